"""Red team round 109 (tests/fixtures/redteam/round109/): conclusions drawn "for every size" that
held only at the sizes the harness runs. (a) A narrowing cast read as no change (`k < (short)n`,
`i < (unsigned short)pixels * channels`); (b) a 64-bit size handed to a template's `int` (a 3 GB
histogram counted nothing); (c) the column tier combining a max with `m < p`, which keeps a NaN
seed of a slice that saw no row, where the loop's `fmaxf` passed over it."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline import OfflineOptimizer
from kernelloop.optimizers.offline.candidates import TEMPLATE_SIZE_LIMIT
from kernelloop.optimizers.offline.facts import _expressions, collect_facts
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.syntax import Cast, to_c, walk_expr

from .conftest import FIXTURES, ROOT
from .test_offline_optimizer import request_for
from .test_redteam_round107 import _verdict

ROUND = FIXTURES / "redteam" / "round109"


def _first_proposal(text: str):
    opt = OfflineOptimizer(cache_dir=Path(tempfile.mkdtemp(prefix="kl-r109-")))
    return opt.propose(request_for(text, "baseline"))


def test_a_narrowing_cast_in_a_loop_bound_is_no_matmul():
    verdict = _verdict((ROUND / "a_narrow_cast_matmul" / "baseline.cu").read_text(), "launch_matmul")
    assert verdict.match is None, verdict.match


def test_a_narrowing_cast_in_a_remap_bound_gets_no_rewrite():
    text = (ROUND / "a_remap_narrow_cast" / "baseline.cu").read_text()
    try:
        proposal = _first_proposal(text)
    except NoMoreCandidates:
        return
    assert "remap" not in proposal.approach, proposal.approach


def _casts(body: str) -> dict[str, bool]:
    text = (f"__device__ void f(float* out, int n, unsigned int u, short s, size_t z, long long w) {{\n"
            f"{body}\n  out[0] = 0;\n}}\n")
    fn = read_editable(text, "", []).functions["f"]
    facts = collect_facts(fn.sig, fn.body, {})
    return {to_c(x): facts.keeps_value(x) for top in _expressions(fn.body) for x in walk_expr(top)
            if isinstance(x, Cast)}


@pytest.mark.parametrize("expr, keeps", [
    ("(short)n", False), ("(unsigned short)n", False), ("(int)z", False), ("(int)u", False),
    ("(float)n", False), ("(char)s", False), ("(int)w", False),
    ("(size_t)n", True), ("(long long)n", True), ("(unsigned int)n", True), ("(int64_t)u", True),
    ("(int)threadIdx.x", True), ("(long)(blockIdx.x * blockDim.x)", True), ("(int)s", True),
    ("(unsigned long long)z", True), ("(int)(n + 1)", True),
])
def test_a_cast_is_no_change_only_where_it_keeps_every_value(expr, keeps):
    found = _casts(f"  long long v = {expr};")
    assert found[next(iter(found))] is keeps, found


@pytest.mark.parametrize("name, launcher", [("histogram_baseline.cu", "launch_histogram"),
                                            ("reduction_baseline.cu", "launch_reduce_sum")])
def test_a_size_beyond_the_templates_int_runs_the_baselines_own_launch(name, launcher):
    text = (ROUND / "b_template_int_sizes" / name).read_text()
    source = _first_proposal(text).source
    tail = source[source.index(f"void {launcher}("):]
    assert f"(long long)(n) <= {TEMPLATE_SIZE_LIMIT}LL" in tail and "} else {" in tail and "<<<" in tail, tail


def test_the_bundled_sum_keeps_its_template_and_falls_back_past_its_range():
    source = _first_proposal((ROOT / "kernels" / "sum_reduction.cu").read_text()).source
    assert "kl_reduction_run(in, out, (int)(n), 0)" in source
    assert "else { reduce_interleaved_kernel<<<" in source and "__global__ void reduce_interleaved_kernel" in source


def test_the_column_tier_combines_a_float_max_as_fmaxf_does():
    text = (ROUND / "c_colsplit_nan_empty_slice" / "baseline.cu").read_text()
    proposal = _first_proposal(text)
    assert "column tier" in proposal.approach
    assert re.search(r"m = ::fmaxf\(\(typename ::kl_lib<decltype\(m\)>::type\)\(m\), "
                     r"\(typename ::kl_lib<decltype\(kl_p\)>::type\)\(kl_p\)\);", proposal.source), proposal.source
    assert "if (m < kl_p)" not in proposal.source


# == round 110 (a): a template's own launch limits ==============================================

def _fits_host_program(source: str, family: str, calls: list[str]) -> str:
    """The candidate's `kl_<family>_fits` and the constants it reads, in a host program that
    prints one 0/1 per call."""
    import re

    fits = re.search(rf"static bool kl_{family}_fits\([^)]*\) \{{.*?\n\}}", source, re.S)
    assert fits is not None, source[:2000]
    constants = "\n".join(re.findall(r"^static const int kl_\w+ = [^;]+;$", source, re.M))
    body = "\n".join(f'  std::printf("%d\\n", (int){c});' for c in calls)
    sm_count = "static int kl_sm_count() { return 132; }  // an H100's\n" if "kl_sm_count()" in fits.group(0) else ""
    return (f"#include <cstdio>\ntypedef void* cudaStream_t;\n{constants}\n{sm_count}{fits.group(0)}\n"
            f"int main() {{\n{body}\n  return 0;\n}}\n")


@pytest.mark.parametrize("kernel, family, calls, expected", [
    ("stencil2d", "stencil", ["kl_stencil_fits(0, 0, 8192, 8192, 0)", "kl_stencil_fits(0, 0, 524280, 64, 0)",
                              "kl_stencil_fits(0, 0, 600000, 64, 0)"], [1, 1, 0]),
    ("transpose", "transpose", ["kl_transpose_fits(0, 0, 8192, 8192, 0)", "kl_transpose_fits(0, 0, 2097120, 16, 0)",
                                "kl_transpose_fits(0, 0, 3000000, 16, 0)"], [1, 1, 0]),
    # and where tiles have nothing to win (H100, 2026-12-06): a sum shorter than a K tile, a grid of 32 x 64 tiles
    # that leaves more than half the SMs idle (55 blocks on 132), an output under 32 wide
    ("naive_matmul", "matmul", ["kl_matmul_fits(0, 0, 0, 4096, 4096, 4096, 0)",
                                "kl_matmul_fits(0, 0, 0, 10000000, 4, 4, 0)",
                                "kl_matmul_fits(0, 0, 0, 4096, 4096, 1, 0)",
                                "kl_matmul_fits(0, 0, 0, 333, 257, 129, 0)",
                                "kl_matmul_fits(0, 0, 0, 512, 512, 512, 0)",
                                "kl_matmul_fits(0, 0, 0, 2446, 3, 908, 0)"], [1, 0, 0, 0, 1, 0]),
])
def test_a_template_launch_beyond_cuda_s_grid_limits_runs_the_baselines_launch(kernel, family, calls, expected,
                                                                                tmp_path):
    # red team round 110: 65535 blocks in y; the guard asks the template, which falls back beyond
    import shutil
    import subprocess

    source = _first_proposal((ROOT / "kernels" / f"{kernel}.cu").read_text()).source
    assert re.search(rf"&& \(kl_{family}_fits\(.*?\)\)( && \(.*?\))?\) {{ kl_{family}_run\(", source), source[-1500:]
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")
    program = tmp_path / "fits.cpp"
    program.write_text(_fits_host_program(source, family, calls))
    subprocess.run([compiler, "-std=c++17", "-o", str(tmp_path / "fits"), str(program)], check=True)
    out = subprocess.run([str(tmp_path / "fits")], check=True, capture_output=True, text=True).stdout.split()
    assert [int(x) for x in out] == expected
