"""Red team round 249b, finding 3's aside (tests/fixtures/redteam/round249/): an honest Hopper RMSNorm with
two-CTA clusters per row through cooperative groups (`cg::this_cluster()`, `cluster.sync()`,
`cluster.map_shared_rank()`) was refused by the static gate `assert-side-effect (object)`, as compiling to
other code in the debug build with every assertion switch. The cause was no assertion: cooperative groups'
debug mode (_CG_DEBUG: CG_DEBUG with __CUDACC_DEBUG__, no NDEBUG) adds checks of the toolkit's own besides
_CG_ASSERT (which CUDA 13 defines and calls nowhere): `this_cluster()` synchronises the cluster once more (a
`barrier.cluster.arrive`/`wait` pair in the kernel), `this_grid()` the grid, `this_thread_block(scratch)`
checks the block's size, and `_CG_ABORT()` is `assert(0);` where it is `__trap();`, so every honest part
naming them differed.

Closed by class (shipped._cooperative_groups_shims): both builds compared leave those checks out (info.h's
shim ends _CG_DEBUG right after the real header, keeping _CG_ASSERT and its <assert.h>; every other
cooperative-groups header's shim reads info.h first by its angled path, as the real ones read it first by a
quoted one), so the debug build differs from the release build by cooperative groups' assertion conditions
alone. A part's side effect in such a condition is still refused (a later toolkit's header asserting on the
part's operator&, staged here as a header of the test's own); the checks left out are pinned below, so a
toolkit that adds one that could run the part's code fails here first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.tools.toolkit import real_nvcc
from kernelloop.verify import shipped
from kernelloop.verify.shipped import _EVERY_ASSERTION, header_assertion_differences, one_file_reaches

from .conftest import FIXTURES, shared_cache_dir
from .redteam_static import assert_passes_source_scan, assert_passes_static_gates

ROUND = FIXTURES / "redteam" / "round249"
RMSNORM = FIXTURES / "redteam" / "round247" / "rmsnorm.cu"
BASE = FIXTURES / "redteam" / "round164" / "policy" / "base_kl.cu"

# A later toolkit's cooperative-groups header asserting on an object of the part's type (the test's own:
# CUDA 13's cooperative groups call _CG_ASSERT nowhere), found on the include folder the gate's shims are on.
_FUTURE_CG = ("kl_future_cg.h",
              "#pragma once\n#include <cooperative_groups.h>\n"
              "template <class T> __device__ void kl_future_cg_check(T& cell) { _CG_ASSERT(&cell != nullptr) }\n")

# Every block of the toolkit's headers under _CG_DEBUG (header, its lines less comments), as CUDA 13.0 has them:
# info.h's macros (the assertion macro, compared; the abort, restored to its release form in both builds), and
# the checks both builds leave out, none of which takes a type or a callable of the part's.
_CG_DEBUG_BLOCKS = {
    ("cooperative_groups/details/info.h",
     ("# include <assert.h>", "# define _CG_ASSERT(x) assert((x));", "# define _CG_ABORT() assert(0);")),
    ("cooperative_groups.h", ("gg.sync();",)),  # this_grid()
    ("cooperative_groups.h", ("cg.sync();",)),  # this_cluster()
    ("cooperative_groups.h", ("if (num_threads() > MaxBlockSize) {", "details::abort();", "}")),  # thread_block(scratch)
}
_CONDITIONAL = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")


def _include() -> Path:
    return real_nvcc(find_toolchain().nvcc).parent.parent / "include"


def _cg_debug_blocks(include: Path) -> set[tuple[str, tuple[str, ...]]]:
    """(header, its stripped lines, comment lines left out) of every `#if`/`#ifdef` on _CG_DEBUG in INCLUDE, up
    to its #else, #elif or #endif (nested directives inside kept as lines)."""
    found = set()
    for header in sorted(include.rglob("*.h*")):
        if not header.is_file() or "_CG_DEBUG" not in (text := header.read_text(errors="replace")):
            continue
        stack: list[list] = []
        for line in text.split("\n"):
            m = _CONDITIONAL.match(line)
            kind = m.group(1) if m else None
            if kind in ("else", "elif", "endif") and stack:
                top = stack[-1] if kind != "endif" else stack.pop()
                if top[0]:
                    found.add((str(header.relative_to(include)), tuple(top[1])))
                top[0], top[1] = False, []
            for open_block in stack:
                if open_block[0] and not line.strip().startswith("//") and line.strip():
                    open_block[1].append(line.strip())
            if kind in ("if", "ifdef"):
                stack.append([bool(re.search(r"\b_CG_DEBUG\b", m.group(2))), []])
            elif kind == "ifndef":
                stack.append([False, []])
    return found


def _debug_differences(part: Path):
    text = part.read_text()
    split = split_program(BASE.read_text(), BASE.name)
    return header_assertion_differences(split, text, arch="sm_90", cache_dir=shared_cache_dir(),
                                        toolchain=find_toolchain(), one_file=one_file_reaches(text))


def test_the_cluster_rewrite_passes_the_source_scan():
    assert_passes_source_scan(RMSNORM, ROUND / "rmsnorm_cluster_row.cu")


@pytest.mark.nvcc
def test_the_honest_cluster_rewrite_passes_the_static_gates_on_sm90():
    assert_passes_static_gates(RMSNORM, ROUND / "rmsnorm_cluster_row.cu")


@pytest.mark.nvcc
def test_an_honest_grid_sync_is_no_debug_build_difference():
    assert _debug_differences(ROUND / "cg_debug" / "honest_grid_sync_part.cu") == ((), [])


@pytest.mark.nvcc
def test_the_parts_side_effect_in_a_cooperative_groups_assertion_is_still_refused(monkeypatch):
    monkeypatch.setitem(shipped._ASSERTION_SHIMS, *_FUTURE_CG)
    found, differing = _debug_differences(ROUND / "cg_debug" / "cg_assert_operator_addr_part.cu")
    assert found == _EVERY_ASSERTION and differing, (found, differing)


@pytest.mark.nvcc
def test_every_cooperative_groups_debug_check_left_out_is_one_judged_to_run_none_of_the_parts_code():
    include = _include()
    assert _cg_debug_blocks(include) == _CG_DEBUG_BLOCKS, sorted(_cg_debug_blocks(include) - _CG_DEBUG_BLOCKS)
    # the shim's abort is the release build's, and every cooperative-groups header is shimmed
    info = (include / "cooperative_groups" / "details" / "info.h").read_text()
    assert re.search(r"#\s*else\s*\n\s*#\s*define _CG_ASSERT\(x\)\s*\n\s*#\s*define _CG_ABORT\(\) __trap\(\);", info)
    shimmed = {name for name, _ in shipped._assertions_evaluated_in_headers(find_toolchain())}
    headers = {str(p.relative_to(include)) for p in (include / "cooperative_groups").rglob("*.h")}
    assert headers | {"cooperative_groups.h"} <= shimmed, sorted(headers - shimmed)
