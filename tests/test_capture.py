"""Launch capture (`init --capture`): reading a capture file and turning its hottest launch into
an init spec. The capture lines here are written the way kl_capture_inject.cpp writes them; a
real capture made on a GPU is tests/fixtures/capture/ (see its README)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from kernelloop.errors import InputError
from kernelloop.program.init import InitSpec
from kernelloop.capture_init import pick_kernel, spec_from_capture
from kernelloop.tools.capture import read_capture

BASE = 0x7F0000000000


def _ptr(address: int, base: int, size: int, sample: bytes | None = None, ctype: str = "float*") -> dict:
    return {"type": ctype, "size": 8, "hex": struct.pack("<Q", address).hex(),
            "pointer": {"base": hex(base), "size": size, "memory": "device"},
            "sample": sample.hex() if sample else None}


def _int(value: int, ctype: str = "int") -> dict:
    return {"type": ctype, "size": 4, "hex": struct.pack("<i", value).hex(), "pointer": None, "sample": None}


def _float(value: float) -> dict:
    return {"type": "float", "size": 4, "hex": struct.pack("<f", value).hex(), "pointer": None, "sample": None}


def _launch(corr: int, name: str, signature: str | None, grid, block, args, smem: int = 0) -> dict:
    return {"kind": "launch", "corr": corr, "api": "runtime", "name": name, "signature": signature,
            "grid": list(grid), "block": list(block), "smem": smem, "args": args}


def _kernel(corr: int, name: str, ns: int) -> dict:
    return {"kind": "kernel", "corr": corr, "start": 1000 * corr, "end": 1000 * corr + ns, "name": name}


def _write(tmp_path: Path, lines: list[dict], end: bool = True) -> Path:
    path = tmp_path / "capture.jsonl"
    body = [{"kind": "meta", "pid": 1, "cupti_version": 130000}, *lines] + ([{"kind": "end"}] if end else [])
    path.write_text("\n".join(json.dumps(x) for x in body) + "\n")
    return path


def _vector_add_capture(tmp_path: Path, n: int = 50000, launches: int = 3) -> Path:
    name, sig = "_Z9vectorAddPKfS0_Pfi", "vectorAdd(float const*, float const*, float*, int)"
    lines = []
    for i in range(launches):
        args = [_ptr(BASE, BASE, 4 * n, ctype="float const*"), _ptr(BASE + 0x100000, BASE + 0x100000, 4 * n,
                                                                         ctype="float const*"),
                _ptr(BASE + 0x200000, BASE + 0x200000, 4 * n), _int(n)]
        lines += [_launch(10 + i, name, sig, ((n + 255) // 256, 1, 1), (256, 1, 1), args), _kernel(10 + i, name, 5000)]
    # a small warm-up kernel of another shape that takes less time
    lines += [_launch(3, name, sig, (1, 1, 1), (256, 1, 1),
                      [_ptr(BASE, BASE, 4 * n, ctype="float const*"), _ptr(BASE, BASE, 4 * n, ctype="float const*"),
                       _ptr(BASE + 0x200000, BASE + 0x200000, 4 * n), _int(256)]), _kernel(3, name, 100)]
    return _write(tmp_path, lines)


def test_launches_are_grouped_by_kernel_and_shape_hottest_first(tmp_path):
    capture = read_capture(_vector_add_capture(tmp_path))
    assert capture.complete and not capture.truncated and capture.errors == []
    (kernel,) = capture.kernels
    assert kernel.base_name == "vectorAdd" and kernel.launches == 4 and kernel.gpu_ns == 3 * 5000 + 100
    assert [s.launches for s in kernel.shapes] == [3, 1]
    assert kernel.shapes[0].example.grid == (196, 1, 1)


def test_a_one_integer_kernel_gets_counts_grid_and_a_second_size_from_the_capture(tmp_path):
    kernel = read_capture(_vector_add_capture(tmp_path)).kernels[0]
    spec, notes = spec_from_capture(kernel, ["A", "B", "C", "numElements"], InitSpec())
    assert spec.counts == {"A": "numElements", "B": "numElements", "C": "numElements"}
    assert spec.grid == "dim3((numElements + 255) / 256, 1, 1)" and spec.block == "dim3(256, 1, 1)"
    # 50000 = 16 * 3125: the second size is a multiple of 16 and of no larger common factor
    assert spec.values == {"numElements": ["50000", "37504"]}
    assert any("3 launch(es)" in n and "1 other shape" in n for n in notes)


def test_the_users_options_win_over_the_capture(tmp_path):
    kernel = read_capture(_vector_add_capture(tmp_path)).kernels[0]
    spec, _ = spec_from_capture(kernel, ["A", "B", "C", "numElements"],
                                InitSpec(values={"numElements": ["4096", "4095"]}, grid="(numElements + 127) / 128",
                                         block="128"))
    assert spec.values["numElements"] == ["4096", "4095"]
    assert spec.grid == "(numElements + 127) / 128" and spec.block == "128"


def test_a_2d_launch_with_products_of_sizes_and_float_scalars(tmp_path):
    m, n, k = 512, 384, 256
    name = "_Z4gemmPKfS0_Pfiiiff"
    sig = "gemm(float const*, float const*, float*, int, int, int, float, float)"
    args = [_ptr(BASE, BASE, 4 * m * k, ctype="float const*"), _ptr(BASE + 2**24, BASE + 2**24, 4 * k * n,
                                                                     ctype="float const*"),
            _ptr(BASE + 2**25, BASE + 2**25, 4 * m * n), _int(m), _int(n), _int(k), _float(1.5), _float(0.5)]
    path = _write(tmp_path, [_launch(1, name, sig, ((n + 15) // 16, (m + 15) // 16, 1), (16, 16, 1), args),
                             _kernel(1, name, 9000)])
    spec, _ = spec_from_capture(read_capture(path).kernels[0], ["A", "B", "C", "M", "N", "K", "alpha", "beta"],
                                InitSpec())
    assert spec.counts == {"A": "K * M", "B": "K * N", "C": "M * N"}
    assert spec.grid == "dim3((N + 15) / 16, (M + 15) / 16, 1)"
    assert spec.values["alpha"] == ["1.5f"] and spec.values["beta"] == ["0.5f"]  # init varies them (test_init)
    # about 3/4 of each, a multiple of the power of two it was (up to a quarter of it), no more
    assert spec.values["M"] == ["512", "384"] and spec.values["N"] == ["384", "320"]
    assert spec.values["K"] == ["256", "192"]


def test_equal_sizes_keep_equal_alternatives(tmp_path):
    n = 1024
    name, sig = "_Z2mmPKfS0_Pfi", "mm(float const*, float const*, float*, int)"
    args = [_ptr(BASE, BASE, 4 * n * n, ctype="float const*"), _ptr(BASE + 2**24, BASE + 2**24, 4 * n * n,
                                                                     ctype="float const*"),
            _ptr(BASE + 2**25, BASE + 2**25, 4 * n * n), _int(n)]
    path = _write(tmp_path, [_launch(1, name, sig, (64, 64, 1), (16, 16, 1), args), _kernel(1, name, 9000)])
    spec, _ = spec_from_capture(read_capture(path).kernels[0], ["A", "B", "C", "n"], InitSpec())
    assert spec.counts == {"A": "n * n", "B": "n * n", "C": "n * n"}
    assert spec.grid == "dim3((n + 15) / 16, (n + 15) / 16, 1)" and spec.values["n"] == ["1024", "768"]


def test_an_allocation_no_expression_explains_keeps_the_captured_size_only(tmp_path):
    n = 1000
    name, sig = "_Z5scalePfi", "scale(float*, int)"
    # the program allocated a pool of 4096 floats and launched on the first 1000
    path = _write(tmp_path, [_launch(1, name, sig, (4, 1, 1), (256, 1, 1), [_ptr(BASE, BASE, 4 * 4096), _int(n)]),
                             _kernel(1, name, 100)])
    spec, notes = spec_from_capture(read_capture(path).kernels[0], ["x", "n"], InitSpec())
    assert spec.counts == {"x": "4096"} and spec.values == {"n": ["1000"]}
    assert any("only the captured size is checked" in n for n in notes)


def test_integer_inputs_are_drawn_from_the_range_the_sample_showed(tmp_path):
    n = 4096
    tokens = struct.pack(f"<{n}i", *[(i * 7919) % 50257 for i in range(n)])
    name, sig = "_Z6gatherPKiPKfPfii", "gather(int const*, float const*, float*, int, int)"
    args = [_ptr(BASE, BASE, 4 * n, sample=tokens, ctype="int const*"),
            _ptr(BASE + 2**24, BASE + 2**24, 4 * 50257 * 64, ctype="float const*"),
            _ptr(BASE + 2**26, BASE + 2**26, 4 * n * 64), _int(n), _int(64)]
    path = _write(tmp_path, [_launch(1, name, sig, (n * 64 // 256, 1, 1), (256, 1, 1), args), _kernel(1, name, 100)])
    spec, notes = spec_from_capture(read_capture(path).kernels[0], ["tokens", "table", "out", "n", "C"], InitSpec())
    low, high = spec.ranges["tokens"]
    assert int(low) == 0 and 50000 < int(high) <= 50257
    assert spec.counts["table"] == "50257 * 64" or spec.counts["table"] == str(50257 * 64)


def test_template_arguments_come_from_the_demangled_name(tmp_path):
    name, sig = "_Z5scaleIfLi4EEvPKT_PS0_i", "void scale<float, 4>(float const*, float*, int)"
    args = [_ptr(BASE, BASE, 4 * 8192, ctype="float const*"), _ptr(BASE + 2**20, BASE + 2**20, 4 * 8192), _int(8192)]
    path = _write(tmp_path, [_launch(1, name, sig, (8, 1, 1), (256, 1, 1), args), _kernel(1, name, 100)])
    kernel = read_capture(path).kernels[0]
    assert kernel.base_name == "scale" and kernel.template_args == "float, 4"
    spec, _ = spec_from_capture(kernel, ["x", "y", "n"], InitSpec())
    assert spec.template_args == "float, 4" and spec.kernel == "scale"
    assert spec.grid == "dim3((n + 1023) / 1024, 1, 1)"  # 4 elements per thread: 8192 / (256 * 4)


def test_the_kernel_chosen_is_the_hottest_one_the_file_defines(tmp_path):
    lines = [_launch(1, "_Z4fastPfi", "fast(float*, int)", (1, 1, 1), (32, 1, 1), [_ptr(BASE, BASE, 128), _int(32)]),
             _kernel(1, "_Z4fastPfi", 10),
             _launch(2, "_Z4slowPfi", "slow(float*, int)", (1, 1, 1), (32, 1, 1), [_ptr(BASE, BASE, 128), _int(32)]),
             _kernel(2, "_Z4slowPfi", 900),
             _launch(3, "cublas_gemm_internal", None, (1, 1, 1), (32, 1, 1), []), _kernel(3, "cublas_gemm_internal", 5000)]
    capture = read_capture(_write(tmp_path, lines))
    assert [k.base_name for k in capture.kernels] == ["cublas_gemm_internal", "slow", "fast"]
    assert pick_kernel(capture, ["fast", "slow"], None).base_name == "slow"
    assert pick_kernel(capture, ["fast", "slow"], "fast").base_name == "fast"
    with pytest.raises(InputError, match="never launched 'other'"):
        pick_kernel(capture, ["fast", "slow"], "other")
    with pytest.raises(InputError, match="none of which the file defines"):
        pick_kernel(capture, ["mine"], None)


def test_host_pointers_and_struct_arguments_are_refused_in_one_line(tmp_path):
    host = {"type": "float*", "size": 8, "hex": struct.pack("<Q", 0x5555000).hex(),
            "pointer": {"base": "0x0", "size": 0, "memory": "host"}, "sample": None}
    path = _write(tmp_path, [_launch(1, "_Z1kPfi", "k(float*, int)", (1, 1, 1), (32, 1, 1), [host, _int(4)])])
    with pytest.raises(InputError, match="points to host memory"):
        spec_from_capture(read_capture(path).kernels[0], ["x", "n"], InitSpec())
    opaque = {"type": "Params", "size": None, "hex": None, "pointer": None, "sample": None}
    path = _write(tmp_path, [_launch(1, "_Z1k6Params", "k(Params)", (1, 1, 1), (32, 1, 1), [opaque])])
    with pytest.raises(InputError, match="could not be captured"):
        spec_from_capture(read_capture(path).kernels[0], ["p"], InitSpec())


def test_an_empty_or_cut_capture_says_what_happened(tmp_path):
    from kernelloop.errors import EnvironmentProblem
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(EnvironmentProblem, match="wrote nothing"):
        read_capture(empty)
    path = _write(tmp_path, [_launch(1, "_Z1kPfi", "k(float*, int)", (1, 1, 1), (32, 1, 1),
                                     [_ptr(BASE, BASE, 128), _int(32)])], end=False)
    path.write_text(path.read_text() + '{"kind":"launch","corr":2,"api"')  # the program crashed mid-line
    capture = read_capture(path)
    assert not capture.complete and capture.kernels[0].launches == 1


# -- real captures (tests/fixtures/capture/README.md: H100, driver 580.159.04) ---------------------

REAL = Path(__file__).parent / "fixtures" / "capture"


def test_a_real_capture_of_a_cuda_samples_program_gives_its_template_and_sizes():
    from kernelloop.program.init import generate
    capture = read_capture(REAL / "capture-matrix_mul_sample.jsonl")
    assert capture.complete and capture.errors == []
    (kernel,) = capture.kernels
    assert kernel.base_name == "MatrixMulCUDA" and kernel.template_args == "32" and kernel.launches == 31
    assert kernel.gpu_ns > 0 and len(kernel.shapes) == 1
    spec, _ = spec_from_capture(kernel, ["C", "A", "B", "wA", "wB"], InitSpec())
    assert spec.values == {"wA": ["640", "512"], "wB": ["1280", "1024"]}  # both stay multiples of 128
    assert spec.counts == {"C": "wA * wB", "A": "wA * wA", "B": "wA * wB"}
    assert spec.grid == "dim3((wB + 31) / 32, (wA + 31) / 32, 1)" and spec.block == "dim3(32, 32, 1)"
    program = generate((Path(__file__).parent / "fixtures" / "outside" / "matrix_mul_sample.cu").read_text(),
                       spec, "matrix_mul_sample.cu").program
    assert "MatrixMulCUDA<32><<<" in program and "h.size<int32_t>({640, 512})" in program


def test_a_real_capture_shows_the_token_ids_range():
    capture = read_capture(REAL / "capture-embedding_lookup_main.jsonl")
    kernel = capture.kernels[0]
    spec, notes = spec_from_capture(kernel, ["out", "tokens", "table", "num_tokens", "dim"], InitSpec())
    low, high = map(int, spec.ranges["tokens"])
    assert 0 <= low and high <= 5000 and high > 4900  # the program drew ids below its 5000-word vocabulary
    assert spec.counts["table"] == str(5000 * 256)  # the vocabulary is no argument: a literal size
    assert spec.values == {"num_tokens": ["8192"], "dim": ["256"]}  # so only the captured size is checked
    assert any("only the captured size" in n for n in notes)


def test_a_real_capture_of_an_llmc_style_program():
    capture = read_capture(REAL / "capture-gelu_forward_main.jsonl")
    (kernel,) = capture.kernels
    assert kernel.launches == 20 and kernel.shapes[0].example.block == (128, 1, 1)
    spec, _ = spec_from_capture(kernel, ["out", "inp", "N"], InitSpec())
    assert spec.values == {"N": ["6291456", "4718336"]} and spec.counts == {"out": "N", "inp": "N"}
    assert spec.grid == "dim3((N + 127) / 128, 1, 1)"


@pytest.mark.nvcc
def test_init_from_a_capture_writes_a_program_that_builds(tmp_path, monkeypatch):
    """The whole `init --capture` path but the GPU run: the real capture stands in for it."""
    import kernelloop.capture_init as ic
    from kernelloop.tools.capture import CaptureLimits
    from kernelloop.tools.nvcc import BuildResult, build_whole_program

    outside = Path(__file__).parent / "fixtures" / "outside"
    built: list[str] = []

    def fake_build(text, **kwargs):
        built.append(text)
        return BuildResult(ok=True, stage="done", log="", binary=tmp_path / "program")

    def fake_capture(command, **kwargs):
        assert command == [str(tmp_path / "program")] and kwargs["cwd"] == outside.resolve()
        return read_capture(REAL / "capture-matrix_mul_sample.jsonl").model_copy(update={"exit_code": 0})

    monkeypatch.setattr(ic, "build_whole_program", fake_build)
    monkeypatch.setattr(ic, "capture_launches", fake_capture)
    result, capture = ic.init_from_capture(outside / "matrix_mul_sample.cu", InitSpec(), cache_dir=tmp_path / "cache",
                                           arch="sm_90", limits=CaptureLimits())
    assert built and "int main(" in built[0]  # the user's own program was built, as it is
    assert result.kernel == "MatrixMulCUDA" and any("captured 31 launch(es)" in n for n in result.notes)
    assert "// GUESS: captured 31 launch(es)" in result.program
    monkeypatch.undo()
    build = build_whole_program(result.program, arch="sm_90", cache_dir=tmp_path / "cache")
    assert build.ok, build.log[-2000:]


def test_init_from_capture_without_main_asks_for_the_command(tmp_path):
    from kernelloop.capture_init import init_from_capture
    from kernelloop.tools.capture import CaptureLimits
    outside = Path(__file__).parent / "fixtures" / "outside"
    with pytest.raises(InputError, match="has no main\\(\\): give the command"):
        init_from_capture(outside / "gemm_accumulate.cu", InitSpec(), cache_dir=tmp_path, arch="sm_90",
                          limits=CaptureLimits())


def test_second_sizes_share_only_the_intended_alignment():
    import math
    from kernelloop.capture_init import _alternative
    for value in (1 << 24, 6291456, 50000, 4097, 8192, 640, 98304):
        alt = _alternative(value)
        alignment = min(value & -value, 256, 1 << max(0, (value // 4).bit_length() - 1))
        assert 0 < alt < value and alt % alignment == 0 and math.gcd(value, alt) == alignment, (value, alt)
        assert 0.6 <= alt / value <= 0.9


def test_an_identity_float_argument_gets_another_value_in_the_second_size(tmp_path):
    from kernelloop.program.init import generate

    m = n = k = 256
    name, sig = "_Z4gemmPKfS0_Pfiiiff", "gemm(float const*, float const*, float*, int, int, int, float, float)"
    args = [_ptr(BASE, BASE, 4 * m * k, ctype="float const*"), _ptr(BASE + 2**24, BASE + 2**24, 4 * k * n,
                                                                     ctype="float const*"),
            _ptr(BASE + 2**25, BASE + 2**25, 4 * m * n), _int(m), _int(n), _int(k), _float(1.0), _float(0.0)]
    path = _write(tmp_path, [_launch(1, name, sig, (16, 16, 1), (16, 16, 1), args), _kernel(1, name, 100)])
    spec, notes = spec_from_capture(read_capture(path).kernels[0], ["A", "B", "C", "M", "N", "K", "alpha", "beta"],
                                    InitSpec())
    source = ("__global__ void gemm(const float* A, const float* B, float* C, int M, int N, int K, float alpha, "
              "float beta) { int i = threadIdx.x; if (i < M) C[i] = alpha * A[i] * B[i] + beta * C[i]; }\n")
    # beta = 0 would let a kernel skip reading C, alpha = 1 skip a multiply: both vary
    program = generate(source, spec).program
    assert "h.size<float>({0.0f, 0.5f})" in program and "h.size<float>({1.0f, 0.75f})" in program
    pinned, _ = spec_from_capture(read_capture(path).kernels[0], ["A", "B", "C", "M", "N", "K", "alpha", "beta"],
                                  InitSpec(values={"beta": ["0", "0"]}))
    assert "h.size<float>({0, 0})" in generate(source, pinned).program


def test_an_integer_input_seen_with_one_value_is_not_drawn_as_a_constant(tmp_path):
    # Red team round 18: a padding mask whose sampled rows were all 1 became the range [1, 2), a
    # constant input a candidate could ignore.
    name, sig = "_Z4maskPKfPKiPfi", "mask(float const*, int const*, float*, int)"
    n = 4096
    args = [_ptr(BASE, BASE, 4 * n, ctype="float const*"),
            _ptr(BASE + 2**24, BASE + 2**24, 4 * n, sample=struct.pack("<64i", *[1] * 64), ctype="int const*"),
            _ptr(BASE + 2**25, BASE + 2**25, 4 * n), _int(n)]
    path = _write(tmp_path, [_launch(1, name, sig, (16, 1, 1), (256, 1, 1), args), _kernel(1, name, 100)])
    spec, notes = spec_from_capture(read_capture(path).kernels[0], ["x", "m", "y", "n"], InitSpec())
    assert spec.ranges["m"] == ("0", "2") and any("held only 1" in note for note in notes)


def test_float_inputs_are_drawn_from_the_values_the_sample_showed(tmp_path):
    # pixels in [0, 255]: a kernel that computes only on such values must be checked on them (round 28)
    n = 4096
    pixels = struct.pack(f"<{n}f", *[float((i * 37) % 256) for i in range(n)])
    name, sig = "_Z4tonePKfPfi", "tone(float const*, float*, int)"
    args = [_ptr(BASE, BASE, 4 * n, sample=pixels, ctype="float const*"), _ptr(BASE + 2**24, BASE + 2**24, 4 * n),
            _int(n)]
    path = _write(tmp_path, [_launch(1, name, sig, (n // 256, 1, 1), (256, 1, 1), args), _kernel(1, name, 100)])
    spec, notes = spec_from_capture(read_capture(path).kernels[0], ["x", "y", "n"], InitSpec())
    assert tuple(map(float, spec.ranges["x"])) == (0.0, 255.0)
    assert any(note.startswith("x held values in [0, 255]") for note in notes)
