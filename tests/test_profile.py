"""`kernelloop profile`: reports diagnosed without a GPU, and every user error as one line."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from kernelloop.config import Settings
from kernelloop.errors import EnvironmentProblem, InputError
from kernelloop.profiler import run as prun
from kernelloop.tools.gpu import GpuInfo

from .conftest import FIXTURES, ROOT

REPORT = FIXTURES / "ncu" / "suite" / "naive_matmul.ncu-rep"


def kl(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kernelloop", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_report_is_diagnosed_without_a_gpu():
    r = kl("profile", "--report", str(REPORT))
    assert r.returncode == 0, r.stderr
    assert "L1/load-store limited" in r.stdout and "shared memory" in r.stdout


def test_report_as_json():
    r = kl("profile", "--report", str(REPORT), "--json")
    d = json.loads(r.stdout)
    assert d["primary"] == "memory-bound" and d["findings"][0]["rule"] == "l1-lsu-limited"


@pytest.mark.parametrize("args, message", [
    (["--report", "missing.ncu-rep"], "missing.ncu-rep"),
    (["--report", "README.md"], "README.md"),
    (["--report", str(REPORT), "--kernel", "no_such_kernel"], "no kernel matching"),
    ([], "give a CUDA program"),
    (["kernels/naive_matmul.cu", "--set", "huge"], "--set"),
])
def test_bad_input_is_one_line_exit_2(args, message):
    r = kl("profile", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_report_from_another_ncu_format_is_refused(tmp_path):
    data = bytearray(REPORT.read_bytes())
    # the reader's own tests establish where the format number lives; flip the NVR header version
    bad = tmp_path / "other.ncu-rep"
    idx = data.find(b"NVR")
    assert idx >= 0
    data[idx + 4] = 3 if data[idx + 4] != 3 else 4
    bad.write_bytes(bytes(data))
    r = kl("profile", "--report", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_profiling_without_a_gpu_says_so(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU machine")
    r = kl("profile", "kernels/naive_matmul.cu", env={"KERNELLOOP_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 2
    assert "GPU" in r.stderr or "ncu" in r.stderr  # no ncu here either: one line either way


@pytest.mark.nvcc
def test_ncu_without_counter_permission_is_one_clear_error(tmp_path, monkeypatch):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
                    "NVIDIA GPU Performance Counters on the target device 0.'\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(prun, "require_ncu", lambda: fake)
    monkeypatch.setattr(prun, "detect_gpus", lambda: [GpuInfo(index=0, name="fake", compute_capability="9.0",
                                                                driver_version="0")])
    monkeypatch.setattr(prun, "_kernels_by_time", lambda binary, settings: [])
    with pytest.raises(EnvironmentProblem, match="ERR_NVGPUCTRPERM.*reboot"):
        prun.profile_file(ROOT / "kernels" / "naive_matmul.cu", Settings(cache_dir=tmp_path / "c", data_dir=tmp_path))


def test_kernel_name_that_matches_nothing_lists_the_kernels():
    kernels = [prun.KernelLaunches(name="_Z3fooPf", launches=22, total_ms=5.0)]
    with pytest.raises(InputError, match="no kernel matching 'bar'; the program launches: _Z3fooPf"):
        prun._pick_kernel(kernels, "bar")
    assert prun._pick_kernel(kernels, "foo").name == "_Z3fooPf"
    assert prun._pick_kernel(kernels, None).name == "_Z3fooPf"


@pytest.mark.nvcc
def test_resources_command_without_a_gpu():
    r = kl("resources", "src/kernelloop/exemplars/matmul_smem_tiling.cu", "--arch", "sm_90", "--block", "1024", "--json")
    assert r.returncode == 0, r.stderr
    (entry,) = json.loads(r.stdout)
    assert entry["kernel"]["static_shared_bytes"] == 8192 and entry["kernel"]["registers"] > 0
    assert entry["occupancy"][0]["theoretical_occupancy_pct"] == 100.0


def test_resources_command_errors():
    assert kl("resources", "nope.cu").returncode == 2
    r = kl("resources", "kernels/naive_matmul.cu", "--arch", "sm_1")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_ncu_command_profiles_one_launch_of_the_hot_kernel():
    hot = prun.KernelLaunches(name="_Z19naive_matmul_kernelPKfS0_Pfi", launches=22, total_ms=9.0)
    argv = prun.ncu_command(prun.Path("/x/ncu"), chosen=hot, kernel=None, section_set="full", clock_control="none")
    assert argv == ["/x/ncu", "--set", "full", "--clock-control", "none", "--kernel-name-base", "mangled",
                    "-k", "regex:^_Z19naive_matmul_kernelPKfS0_Pfi$", "--launch-skip", "1", "--launch-count", "1",
                    "-f", "-o", "profile"]
    once = hot.model_copy(update={"launches": 1})
    fast = prun.ncu_command(prun.Path("ncu"), chosen=once, kernel=None, section_set="fast", clock_control="base")
    assert fast[fast.index("--launch-skip") + 1] == "0" and "--set" not in fast
    assert fast.count("--section") == len(prun.FAST_SECTIONS)
    # every option is followed by its own value
    for flag in ("--clock-control", "--launch-skip", "--launch-count", "-o", "-k"):
        assert not fast[fast.index(flag) + 1].startswith("-")


# -- the fast set collects what the rules read ---------------------------------------------------

def test_the_fast_set_collects_every_section_the_rules_read():
    from kernelloop.profiler.rules import rule_sections

    argv = prun.ncu_command(prun.Path("ncu"), chosen=None, kernel=None, section_set="fast", clock_control="none")
    sections = {argv[i + 1] for i, a in enumerate(argv) if a == "--section"}
    assert rule_sections() <= sections
    # fp32_pipe_pct (issue-bound, fma-bound) and the instruction count: the two the old fast set lacked
    assert {"SpeedOfLight_RooflineChart", "InstructionStats"} <= sections


_SECTIONS_OF_METRICS = """
import json, sys
from kernelloop.tools.ncu_report_reader import load_ncu_report_module
ncu_report = load_ncu_report_module()
action = ncu_report.load_report(sys.argv[1]).range_by_idx(0).action_by_idx(0)
listed = {}
for section in action.sections():
    for metric in list(section.header_metrics()) + list(section.body_metrics()):
        listed.setdefault(metric.name(), []).append(section.identifier())
