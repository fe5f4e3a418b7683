"""What is verified is what ships: the candidate's code must not depend on what else is in its
translation unit.

The gate builds the editable part as a unit of its own (preamble + editable part); everything
else that builds it builds one file with the harness after it: `best.cu` and its certificate,
the program a pull request changes and `bench check` runs, `nvcc program.cu`, the profiler. A
candidate that can tell the two apart compiles one kernel for the verifier and another for
everyone else: an overload or a template whose end-of-unit lookup finds a name of the harness's
header only where that header is in the same unit (red team round 51; `__LINE__` and its kind
are refused by the policy). So the editable part is built both ways, with the same position for
it in both (and, in the one-file build, under a file name no candidate knows and in the contract's
dialect), and each of its functions and kernels must compile to the same code (the
fingerprints `kernelloop init` compares its copies by: host machine code with relocations
resolved, device PTX with position-numbered names neutral)."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Callable
from concurrent.futures import Executor, Future
from functools import partial
from pathlib import Path
from typing import NamedTuple, TypeVar

from ..program.scanner import strip_comments
from ..program.split import ProgramSplit
from ..tools.code_identity import device_fingerprints, host_fingerprints, unit_neutral
from ..tools.nvcc import Toolchain, build_whole_object
from ..tools.state_refs import generated, state_references
from ..tools.symbols import demangle
from ..tools.toolkit import nvcc_root

# PTX names of functions with internal linkage in an anonymous namespace carry a digest of their
# translation unit: the same function has another name in another unit.
T = TypeVar("T")

_UNIT_NAMES = re.compile(r"_INTERNAL_[0-9a-f]{8}_\d+_\w+?_[0-9a-f]{8}")


# The functions nvcc emits per unit to register its kernels with the runtime: they differ between
# a unit with the harness's kernels and one without, and nothing the editable part names reaches
# them. Only these count by name: a function of the part's own that merely looks generated is
# compared by its code (red team round 52 hid a build switch behind `extern "C" __nv_probe`).
# Exact symbols (nvcc's internal-linkage names, which no declaration of the part can take: the
# same name in the unit is a redefinition), never prefixes (red team round 53: `__nv_module_id_probe`).
_REGISTRATION = re.compile(r"^(?:_ZL24__sti____cudaRegisterAllv|_ZL31__nv_cudaEntityRegisterCallbackPPv|"
                           r"_ZL37__nv_save_fatbinhandle_for_managed_rtPPv|_ZL26__cudaUnregisterBinaryUtilv|"
                           r"_ZL22____nv_dummy_param_refPv|_ZL15__fatDeviceText|_ZL20__cudaFatCubinHandle|"
                           r"_ZL\d+__nv_init_managed_rt\w*|_GLOBAL__sub_I_\w+)$")


def _registration(name: str) -> bool:
    return bool(_REGISTRATION.match(name))


def _neutral_ptx(ptx: str) -> tuple[str, bool]:
    """PTX with its unit's internal names made neutral, and whether they were: a translation unit has
    one such spelling; where the text holds several (a part's own names spelled like them: red team
    round 181), neutral they would read as one, so the text stays as written (and its names too:
    `_neutral_names`)."""
    if len(set(_UNIT_NAMES.findall(ptx))) > 1:
        return ptx, False
    return _UNIT_NAMES.sub("_INTERNAL_", ptx), True


def _neutral_names(names: set[str], neutral: bool) -> set[str]:
    return {_UNIT_NAMES.sub("_INTERNAL_", name) for name in names} if neutral else set(names)


class ShippedBuildUnreadable(Exception):
    """One of the two builds failed: the gate's own build is the judge of that."""


def _build_identity_key(cache_dir: Path) -> str:
    """A secret drawn once per cache folder and kept there (so the comparison's builds are cached like
    any other): names no candidate can know."""
    key = cache_dir / "build-identity.key"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        tmp = key.with_name(f"{key.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # the owner's alone, not a sandbox uid's
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(8))
        os.replace(tmp, key)
    return key.read_text().strip()[:16]


def _comparison_file_name(cache_dir: Path) -> str:
    """A file name for the one-file build that no candidate can know. A fixed name in this source could
    be special-cased beside the verifier's own (red team round 54 read the file name nvcc builds from)."""
    return f"u{_build_identity_key(cache_dir)}.cu"


def frozen_names_namespace(cache_dir: Path) -> str:
    """The namespace policy.qualified_macro_definitions pins the frozen macros' names in: secret, so a
    candidate cannot add to it (namespaces are open)."""
    return f"kl_frozen_{_build_identity_key(cache_dir)}"


def _redefined_after_includes(editable: str, qualified_macros: str, include_end: int | None) -> str:
    """The part with the qualified macros' `#undef`/`#define` lines again before its line `include_end`,
    the line after its last `#include` as the preprocessor saw it (a header the part includes,
    `<cassert>`, defines its macro anew; a commented-out or `#if 0` include is no include: round 62),
    the part's own line numbers kept."""
    redefinitions = [line for line in qualified_macros.splitlines() if line.startswith(("#undef ", "#define "))]
    lines = editable.split("\n")
    if not include_end or not redefinitions or not 1 < include_end <= len(lines) + 1:
        return editable
    head, tail = lines[:include_end - 1], lines[include_end - 1:]
    return "\n".join([*head, *redefinitions, f'#line {include_end} "candidate.cu"', *tail])


