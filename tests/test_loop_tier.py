"""The loop tier (optimizers/offline/loops.py): a kernel whose threads each run a loop over the fast index
of what they store gets that loop's independent iterations spread over a block of lanes per thread, the
baseline's launch kept where the new one cannot be made. Taken only where the iterations cannot depend on
each other."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from kernelloop.optimizers.base import FailedAttempt
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.loops import loop_rewrites
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.split import split_program

from .conftest import FIXTURES
from .test_offline_optimizer import request_for

LOOPS = FIXTURES / "loops"
SEA_ICE = (LOOPS / "sea_ice_relax_iloop.cu").read_text()
SEA_ICE_SPEC = InitSpec(values={"nx": ["2048", "333"], "ny": ["1024", "97"], "alpha": ["0.2", "0.15"]},
                        counts={"h": "nx * ny", "melt": "ny", "hnew": "nx * ny"})
SOFTSIGN = (LOOPS / "rows_softsign_thread_per_row.cu").read_text()
SOFTSIGN_SPEC = InitSpec(values={"rows": ["4096", "1001"], "cols": ["1024", "333"]},
                         counts={"x": "rows * cols", "row_scale": "rows", "y": "rows * cols"})


def _split(text: str, spec: InitSpec, name: str):
    return split_program(generate(text, spec, name).program, name)


def _loop_tier(text: str, spec: InitSpec = SEA_ICE_SPEC, name: str = "sea_ice_relax_iloop.cu"):
    split = _split(text, spec, name)
    return loop_rewrites(read_editable(split.editable, split.harness, split.exported, split.preamble),
                         split.harness, split.preamble)


@pytest.mark.parametrize("text, spec, name, loop", [
    (SEA_ICE, SEA_ICE_SPEC, "sea_ice_relax_iloop.cu", "the i loop of relax_kernel"),
    (SOFTSIGN, SOFTSIGN_SPEC, "rows_softsign_thread_per_row.cu", "the c loop of softsign_rows"),
])
def test_a_loop_over_the_fast_index_is_spread_over_a_block_of_lanes(text, spec, name, loop):
    rewrites, refused = _loop_tier(text, spec, name)
    assert [r.label for r in rewrites] == [f"loop tier: {loop} spread over {n} lanes" for n in (128, 32)], refused
    source = rewrites[0].source
    # the baseline's thread is the block's index; its loop starts at the lane and steps by the block
    assert "blockIdx.x % kl_ob.x" in source and ("+= (int)kl_lanes" in source or "+= (long)kl_lanes" in source)
    assert "while (0);" in source and "<<<kl_grid, kl_block, kl_shmem>>>" in source  # the baseline's launch kept


def test_the_offline_optimizer_proposes_the_loop_tier_for_a_kernel_no_template_fits():
    program = generate(SEA_ICE, SEA_ICE_SPEC, "sea_ice_relax_iloop.cu").program
    opt = OfflineOptimizer(cache_dir=Path(tempfile.mkdtemp(prefix="kl-loops-")))
    first = opt.propose(request_for(program, "baseline"))
    assert first.approach == "loop tier: the i loop of relax_kernel spread over 128 lanes"
    failed = [FailedAttempt(iteration=1, approach=first.approach, kind="not_faster", reason="rejected: not_faster",
                            speedup=1.0, source=first.source)]
    second = opt.propose(request_for(program, "baseline", iteration=2, failed_attempts=failed))
    assert second.approach.endswith("spread over 32 lanes")


@pytest.mark.parametrize("old, new, words", [
    ("    H(hnew, i, j) = v > 0.0f ? v : 0.0f;", "    carry += v;\n    H(hnew, i, j) = carry;",
     "assigns carry in its loop"),
    ("float left = i > 0 ? H(h, i - 1, j)", "float left = i > 0 ? H(hnew, i - 1, j)", "reads an array it stores"),
    ("    H(hnew, i, j) = v > 0.0f ? v : 0.0f;", "    if (v < -1.0f) break;\n    H(hnew, i, j) = v;", "leaves its loop early"),
    ("  const float m = melt[j];", "  const float m = melt[j];\n  __syncthreads();", "uses __syncthreads"),
    ("    H(hnew, i, j) = v > 0.0f ? v : 0.0f;", "    H(hnew, i, j) = v;\n    hnew[j] = v;", "stores to hnew at a place"),
], ids=["carried-sum", "reads-its-output", "break", "barrier", "store-the-loop-does-not-move"])
def test_a_loop_whose_iterations_may_depend_on_each_other_is_refused(old, new, words):
    text = SEA_ICE.replace(old, new)
    if "carry" in new:
        text = text.replace("  const float m = melt[j];", "  const float m = melt[j];\n  float carry = 0.0f;")
    assert text != SEA_ICE
    rewrites, refused = _loop_tier(text)
    assert not rewrites and any(words in r for r in refused), refused


def test_a_kernel_already_walking_the_fast_index_with_its_threads_is_left_alone():
    coalesced = SEA_ICE.replace("H(hnew, i, j) = v", "hnew[(size_t)i * ny + j] = v")
    rewrites, refused = _loop_tier(coalesced)
    assert not rewrites and any("already stores neighbouring elements" in r or "one by one" in r for r in refused), refused


@pytest.mark.nvcc
def test_the_loop_candidate_passes_the_static_gates():
    from kernelloop.config import Settings
    from kernelloop.program.split import candidate_editable_part
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates

    from .conftest import shared_cache_dir

    split = _split(SEA_ICE, SEA_ICE_SPEC, "sea_ice_relax_iloop.cu")
    rewrites, _ = _loop_tier(SEA_ICE)
    editable, _ = candidate_editable_part(rewrites[0].source, split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-2000:]
