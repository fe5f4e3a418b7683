"""The precision-downgrade scan: the instruction classifier on SASS and PTX captured from real
nvcc 13.0 output (sm_80, sm_86, sm_90, sm_90a), and the scan inside the static gates."""

from __future__ import annotations

import os
import subprocess

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify import precision
from kernelloop.verify.gate import static_gates
from kernelloop.verify.precision import PrecisionProfile, classify_ptx, classify_sass, compare_profiles

from .conftest import FIXTURES, ROOT, shared_cache_dir

# `cuobjdump -sass` lines (encodings trimmed), captured from small kernels compiled with
# nvcc 13.0 -O3: __float2half/__half2float, __hadd/__hfma/__hmul/__hmax, bf16 arithmetic, wmma
# f16/bf16/tf32/int8/f64, wgmma bf16/tf32/e4m3/s8 (sm_90a), fp64 arithmetic.
SASS = {
    "fp32_constant_idiom": """
        /*0050*/                   HFMA2.MMA R5, -RZ, RZ, 0, 2.384185791015625e-07 ;
        /*0060*/                   HFMA2.MMA R18, -RZ, RZ, 0, 0 ;
        /*0070*/                   FFMA R3, R2, R5, R3 ;
        /*0080*/                   MUFU.RCP R7, R2 ;
        /*0090*/                   I2FP.F32.S32 R4, R0 ;
        /*00a0*/                   F2F.F32.F64 R7, R2 ;
""",
    "half_sm80": """
        /*0100*/                   F2FP.PACK_AB R3, R3, R2 ;
        /*0110*/                   HADD2 R3, R0.H0_H0, R0.H1_H1 ;
        /*0120*/                   HFMA2 R3, R0.H0_H0, R0.H1_H1, R3.H0_H0 ;
        /*0130*/                   HMUL2 R3, R3.H0_H0, R0.H0_H0 ;
        /*0140*/                   HMNMX2 R3, R3.H0_H0, R0.H1_H1, !PT ;
        /*0150*/                   HADD2.F32 R9, -RZ, R3.H0_H0 ;
""",
    "half2_sm90_on_the_mma_pipe": """
        /*0100*/                   F2FP.F16.F32.PACK_AB R0, R5, R2 ;
        /*0110*/                   HFMA2.MMA R0, R3, R3, R0 ;
        /*0120*/                   HMNMX2 R0, R0, R3, PT ;
""",
    "bf16_sm90": """
        /*0100*/                   F2FP.BF16.F32.PACK_AB R0, RZ, R2 ;
        /*0110*/                   HADD2.BF16_V2 R3, R0.H0_H0, R0.H0_H0 ;
        /*0120*/                   HFMA2.BF16_V2 R3, R0.H0_H0, R0.H0_H0, R3.H0_H0 ;
""",
    "round_bf16_sm90": """
        /*0100*/                   F2F.BF16.F32 R0, R2 ;
        /*0110*/                   SHF.L.U32 R0, R0, 0x10, RZ ;
""",
    "wmma_bf16": "        /*0200*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;\n",
    "wmma_f16": "        /*0200*/                   HMMA.16816.F32 R4, R8, R12, R4 ;\n",
    "mma_f16_accumulate": "        /*00c0*/                   HMMA.16816.F16 R6, R8, R6, RZ ;\n",
    "wmma_tf32": "        /*0200*/                   HMMA.1684.F32.TF32 R4, R8, R12, R4 ;\n",
    "wmma_int8": "        /*0200*/               @!P0 IMMA.16816.S8.S8 R4, R8.ROW, R12.COL, R4 ;\n",
    "wgmma_bf16": "        /*0150*/                   HGMMA.64x8x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0 ;\n",
    "wgmma_tf32": "        /*0150*/                   HGMMA.64x8x8.F32.TF32 R24, gdesc[UR4], RZ, !UPT, gsb0 ;\n",
    "wgmma_e4m3": "        /*0150*/                   QGMMA.64x8x32.F32.E4M3.E4M3 R24, gdesc[UR4], RZ, !UPT, gsb0 ;\n",
    "wgmma_s8": "        /*0150*/                   IGMMA.64x8x32.S8.S8 R24, gdesc[UR4], RZ, !UPT, gsb0 ;\n",
    "fp8_convert": "        /*0080*/                   F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C R5, R3, R2, RZ ;\n",
    "dp4a": "        /*00b0*/                   IDP.4A.S8.S8 R9, R2, R5, RZ ;\n",
    "fp64": """
        /*0100*/                   DMUL R4, R2, R2 ;
        /*0110*/                   DFMA R6, R4, R2, R6 ;
        /*0120*/                   DADD R8, R6, -R2 ;
        /*0130*/                   DMMA.8x8x4 R4, R8, R12, R4 ;
""",
}
SASS_EXPECTED = {
    "fp32_constant_idiom": {},
    # HADD2.F32 with -RZ: a half value widened, exact, in no class (red team round 263: widening the inputs licensed
    # half arithmetic)
    "half_sm80": {"narrowing": ["F2FP.PACK_AB"], "half": ["HADD2", "HFMA2", "HMNMX2", "HMUL2"]},
    "half2_sm90_on_the_mma_pipe": {"narrowing": ["F2FP.F16.F32.PACK_AB"], "half": ["HFMA2.MMA", "HMNMX2"]},
    "bf16_sm90": {"narrowing": ["F2FP.BF16.F32.PACK_AB"], "half": ["HADD2.BF16_V2", "HFMA2.BF16_V2"]},
    "round_bf16_sm90": {"narrowing": ["F2F.BF16.F32"]},
    "wmma_bf16": {"tensor": ["HMMA.16816.F32.BF16"]},
    "wmma_f16": {"tensor": ["HMMA.16816.F32"]},
    "mma_f16_accumulate": {"tensor": ["HMMA.16816.F16"]},
    "wmma_tf32": {"tensor": ["HMMA.1684.F32.TF32"]},
    "wmma_int8": {"tensor": ["IMMA.16816.S8.S8"]},
    "wgmma_bf16": {"tensor": ["HGMMA.64x8x16.F32.BF16"]},
    "wgmma_tf32": {"tensor": ["HGMMA.64x8x8.F32.TF32"]},
    "wgmma_e4m3": {"tensor": ["QGMMA.64x8x32.F32.E4M3.E4M3"]},
    "wgmma_s8": {"tensor": ["IGMMA.64x8x32.S8.S8"]},
    "fp8_convert": {"narrowing": ["F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C"]},
    "dp4a": {"tensor": ["IDP.4A.S8.S8"]},
    "fp64": {"fp64": ["DADD", "DFMA", "DMMA.8x8x4", "DMUL"]},
}


