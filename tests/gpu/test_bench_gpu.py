"""`kernelloop bench` end to end on the GPU: three bundled kernels recorded, checked unchanged
(every one SAME, exit 0), then checked with one made slower (launched twice: same results,
twice the work) and one made wrong (results off by 1 %): SLOWER and FAILED, exit 1.

memcheck is off here to keep the group under 9 minutes (it is the verify groups' business);
benchmarks/bench_suite.py runs the six bundled kernels with every gate."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.gpu
KERNELS = ("transpose", "row_softmax", "sum_reduction")


def _kl(project, *args):
    env = {**os.environ, "KERNELLOOP_VERIFY_MEMCHECK": "off"}
    return subprocess.run([sys.executable, "-m", "kernelloop", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=400)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    lines = []
    for name in KERNELS:
        shutil.copy(ROOT / "kernels" / f"{name}.cu", root / f"{name}.cu")
        lines += ["[[bench.kernels]]", f'name = "{name}"', f'program = "{name}.cu"']
    (root / "kernelloop.toml").write_text("\n".join(lines) + "\n")
    recorded = _kl(root, "bench", "record", "--json")
    assert recorded.returncode == 0, recorded.stderr[-2000:]
    return root


def _statuses(result) -> dict[str, str]:
    return {k["name"]: k["status"] for k in json.loads(result.stdout)["kernels"]}


def test_record_keeps_a_verified_reference_per_kernel(project, record_property):
    for name in KERNELS:
        reference = json.loads((project / "bench-references" / name / "reference.json").read_text())
        assert reference["self_check"]["outcome"] == "same", reference["self_check"]
        assert len(reference["experiments"]) == 2 and reference["kernel_ms"]["median"] > 0
        record_property(f"{name}_recorded_ms", reference["kernel_ms"]["median"])
        record_property(f"{name}_recorded_iqr", reference["kernel_ms"]["relative_iqr"])


def test_an_unchanged_suite_is_same_everywhere(project, record_property):
    result = _kl(project, "bench", "check", "--json", "--junit", str(project / "same.xml"))
    for k in json.loads(result.stdout)["kernels"]:
        record_property(f"{k['name']}_aa", f"{k['status']} {k['summary']} ({k['wall_s']:.0f} s)")
        if not k["reference_varies"]:  # sum_reduction's float atomics vary between runs; the others are exact
            assert k["reproduction"]["differing"] == [], k["reproduction"]  # same GPU, same build: same bits
    assert [k["name"] for k in json.loads(result.stdout)["kernels"] if k["reference_varies"]] == ["sum_reduction"]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert set(_statuses(result).values()) == {"same"}
    assert ET.parse(project / "same.xml").getroot().get("failures") == "0"


def test_a_slower_and_a_wrong_kernel_fail_the_check(project, record_property):
    softmax = project / "row_softmax.cu"
    launch = "naive_softmax_kernel<<<grid, block>>>(in, out, rows, cols);"
    assert launch in softmax.read_text()
    softmax.write_text(softmax.read_text().replace(launch, launch + "\n  " + launch))  # twice the work, same results
    transpose = project / "transpose.cu"
    store = "out[(size_t)col * rows + row] = in[(size_t)row * cols + col];"
    assert store in transpose.read_text()
    transpose.write_text(transpose.read_text().replace(store, store.replace("];", "] * 1.01f;")))
    result = _kl(project, "bench", "check", "--json", "--junit", str(project / "changed.xml"))
    for k in json.loads(result.stdout)["kernels"]:
        record_property(f"{k['name']}_changed", f"{k['status']} {k['summary']} ({k['wall_s']:.0f} s)")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert _statuses(result) == {"transpose": "failed", "row_softmax": "slower", "sum_reduction": "same"}
    kernels = {k["name"]: k for k in json.loads(result.stdout)["kernels"]}
    assert "correctness" in kernels["transpose"]["verdict"]["reasons"]
    assert kernels["row_softmax"]["decision"]["ratio"] > 1.5
    root = ET.parse(project / "changed.xml").getroot()
    assert root.get("failures") == "2"
