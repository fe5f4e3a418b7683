"""The part's module memory for the run-time state check (tools/module_memory.py): what objects the cubin lists,
the table the build links for the harness, the build's refusal to go on without it, and the record of what the
harness could not locate. The runs themselves:
tests/gpu/test_module_memory_gpu.py."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kernelloop.program.split import split_program
from kernelloop.tools import nvcc as nvcc_module
from kernelloop.tools.module_memory import (ModuleMemoryUnread, ModuleObject, ModuleSection, module_memory_unit,
                                            object_module_memory)
from kernelloop.tools.nvcc import build_program, find_toolchain
from kernelloop.tools.toolkit import find_toolkit_program

from .conftest import FIXTURES, shared_cache_dir

MODULE = FIXTURES / "module_memory"


def _cuobjdump() -> Path:
    found = find_toolkit_program("cuobjdump", find_toolchain().nvcc)
    if found is None:
        pytest.skip("cuobjdump not found (toolkit, PATH, or the nvidia-cuda-cuobjdump wheel)")
    return found


def _editable_object(name: str, tmp_path: Path, *arch_flags: str) -> Path:
    split = split_program((MODULE / name).read_text(), name)
    unit = tmp_path / "editable.cu"
    unit.write_text(split.editable_unit())
    obj = tmp_path / "editable.o"
    subprocess.run([str(find_toolchain().nvcc), "-c", *(arch_flags or ("-arch=sm_90",)), "-o", str(obj), str(unit)],
                   check=True, capture_output=True, timeout=300)
    return obj


@pytest.mark.nvcc
@pytest.mark.parametrize("name, expected", [
    ("static_local_counter.cu", {r"_ZZ14launch_countervE8launches"}),
    ("string_storage_counter.cu", {r"\$str"}),
    ("asm_global_counter.cu", {r"\$__kl_launches__\d+"}),
    ("local_memory_reader.cu", set()),
    ("honest_module_memory.cu", {"kOne", r"_ZZ11block_scaleiE4unit", r"\$str", r"__unnamed_1"}),
])
def test_the_cubin_names_every_object_of_module_memory(name, expected, tmp_path):
    sections = object_module_memory(_editable_object(name, tmp_path), arch="sm_90", cuobjdump=_cuobjdump())
    names = [o.name for s in sections for o in s.objects]
    for pattern in expected:
        assert any(re.fullmatch(pattern, n) for n in names), (pattern, names)
    assert expected or not names, names  # local memory only: no module memory
    for section in sections:
        assert section.name.startswith((".nv.global", ".nv.constant"))
        for o in section.objects:  # each object inside its section
            assert 0 <= o.offset and o.offset + o.size <= section.size, (section, o)


@pytest.mark.nvcc
def test_the_cubin_read_is_the_targets_own(tmp_path):
    obj = _editable_object("static_local_counter.cu", tmp_path, "-gencode=arch=compute_80,code=sm_80",
                           "-gencode=arch=compute_90a,code=sm_90a")
    for arch in ("sm_80", "sm_90a"):
        assert object_module_memory(obj, arch=arch, cuobjdump=_cuobjdump())
    with pytest.raises(ModuleMemoryUnread, match="no single cubin for sm_86"):
        object_module_memory(obj, arch="sm_86", cuobjdump=_cuobjdump())
    with pytest.raises(ModuleMemoryUnread, match="cuobjdump not found"):
        object_module_memory(obj, arch="sm_80", cuobjdump=None)


def test_the_table_the_harness_reads_keeps_every_name_and_number(tmp_path):
    # compiled and read back on the host: names with the characters ptxas and C++ give them, and any byte
    odd = 'we"ird\\name\n\u00e9'
    sections = [ModuleSection(".nv.global", 24, (ModuleObject("$str$1", 0, 5), ModuleObject("_ZZ1fvE1n", 8, 8))),
                ModuleSection(".nv.constant3", 4096, (ModuleObject(odd, 4000, 96),))]
    (tmp_path / "table.cpp").write_text(module_memory_unit(sections))
    (tmp_path / "main.cpp").write_text(
        "#include <cstdio>\nstruct kl_module_object { const char *name; unsigned long long size; };\n"
        "extern \"C\" const kl_module_object __kl_module_objects[];\n"
        "int main() { for (const kl_module_object* o = __kl_module_objects; o->name; ++o) {\n"
        "  for (const char* c = o->name; *c; ++c) printf(\"%02x\", (unsigned char)*c);\n"
        "  printf(\" %llu\\n\", o->size); } }\n")
    subprocess.run(["g++", "-o", str(tmp_path / "t"), str(tmp_path / "table.cpp"), str(tmp_path / "main.cpp")],
                   check=True, capture_output=True, timeout=120)
    out = subprocess.run([str(tmp_path / "t")], check=True, capture_output=True, text=True, timeout=60).stdout
    assert out.splitlines() == [f"{'$str$1'.encode().hex()} 5", f"{'_ZZ1fvE1n'.encode().hex()} 8",
                                f"{odd.encode().hex()} 96"]
    assert module_memory_unit([]).count("{0, 0ull}") == 1  # no module memory: the end row alone


@pytest.mark.nvcc
def test_the_program_links_the_table_read_only_and_records_the_parts_kernels():
    split = split_program((MODULE / "honest_module_memory.cu").read_text(), "honest_module_memory.cu")
    result = build_program(split.editable_unit(), split.harness_unit(), arch="sm_90", cache_dir=shared_cache_dir(),
                           toolchain=find_toolchain())
    assert result.ok, result.log[-2000:]
    symbols = subprocess.run(["readelf", "-sW", str(result.binary)], capture_output=True, text=True, check=True).stdout
    sections = subprocess.run(["readelf", "-SW", str(result.binary)], capture_output=True, text=True,
                              check=True).stdout
    index = re.search(r"\s(\d+)\s+__kl_module_objects$", symbols, re.M)
    assert index, "no table"
    # .data.rel.ro: read-only once the program starts (the link's full RELRO), out of the part's reach
    assert re.search(rf"\[\s*{index.group(1)}\]\s+\.data\.rel\.ro\s", sections)
    disassembly = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(result.binary)], capture_output=True,
                                 text=True, check=True).stdout
    assert re.search(r"call\s+[0-9a-f]+ <__kl_part___cudaRegisterFunction>", disassembly)


@pytest.mark.nvcc
def test_a_build_that_cannot_read_the_module_memory_fails_and_says_why(tmp_path, monkeypatch):
    real = nvcc_module.find_toolkit_program
    monkeypatch.setattr(nvcc_module, "find_toolkit_program",
                        lambda name, nvcc=None: None if name == "cuobjdump" else real(name, nvcc))
    split = split_program((MODULE / "static_local_counter.cu").read_text(), "static_local_counter.cu")
    result = build_program(split.editable_unit(), split.harness_unit(), arch="sm_90", cache_dir=tmp_path / "cache",
                           toolchain=find_toolchain())
    assert not result.ok and result.stage == "module memory" and "cuobjdump not found" in result.log


def test_the_state_record_says_how_many_sections_went_unread():
    from kernelloop.verify.records import parse_records
    assert parse_records(b"kernelloop-state 2 1 40 8 3 2\n").state.module_unread == 2
    assert parse_records(b"kernelloop-state 2 1 40 8 3\n").state.module_unread == 0  # a harness before the field


def test_a_candidates_unread_module_memory_is_unjudged_state_and_fails_it():
    from kernelloop.verify.experiment import module_memory_unread
    from kernelloop.verify.records import PartStateRecord
    from kernelloop.verify.verdict import Reason
    read = PartStateRecord(same=True, host_bytes=0, device_bytes=145, blocks=1)
    unread = PartStateRecord(same=True, host_bytes=0, device_bytes=0, blocks=0, module_unread=1)
    assert module_memory_unread([(5, 0, read), (6, -1, None)]) is None
    reason, detail = module_memory_unread([(5, 0, read), (6, -1, unread)])
    assert reason is Reason.state_between_calls and detail.startswith("seed 6, a drawn size: 1 object(s)")


@pytest.mark.nvcc
@pytest.mark.parametrize("path", ["module_memory/local_memory_reader.cu", "redteam/round338/deep_frame_reader.cu",
                                  "redteam/round338/slot_padding_counter.cu"])
def test_the_run_time_readers_fixtures_pass_every_static_gate(path):
    # their verdicts are the run's (tests/gpu/test_module_memory_gpu.py): nothing before it may decide them
    from kernelloop.config import Settings
    from kernelloop.verify.gate import candidate_editable_part, static_gates
    split = split_program((FIXTURES / "part_state" / "baseline.cu").read_text(), "baseline.cu")
    editable, _ = candidate_editable_part((FIXTURES / path).read_text(), split)
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-1500:]
    assert not result.violations, [v.describe() for v in result.violations]