@pytest.mark.parametrize("name", sorted(SASS))
def test_sass_classes(name):
    assert classify_sass(SASS[name]).classes == SASS_EXPECTED[name]


PTX = {
    "half_inline_asm": "\t// begin inline asm\n\t{  cvt.rn.f16.f32 %rs1, %f1;}\n\t// end inline asm\n"
                       "\t{add.f16 %rs3,%rs1,%rs2;\n}\n\t{ fma.rn.f16x2 %r5,%r3,%r3,%r4;\n}\n"
                       "\t{  cvt.f32.f16 %f3, %rs9;}\n\tld.global.f32 \t%f1, [%rd6];\n",
    "bf16": "\t{  cvt.rn.bf16.f32 %rs1, %f1;}\n\t{ add.bf16 %rs2,%rs1,%rs1;\n}\n",
    "wmma_f16_names_no_input_type": "\twmma.load.a.sync.aligned.row.m16n16k16.global.f16 \t{%r2, %r3}, [%rd6], %r1;\n"
                                    "\twmma.mma.sync.aligned.row.row.m16n16k16.f32.f32 {%f2, %f3}, {%r2, %r3}, "
                                    "{%r10, %r11}, {%f1, %f1};\n",
    "wmma_tf32": "\tcvt.rna.tf32.f32 \t%r5, %f5;\n"
                 "\twmma.mma.sync.aligned.row.row.m16n16k8.f32.tf32.tf32.f32 {%f2}, {%r2}, {%r10}, {%f1};\n",
    "wgmma_e4m3": "\twgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%f1,%f2,%f3,%f4}, %rd1, %rd2, 0, 1, 1;\n",
    "mma_f64": "\tmma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%fd1, %fd2}, {%fd3}, {%fd4}, {%fd1, %fd2};\n",
    "fp64_and_fp32": "\tfma.rn.f64 \t%fd3, %fd1, %fd2, %fd1;\n\tdiv.rn.f64 \t%fd4, %fd3, 0d4008000000000000;\n"
                     "\tcvt.rn.f32.f64 \t%f1, %fd4;\n\tfma.rn.f32 \t%f2, %f1, %f1, %f1;\n",
    "fp32_only": "$L__BB0_4:\n\tld.global.f32 \t%f12, [%rd30];\n\tfma.rn.f32 \t%f14, %f13, %f12, %f29;\n"
                 "\t@%p6 bra \t$L__BB0_4;\n\tmov.f32 \t%f29, 0f00000000;\n",
    "dp4a": "\tdp4a.s32.s32 \t%r5, %r3, %r4, 0;\n",
}
PTX_EXPECTED = {
    "half_inline_asm": {"narrowing": ["cvt.rn.f16.f32"], "half": ["add.f16", "fma.rn.f16x2"]},  # cvt.f32.f16 widens
    "bf16": {"narrowing": ["cvt.rn.bf16.f32"], "half": ["add.bf16"]},
    "wmma_f16_names_no_input_type": {"tensor": ["wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32"]},
    "wmma_tf32": {"narrowing": ["cvt.rna.tf32.f32"], "tensor": ["wmma.mma.sync.aligned.row.row.m16n16k8.f32.tf32.tf32.f32"]},
    "wgmma_e4m3": {"tensor": ["wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"]},
    "mma_f64": {"fp64": ["mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"]},
    "fp64_and_fp32": {"fp64": ["div.rn.f64", "fma.rn.f64"]},
    "fp32_only": {},
    "dp4a": {"tensor": ["dp4a.s32.s32"]},
}


@pytest.mark.parametrize("name", sorted(PTX))
def test_ptx_classes(name):
    assert {k: v for k, v in classify_ptx(PTX[name]).classes.items()} == PTX_EXPECTED[name]


def profile(**classes) -> PrecisionProfile:
    return PrecisionProfile(source="sass", classes=classes)


def test_a_class_the_baseline_does_not_use_is_a_violation_and_one_it_uses_is_not():
    v = compare_profiles(profile(), profile(tensor=["HMMA.16816.F32.BF16"], narrowing=["F2FP.BF16.F32.PACK_AB"]))
    assert len(v) == 1 and v[0].rule == "reduced_precision"
    assert "HMMA.16816.F32.BF16" in v[0].detail and "F2FP.BF16.F32.PACK_AB" in v[0].detail
    # a half-precision baseline may have half-precision rewrites
    assert not compare_profiles(profile(half=["HFMA2"], narrowing=["F2FP.PACK_AB"]),
                                profile(half=["HADD2", "HFMA2.MMA"], narrowing=["F2FP.PACK_AB"]))