def shipped_build_differences(split: ProgramSplit, editable: str, *, arch: str, cache_dir: Path,
                              toolchain: Toolchain | None = None, qualified_macros: str = "",
                              include_end: int | None = None, one_file: bool = True) -> list[str]:
    """The editable part's functions and kernels (readable names) that compile to other code in one
    file with the harness after them (`one_file`: else the part's unit alone, for a part the rest of
    its file cannot reach: one_file_reaches), under another file name and in the compiler's default dialect
    (gnu++17, as docs/contract.md builds), than in a unit alone as the verifier builds it (`editable.cu`,
    -std=c++17). Whatever a candidate can tell apart between those builds (the rest of the unit, the
    file's name, the dialect) must not change its code (red team rounds 51-54).

    `include_end`: the part's line after its last `#include` (tools/nvcc.py preprocess_unit).
    `qualified_macros` (policy.qualified_macro_definitions): redefinitions of the frozen macros that carry
    a value of the build, their names qualified (`::fprintf`), put before the part in the unit built
    alone. A part that binds one of those names (a local `fprintf` keeping CUDA_CHECK's `__LINE__`, red
    team rounds 56-59) gets the frozen code's meaning there and its own in the one-file build, so the
    two differ; an honest part compiles to the same code either way."""
    alone = split.editable_unit(editable, "candidate.cu")
    whole = _whole_unit(split, alone) if one_file else alone
    if qualified_macros:
        alone = split.editable_unit(_redefined_after_includes(editable, qualified_macros, include_end),
                                    "candidate.cu").replace(
            '\n#line 1 "candidate.cu"\n', f'\n{qualified_macros}\n#line 1 "candidate.cu"\n', 1)
    objects = []
    for text, filename, iso, what in (
            (alone, "editable.cu", True, "with the frozen macros' names qualified (::name)" if qualified_macros
             else "as the verifier's unit"),
            (whole, _comparison_file_name(cache_dir), False,
             "as one file with the harness" if one_file else "under another file name and dialect")):
        build = build_whole_object(text, arch=arch, cache_dir=cache_dir, toolchain=toolchain, optimised=True,
                                   filename=filename, iso_dialect=iso)
        if not build.ok or build.binary is None:
            why = build.log.strip().splitlines()[-1] if build.log.strip() else build.stage
            # The verdict reaches the optimizer: the secret names (file, namespace) must not.
            raise ShippedBuildUnreadable(f"{what}: {why}".replace(_build_identity_key(cache_dir), "<secret>"))
        objects.append(build.binary)
    return _differing_functions(*objects)


def _by_neutral_name(prints: dict[str, str]) -> dict[str, str]:
    """Digests keyed by unit_neutral names; names that read alike once neutral (a namespace spelled like
    nvcc's anonymous one: red team round 181) keep every one of theirs, as written, under the one key."""
    grouped: dict[str, list[str]] = {}
    for name in sorted(prints):
        grouped.setdefault(unit_neutral(name), []).append(name)
    return {key: prints[names[0]] if len(names) == 1 else
            hashlib.sha256("\n".join(f"{n} {prints[n]}" for n in names).encode()).hexdigest()
            for key, names in grouped.items()}


def _differing_functions(unit_object: Path, other_object: Path, *, among: Path | None = None) -> list[str]:
    """The functions and kernels of the first build (readable names) that the second build lacks or
    compiles to other code: host code with relocations resolved, device PTX with position-numbered and
    file-named names neutral. AMONG: an object whose functions and kernels alone are compared (the
    part's own, where both builds hold the harness too)."""
    refs, other_refs = state_references(unit_object), state_references(other_object)
    chosen = state_references(among) if among is not None else refs
    wanted = {unit_neutral(f) for f in chosen.functions if not generated(f, chosen.readable_names.get(f))}
    # Each unit's kernel registration counts by name, not by code; names are compared with the file's
    # name taken out of anonymous namespaces' (an honest helper in one has another name in another file).
    unit_prints = _by_neutral_name(host_fingerprints(
        unit_object, {f for f in refs.functions if unit_neutral(f) in wanted}, opaque=_registration))
    other_prints = _by_neutral_name(host_fingerprints(
        other_object, {f for f in other_refs.functions if unit_neutral(f) in wanted}, opaque=_registration))
    unit_ptx, unit_neutral_names = _neutral_ptx(unit_object.with_name("program.ptx").read_text())
    other_ptx, other_neutral_names = _neutral_ptx(other_object.with_name("program.ptx").read_text())
    # keyed as each side names them: a side left as written keys apart from a neutral one, and differs
    unit_prints.update(device_fingerprints(unit_ptx, _neutral_names(chosen.device_edges, unit_neutral_names)))
    other_prints.update(device_fingerprints(other_ptx, _neutral_names(chosen.device_edges, other_neutral_names)))
    differing = sorted(name for name, digest in unit_prints.items() if other_prints.get(name) != digest)
    return demangle(differing) if differing else []


# Builds a user's program may ship as besides the verifier's, whose code an honest part does not
# change. The build a user ships is the one to declare (verify.build_flags: every verifier build is
# then that build); these are the ones compared where it is not declared. Options that change
# honest code too are read by their macros only (gate._switched_builds): a debug build (-DDEBUG,
# -D_DEBUG and the CCCL assertion switches add checks inside cuda::barrier and cuda::std code an
# honest part calls: round 67's async-copy transpose), -rdc=true (templates and launches compile
# otherwise), -G.
_HALF_SWITCHES = ("__CUDA_NO_HALF_OPERATORS__", "__CUDA_NO_HALF_CONVERSIONS__", "__CUDA_NO_HALF2_OPERATORS__",
                  "__CUDA_NO_BFLOAT16_CONVERSIONS__", "__CUDA_NO_BFLOAT16_OPERATORS__", "__CUDA_NO_BFLOAT162_OPERATORS__")