print(json.dumps(listed))
"""


def test_the_section_of_each_metric_agrees_with_what_a_real_report_lists():
    """rules.METRIC_SECTION against the sections of a full-set H200 capture (tables' metrics are not
    listed by ncu_report; every metric it does list must sit in the section the table names)."""
    from kernelloop.profiler.rules import METRIC_SECTION
    from kernelloop.tools.ncu_report_reader import HEADLINE_METRICS

    r = subprocess.run([sys.executable, "-c", _SECTIONS_OF_METRICS, str(REPORT)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    checked = 0
    for key, section in METRIC_SECTION.items():
        for raw in HEADLINE_METRICS.get(key, ()):
            if raw in listed:
                assert section in listed[raw], (key, raw, listed[raw])
                checked += 1
    assert checked >= 25


# -- the launch that takes the time, not a tail launch ------------------------------------------

REDUCE = "_Z6reducePKfPfi"


def _trace(tmp_path, launches):
    """A trace in the CUPTI injection library's record format: (name, grid x, duration in µs) per launch."""
    lines, t = ['{"kind":"meta","pid":1,"cupti_version":130001}'], 1_000_000
    for corr, (name, grid, us) in enumerate(launches, 1):
        end = t + int(us * 1000)
        lines.append(json.dumps({"kind": "kernel", "name": name, "start": t, "end": end, "corr": corr, "stream": 7,
                                 "device": 0, "context": 1, "grid": [grid, 1, 1], "block": [256, 1, 1],
                                 "dyn_smem": 1024, "static_smem": 0, "regs": 16, "graph_node": 0}))
        t = end + 5_000
    lines.append('{"kind":"end"}')
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(lines) + "\n")
    from kernelloop.tools.cupti import read_trace

    return read_trace(path)


def test_a_multi_pass_reduction_is_profiled_on_its_big_pass_not_the_tail_launch(tmp_path):
    # per call: the harness's fill, a 65536-block pass (400 µs), then a 256-block pass over the
    # partial sums (3.5 µs); one warm-up call, then 20 timed calls
    launches = []
    for _ in range(21):
        launches += [("_ZN2kl4fillEPfm", 262144, 50.0), (REDUCE, 65536, 400.0), (REDUCE, 256, 3.5)]
    (hot,) = prun.kernels_from_trace(_trace(tmp_path, launches))
    assert hot.name == REDUCE and hot.launches == 42 and hot.configurations == 2
    assert hot.profile_launch == 2  # the big pass of the first timed call (launch 0: warm-up, 1: its tail)
    assert hot.grid == (65536, 1, 1) and hot.launch_ms == pytest.approx(0.4)
    argv = prun.ncu_command(prun.Path("ncu"), chosen=hot, kernel=None, section_set="full", clock_control="none")
    assert argv[argv.index("--launch-skip") + 1] == "2" and argv[argv.index("--launch-count") + 1] == "1"


def test_one_configuration_skips_only_the_warm_up_launch_and_a_single_launch_is_profiled(tmp_path):
    (hot,) = prun.kernels_from_trace(_trace(tmp_path, [(REDUCE, 4096, 90.0)] * 21))
    assert (hot.profile_launch, hot.configurations) == (1, 1)
    (once,) = prun.kernels_from_trace(_trace(tmp_path, [(REDUCE, 4096, 90.0)]))
    assert once.profile_launch == 0


def test_kernels_are_ordered_by_gpu_time_and_harness_kernels_are_never_hot(tmp_path):
    kernels = prun.kernels_from_trace(_trace(tmp_path, [("_ZN2kl4fillEPfm", 9, 5000.0), ("_Z1aPf", 9, 10.0),
                                                        ("_Z1bPf", 9, 30.0), ("_Z1aPf", 9, 10.0)]))
    assert [k.name for k in kernels] == ["_Z1bPf", "_Z1aPf"]


def test_profiles_kept_in_one_second_never_share_a_file(tmp_path):
    # Two jobs of one machine (an engine's workers) profiled `baseline` programs in the same second:
    # one report overwrote the other and a job read the wrong kernel's profile (2 H200, --engine ray).
    from kernelloop.profiler.run import keep_report
    first, second = tmp_path / "a.ncu-rep", tmp_path / "b.ncu-rep"
    first.write_bytes(b"matmul report")
    second.write_bytes(b"softmax report")
    out = tmp_path / "profiles"
    kept = [keep_report(first, out, "baseline"), keep_report(second, out, "baseline")]
    assert kept[0] != kept[1] and all(k.name.startswith("baseline-") and k.suffix == ".ncu-rep" for k in kept)
    assert [k.read_bytes() for k in kept] == [b"matmul report", b"softmax report"]