def test_dropping_the_baselines_fp64_is_a_downgrade():
    v = compare_profiles(profile(fp64=["DFMA", "DADD"]), profile())
    assert len(v) == 1 and "fp64 -> fp32" in v[0].detail and "DFMA" in v[0].detail
    assert not compare_profiles(profile(fp64=["DFMA"]), profile(fp64=["DADD"]))
    assert not compare_profiles(profile(), profile(fp64=["DFMA"]))  # more precision is fine


# -- inside the static gates, with real nvcc ------------------------------------------------

@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return Settings(cache_dir=shared_cache_dir())


def gates(name: str, settings: Settings, arch: str = "sm_86"):
    split = split_program((ROOT / "kernels" / "naive_matmul.cu").read_text())
    path = FIXTURES / "candidates/matmul" / name if "/" not in name else ROOT / name
    editable, _ = candidate_editable_part(path.read_text(), split, path.name)
    return static_gates(split, editable, arch=arch, settings=settings, toolchain=find_toolchain())


def reduced(result):
    """The precision scan's violations (other scans of the static gates judge other things)."""
    return [v for v in result.violations if v.rule == "reduced_precision"]


@pytest.fixture(params=["sass", "ptx"])
def backend(request, monkeypatch):
    """Both ways of reading device code: SASS where cuobjdump and nvdisasm exist, PTX always."""
    if request.param == "sass":
        if precision.find_disassembler(find_toolchain()) is None:
            pytest.skip("cuobjdump/nvdisasm not found (toolkit, PATH, or the nvidia-cuda-cuobjdump wheels)")
    else:
        monkeypatch.setattr(precision, "find_disassembler", lambda toolchain: None)
    return request.param


@pytest.mark.nvcc
@pytest.mark.parametrize("name, expect_classes", [
    ("bf16_mma.cu", {"tensor", "narrowing"}),
    ("half_round.cu", {"narrowing"}),  # its half->float widenings are exact: no class (round 263)
])
def test_reduced_precision_fixtures_are_caught(name, expect_classes, settings, backend):
    result = gates(name, settings)
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    assert result.precision is not None and result.precision.source == backend
    assert len(reduced(result)) == 1, [v.describe() for v in result.violations]
    assert set(result.precision.candidate.classes) == expect_classes
    assert not result.precision.baseline.classes


@pytest.mark.nvcc
@pytest.mark.parametrize("exemplar", ["src/kernelloop/exemplars/matmul_smem_tiling.cu", "src/kernelloop/exemplars/matmul_register_blocking.cu"])
def test_fp32_exemplars_pass_the_precision_scan(exemplar, settings, backend):
    result = gates(exemplar, settings)
    assert not reduced(result), [v.describe() for v in result.violations]
    assert result.precision is not None and result.precision.source == backend
    assert result.precision.candidate.instructions > 0 and not result.precision.candidate.classes


@pytest.mark.nvcc
def test_allow_reduced_precision_skips_the_scan(settings):
    allowed = settings.model_copy(update={"verify": settings.verify.model_copy(update={"allow_reduced_precision": True})})
    result = gates("bf16_mma.cu", allowed)
    assert result.candidate is not None and result.candidate.ok and not reduced(result)
    assert result.precision is None


@pytest.mark.nvcc
def test_an_fp64_baseline_rewritten_in_fp32_is_a_downgrade(settings, backend):
    program = (ROOT / "kernels" / "naive_matmul.cu").read_text()
    fp64 = program.replace("float acc = 0.0f;", "double acc = 0.0;").replace(
        "acc += A[row * n + k] * B[k * n + col];", "acc += (double)A[row * n + k] * (double)B[k * n + col];"
    ).replace("C[row * n + col] = acc;", "C[row * n + col] = (float)acc;")
    assert fp64 != program
    split = split_program(fp64)
    fp32 = split.editable.replace("double acc = 0.0;", "float acc = 0.0f;").replace(
        "acc += (double)A[row * n + k] * (double)B[k * n + col];", "acc += A[row * n + k] * B[k * n + col];")
    result = static_gates(split, fp32, arch="sm_86", settings=settings, toolchain=find_toolchain())
    assert len(reduced(result)) == 1, [v.describe() for v in result.violations]
    assert "fp64 -> fp32" in reduced(result)[0].detail
    # the baseline compared with itself: no downgrade
    same = static_gates(split, split.editable, arch="sm_86", settings=settings, toolchain=find_toolchain())
    assert not reduced(same) and same.precision.baseline.classes.get("fp64")


# -- formats within a class (red team round 262: int8 and fp8 tensor cores for a bf16 tensor-core baseline passed, both
# using the class `tensor`) -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opcode, bits, accumulates", [
    ("HMMA.16816.F32.BF16", 8, 24), ("HMMA.16816.F32", 11, 24), ("HMMA.16816.F16", 11, 11),
    ("HMMA.1684.F32.TF32", 11, 24), ("IMMA.16816.S8.S8", 7, 24), ("QGMMA.64x8x32.F32.E4M3.E4M3", 4, 24),
    ("IGMMA.64x8x32.S8.S8", 7, 24), ("IDP.4A.S8.S8", 7, 24), ("F2FP.PACK_AB", 11, 24),
    ("F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C", 4, 24), ("HFMA2.BF16_V2", 8, 24),
    ("wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32", 11, 24),
    ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", 11, 11), ("dp4a.s32.s32", 7, 31),
    ("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", 4, 24), ("cvt.rni.sat.s8.f32", 7, 24),
    ("tcgen05.mma.cta_group::1.kind::f16", 8, 24), ("UTCQMMA", 3, 24),
    ("mma.sync.aligned.kind::f8f6f4.m16n8k32.row.col.f16.e4m3.e4m3.f16", 4, 11),  # the types win over the kind
])
def test_each_instruction_names_its_narrowest_format(opcode, bits, accumulates):
    assert precision.significand_bits(opcode) == bits
    assert precision.accumulator_bits(opcode) == accumulates