# The same kind of switch for the narrower float types (cuda_fp8.h, cuda_fp6.h, cuda_fp4.h): each removes
# conversions or their operators, which a part can ask about at compile time (`std::is_constructible<float,
# __nv_fp8_e4m3>`: red team round 174). Compared in the build with every switch at once; the part may not
# name them (policy.BUILD_SWITCHES). tests/test_redteam_round174.py finds every such switch in the toolkit.
_NARROW_SWITCHES = ("__CUDA_NO_FP8_CONVERSIONS__", "__CUDA_NO_FP8_CONVERSION_OPERATORS__",
                    "__CUDA_NO_FP6_CONVERSIONS__", "__CUDA_NO_FP6_CONVERSION_OPERATORS__",
                    "__CUDA_NO_FP4_CONVERSIONS__", "__CUDA_NO_FP4_CONVERSION_OPERATORS__")
# torch.utils.cpp_extension's COMMON_NVCC_FLAGS: four of the six switches (red team round 162: two
# facts that cancel with all six set do not with these four).
_PYTORCH_FLAGS = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                  "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr")


class OtherBuild(NamedTuple):
    what: str
    flags: tuple[str, ...]
    alone: bool  # the part alone is compared too (only where a header of its unit reads the half switches, for
    # a build of half switches only: elsewhere they change nothing in it)
    whole: bool  # as one file with the harness after the part (the rest of a user's file)
    whole_for_half: bool = False  # as one file only where a header of the part's unit reads the half switches
    divisible: bool = False  # switches that need not go together: split where the baseline's part differs with all


def other_builds(build_flags: tuple[str, ...], config_switches: tuple[str, ...] = ()) -> list[OtherBuild]:
    """The builds compared besides the verifier's (which has the user's BUILD_FLAGS). Each axis a real
    build varies (the half and bfloat16 switches, the rest of the file, --extended-lambda, the
    dialect) alone, and the real combinations all at once: a part whose code follows one fact of the
    build shows in the build that changes it; an XOR of two facts in the build that changes one
    (each switch alone); an AND of facts in a build that has them all (as one file with the harness
    after the part, every switch with every option: red team rounds 162-163). A list does not
    close the
    class (three facts agreeing on every build listed): the build a user ships is the one to
    declare. Facts: each half
    switch removes declarations (an operator of `__half`); --extended-lambda makes cuda_runtime.h
    include <functional>, whose declarations a part can find by argument-dependent lookup; a `u8""`
    literal has another type in C++20. CONFIG_SWITCHES: the toolkit's own configuration switches
    (toolkit_switches.switches_set_together: `CCCL_DISABLE_INT128_SUPPORT` takes `__int128` out of
    `cuda::std::is_integral`, round 175; `__NV_DISABLE_128_ATOMICS` a 128-bit atomicCAS, round 176),
    all at once in a build of their own, split where the baseline's part differs with them all. A build whose flags the user's already has is the verifier's
    own and not repeated."""
    dialect = next((f for f in reversed(build_flags) if f.startswith("-std=")), "-std=c++17")
    other_dialect = "-std=c++17" if dialect.endswith("20") else "-std=c++20"
    every_switch = tuple(f"-D{name}" for name in (*_HALF_SWITCHES, *_NARROW_SWITCHES))
    lambdas = ("--extended-lambda", "--expt-relaxed-constexpr")
    # Alone: each axis (the half builds only where a header reads the switches). In the part's real
    # context too (as one file with the harness where the part has a template: one_file_reaches):
    # every switch with every option at once, where an AND of facts that are all on shows; and, for a
    # part whose unit reads the half switches, the build real half programs ship most (PyTorch's
    # extension build, C++17: red team round 164, an AND with "bfloat16 keeps its operators", which
    # every switch at once turns off). A one-file build costs about five builds of the part alone.
    builds = [OtherBuild("a build with PyTorch's half and bfloat16 switches (torch.utils.cpp_extension's "
                         "-D__CUDA_NO_HALF_OPERATORS__ ... --expt-relaxed-constexpr)", _PYTORCH_FLAGS, True, False,
                         True),
              OtherBuild(f"a {other_dialect[5:]} build ({other_dialect})", (other_dialect,), True, False),
              OtherBuild("a build with every half, bfloat16 and fp8/fp6/fp4 switch (-D__CUDA_NO_HALF_OPERATORS__ ...)",
                         every_switch, True, False),
              OtherBuild("a build with --extended-lambda", lambdas, True, False),
              OtherBuild(f"a build with every half and bfloat16 switch, --extended-lambda and {other_dialect}",
                         (*every_switch, *lambdas, other_dialect), False, True),
              *(OtherBuild(f"a build with -D{name} alone", (f"-D{name}",), True, False) for name in _HALF_SWITCHES)]
    if config_switches:
        builds.append(OtherBuild(f"a build with every configuration switch the toolkit's headers read "
                                 f"(-D{config_switches[0]} ...)", tuple(f"-D{n}" for n in config_switches), True, False,
                                 divisible=True))
    return [b for b in builds if not set(b.flags) <= set(build_flags)]


# A template's point of instantiation is the end of the unit, where lookup sees what follows the
# part; a generic lambda, an abbreviated function template, a concept or a constraint is a template
# too. Read by tokens that no template lacks, not by where they stand (red team round 165: an
# attribute before a lambda's `auto` parameter hid it from a reading of parameter lists): any
# `auto` (a deduced variable too), and a lambda's template parameters (`[]<class T>`, `:>` its
# digraph). Reading too much only costs the one-file builds.
_TEMPLATE_SYNTAX = re.compile(r"\b(?:template|concept|requires|auto)\b|(?:\]|:>)\s*<")


def one_file_reaches(part: str) -> bool:
    """Whether the rest of a file can change the code of PART (the gate asks of the part as written,
    as the compiler reads it with macros expanded, and of the preamble): only through a template of its own, whose dependent names are looked up at the end of
    the unit too. Without one, every name the part uses is bound where it is written, and what follows
    it in its file cannot change its code: its other builds are compared for the part alone (the
    dialect and the file name a one-file build differs by still are: shipped_build_differences)."""
    # the raw text, comments and strings too: a word read where it is none only costs builds, and no
    # literal's reading can hide one
    return bool(_TEMPLATE_SYNTAX.search(part))


