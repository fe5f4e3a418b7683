"""`kernelloop init`: a contract-v2 program around a user's own kernel."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.errors import InputError
from kernelloop.program.init import InitSpec, generate, parse_params
from kernelloop.program.split import split_program

from .outside_specs import OUTSIDE, SPECS


def test_parameters_are_read_with_their_roles_guessed_from_const():
    params = parse_params("__global__ void k(const float* __restrict__ a, float *b, int n, const __nv_bfloat16* c)")
    assert [(p.name, p.element, p.pointer, p.const) for p in params] == [
        ("a", "float", True, True), ("b", "float", True, False), ("n", "int32_t", False, False),
        ("c", "__nv_bfloat16", True, True)]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_init_writes_a_contract_program_that_keeps_the_kernel_verbatim(name):
    source = (OUTSIDE / name).read_text()
    result = generate(source, SPECS[name], name)
    split = split_program(result.program, "generated.cu")
    assert split.mode == "markers"
    kernel = next(i for i in source.split("__global__")[1:2])
    assert kernel.split("{")[0] in split.editable  # the signature, as written
    assert "kl::Harness h;" in split.harness and "int main()" not in split.editable
    assert f"void launch_{result.kernel}(" in split.editable
    assert all(f"// GUESS: {n}" in result.program for n in result.notes)


def test_roles_and_sizes_follow_the_options():
    result = generate((OUTSIDE / "gemm_accumulate.cu").read_text(), SPECS["gemm_accumulate.cu"])
    assert result.roles == {"A": "input", "B": "input", "C": "inout"}
    assert 'h.inout<float>("C", (size_t)(M * N)' in result.program
    assert "h.size<int32_t>({512, 333})" in result.program and "const float alpha = (float)(1.5);" in result.program


@pytest.mark.parametrize("spec, message", [
    (InitSpec(), "give the value of vectorAdd's argument numElements"),
    (InitSpec(values={"numElements": ["5"]}, roles={"Q": "input"}), "has no parameter 'Q'"),
    (InitSpec(values={"numElements": ["5"]}, roles={"C": "input"}), "has no output"),
    (InitSpec(values={"numElements": ["5"]}, kernel="nope"), "no kernel named 'nope'"),
])
def test_what_init_cannot_guess_is_one_clear_line(spec, message):
    with pytest.raises(InputError, match=message) as err:
        generate((OUTSIDE / "vector_add.cu").read_text(), spec)
    assert "\n" not in str(err.value)


def test_a_template_kernel_is_refused_with_the_reason():
    with pytest.raises(InputError, match="template kernel"):
        generate("template <int B> __global__ void k(float* x, int n) { x[0] = B; }\n", InitSpec(values={"n": ["4"]}))


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_generated_program_passes_every_static_gate_against_itself(name, tmp_path):
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates
    program = generate((OUTSIDE / name).read_text(), SPECS[name], name).program
    split = split_program(program, "generated.cu")
    result = static_gates(split, split.editable, arch="sm_90", settings=Settings(cache_dir=tmp_path),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok and result.violations == []


def test_a_pointer_without_const_is_guessed_inout_and_a_kernel_reading_nothing_is_refused():
    source = "__global__ void popcount(unsigned* words, int* counts, int n) { counts[0] = __popc(words[0]); }\n"
    result = generate(source, InitSpec(values={"n": ["64", "63"]}))
    assert result.roles == {"words": "inout", "counts": "inout"}
    assert any("words holds integers in [0, 16)" in n for n in result.notes)
    with pytest.raises(InputError, match="reads nothing the harness generates"):
        generate(source, InitSpec(values={"n": ["64"]}, roles={"words": "output", "counts": "output"}))
    ranged = generate(source, InitSpec(values={"n": ["64"]}, roles={"counts": "output"},
                                       ranges={"words": ("0", "1000000")}))
    assert "kl::UniformInt<uint32_t>{0, 1000000}" in ranged.program
