"""Red team round 158 (tests/fixtures/redteam/round158/): the attribute rules read
`__attribute__((` and `[[` as runs of characters, where the compiler reads tokens. A blank or a
comment between the two `(` (`__attribute__( (ms_abi) )`, `__attribute__( (optimize(...)) )`),
the keyword's second spelling `__attribute`, or a macro for the keyword (`#define A
__attribute__`, `A((constructor))`) hid the attribute list from every rule keyed on it; the first
two passed every static gate (certain: the host object of `ms_abi` reads its argument from %ecx).
`_Pragma(L"GCC optimize ...")` missed the pragma rule. Fixed by class: one token-wise opening
(`_ATTRIBUTE_OPEN`) for every attribute rule, an encoding prefix in the `_Pragma` rule, and the
attribute and pragma rules also read the preprocessed part, where a macro spells nothing and every
`_Pragma` is a `#pragma` line; and in the host code nvcc compiles, where a macro defined for the
host pass only (`#ifndef __CUDA_ARCH__`) spells the attribute (found while fixing the round: it
passed every static gate)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify import policy
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round158" / "policy"
BASE = CASE / "base_kl.cu"


@pytest.mark.parametrize("spelling, rule", [
    ("static __attribute__( (ms_abi) ) int f(int a) { return a; }", "compiler-options"),
    ("static __attribute__ /* c */ ( /* d */ (sysv_abi, noinline) ) int f(int a) { return a; }", "compiler-options"),
    ("static __attribute ((ms_abi)) int f(int a) { return a; }", "compiler-options"),
    ("__attribute__(\n(optimize(\"O0\"))\n) void f() {}", "compiler-options"),
    ("[ [gnu::optimize(\"O0\")] ] void f() {}", "compiler-options"),
    ("__attribute__( (constructor) ) static void f() {}", "static-init"),
    ("__attribute__( ( section(\".ctors\") ) ) int x = 1;", "static-init"),
    ("[ [gnu::destructor] ] static void f() {}", "exit-handler"),
    ("__attribute ( (naked) ) void f() {}", "host-asm"),
    ("_Pragma(L\"GCC optimize(\\\"O0\\\")\")", "compiler-options"),
    ("_Pragma(u8\"clang optimize off\")", "compiler-options"),
])
def test_every_spelling_of_an_attribute_list_is_read(spelling, rule):
    assert rule in {v.rule for v in policy.scan_source(spelling)}, spelling


@pytest.mark.parametrize("part, rule", [
    ("static __attribute__((ms_abi, noinline)) int f(int a) { return a; }", "compiler-options"),
    ("__attribute__((constructor)) static void f() {}", "static-init"),
    ("#pragma GCC optimize(\"O0\")\nint f() { return 0; }", "compiler-options"),
    ("__attribute__((destructor)) static void f() {}", "exit-handler"),
])
def test_the_preprocessed_part_is_read_for_attributes_and_pragmas(part, rule):
    assert rule in {v.rule for v in policy.scan_preprocessed("int f();", part, {})}


def test_the_host_code_nvcc_compiles_is_read_for_attributes():
    lines = [(12, "static __attribute__((ms_abi, noinline)) int kl_twice(int b) { return b + 0; }")]
    assert "compiler-options" in {v.rule for v in policy.scan_host_pass(lines)}
    assert "static-init" in {v.rule for v in policy.scan_host_pass([(3, "__attribute__((constructor))"),
                                                                     (4, "static void f() {}")])}
    assert policy.scan_host_pass([(1, "static __attribute((noinline)) int g(int b) { return b; }")]) == []


def test_the_toolkits_own_attributes_are_not_refused():
    part = ("__attribute__((global)) __attribute__((launch_bounds(256, 2))) void k(float *__restrict__ x) {}\n"
            "static __inline__ __attribute__((always_inline)) __attribute__((device)) float g(float v) { return v; }\n"
            "__attribute__((shared)) __attribute__((aligned(16))) float tile[32];")
    assert policy.scan_preprocessed("int f();", part, {}) == []
    assert policy.scan_source("__global__ void __launch_bounds__(256) k(float *x) { [[maybe_unused]] int a = 0; }") == []


@pytest.mark.parametrize("candidate, rule", [
    ("optsp_cand.cu", "compiler-options"), ("msabi2_cand.cu", "compiler-options"),
    ("msabimac_cand.cu", "compiler-options"), ("msabialt_cand.cu", "compiler-options"),
    ("ctorsp2_cand.cu", "static-init"), ("ctormac2_cand.cu", "static-init"), ("pragL_cand.cu", "compiler-options"),
    # a macro defined for the host pass only: the device pass's preprocessed part shows no attribute
    ("msabi_hostmac_cand.cu", "compiler-options"), ("opt_hostmac_cand.cu", "compiler-options"),
])
def test_the_red_teams_candidates_are_refused(candidate, rule):
    check = check_static_files(BASE, CASE / candidate, Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok and rule in check.summary, check.summary