def half_switches_reach(header_macros: dict[str, str]) -> bool:
    """Whether a header in the unit reads the half and bfloat16 switches (cuda_fp16.h, cuda_bf16.h, or
    CCCL's cuda/std, whose common_type of the extended types follows them): elsewhere they change nothing."""
    return any(name in ("__CUDA_FP16_H__", "__CUDA_BF16_H__", "__CUDA_FP8_H__", "__CUDA_FP6_H__", "__CUDA_FP4_H__")
               or name.startswith("_CCCL_") for name in header_macros)


def other_build_differences(split: ProgramSplit, editable: str, *, arch: str, cache_dir: Path,
                            toolchain: Toolchain, half_types: bool = True,
                            one_file: bool = True, config_switches: tuple[str, ...] = (),
                            pool: Executor | None = None) -> list[tuple[str, list[str]]]:
    """For each of other_builds in which the baseline's part compiles to the same code as in the
    verifier's build: the candidate part's functions and kernels that compile to other code there
    (["the part does not build there"] where it does not build); a build marked `whole` is compared
    as one file with the harness after the part too. A build the baseline's own code follows (or
    fails in) is not one its program ships as unchanged, and is not judged. The compiler decides,
    not a reading of names: a switch that changes what a header declares (an operator of `__half`)
    shows as code, like one that changes a macro. `half_types`: whether a header of the unit (the
    candidate's part and the preamble) reads the half switches; the one-file build always has one
    (the harness header includes cuda_fp16.h), but a build `whole_for_half` is made as one file only
    where `half_types`. `one_file`: whether the rest of the file can reach the
    part's code (one_file_reaches); where it cannot, a `whole` build is compared for the part alone.
    `config_switches`: other_builds'. `pool`: the builds' comparisons run in it at once (first_found)."""
    if editable == split.editable:
        return []  # the baseline's own text compiles as the baseline's does in every build (init's check)
    comparison_name = _comparison_file_name(cache_dir)

    def compare(build: OtherBuild, baseline_unit: str, candidate_unit: str, filename: str, iso: bool,
                where: str) -> list[tuple[str, list[str]]]:
        # in one file, the part's functions alone: the harness's own may follow a build (C++20's library)
        def baseline_alike(flags: tuple[str, ...]) -> bool:
            return _part_differences(baseline_unit, flags, arch, cache_dir, toolchain, filename, iso,
                                     among=split.editable_unit() if where else None) == []
        for flags in _groups_alike(build.flags, baseline_alike) if build.divisible else \
                [build.flags] if baseline_alike(build.flags) else []:
            differing = _part_differences(candidate_unit, flags, arch, cache_dir, toolchain, filename, iso,
                                          among=split.editable_unit(editable, "candidate.cu") if where else None)
            if differing is None:
                return [(build.what + where, ["the part does not build there"])]
            if differing:
                return [(build.what + where, differing)]  # one is enough to refuse
        return []

    comparisons = []
    for build in other_builds(toolchain.build_flags, config_switches):
        half_only = all(f.startswith("-D__CUDA_NO_") for f in build.flags)
        alone = build.alone and (half_types or not half_only)
        whole = build.whole or (build.whole_for_half and half_types)
        units = ([(split.editable_unit(), split.editable_unit(editable, "candidate.cu"), "editable.cu", True, "")]
                 if alone or (whole and not one_file) else [])
        if whole and one_file:
            units.append((_whole_unit(split, split.editable_unit()), _whole_unit(split, split.editable_unit(editable, "candidate.cu")),
                          comparison_name, False, " as one file with the harness"))
        comparisons += [partial(compare, build, *unit) for unit in units]
        for baseline_unit, candidate_unit, filename, iso, where in units:  # the first group's builds, both parts
            _prefetch(pool, _part_builds(baseline_unit, build.flags, toolchain, filename, iso,
                                         split.editable_unit() if where else None), arch, cache_dir)
            _prefetch(pool, _part_builds(candidate_unit, build.flags, toolchain, filename, iso,
                                         split.editable_unit(editable, "candidate.cu") if where else None), arch, cache_dir)
    return first_found(comparisons, pool) or []


def first_found(tasks: list[Callable[[], T]], pool: Executor | None) -> T | None:
    """The first task's result, in the tasks' order, that is not empty (None where none is): the
    comparisons of other builds are independent, so with a `pool` they all start at once (nvcc on
    every core; a build two of them need is made once: tools/nvcc.py) and the ones left are
    cancelled once a result decides; without one they run one after another, as far as needed.
    An exception is raised in the same order: one task's failure counts only where no task before it
    found something."""
    if pool is None:
        return next((result for result in (task() for task in tasks) if result), None)
    futures: list[Future] = [pool.submit(task) for task in tasks]
    try:
        return next((result for result in (future.result() for future in futures) if result), None)
    finally:
        for future in futures:
            future.cancel()