@pytest.mark.parametrize("baseline, candidate, narrower", [
    ({"tensor": ["HMMA.16816.F32.BF16"]}, {"tensor": ["IMMA.16816.S8.S8"]}, True),
    ({"tensor": ["HGMMA.64x8x16.F32.BF16"]}, {"tensor": ["QGMMA.64x8x32.F32.E4M3.E4M3"]}, True),
    ({"tensor": ["HMMA.16816.F32.BF16"]}, {"tensor": ["HMMA.16816.F32.BF16", "IDP.4A.S8.S8"]}, True),
    ({"tensor": ["HMMA.16816.F32"]}, {"tensor": ["HMMA.16816.F32.BF16"]}, True),  # fp16 -> bf16 inputs
    ({"tensor": ["HMMA.16816.F32.BF16"]}, {"tensor": ["HMMA.16816.F16"]}, True),  # fp32 -> fp16 accumulation
    ({"narrowing": ["F2FP.BF16.F32.PACK_AB"]}, {"narrowing": ["F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C"]}, True),
    ({"half": ["HFMA2"]}, {"half": ["HFMA2.BF16_V2"]}, True),
    ({"tensor": ["HMMA.16816.F32.BF16"]}, {"tensor": ["HMMA.1684.F32.TF32"]}, False),  # wider is fine
    ({"tensor": ["HMMA.16816.F32.BF16"]}, {"tensor": ["HGMMA.64x8x16.F32.BF16"]}, False),  # same format, other unit
    ({"tensor": ["IMMA.16816.S8.S8"]}, {"tensor": ["IGMMA.64x8x32.S8.S8"]}, False),
    ({"half": ["HFMA2.BF16_V2"]}, {"half": ["HFMA2"]}, True),  # fp16's 5 exponent bits against bf16's 8
    ({"tensor": ["HMMA.1684.F32.TF32"]}, {"tensor": ["HMMA.16816.F32"]}, True),  # tf32 -> fp16: round 263
    ({"half": ["HFMA2"]}, {"half": ["HFMA2", "HADD2"]}, False),
])
def test_a_narrower_format_in_a_class_the_baseline_uses_is_a_violation(baseline, candidate, narrower):
    found = compare_profiles(profile(**baseline), profile(**candidate))
    assert [v.rule for v in found] == (["reduced_precision"] if narrower else []), [v.detail for v in found]
    if narrower:
        assert "narrower than the baseline's" in found[0].detail


def test_a_float_quantised_to_eight_bits_is_narrowing():
    assert classify_ptx("\tcvt.rni.sat.s8.f32 \t%rs1, %f1;\n").classes == {"narrowing": ["cvt.rni.sat.s8.f32"]}
    assert classify_ptx("\tcvt.rzi.s32.f32 \t%r1, %f1;\n").classes == {}  # an index from a float: no
    assert classify_sass("        /*0100*/                   F2I.S8.TRUNC R3, R2 ;\n").classes == \
        {"narrowing": ["F2I.S8.TRUNC"]}
    assert classify_sass("        /*0100*/                   F2I.TRUNC.NTZ R3, R2 ;\n").classes == {}


@pytest.mark.nvcc
def test_an_int8_tensor_core_rewrite_of_a_bf16_one_is_caught_in_real_ptx(tmp_path):
    toolchain = find_toolchain()
    fixtures = FIXTURES / "precision_formats"
    profiles = {}
    for name in ("bf16_wmma", "int8_wmma"):
        out = tmp_path / f"{name}.ptx"
        subprocess.run([str(toolchain.nvcc), "-ptx", "-arch=sm_90", "-o", str(out), str(fixtures / f"{name}.cu")],
                       check=True, capture_output=True, timeout=300)
        profiles[name] = classify_ptx(out.read_text())
    base, cand = profiles["bf16_wmma"], profiles["int8_wmma"]
    assert set(base.classes) == set(cand.classes) == {"tensor", "narrowing"}  # one class each: what passed before
    found = compare_profiles(base, cand)
    assert [v.rule for v in found] == ["reduced_precision"] and "7 significand and 0 exponent bits" in found[0].detail
    assert not compare_profiles(base, base)


def test_an_instruction_behind_a_predicate_of_any_spelling_is_read():
    # red team round 263: `@p` (a predicate inline asm declares without %) hid an int8 mma and a clock read
    ptx = ("\t{ .reg .pred p; setp.eq.u32 p,1,1; @p mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r1,%r2,%r3,%r4}, "
           "{%r5,%r6,%r7,%r8}, {%r9,%r10}, {%r1,%r2,%r3,%r4}; }\n\t{ .reg .pred q; @!q cvt.rn.f16x2.f32 %r1, %f1, %f2; }\n"
           "\t@P mov.u64 %rd1, %globaltimer;\n")
    classes = classify_ptx(ptx).classes
    assert classes["tensor"] == ["mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"]
    assert classes["narrowing"] == ["cvt.rn.f16x2.f32"] and classes["clock"] == ["%globaltimer"]


def test_a_statement_the_scan_cannot_read_fails_closed():
    unreadable = classify_ptx("\tMMA.SYNC %r1, %r2;\n\tld.global.f32 %f1, [%rd1];\n")
    assert unreadable.classes == {"unread": ["MMA.SYNC %r1, %r2"]}
    found = compare_profiles(PrecisionProfile(source="ptx"), unreadable)
    assert [v.rule for v in found] == ["device-unread"]
    # what splitting at braces leaves of operand lists and data initialisers is no statement
    classes = classify_ptx("\tld.shared.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];\n"
                           ".global .align 1 .b8 $str[3] = {118, 111, 0};\n").classes
    # (a fragment no nvcc writes is no readable module: its string's storage counts as written, fail closed)
    assert classes == {"device_static_written": ["$str"]}


