"""ncu_report_reader: a real H200 `--set full` capture read with NVIDIA's ncu_report, no GPU needed."""

from __future__ import annotations

import importlib.machinery
import os
import re
import stat
import struct
import sys
from pathlib import Path

import pytest

from kernelloop.errors import EnvironmentProblem, InputError
from kernelloop.tools import ncu_report_reader as reader
from kernelloop.tools.ncu_report_reader import (
    HEADLINE_METRICS,
    KernelProfile,
    NcuUnavailable,
    ReportError,
    headline,
    list_kernels,
    load_ncu_report_module,
    read_report,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ncu"
REPORT = FIXTURES / "h200_naive_matmul_1024_full.ncu-rep"
DETAILS = FIXTURES / "h200_naive_matmul_1024_full_details.txt"
TWO = FIXTURES / "two_kernels.ncu-rep"  # fill, fill (other grid), scale_add<4>; SpeedOfLight + LaunchStats only

# What Nsight Compute printed for this capture (the details page). The fixture README's own list has
# three slips (SM 61.86, memory 92.84, L2 14.10); see the note at its end.
EXPECTED = {
    "sm_throughput_pct": 61.59,
    "memory_throughput_pct": 92.44,
    "l1tex_throughput_pct": 96.15,
    "dram_throughput_pct": 0.32,
    "l2_throughput_pct": 14.20,
    "l1_hit_rate_pct": 87.57,
    "l2_hit_rate_pct": 97.36,
    "achieved_occupancy_pct": 91.35,
    "theoretical_occupancy_pct": 100.0,
    "waves_per_sm": 3.88,
    "registers_per_thread": 32,
}


@pytest.fixture(scope="module")
def profile() -> KernelProfile:
    return read_report(REPORT)


def _one_clean_line(err: BaseException) -> str:
    text = str(err)
    assert text and "\n" not in text
    assert "Traceback" not in text
    assert not re.search(r"\b\w+(Error|Exception)\b", text), text  # no exception class names leak
    return text


# --- the fixture ------------------------------------------------------------------------------------


def test_reads_the_real_capture(profile: KernelProfile):
    assert "naive_matmul" in profile.kernel_name
    assert profile.kernel_name == "naive_matmul"
    assert profile.demangled_name == "naive_matmul(const float *, const float *, float *, int)"
    assert profile.mangled_name == "_Z12naive_matmulPKfS0_Pfi"
    assert profile.grid == (64, 64, 1)
    assert profile.block == (16, 16, 1)
    assert profile.device_name == "NVIDIA H200"
    assert profile.compute_capability == "9.0"
    assert profile.ncu_version == "2025.3.1"
    assert len(profile.metrics) > 1000
    m = profile.metrics["gpu__time_duration.sum"]
    assert m.unit == "ns" and m.value == pytest.approx(550016.0)
    assert profile.metrics["device__attribute_display_name"].value == "NVIDIA H200"


def test_headline_matches_what_ncu_printed(profile: KernelProfile):
    values = headline(profile)
    for key, expected in EXPECTED.items():
        assert values[key] == pytest.approx(expected, abs=0.05), key
    assert values["duration_ns"] == pytest.approx(550_016)


def test_headline_agrees_with_the_details_page(profile: KernelProfile):
    """Cross-check against ncu's own text output of the same report (GPU Speed Of Light section)."""
    sol = DETAILS.read_text().split("Section: GPU Speed Of Light Throughput", 1)[1].split("Section:", 1)[0]
    printed = {}
    for line in sol.splitlines():
        match = re.match(r"\s+(.+?)\s{2,}(?:%|cycle|Ghz|us)?\s*([\d,.]+)$", line)
        if match:
            printed[match.group(1).strip()] = float(match.group(2).replace(",", ""))
    values = headline(profile)
    pairs = {
        "Compute (SM) Throughput": "sm_throughput_pct",
        "Memory Throughput": "memory_throughput_pct",
        "L1/TEX Cache Throughput": "l1tex_throughput_pct",
        "L2 Cache Throughput": "l2_throughput_pct",
        "DRAM Throughput": "dram_throughput_pct",
        "Waves Per SM": "waves_per_sm",
        "Elapsed Cycles": "elapsed_cycles",
    }
    for label, key in pairs.items():
        assert values[key] == pytest.approx(printed[label], abs=0.006), label
    assert values["duration_ns"] / 1000 == pytest.approx(printed["Duration"], abs=0.006)
    assert values["sm_frequency_hz"] / 1e9 == pytest.approx(printed["SM Frequency"], abs=0.006)


def test_every_headline_key_is_found_in_a_full_set_report(profile: KernelProfile):
    values = headline(profile)
    assert {k for k, v in values.items() if v is None} == set()
    for key, names in HEADLINE_METRICS.items():
        assert names and all(isinstance(n, str) for n in names), key
    required = {
        "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "l1tex_throughput_pct",
        "l2_throughput_pct", "l1_hit_rate_pct", "l2_hit_rate_pct", "achieved_occupancy_pct",
        "theoretical_occupancy_pct", "registers_per_thread", "shared_mem_per_block", "duration_ns",
        "waves_per_sm", "stall_long_scoreboard", "stall_barrier", "stall_mio_throttle", "stall_lg_throttle",
        "stall_short_scoreboard", "stall_math_pipe_throttle", "stall_not_selected", "stall_wait",
        "stall_membar", "shared_bank_conflicts", "global_load_sectors_per_request",
        "global_store_sectors_per_request", "dram_read_bytes", "dram_write_bytes", "ffma_count",
        "sm_count", "sm_clock_rate_hz", "memory_bus_width_bits", "max_shared_memory_per_block_bytes",
    }
    assert required <= set(values)


def test_derived_numbers_make_physical_sense(profile: KernelProfile):
    v = headline(profile)
    n = 1024
    assert v["ffma_count"] == pytest.approx(n**3, rel=1e-6)  # one FFMA per multiply-add of C = A·B
    assert v["fp32_flops"] == pytest.approx(2 * n**3, rel=1e-6)
    assert v["global_load_sectors_per_request"] == pytest.approx(2.0)
    assert v["global_load_bytes_per_sector"] == pytest.approx(18.0)
    assert v["shared_mem_per_block"] == 0  # no __shared__ in the naive kernel
    assert v["shared_bank_conflicts"] == 0
    assert v["stall_lg_throttle"] > v["stall_long_scoreboard"] > v["stall_not_selected"]
    assert v["dram_read_bytes"] == pytest.approx(8_394_496)
    assert v["peak_dram_bytes_per_s"] == pytest.approx(4.8e12, rel=0.02)  # H200 HBM3e
    assert v["peak_fp32_flops_per_s"] == pytest.approx(2 * 132 * 128 * v["sm_frequency_hz"], rel=1e-9)
    assert v["sm_clock_rate_hz"] == pytest.approx(1.98e9)
    assert v["sm_count"] == 132


def test_value_helper(profile: KernelProfile):
    assert profile.value("launch__registers_per_thread") == 32
    assert profile.value("device__attribute_display_name") is None  # a string
    assert profile.value("no__such_metric") is None


def test_headline_of_an_empty_profile_is_all_none():
    empty = KernelProfile(
        kernel_name="k", demangled_name=None, grid=None, block=None, device_name=None,
        compute_capability=None, ncu_version=None, metrics={}, rules=[],
    )
    assert all(v is None for v in headline(empty).values())


# --- rule results -----------------------------------------------------------------------------------


def test_rule_results(profile: KernelProfile):
    rules = profile.rules
    assert rules
    opts = [r for r in rules if r.kind == "OPT"]
    assert any(r.estimated_speedup_pct for r in opts)
    by_id = {(r.rule_id, r.kind): r for r in rules}
    access = by_id[("MemoryCacheAccessPattern", "OPT")]
    assert access.section == "MemoryWorkloadAnalysis_Tables"
    assert access.estimated_speedup_pct == pytest.approx(40.44, abs=0.01)
    assert access.speedup_type == "global"
    assert "18.0 of the 32 bytes" in access.message
    assert by_id[("IssueSlotUtilization", "OPT")].speedup_type == "local"
    assert by_id[("LaunchConfiguration", "OPT")].title == "Tail Effect"
    bottleneck = by_id[("SOLBottleneck", "INF")]
    assert bottleneck.estimated_speedup_pct is None and bottleneck.speedup_type is None
    # ncu's link markup is reduced to its text, as `ncu --page details` prints it
    assert "Start by analyzing L1 in the Memory Workload Analysis section." in bottleneck.message
    assert not any("@" in r.message for r in rules)


def test_rule_kinds_and_speedups_agree_with_the_details_page(profile: KernelProfile):
    text = DETAILS.read_text()
    printed_kinds = sorted(re.findall(r"^\s{4}(OPT|INF|WRN|ERR)\s{3}", text, flags=re.M))
    assert sorted(r.kind for r in profile.rules) == printed_kinds
    printed = sorted(
        (float(pct), "local" if local else "global")
        for local, pct in re.findall(r"Est\. (Local )?Speedup: ([\d.]+)%", text)
    )
    ours = sorted(
        (round(r.estimated_speedup_pct, 4 - len(str(int(r.estimated_speedup_pct)))), r.speedup_type)
        for r in profile.rules
        if r.estimated_speedup_pct is not None
    )
    assert [t for _, t in ours] == [t for _, t in printed]
    assert [p for p, _ in ours] == pytest.approx([p for p, _ in printed], abs=0.01)


def test_link_markup_is_reduced_to_text():
    plain = reader._plain(
        "See @url:Profiling Guide:https://docs.nvidia.com/x#y@, @section:SourceCounters:Source Counters@, "
        "@sass:0x1a0:this load@ and @source:/w/k.cu:12:line 12@."
    )
    assert plain == "See Profiling Guide, Source Counters, this load and line 12."


# --- choosing a kernel ------------------------------------------------------------------------------


def test_list_kernels():
    assert list_kernels(REPORT) == ["naive_matmul"]


@pytest.mark.parametrize(
    "pattern",
    [
        "matmul",  # substring of the function name
        r"^naive_\w+$",  # regex on the function name
        r"_Z\d+naive",  # regex on the mangled name
        "naive_matmul(const float *",  # substring of the demangled name (not a valid regex)
        r"float \*, int\)$",  # regex on the demangled name
    ],
)
def test_kernel_filter_matches(pattern):
    assert read_report(REPORT, kernel=pattern).kernel_name == "naive_matmul"


def test_kernel_filter_without_match_lists_the_kernels():
    with pytest.raises(ReportError) as info:
        read_report(REPORT, kernel="tiled_gemm")
    text = _one_clean_line(info.value)
    assert "no kernel matching 'tiled_gemm'" in text
    assert "(kernels: naive_matmul)" in text
    assert isinstance(info.value, InputError)


def test_launch_index_out_of_range():
    with pytest.raises(ReportError) as info:
        read_report(REPORT, kernel="naive", launch_index=1)
    text = _one_clean_line(info.value)
    assert "launch_index 1" in text and "1 profiled launch" in text


def test_several_kernels_and_launches():
    assert list_kernels(TWO) == ["fill", "fill", "scale_add"]
    first = read_report(TWO)
    assert (first.kernel_name, first.grid, first.block) == ("fill", (4096, 1, 1), (256, 1, 1))
    second = read_report(TWO, kernel="fill", launch_index=1)
    assert (second.grid, second.block) == ((8192, 1, 1), (128, 1, 1))
    assert read_report(TWO, launch_index=2).kernel_name == "scale_add"
    scale = read_report(TWO, kernel=r"<\(int\)4>")  # regex on the demangled template name
    assert scale.demangled_name == "void scale_add<(int)4>(const float *, float *, float, int)"
    assert scale.mangled_name == "_Z9scale_addILi4EEvPKfPffi"
    assert scale.grid == (1024, 1, 1) and scale.ncu_version == "2025.3.1"
    assert headline(scale)["dram_throughput_pct"] == pytest.approx(19.75, abs=0.01)
    assert headline(scale)["stall_long_scoreboard"] is None  # a section that was not collected
    with pytest.raises(ReportError) as info:
        read_report(TWO, kernel="gemm")
    assert "(kernels: fill, scale_add)" in _one_clean_line(info.value)
    with pytest.raises(ReportError) as info:
        read_report(TWO, kernel="fill", launch_index=2)
    assert "2 profiled launch(es) matching 'fill'" in _one_clean_line(info.value)


# --- bad input --------------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(ReportError) as info:
        read_report(tmp_path / "nope.ncu-rep")
    assert "report not found" in _one_clean_line(info.value)


def test_directory(tmp_path):
    with pytest.raises(ReportError) as info:
        read_report(tmp_path)
    assert "is a directory" in _one_clean_line(info.value)


def test_empty_file(tmp_path):
    bad = tmp_path / "empty.ncu-rep"
    bad.write_bytes(b"")
    with pytest.raises(ReportError) as info:
        read_report(bad)
    assert "is empty" in _one_clean_line(info.value)


def test_text_file_renamed(tmp_path):
    bad = tmp_path / "notes.ncu-rep"
    bad.write_text("==PROF== Connected to process 1\nnot a report at all\n")
    with pytest.raises(ReportError) as info:
        read_report(bad)
    text = _one_clean_line(info.value)
    assert "not an Nsight Compute report" in text
    with pytest.raises(ReportError):
        list_kernels(bad)


@pytest.mark.parametrize("fraction", [0.2, 0.95])
def test_truncated_report(tmp_path, fraction):
    data = REPORT.read_bytes()
    bad = tmp_path / "cut.ncu-rep"
    bad.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ReportError) as info:
        read_report(bad)
    text = _one_clean_line(info.value)
    assert "truncated or corrupt" in text
    assert "ncu_report" in text  # says which reader failed