def _groups_alike(flags: tuple[str, ...], baseline_alike) -> list[tuple[str, ...]]:
    """FLAGS split into groups the baseline's part builds alike with (`baseline_alike`): all of them,
    else each half, and so on; a switch the baseline's own part follows (or fails with) alone is not
    one its program ships unchanged, and is left out. The baseline's builds are cached, so a program
    pays for the splitting once."""
    todo, alike = [flags], []
    while todo:
        group = todo.pop()
        if baseline_alike(group):
            alike.append(group)
        elif len(group) > 1:
            todo += [group[len(group) // 2:], group[:len(group) // 2]]
    return alike


def _whole_unit(split: ProgramSplit, alone: str) -> str:
    """The unit as one file: the part's unit with the harness after it (shipped_build_differences)."""
    return f"{alone}#line {split.harness_line} \"harness.cu\"\n{split.harness}\n"


def _part_builds(unit: str, flags: tuple[str, ...], toolchain: Toolchain, filename: str, iso_dialect: bool,
                 among: str | None) -> list[tuple[str, Toolchain, str, bool]]:
    """The builds _part_differences compares: (text, toolchain, file name, ISO dialect) of UNIT as the
    verifier builds it, of UNIT with FLAGS after the user's (a -std among them is the one in force:
    tools/nvcc.language_flags), and of AMONG alone where given."""
    builds = [(unit, toolchain, filename, iso_dialect),
              (unit, toolchain.model_copy(update={"build_flags": (*toolchain.build_flags, *flags)}), filename, iso_dialect)]
    return builds + ([(among, toolchain, "editable.cu", True)] if among is not None else [])


def _prefetch(pool: Executor | None, builds: list[tuple[str, Toolchain, str, bool]], arch: str, cache_dir: Path,
              include_first: tuple[tuple[str, str], ...] = ()) -> None:
    """Start BUILDS in POOL now (their results land in the cache: tools/nvcc.py makes each key once), so
    that a comparison that needs three builds one after another finds them made or being made."""
    for text, tc, name, iso in builds if pool is not None else ():
        pool.submit(build_whole_object, text, arch=arch, cache_dir=cache_dir, toolchain=tc, optimised=True,
                    filename=name, iso_dialect=iso, include_first=include_first)


def _part_differences(unit: str, flags: tuple[str, ...], arch: str, cache_dir: Path, toolchain: Toolchain,
                      filename: str = "editable.cu", iso_dialect: bool = True,
                      among: str | None = None, include_first: tuple[tuple[str, str], ...] = ()) -> list[str] | None:
    """The functions of UNIT that compile to other code with FLAGS added to the build than without
    (of those the unit AMONG defines, where given: the part's, in a unit with the harness); None
    where UNIT does not build with them. `include_first`: both builds' (build_whole_object)."""
    def build(spec: tuple[str, Toolchain, str, bool]):
        text, tc, name, iso = spec
        return build_whole_object(text, arch=arch, cache_dir=cache_dir, toolchain=tc, optimised=True,
                                  filename=name, iso_dialect=iso, include_first=include_first)
    specs = _part_builds(unit, flags, toolchain, filename, iso_dialect, among)
    verified = build(specs[0])
    if not verified.ok or verified.binary is None:
        raise ShippedBuildUnreadable(f"as the verifier builds it: {verified.stage}")
    other = build(specs[1])
    if not other.ok or other.binary is None:
        return None
    reference = None
    if among is not None:
        part = build(specs[2])
        if not part.ok or part.binary is None:
            raise ShippedBuildUnreadable(f"as the verifier builds it: {part.stage}")
        reference = part.binary
    return _differing_functions(verified.binary, other.binary, among=reference)


# As <cassert> evaluates a condition (converted to bool: a class's conversion runs, round 67), less
# the failure path; and as -DNDEBUG drops it.
_ASSERT_EVALUATED = "#undef assert\n#define assert(e) ((void)static_cast<bool>(e))"
_ASSERT_DROPPED = "#undef assert\n#define assert(e) ((void)0)"


def assert_release_differences(split: ProgramSplit, editable: str, *, arch: str, cache_dir: Path,
                               toolchain: Toolchain | None = None, include_end: int | None = None,
                               program_macros: dict[str, str] | None = None) -> list[str]:
    """The part's functions and kernels whose code depends on whether its asserts' conditions are
    evaluated: the part built with `assert(e)` as `((void)static_cast<bool>(e))` against it built as a release build
    drops it (`-DNDEBUG`: `((void)0)`). A condition without side effects leaves nothing once
    optimised, so an honest part builds to the same code both ways; one that assigns, constructs,
    converts or calls something that changes state does not (red team rounds 66-68: `(tail = 1)`, a
    conversion operator, a lambda passed as `isfinite`). The compiler decides, not a reading of the
    syntax. Empty when neither the part nor a macro of the program's own (`program_macros`, name ->
    body: a preamble's `CHECK_IDX(i, n)` wrapping assert, which the part can call) names assert."""
    named = re.compile(r"\bassert\b")
    if not named.search(strip_comments(editable)) and not any(
            named.search(body) for body in (program_macros or {}).values()):
        return []
    objects = []
    for definition, what in ((_ASSERT_EVALUATED, "with its asserts' conditions evaluated"),
                             (_ASSERT_DROPPED, "with its asserts dropped (-DNDEBUG)")):
        unit = split.editable_unit(_redefined_after_includes(editable, definition, include_end), "candidate.cu").replace(
            '\n#line 1 "candidate.cu"\n', f'\n#include <cassert>\n{definition}\n#line 1 "candidate.cu"\n', 1)
        build = build_whole_object(unit, arch=arch, cache_dir=cache_dir, toolchain=toolchain, optimised=True,
                                   filename="editable.cu", iso_dialect=True)
        if not build.ok or build.binary is None:
            raise ShippedBuildUnreadable(f"{what}: {build.log.strip().splitlines()[-1] if build.log.strip() else build.stage}")
        objects.append(build.binary)
    return _differing_functions(*objects)


# Debug builds whose headers evaluate their own assertions' conditions (CCCL's _CCCL_ASSERT, libstdc++'s
# __glibcxx_assert), where a release build does not: a condition calls what the part gave the header
# (a comparator to cuda::std::clamp, an operator of its type) and a side effect there changes what
# the part computes in the debug build only (red team round 166). Every combination of the facts a
# pass of the compiler sees: CCCL's assertions (host pass, device pass), CCCL's debug mode (more
# comparator checks; DEBUG and _DEBUG, which also imply the assertions) and libstdc++'s assertions;
# one at a time and together, since effects that cancel in one build need not in another (a count
# of calls taken modulo 2).
# Every switch that turns a header's assertions on: CCCL's, libstdc++'s, and those of the toolkit's
# headers with assertion macros of their own, empty unless their switch is set (cuda_pipeline_helpers.h's
# _CUDA_PIPELINE_ASSERT, cuda_awbarrier_helpers.h's, cooperative groups' _CG_ASSERT), which `nvcc -G`
# sets through __CUDACC_DEBUG__ (red team round 172: `memcpy_async` asserting on `&dst`, the part's
# own operator&). tests/test_redteam_round172.py finds every such macro in the toolkit and checks it
# is on here.
_EVERY_ASSERTION = ("DEBUG", "_DEBUG", "CCCL_ENABLE_ASSERTIONS", "CCCL_ENABLE_HOST_ASSERTIONS",
                    "CCCL_ENABLE_DEVICE_ASSERTIONS", "_GLIBCXX_ASSERTIONS", "_CUDA_PIPELINE_DEBUG",
                    "_CUDA_AWBARRIER_DEBUG", "__CUDACC_DEBUG__", "CG_DEBUG")
_ASSERTION_BUILDS = (("DEBUG",), ("CCCL_ENABLE_ASSERTIONS",), ("_GLIBCXX_ASSERTIONS",),
                     ("CCCL_ENABLE_ASSERTIONS", "_GLIBCXX_ASSERTIONS"),
                     ("__CUDACC_DEBUG__",),  # the macro side of a device-debug build (nvcc -G)
                     _EVERY_ASSERTION,
                     # and the other direction: a release build, whose headers' plain asserts are gone
                     # (cuda_fp6.hpp's conversion asserts on `==` of cudaRoundMode, an operator a part
                     # can declare first: red team round 171)
                     ("NDEBUG",))
# CCCL's own debug switches, which change header functions besides assertions (cub::detail::
# DebugSyncStream synchronises the stream under CUB_DEBUG_SYNC, an error inside a stream capture that a
# part read to take another path: red team round 173): each compared alone, and all at once, for a unit
# that includes CCCL. policy.BUILD_SWITCHES keeps the part from naming them.
_CCCL_DEBUG_SWITCHES = ("CUB_DEBUG_SYNC", "CUB_DEBUG_LOG", "CUB_DEBUG_ALL", "CUB_STDERR", "THRUST_DEBUG",
                        "THRUST_DEBUG_SYNC")
_CCCL_DEBUG_BUILDS = (*((name,) for name in _CCCL_DEBUG_SWITCHES), (*_EVERY_ASSERTION, *_CCCL_DEBUG_SWITCHES))
# The headers that define the assertion macros, as an include folder searched first finds them: each
# includes the real header and redefines the macro right after it, so every header function after it
# (cuda_runtime.h's own too) is parsed with the new one. No other name the part can write changes. A
# failing condition still leaves no constant expression, as the real failure path (a call of a
# function that is not constexpr) does not (red team round 168 asked whether an assertion's call is a
# constant): an empty function of a reserved name, inlined away at run time.
_ASSERTION_SHIMS = {
    "cuda/std/__cccl/assert.h": (
        "#include_next <cuda/std/__cccl/assert.h>\n"
        "#ifndef __KL_ASSERTION_FAILED\n"
        "#define __KL_ASSERTION_FAILED\n"
        "__host__ __device__ __attribute__((always_inline)) inline void __kl_assertion_failed() noexcept {}\n"
        "#endif\n"
        "#undef _CCCL_ASSERT_IMPL_HOST\n"
        "#define _CCCL_ASSERT_IMPL_HOST(expression, message) "
        "(static_cast<bool>(expression) ? (void) 0 : __kl_assertion_failed())\n"
        "#undef _CCCL_ASSERT_IMPL_DEVICE\n"
        "#define _CCCL_ASSERT_IMPL_DEVICE(expression, message) "
        "(static_cast<bool>(expression) ? (void) 0 : __kl_assertion_failed())\n"),
    "bits/c++config.h": (
        "#include_next <bits/c++config.h>\n"
        "#undef __glibcxx_assert_impl\n"
        "#define __glibcxx_assert_impl(_Condition) if (!bool(_Condition)) { __glibcxx_constexpr_assert(false); }\n"),
    # <assert.h> is read anew at each #include and follows NDEBUG as it stands there: so does this
    "assert.h": (
        "#include_next <assert.h>\n"
        "#ifndef __KL_PLAIN_ASSERTION_FAILED\n"
        "#define __KL_PLAIN_ASSERTION_FAILED\n"
        "#ifdef __CUDACC__\n"  # read before CUDA's macros define __host__: what they expand to
        "__attribute__((host)) __attribute__((device))\n"
        "#endif\n"
        "__attribute__((always_inline)) inline void __kl_plain_assertion_failed() noexcept {}\n"
        "#endif\n"
        "#ifndef NDEBUG\n"
        "#undef assert\n"
        "#define assert(e) (static_cast<bool>(e) ? (void) 0 : __kl_plain_assertion_failed())\n"
        "#endif\n"),
}


# Cooperative groups' debug mode (_CG_DEBUG: CG_DEBUG with __CUDACC_DEBUG__, which `nvcc -G` sets, and no NDEBUG;
# cooperative_groups/details/info.h) turns on its assertion macro _CG_ASSERT (a plain assert: compared, as every
# assertion is) and, besides it, checks of the toolkit's own that run no code of the part's: this_grid() and
# this_cluster() synchronise the grid and the cluster, this_thread_block(scratch) checks the block's size, and
# _CG_ABORT() (the failure path of grid_group::sync on a grid not launched cooperatively, and of those checks) is
# `assert(0);` instead of `__trap();`. Those changed every honest part that names this_cluster() or this_grid()
# (a cluster barrier more: red team round 249b's two-CTA RMSNorm), so both builds compared are without them:
# info.h's shim ends _CG_DEBUG's checks (and their failure path) right after the real header, keeping its
# _CG_ASSERT and the <assert.h> it includes, so the debug build differs from the release one by the conditions of
# cooperative groups' assertions alone. What is left out calls nothing of the part's (no parameter of a type the
# part gives: tests/test_redteam_round249b.py pins every _CG_DEBUG block of the toolkit's headers), changes no value
# a header computes, and exists only where __CUDACC_DEBUG__ does, a build whose device code is not optimised and
# whose schedule is no build's verified; an extra barrier is visible only through a data race, and an abort is loud.
# The headers include info.h by quoted paths, which the include folder searched first cannot catch: each of them
# (every header of the toolkit under cooperative_groups/, found by listing it, and cooperative_groups.h) has a shim
# that includes info.h by its angled path first, as each real one does first, then itself. A header the listing
# misses is only parsed with the real debug mode, a difference the comparison refuses: never a route around it.
_CG_INFO = "cooperative_groups/details/info.h"
_CG_INFO_SHIM = (
    f"#include_next <{_CG_INFO}>\n"
    "#ifdef _CG_DEBUG\n"
    "#undef _CG_DEBUG\n"
    "#undef _CG_ABORT\n"
    "#define _CG_ABORT() __trap();\n"
    "#endif\n")


def _cooperative_groups_headers(toolchain: Toolchain | None) -> tuple[str, ...]:
    """The toolkit's cooperative-groups headers (relative to its include folder), info.h aside; () where
    the toolkit's include folder is not found (then no shim: the debug mode is compared whole)."""
    root = nvcc_root(toolchain.nvcc if toolchain is not None else None)
    found: set[str] = set()
    for include in ([root / "include", *root.glob("targets/*/include")] if root is not None else []):
        if (include / "cooperative_groups.h").is_file():
            found.add("cooperative_groups.h")
        folder = include / "cooperative_groups"
        found.update(str(p.relative_to(include)) for p in folder.rglob("*") if p.is_file() and p.suffix in (".h", ".hpp"))
    found.discard(_CG_INFO)
    return tuple(sorted(found))


def _cooperative_groups_shims(toolchain: Toolchain | None) -> tuple[tuple[str, str], ...]:
    """_CG_INFO_SHIM and a shim of every other cooperative-groups header that reads it first (above)."""
    headers = _cooperative_groups_headers(toolchain)
    if not headers:
        return ()
    first = f"#if defined(__cplusplus) && defined(__CUDACC__)\n#include <{_CG_INFO}>\n#endif\n"
    return ((_CG_INFO, _CG_INFO_SHIM), *((name, f"{first}#include_next <{name}>\n") for name in headers))


def _assertion_reach_shims(marker: str) -> tuple[tuple[str, str], ...]:
    """Headers under which every assertion the headers define makes the code that holds it ill-formed
    where that code is instantiated: its macro calls MARKER, a function template whose body fails a
    static_assert on its argument type, so only an instantiation fails, never a mere definition. An
    error in a function's body is never a substitution failure, so a part that makes a header
    instantiate one (to call it at run time, or to evaluate it as a constant, in a template's default
    argument as much as anywhere: round 168) cannot build."""
    def failing(name: str, space: str = "") -> tuple[str, str]:
        """The declarations of template NAME (guarded: the headers are read again) and its call."""
        return (f"#ifndef {name}_DECLARED\n#define {name}_DECLARED\n"
                f"template <class T> struct {name}_never {{ static constexpr bool value = false; }};\n"
                f"template <class T> {space}constexpr void {name}() noexcept "
                f"{{ static_assert({name}_never<T>::value, \"reached\"); }}\n#endif\n",
                f"{name}<decltype((expression))>()")

    cccl, cccl_call = failing(marker, "__host__ __device__ ")
    # <bits/c++config.h> and <assert.h> are read before CUDA's macros define __host__: host code only
    std, std_call = failing(f"{marker}_std")
    plain, plain_call = failing(f"{marker}_plain")
    return (("cuda/std/__cccl/assert.h", "#include_next <cuda/std/__cccl/assert.h>\n" + cccl
             + f"#undef _CCCL_ASSERT_IMPL_HOST\n#define _CCCL_ASSERT_IMPL_HOST(expression, message) {cccl_call}\n"
             + f"#undef _CCCL_ASSERT_IMPL_DEVICE\n#define _CCCL_ASSERT_IMPL_DEVICE(expression, message) {cccl_call}\n"),
            ("bits/c++config.h", "#include_next <bits/c++config.h>\n" + std
             + f"#undef __glibcxx_assert_impl\n#define __glibcxx_assert_impl(expression) {std_call};\n"),
            ("assert.h", "#include_next <assert.h>\n" + plain
             + f"#ifndef NDEBUG\n#undef assert\n#define assert(expression) {plain_call}\n#endif\n"))


def header_assertions_reached(split: ProgramSplit, editable: str, *, arch: str, cache_dir: Path,
                              toolchain: Toolchain, one_file: bool = False) -> bool:
    """Whether the candidate's part makes a header instantiate code that holds an assertion, in the debug
    build with every assertion switch (_EVERY_ASSERTION) and plain asserts on: the compiler's word, not a reading of
    names (red team round 170: `::cuda::std::clamp`, and `clamp` found by argument-dependent lookup on the
    `std::initializer_list` that `auto one = {0}` makes, named no namespace a text scan could see). Under
    _assertion_reach_shims such a unit does not build, whatever the assertion is evaluated for; one that
    builds instantiates none, so no debug build can change its code through one. With the harness's
    headers after the part too where its templates can see them (`one_file`: _with_harness_headers)."""
    marker = f"__kl_assertion_reached_{_build_identity_key(cache_dir)}"
    flags = tuple(f"-D{name}" for name in _EVERY_ASSERTION)
    unit = split.editable_unit(editable, "candidate.cu")
    for text in (unit, _with_harness_headers(split, unit)) if one_file else (unit,):
        build = build_whole_object(text, arch=arch, cache_dir=cache_dir, toolchain=toolchain, optimised=True,
                                   filename="editable.cu", extra_flags=flags,
                                   include_first=_assertion_reach_shims(marker))
        if not build.ok:
            return True
    return False


def _assertions_evaluated_in_headers(toolchain: Toolchain | None = None) -> tuple[tuple[str, str], ...]:
    """Headers under which CCCL's, libstdc++'s and plain assertions evaluate their condition and have no failure
    path at run time, for build_whole_object's `include_first`: an assertion whose
    condition has no side effect then leaves no code once optimised, in any build, and one whose condition
    changes state leaves that change. Only the assertion macros change (red team round 167 read the value
    of a header's `__builtin_expect`, which an earlier form of this rewrote, through libstdc++'s string
    code), and cooperative groups' debug-mode checks, which run no code of the part's, are left out of both
    builds (_cooperative_groups_shims: round 249b); the part cannot name them (reserved names). TOOLCHAIN's
    toolkit (the nvcc on PATH where None) is the one whose cooperative-groups headers are listed."""
    return (*_ASSERTION_SHIMS.items(), *_cooperative_groups_shims(toolchain))


def _with_harness_headers(split: ProgramSplit, alone: str) -> str:
    """The part's unit with the harness's preprocessor lines after it (its #includes, with its macros
    and conditions around them) and none of its code: the declarations a template of the part finds at
    the end of the unit in the one-file build (std::clamp through <algorithm>, red team round 168),
    without compiling the harness's own code."""
    directives, continued = [], False
    for line in split.harness.split("\n"):
        if continued or line.lstrip().startswith("#"):
            directives.append(line)
            continued = line.rstrip().endswith("\\")
        else:
            directives.append("")  # the harness's line numbers kept
            continued = False
    return f"{alone}#line {split.harness_line} \"harness.cu\"\n" + "\n".join(directives) + "\n"


def cccl_included(header_macros: dict[str, str]) -> bool:
    """Whether a unit (its headers' macros: tools/nvcc.py preprocess_unit) includes CCCL, whose debug mode
    (-DDEBUG, -D_DEBUG) changes header code besides its assertions: comparators wrapped in
    `__debug_less`, whose result is taken as a `bool` (red team round 171)."""
    return any(name.startswith("_CCCL_") for name in header_macros)


def header_assertion_differences(split: ProgramSplit, editable: str, *, arch: str, cache_dir: Path,
                                 toolchain: Toolchain, one_file: bool = False, cccl: bool = True,
                                 pool: Executor | None = None) -> tuple[tuple[str, ...], list[str]]:
    """The first of the debug builds (_ASSERTION_BUILDS, switch names) in which the part's functions and
    kernels compile to other code with the headers' assertion conditions evaluated than with them
    dropped, and those functions (readable names); ((), []) where none. Both builds keep the conditions'
    side effects and lose the failure paths (_assertions_evaluated_in_headers), so an honest part, whose
    comparators and operators change nothing, compiles to the same code in both: a debug build's checks
    inside cuda::barrier or cuda::std code (round 67) are no difference. A build the baseline's own part
    differs in (or fails in) is not one its program ships as unchanged, and is not judged. `one_file`
    (one_file_reaches: the part has a template): the part is compared with the harness's headers after
    it too, as the one-file build declares names for its template's end-of-unit lookup. Only where the
    part reaches a header's assertion (header_assertions_reached) or its unit includes CCCL (`cccl`:
    cccl_included, whose debug mode changes more than assertions; then CCCL's own debug switches are
    compared too, _CCCL_DEBUG_BUILDS). `pool`: the builds' comparisons run in it at once (first_found)."""
    if editable == split.editable:
        return (), []  # the baseline's own text compiles as the baseline's does in every build
    if not cccl and not header_assertions_reached(split, editable, arch=arch, cache_dir=cache_dir,
                                                  toolchain=toolchain, one_file=one_file):
        return (), []  # no header's assertion in its code, no CCCL: no debug or release build can change it
    shims = _assertions_evaluated_in_headers(toolchain)
    units = [(split.editable_unit(), split.editable_unit(editable, "candidate.cu"))]
    if one_file:
        units.append(tuple(_with_harness_headers(split, unit) for unit in units[0]))

    def compare(switches: tuple[str, ...], baseline_unit: str, candidate_unit: str) -> tuple[tuple[str, ...], list[str]] | None:
        flags = tuple(f"-D{name}" for name in switches)
        if _part_differences(baseline_unit, flags, arch, cache_dir, toolchain, include_first=shims) != []:
            return None
        differing = _part_differences(candidate_unit, flags, arch, cache_dir, toolchain, include_first=shims)
        if differing is None:
            return switches, ["the part does not build there"]
        return (switches, differing) if differing else None

    comparisons = [partial(compare, switches, *pair) for switches in (*_ASSERTION_BUILDS, *(_CCCL_DEBUG_BUILDS if cccl else ()))
                   for pair in units]
    for switches in (*_ASSERTION_BUILDS, *(_CCCL_DEBUG_BUILDS if cccl else ())):  # every build, both parts
        for pair in units:
            for unit in pair:
                _prefetch(pool, _part_builds(unit, tuple(f"-D{name}" for name in switches), toolchain, "editable.cu",
                                             True, None), arch, cache_dir, shims)
    return first_found(comparisons, pool) or ((), [])