def test_a_percent_label_or_a_line_directive_hides_no_instruction():
    # red team round 265: `%Lq: mma...` and an instruction after `.loc 1 3 0` (a directive with no `;`; -lineinfo
    # builds have one before many instructions) were read as no statement at all
    mma = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r1}, {%r2}, {%r3}, {%r4};\n"
    assert classify_ptx(f"\t%Lq: {mma}").classes == {"tensor": [mma.split()[0]]}
    assert classify_ptx(f"\t$x$: %y: {mma}").classes == {"tensor": [mma.split()[0]]}
    assert classify_ptx(f"\t.loc 1 3 0\n\t{mma}").classes == {"tensor": [mma.split()[0]]}
    assert classify_ptx("\t.reg .b32 %r<5>;\n\t.loc 1 3 0\n\tld.global.f32 %f1, [%rd1];\n").instructions == 1


# -- PTX read as ptxas reads it (red team round 266: an instruction after `.loc 1 1 0` on its own line, a label
# written `lab :`, a space inside an opcode's modifiers each hid an instruction, a clock read, a device malloc or an
# asm statement's `.global` from the reader; round 267: an opcode glued to the number before it, `0mma.sync`) --------------------------------------------------------------------------

_PTX_HEAD = """.version 8.8
.target sm_90
.address_size 64
.extern .func (.param .b64 func_retval0) malloc (.param .b64 malloc_param_0);
.visible .entry k(.param .u64 p)
{{
.reg .b32 %r<20>;
.reg .f32 %f<20>;
.reg .b16 %rs<8>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [p];
ld.global.v4.u32 {{%r1,%r2,%r3,%r4}}, [%rd1];
ld.global.f32 %f1, [%rd1+16];
mov.b32 %r10, 0; mov.b32 %r11, 0; mov.b32 %r12, 0; mov.b32 %r13, 0; mov.b16 %rs2, 0x3c00;
{body}
st.global.v4.u32 [%rd1], {{%r10,%r11,%r12,%r13}};
st.global.b16 [%rd1+32], %rs1;
st.global.b64 [%rd1+40], %rd3;
ret;
}}
"""
_INT8_MMA = ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r10,%r11,%r12,%r13}, {%r1,%r2,%r3,%r4}, {%r1,%r2}, "
             "{%r10,%r11,%r12,%r13};")