def test_report_of_a_file_format_the_reader_does_not_know(tmp_path):
    """ncu_report returns an empty context (no exception, no output) for a report whose header
    carries a file-format version it does not read; the error names both versions."""
    data = bytearray(REPORT.read_bytes())
    assert data[:4] == b"NVR\x00" and struct.unpack("<I", data[4:8])[0] == 2
    data[4:8] = struct.pack("<I", 3)
    bad = tmp_path / "future.ncu-rep"
    bad.write_bytes(bytes(data))
    with pytest.raises(ReportError) as info:
        read_report(bad)
    text = _one_clean_line(info.value)
    assert "report file format 3" in text and "reads format 2" in text
    assert "written by Nsight Compute 2025.3.1" in text
    assert re.search(r"read with ncu_report \d{4}\.\d+\.\d+", text)
    assert "pip install -U ncu-report" in text


def test_unreadable_file(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    bad = tmp_path / "locked.ncu-rep"
    bad.write_bytes(REPORT.read_bytes()[:100])
    bad.chmod(0)
    with pytest.raises(ReportError) as info:
        read_report(bad)
    assert "cannot open" in _one_clean_line(info.value)


# --- reading in a helper process (ncu_report 2025.x crashes next to numpy) ---------------------------


@pytest.fixture
def isolated(monkeypatch):
    monkeypatch.delenv(reader._INPROCESS_ENV, raising=False)
    monkeypatch.setattr(reader, "_needs_isolation", lambda mod: True)


def test_helper_process_reads_the_same_profile(isolated, profile: KernelProfile):
    child = read_report(REPORT, kernel="naive")
    assert child.model_dump() == profile.model_dump()
    assert KernelProfile.model_validate_json(profile.model_dump_json()) == profile  # JSON round trip
    assert child.grid == (64, 64, 1)
    assert list_kernels(REPORT) == ["naive_matmul"]


def test_helper_process_passes_errors_back(isolated, tmp_path):
    with pytest.raises(ReportError) as info:
        read_report(REPORT, kernel="tiled_gemm")
    assert "(kernels: naive_matmul)" in _one_clean_line(info.value)
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(REPORT.read_bytes()[:300_000])
    with pytest.raises(ReportError) as info:
        read_report(cut)
    assert "truncated or corrupt" in _one_clean_line(info.value)


def test_helper_process_crash_is_a_report_error(isolated, monkeypatch):
    crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    monkeypatch.setattr(reader, "_child_argv", lambda request: [sys.executable, "-c", crash])
    with pytest.raises(ReportError) as info:
        read_report(REPORT)
    text = _one_clean_line(info.value)
    assert "ncu_report crashed" in text and "signal 11" in text


def test_when_the_helper_process_is_used(monkeypatch):
    monkeypatch.delenv(reader._INPROCESS_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "numpy", sys.modules.get("numpy") or type(sys)("numpy"))
    for version, isolate in [("2025.3.1", True), ("2026.3.1", False), ("(version unknown)", True)]:
        monkeypatch.setattr(reader, "_module_version", lambda mod, v=version: v)
        assert reader._needs_isolation(None) is isolate, version
    monkeypatch.setenv(reader._INPROCESS_ENV, "1")  # the helper itself never isolates again
    monkeypatch.setattr(reader, "_module_version", lambda mod: "2025.3.1")
    assert reader._needs_isolation(None) is False
    monkeypatch.delenv(reader._INPROCESS_ENV)
    monkeypatch.delitem(sys.modules, "numpy")
    assert reader._needs_isolation(None) is False


# --- finding the module -----------------------------------------------------------------------------


class _OnlyFrom:
    """A meta-path finder that lets `import ncu_report` succeed only from the given folders, and only
    once they are on sys.path: the pip package (site-packages) stays invisible."""

    def __init__(self, allowed: list[Path]):
        self.allowed = {str(p) for p in allowed}

    def find_spec(self, name, path=None, target=None):
        if name != "ncu_report":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, [p for p in sys.path if p in self.allowed])
        if spec is None:
            raise ModuleNotFoundError("No module named 'ncu_report'", name=name)
        return spec


