"""What is verified is what ships (red team round 51): a candidate whose code depends on what else
is in its translation unit, or on values the build supplies, is refused before it runs."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import static_gates
from kernelloop.verify.policy import scan_source

from .conftest import FIXTURES, ROOT, shared_cache_dir

ROUND51 = FIXTURES / "redteam" / "round51" / "build_identity"


@pytest.mark.parametrize("token", ["__LINE__", "__FILE__", "__COUNTER__", "__DATE__", "__TIME__", "__TIMESTAMP__",
                                   "__BASE_FILE__", "__FILE_NAME__", "__INCLUDE_LEVEL__", "__builtin_LINE()",
                                   "std::source_location::current().line()"])
def test_a_value_the_build_supplies_is_refused_in_the_editable_part(token):
    found = scan_source(f"__global__ void k(long* o) {{ o[0] = (long){token}; }}\n")
    assert [v.rule for v in found] == ["build-context"], found
    # in a comment or a string it is no value of the build
    assert scan_source(f"__global__ void k(long* o) {{ o[0] = 1; }}  // {token}\n") == []


def _static(baseline: str, candidate_path):
    split = split_program((ROOT / "kernels" / baseline).read_text(), baseline)
    editable, _ = candidate_editable_part(candidate_path.read_text(), split, "candidate")
    return static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                        toolchain=find_toolchain())


@pytest.mark.nvcc
def test_a_candidate_that_compiles_otherwise_in_one_file_with_the_harness_is_refused():
    # The red team's lookup switch: a template's end-of-unit lookup finds kl::mix64 only where the
    # harness's header is in the same unit, and picks the exact kernel for the verifier, a 1/16
    # subsample everywhere else.
    result = _static("sum_reduction.cu", ROUND51 / "candidate_adl_switch.cu")
    rules = {v.rule for v in result.violations}
    assert rules == {"build-identity"}, result.violations
    assert any("launch_reduce_sum" in v.detail for v in result.violations)


@pytest.mark.nvcc
@pytest.mark.parametrize("baseline, exemplar", [
    ("histogram.cu", "histogram_privatized.cu"),  # constants pooled at another width, strings merged elsewhere
    ("sum_reduction.cu", "reduction_warp_shuffle.cu"),
    ("naive_matmul.cu", "matmul_register_blocking.cu"),
])
def test_honest_rewrites_compile_alike_in_both_builds(baseline, exemplar):
    result = _static(baseline, ROOT / "src" / "kernelloop" / "exemplars" / exemplar)
    assert result.violations == [], result.violations