# (what the statement is, its spellings as ptxas takes them, the class and name the scan must find)
_SPELLINGS = {
    "int8 mma": ([_INT8_MMA, ".loc 1 1 0 " + _INT8_MMA, ".loc 1 1 0" + _INT8_MMA, "lab : " + _INT8_MMA, "lab\n:\n" + _INT8_MMA,
                  _INT8_MMA.replace("mma.sync.aligned", "mma.sync .aligned"),
                  _INT8_MMA.replace("mma.sync.aligned", "mma/* x */.sync\n.aligned")],
                 "tensor", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
    "cvt to f16": (["cvt.rn.f16.f32 %rs1, %f1;", ".loc 1 1 0 cvt.rn.f16.f32 %rs1, %f1;", "lab : cvt.rn.f16.f32 %rs1, %f1;",
                    "cvt.rn .f16.f32 %rs1, %f1;", "cvt/**/.rn.f16.f32 %rs1, %f1;"], "narrowing", "cvt.rn.f16.f32"),
    "add.f16": (["add.rn.f16 %rs1, %rs2, %rs2;", ".loc 1 1 0 add.rn.f16 %rs1, %rs2, %rs2;",
                 ".loc 1 1 0add.rn.f16 %rs1, %rs2, %rs2;",
                 "lab : add.rn.f16 %rs1, %rs2, %rs2;", "add.rn .f16 %rs1, %rs2, %rs2;"], "half", "add.rn.f16"),
    "clock read": (["mov.u32 %r10, %clock;", ".loc 1 1 0 mov.u32 %r10, %clock;", "lab : mov.u32 %r10, %clock;"],
                   "clock", "%clock"),
    "device malloc": (["{ .param .b64 a; .param .b64 r; st.param.b64 [a], 64; CALL (r), malloc, (a); "
                       "ld.param.b64 %rd3, [r]; }".replace("CALL", call)
                       for call in ("call.uni", ".loc 1 1 0 call.uni", ".loc 1 1 0call.uni", "lab : call.uni",
                                    "call .uni")],
                      "device_heap", "malloc"),
    "asm .global": (["{ .global .u32 ctr; ld.global.u32 %r10, [ctr]; }",
                     "{ .loc 1 1 0 .global .u32 ctr; ld.global.u32 %r10, [ctr]; }",
                     "{ lab : .global .u32 ctr; ld .global.u32 %r10, [ctr]; }"], "device_static", "ctr"),
}


@pytest.mark.nvcc
@pytest.mark.parametrize("what", sorted(_SPELLINGS))
def test_every_spelling_ptxas_assembles_is_read(what, tmp_path):
    spellings, kind, name = _SPELLINGS[what]
    for body in spellings:
        ptx = _PTX_HEAD.format(body=body)
        (tmp_path / "k.ptx").write_text(ptx)
        assembled = subprocess.run(["ptxas", "-arch=sm_90", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                                   capture_output=True, text=True, timeout=120)
        assert assembled.returncode == 0, (body, assembled.stderr)  # a spelling ptxas takes, so one a candidate has
        profile = classify_ptx(ptx)
        assert profile.classes.get(kind) == [name], (body, profile.classes)
        assert not profile.classes.get("unread"), body
        # and the same without the statement: nothing of the kind
        assert not classify_ptx(_PTX_HEAD.format(body="")).classes.get(kind)


def test_ptx_opcodes_are_read_whatever_stands_before_them():
    # a label, `.loc` and a guard before an opcode on one line; `ld .global` (an opcode) is no declaration
    classes = classify_ptx("\t$L1 : .loc 1 2 0 @ !%p1 cvt.rn.bf16x2.f32 %r1, %f1, %f2;\n"
                           "\tld .global .f32 %f3, [%rd1];\n").classes
    assert classes == {"narrowing": ["cvt.rn.bf16x2.f32"]}
    # nvcc's own declarations: module scope (registered by the host stub), not a device static
    honest = classify_ptx(".global .align 4 .u32 g_plain;\n.visible .global .align 4 .f32 s_scaled[16];\n")
    assert honest.classes == {}


@pytest.mark.nvcc
def test_the_cubin_names_every_global_an_asm_statement_declares(tmp_path):
    # what lasts from launch to launch is read from the object, however the PTX spelled it (round 266)
    from kernelloop.verify.precision import global_objects
    tool = precision.find_disassembler(find_toolchain())
    if tool is None:
        pytest.skip("cuobjdump/nvdisasm not found (toolkit, PATH, or the nvidia-cuda-cuobjdump wheels)")
    source = tmp_path / "globals.cu"
    source.write_text(
        "__device__ int g_plain;\nstatic __device__ float s_scaled[16];\n"
        "namespace ns { __device__ unsigned long long counter_ns = 3; }\n"
        "__global__ void k(float *p) {\n"
        "  unsigned v; asm volatile(\"{ .loc 1 1 0 .global .u32 hidden; ld.global.u32 %0, [hidden]; }\" : \"=r\"(v));\n"
        "  p[threadIdx.x] = g_plain + s_scaled[threadIdx.x & 15] + ns::counter_ns + v; }\n")
    subprocess.run([str(find_toolchain().nvcc), "-c", "-arch=sm_90", "-o", str(tmp_path / "g.o"), str(source)],
                   check=True, capture_output=True, timeout=300)
    elf = subprocess.run([str(tool.cuobjdump), "-elf", str(tmp_path / "g.o")], capture_output=True, text=True,
                         check=True, timeout=120, env={**os.environ, "PATH": f"{tool.nvdisasm_dir}:{os.environ['PATH']}"})
    objects = global_objects(elf.stdout)
    assert {"g_plain", "s_scaled", "_ZN2ns10counter_nsE"} <= set(objects)
    assert any("hidden" in o and o != "hidden" for o in objects)  # ptxas's own name for it, `$__hidden__N$M`


@pytest.mark.nvcc
@pytest.mark.parametrize("name, rule", [("hidden_call_counter.cu", "device-static"),
                                        ("hidden_bf16_mma.cu", "reduced_precision")])
def test_round266_candidates_are_refused_on_both_readers(name, rule, settings, backend):
    result = gates(f"tests/fixtures/redteam/round266/{name}", settings, arch="sm_90")
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    assert rule in [v.rule for v in result.violations], [v.describe() for v in result.violations]


@pytest.mark.nvcc
def test_the_object_alone_refuses_an_asm_global_the_ptx_reader_misses(settings, monkeypatch):
    # the SASS path decides device statics from the cubin too: with the PTX reader blind to them, still refused
    if precision.find_disassembler(find_toolchain()) is None:
        pytest.skip("cuobjdump/nvdisasm not found (toolkit, PATH, or the nvidia-cuda-cuobjdump wheels)")
    reader = precision.classify_ptx

    def blind(text):
        profile = reader(text)
        profile.classes.pop("device_static", None)
        return profile

    monkeypatch.setattr(precision, "classify_ptx", blind)
    monkeypatch.setattr(precision, "PRECISION_SCAN_VERSION", "blind-ptx-test")  # no cached profile of the real one
    result = gates("tests/fixtures/redteam/round266/hidden_call_counter.cu", settings, arch="sm_90")
    assert "device-static" in [v.rule for v in result.violations], [v.describe() for v in result.violations]
    plain = gates("src/kernelloop/exemplars/matmul_smem_tiling.cu", settings, arch="sm_90")
    assert "device-static" not in [v.rule for v in plain.violations]


# -- module memory the host stub does not register (red team round 267: a call counter in a string literal's storage,
# `$str`, which nvcc declares at module scope and no __cudaRegisterVar names; internal-linkage names differ between two
# compiles of one unit, so what is registered is read from the shipped object's own registration code) ---------------

@pytest.mark.nvcc
def test_the_registered_names_are_read_from_the_objects_own_registration(tmp_path):
    from kernelloop.tools.registered import registered_device_names
    source = tmp_path / "reg.cu"
    source.write_text(
        "#include <cstdio>\nnamespace { __device__ float kl_one = 1.0f; }\nstatic __device__ float kl_two = 2.0f;\n"
        "__device__ int g_plain;\n__global__ void k(float *p) { p[threadIdx.x] *= kl_one + kl_two + g_plain;\n"
        "  if (threadIdx.x == 0) printf(\"%f\\n\", p[0]); }\n")
    for host_opt in ("-O0", "-O3"):  # at -O3 the callback is inlined into the unit's static initialiser
        obj = tmp_path / f"reg{host_opt}.o"
        subprocess.run([str(find_toolchain().nvcc), "-c", "-arch=sm_90", "-Xcompiler", host_opt, "-o", str(obj),
                        str(source)], check=True, capture_output=True, timeout=300)
        names = registered_device_names(obj)
        assert {"kl_two", "g_plain", "_Z1kPf"} <= names, (host_opt, names)
        assert any("kl_one" in n for n in names) and not any(n.startswith("$str") for n in names)


def test_an_unregistered_objects_identity_leaves_out_what_a_compile_names_it():
    from kernelloop.verify.precision import object_identity
    assert object_identity("$str$3") == object_identity("$str") == "$str"
    assert object_identity("__unnamed_2") == "__unnamed"
    assert object_identity("$__kl_calls__44$1") == "$__kl_calls"
    one = "_ZN42_INTERNAL_4cbc6a20_11_editable_cu_758ecd5f4cuda3std3__45__cpo3endE"
    other = "_ZN37_INTERNAL_548d289e_7_unit_cu_0a1b2c3d4cuda3std3__45__cpo3endE"
    assert object_identity(one) == object_identity(other)


@pytest.mark.nvcc
@pytest.mark.parametrize("baseline, candidate, refused", [
    ("kernels/naive_matmul.cu", "strlit_counter.cu", True),  # a counter in a string literal's storage
    ("kernels/naive_matmul.cu", "honest_cg_assert.cu", True),  # assert's strings: module memory the baseline lacks
    ("honest_baseline_with_cuda_std.cu", "honest_cuda_std_include.cu", False),  # the same header's objects
])
def test_unregistered_module_memory_is_refused_where_the_baseline_has_none(baseline, candidate, refused, settings):
    if precision.find_disassembler(find_toolchain()) is None:
        pytest.skip("cuobjdump/nvdisasm not found (toolkit, PATH, or the nvidia-cuda-cuobjdump wheels)")
    here = FIXTURES / "redteam" / "round267"
    base_path = ROOT / baseline if baseline.startswith("kernels/") else here / baseline
    split = split_program(base_path.read_text())
    path = here / candidate
    editable, _ = candidate_editable_part(path.read_text(), split, path.name)
    result = static_gates(split, editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    assert ("device-static" in [v.rule for v in result.violations]) == refused, \
        [v.describe() for v in result.violations]


@pytest.mark.nvcc
def test_a_number_glued_to_an_opcode_hides_nothing_on_the_ptx_path(settings, monkeypatch):
    # round 267: `.loc 1 1 0mma.sync...` (ptxas takes it) hid a bf16 GEMM's tensor-core instructions from the PTX path
    monkeypatch.setattr(precision, "find_disassembler", lambda toolchain: None)
    result = gates("tests/fixtures/redteam/round267/glued_bf16_mma.cu", settings, arch="sm_90")
    assert result.precision is not None and result.precision.source == "ptx"
    assert "reduced_precision" in [v.rule for v in result.violations], [v.describe() for v in result.violations]


# -- PTX strings as ptxas reads them (red team round 268: a string run across a newline hid `%gridid` on the next
# line as a comment, and one ended by what looked like an escaped quote swallowed a bf16 mma) ------------------------

@pytest.mark.nvcc
@pytest.mark.parametrize("body, kind, name", [
    ('.pragma "nounroll\n// kl"; mov.u64 %rd3, %gridid;', "special_register", "%gridid"),
    ('.pragma "nounroll\\"; add.rn.f16 %rs1, %rs2, %rs2; .pragma "nounroll";', "half", "add.rn.f16"),
])
def test_a_ptx_string_ends_where_ptxas_ends_it(body, kind, name, tmp_path):
    ptx = _PTX_HEAD.format(body=body)
    (tmp_path / "k.ptx").write_text(ptx)
    assembled = subprocess.run(["ptxas", "-arch=sm_90", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                               capture_output=True, text=True, timeout=120)
    assert assembled.returncode == 0, assembled.stderr
    assert classify_ptx(ptx).classes.get(kind) == [name]


@pytest.mark.nvcc
def test_a_function_named_like_the_registrar_registers_nothing(settings):
    # round 268: `kl_names__sti____cudaRegisterAll` returning "$str" made round 267's string-literal counter registered
    if precision.find_disassembler(find_toolchain()) is None:
        pytest.skip("cuobjdump/nvdisasm not found (toolkit, PATH, or the nvidia-cuda-cuobjdump wheels)")
    result = gates("tests/fixtures/redteam/round268/strlit_counter_named_registrar.cu", settings, arch="sm_90")
    assert "device-static" in [v.rule for v in result.violations], [v.describe() for v in result.violations]


# -- the driver's words in constant bank 0 (red team round 269: `ld.param [k_param_0+-480]` read `%gridid`'s word,
# a launch count, with no register named: judged by offset in SASS, by the parameter read's address in PTX) ----------

def test_a_parameter_read_past_its_parameters_is_a_driver_word():
    entry = ".visible .entry _Z1kPf(.param .u64 _Z1kPf_param_0, .param .align 4 .b8 _Z1kPf_param_1[32]) {{ {body} }}"
    for body in ("ld.param.u64 %rd1, [_Z1kPf_param_0+-480];",
                 ".reg .u64 t; mov.u64 t, _Z1kPf_param_0; add.s64 t, t, %rd2; ld.param.u64 %rd1, [t];",
                 "cvta.param.u64 %rd2, %rd3;"):
        assert classify_ptx(entry.format(body=body)).classes.get("driver_word"), body
    honest = ("ld.param.u64 %rd1, [_Z1kPf_param_0]; ld.param.f32 %f1, [_Z1kPf_param_1+12]; "
              "ld.param.v2.u32 {%r1, %r2}, [_Z1kPf_param_1+16]; { .param .b32 param0; st.param.f32 [param0+0], %f1; "
              ".param .b32 retval0; call.uni (retval0), _Z1hf, (param0); ld.param.f32 %f2, [retval0+0]; }")
    assert classify_ptx(entry.format(body=honest)).classes == {}


def test_a_parameter_read_is_judged_by_its_state_space_and_its_offset_as_ptxas_reads_them():
    # red team round 270: `ld.param::entry` (a sub-qualified state space) and `+4294966816` (ptxas wraps it to
    # -480) read %gridid's word past round 269's check; a read at the end of a parameter is past it too
    entry = ".visible .entry _Z1kPf(.param .u64 _Z1kPf_param_0, .param .align 4 .b8 _Z1kPf_param_1[32]) {{ {body} }}"
    for body in ("ld.param::entry.u64 %rd1, [_Z1kPf_param_0+-480];", "ld.param.u64 %rd1, [_Z1kPf_param_0+4294966816];",
                 "ld.param.u32 %r1, [_Z1kPf_param_1+32];", "ld.param.u32 %r1, [_Z1kPf_param_0+0x10];",
                 "cvta.param::entry.u64 %rd2, %rd3;"):
        assert classify_ptx(entry.format(body=body)).classes.get("driver_word"), body
    assert classify_ptx(entry.format(body="ld.param::entry.u32 %r1, [_Z1kPf_param_1+28];")).classes == {}
    # round 271: a `.param` an asm's braces declare under the kernel parameter's name does not widen it
    shadow = "{ .param .b8 _Z1kPf_param_0[65536]; } ld.param.u64 %rd1, [_Z1kPf_param_0+65056];"
    assert classify_ptx(entry.format(body=shadow)).classes.get("driver_word")
    assert [precision._ptx_int(t) for t in ("4294966816", "0x10", "010", "0b11", "7U")] == [-480, 16, 8, 3, 7]


def test_driver_words_are_judged_below_the_targets_parameter_base_not_the_candidates():
    # red team round 270: a part whose kernels take no parameters has no EIATTR_PARAM_CBANK of its own
    paramless = precision.PrecisionProfile(source="sass", bank0=[0x0, 0x198])
    precision.judge_driver_words(paramless, {0x0}, 0x210)
    assert paramless.classes["driver_word"] == ["c[0x0][0x198]"]
    moved = precision.PrecisionProfile(source="sass", bank0=[0x0], parameter_base=0x160)
    precision.judge_driver_words(moved, {0x0}, 0x210)
    assert moved.classes["driver_word"] == ["parameters at c[0x0][0x160], where the target's start at 0x210"]


@pytest.mark.nvcc
@pytest.mark.parametrize("name, refused", [("tests/fixtures/redteam/round269/param_offset_gridid.cu", True),
                                           ("tests/fixtures/redteam/round270/paramless_cvta_gridid.cu", True),
                                           ("tests/fixtures/redteam/round270/param_entry_gridid.cu", True),
                                           ("tests/fixtures/redteam/round270/param_wrap_gridid.cu", True),
                                           ("tests/fixtures/redteam/round271/param_shadow_gridid.cu", True),
                                           ("src/kernelloop/exemplars/matmul_smem_tiling.cu", False)])
def test_the_launch_count_read_through_a_parameter_is_refused(name, refused, settings, backend):
    result = gates(name, settings, arch="sm_90")
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    assert ("device-register" in [v.rule for v in result.violations]) == refused, \
        [v.describe() for v in result.violations]


@pytest.mark.nvcc
@pytest.mark.parametrize("name, rule", [("const_symaddr_counter.cu", "device-static"),
                                        ("const_cvta_counter.cu", "device-register")])
def test_a_counter_in_the_modules_constant_memory_is_refused(name, rule, settings, backend):
    # red team round 271: an unregistered `.const` an asm declares, written through a generic pointer (from a
    # registered table's address, or cvta.const): the module's constant bank is module memory like .nv.global
    result = gates(f"tests/fixtures/redteam/round271/{name}", settings, arch="sm_90")
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    assert rule in [v.rule for v in result.violations], [v.describe() for v in result.violations]


_TABLE_MODULE = """.version 8.8
.target sm_90
.address_size 64

.global .align 4 .b8 _ZZ3tapiE4taps[8] = {0, 0, 128, 62, 0, 0, 128, 62};
.visible .entry k(
\t.param .u64 k_param_0
)
{
\t.reg .b64 \t%rd<4>;
\t.reg .f32 \t%f<3>;
\tld.global.f32 \t%f1, [_ZZ3tapiE4taps+4];
\tld.param.u64 \t%rd1, [k_param_0];
\tst.global.f32 \t[%rd1], %f1;
BODY\tret;
}
"""


def test_a_candidate_that_writes_into_the_baselines_constant_table_is_refused():
    """The baseline keeps a `static const` table in device code (init admits it: only read); a
    candidate with the same table that writes into it (a call counter, a cache) keeps state the
    state check cannot see, however the table is named."""
    baseline = classify_ptx(_TABLE_MODULE.replace("BODY", ""))
    assert "device_static_written" not in baseline.classes
    honest = classify_ptx(_TABLE_MODULE.replace("BODY", "\tld.global.f32 \t%f2, [_ZZ3tapiE4taps];\n"))
    assert not [v for v in compare_profiles(baseline, honest) if v.rule == "device-static"]
    counter = classify_ptx(_TABLE_MODULE.replace("BODY", "\tst.global.f32 \t[_ZZ3tapiE4taps], %f1;\n"))
    found = [v for v in compare_profiles(baseline, counter) if v.rule == "device-static"]
    assert found and "which the baseline only reads" in found[0].detail
