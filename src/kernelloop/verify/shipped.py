"""What is verified is what ships: the candidate's code must not depend on what else is in its
translation unit.

The gate builds the editable part as a unit of its own (preamble + editable part); everything
else that builds it builds one file with the harness after it: `best.cu` and its certificate,
the program a pull request changes and `bench check` runs, `nvcc program.cu`, the profiler. A
candidate that can tell the two apart compiles one kernel for the verifier and another for
everyone else: an overload or a template whose end-of-unit lookup finds a name of the harness's
header only where that header is in the same unit (red team round 51; `__LINE__` and its kind
are refused by the policy). So the editable part is built both ways, with the same position for
it in both, and each of its functions and kernels must compile to the same code (the
fingerprints `kernelloop init` compares its copies by: host machine code with relocations
resolved, device PTX with position-numbered names neutral)."""

from __future__ import annotations

import re
from pathlib import Path

from ..program.split import ProgramSplit
from ..tools.code_identity import device_fingerprints, host_fingerprints
from ..tools.nvcc import Toolchain, build_whole_object
from ..tools.state_refs import generated, state_references
from ..tools.symbols import demangle

# PTX names of functions with internal linkage in an anonymous namespace carry a digest of their
# translation unit: the same function has another name in another unit.
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


def _neutral_ptx(ptx: str) -> str:
    return _UNIT_NAMES.sub("_INTERNAL_", ptx)


class ShippedBuildUnreadable(Exception):
    """One of the two builds failed: the gate's own build is the judge of that."""


def shipped_build_differences(split: ProgramSplit, editable: str, *, arch: str, cache_dir: Path,
                              toolchain: Toolchain | None = None) -> list[str]:
    """The editable part's functions and kernels (readable names) that compile to other code in
    one file with the harness after them than in the verifier's unit alone."""
    alone = split.editable_unit(editable, "candidate.cu")
    whole = f"{alone}#line {split.harness_line} \"harness.cu\"\n{split.harness}\n"
    objects = []
    for text in (alone, whole):
        build = build_whole_object(text, arch=arch, cache_dir=cache_dir, toolchain=toolchain, optimised=True)
        if not build.ok or build.binary is None:
            raise ShippedBuildUnreadable(build.log.strip().splitlines()[-1] if build.log.strip() else build.stage)
        objects.append(build.binary)
    unit_object, whole_object = objects
    refs = state_references(unit_object)
    names = {f for f in refs.functions if not generated(f, refs.readable_names.get(f))}
    # Each unit's kernel registration counts by name, not by code.
    unit_prints = host_fingerprints(unit_object, names, opaque=_registration)
    whole_prints = host_fingerprints(whole_object, names, opaque=_registration)
    unit_ptx = _neutral_ptx(unit_object.with_name("program.ptx").read_text())
    whole_ptx = _neutral_ptx(whole_object.with_name("program.ptx").read_text())
    device = {_UNIT_NAMES.sub("_INTERNAL_", name) for name in refs.device_edges}
    unit_prints.update(device_fingerprints(unit_ptx, device))
    whole_prints.update(device_fingerprints(whole_ptx, device))
    # A function the one-file build lacks, or compiles otherwise, differs.
    differing = sorted(name for name, digest in unit_prints.items() if whole_prints.get(name) != digest)
    return demangle(differing) if differing else []