@pytest.fixture
def no_installed_module(monkeypatch, tmp_path):
    """Hide the pip package and this machine's own Nsight Compute installs; restore everything (module,
    sys.path, cache) afterwards."""
    load_ncu_report_module.cache_clear()
    monkeypatch.delitem(sys.modules, "ncu_report", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("kernelloop.toolkit_roots.DEFAULT_ROOT", tmp_path / "no-default-toolkit")
    monkeypatch.setattr("kernelloop.tools.toolkit.NSIGHT_COMPUTE_ROOT", tmp_path / "no-opt-nvidia")

    def install(allowed: list[Path]):
        monkeypatch.setattr(sys, "meta_path", [_OnlyFrom(allowed), *sys.meta_path])

    yield install
    load_ncu_report_module.cache_clear()


def _stub_extras(extras: Path) -> Path:
    extras.mkdir(parents=True)
    (extras / "ncu_report.py").write_text("STUB_FROM_EXTRAS = True\n\ndef load_report(file_name):\n    return None\n")
    return extras


def _fake_ncu(path: Path, target: Path | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if target is not None:
        path.symlink_to(target)
        return
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.mark.parametrize("layout", ["beside", "symlink", "cuda-toolkit"])
def test_falls_back_to_extras_python_beside_ncu(tmp_path, monkeypatch, no_installed_module, layout):
    if layout == "beside":  # /opt/nvidia/nsight-compute/<ver>/{ncu, extras/python} with that dir on PATH
        extras = _stub_extras(tmp_path / "nsight-compute" / "2025.3.1" / "extras" / "python")
        _fake_ncu(tmp_path / "nsight-compute" / "2025.3.1" / "ncu")
        bin_dir = tmp_path / "nsight-compute" / "2025.3.1"
    elif layout == "symlink":  # /usr/bin/ncu -> /opt/nvidia/nsight-compute/<ver>/ncu
        extras = _stub_extras(tmp_path / "opt" / "ncu-2025.3.1" / "extras" / "python")
        _fake_ncu(tmp_path / "opt" / "ncu-2025.3.1" / "ncu")
        bin_dir = tmp_path / "usr" / "bin"
        _fake_ncu(bin_dir / "ncu", target=tmp_path / "opt" / "ncu-2025.3.1" / "ncu")
    else:  # /usr/local/cuda/bin/ncu (a script) beside /usr/local/cuda/nsight-compute-<ver>/extras/python
        extras = _stub_extras(tmp_path / "cuda" / "nsight-compute-2025.3.1" / "extras" / "python")
        bin_dir = tmp_path / "cuda" / "bin"
        _fake_ncu(bin_dir / "ncu")
    monkeypatch.setenv("PATH", str(bin_dir))
    no_installed_module([extras])

    mod = load_ncu_report_module()
    assert getattr(mod, "STUB_FROM_EXTRAS", False)
    assert Path(mod.__file__).resolve().parent == extras.resolve()
    assert str(extras) in sys.path
    assert load_ncu_report_module() is mod  # cached


def test_the_reader_and_find_ncu_search_the_same_installs(tmp_path, monkeypatch, no_installed_module):
    # a standalone install, not on PATH: doctor/profile's ncu and the report reader come from one folder
    from kernelloop.tools import toolkit

    root = tmp_path / "opt-nvidia-nsight-compute"
    _stub_extras(root / "2025.1.0" / "extras" / "python")
    extras = _stub_extras(root / "2025.3.1" / "extras" / "python")
    _fake_ncu(root / "2025.1.0" / "ncu")
    _fake_ncu(root / "2025.3.1" / "ncu")
    monkeypatch.setattr(toolkit, "NSIGHT_COMPUTE_ROOT", root)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    no_installed_module([extras])

    assert toolkit.find_ncu() == root / "2025.3.1" / "ncu"
    mod = load_ncu_report_module()
    assert Path(mod.__file__).resolve().parent == extras.resolve()


def test_module_missing_everywhere(tmp_path, monkeypatch, no_installed_module):
    monkeypatch.setenv("PATH", str(tmp_path))
    no_installed_module([])
    with pytest.raises(NcuUnavailable) as info:
        load_ncu_report_module()
    text = str(info.value)
    assert "\n" not in text
    assert "pip install ncu-report" in text and "extras/python" in text
    assert isinstance(info.value, EnvironmentProblem)


def test_installed_module_is_used_first():
    load_ncu_report_module.cache_clear()
    mod = load_ncu_report_module()
    assert mod.__name__ == "ncu_report"
    assert hasattr(mod, "load_report")
    assert load_ncu_report_module() is mod
