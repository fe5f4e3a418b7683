"""`kernelloop profile` on a real GPU: the reference demo's diagnosis, with both section sets."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("section_set", ["full", "fast"])
def test_profile_naive_matmul_names_the_l1_limit_and_tiling(section_set, tmp_path):
    r = subprocess.run([sys.executable, "-m", "kernelloop", "profile", "kernels/naive_matmul.cu", "--json",
                        "--set", section_set, "--output", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=600,
                       env={**os.environ, "KERNELLOOP_DATA_DIR": str(tmp_path), "KERNELLOOP_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    d = result["diagnosis"]
    assert d["findings"][0]["rule"] == "l1-lsu-limited", d["summary"]
    assert "shared memory" in d["findings"][0]["action"]
    assert d["not_judged"] == [], d["not_judged"]  # either set collects every metric a rule reads
    assert result["launch"]["grid"] == [64, 64, 1] and result["launch"]["profile_launch"] >= 1  # not the warm-up
    assert result["kernel"] == "naive_matmul_kernel" and os.path.exists(result["report_path"])
    print(section_set, json.dumps(result["timings"]))
    timings = {**result["timings"], "set": section_set}
    out = os.environ.get("KERNELLOOP_GPU_REPORT")
    if out:
        with open(out + f".profile-{section_set}.json", "w") as f:
            json.dump(timings, f)
