"""The offline optimizer's atomics tier (optimizers/offline/privatize.py): integer atomics into small
tables get private per-block copies in shared memory, a block running several of the baseline's
blocks, only where nothing can tell the grouping of the adds.

Tier 1: which kernels it takes (one thread per sample with two tables, `table + index`, a grid-stride
loop whose stride reads gridDim.x, OR and max tables, a device assertion) and which it refuses, by
class (an atomic's old value used, a float table, a table read or passed on, two operations on one
table, shared memory, barriers, warp intrinsics, an exchange or compare-and-swap, a const table, a
table that is no parameter); what the rewrite writes (the adds routed through the private tables,
blockIdx.x and gridDim.x read as the baseline's, the flush only of changed entries). Tier 2 (nvcc):
the outside-style programs' rewrites pass the verifier's static gates for sm_90 and build for sm_86.
"""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import FailedAttempt, NoMoreCandidates
from kernelloop.optimizers.offline.launcher import expanded_function, read_editable
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.optimizers.offline.privatize import (
    GRID_CAP,
    OPERATIONS,
    plan_privatization,
    privatization_rewrites,
    private_kernel,
)
from kernelloop.optimizers.offline.rowwarp import NotARowKernel, pure_helpers
from kernelloop.program.init import generate
from kernelloop.program.macros import program_macros
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import assert_passes_the_static_gates
from .outside_specs import OUTSIDE, SPECS


def _kernel(text: str):
    part = read_editable(text, "", [])
    (fn,) = [f for f in part.functions.values() if f.is_kernel]
    read = expanded_function(fn, program_macros("", text))
    if isinstance(read, str):
        raise NotARowKernel(read)
    return read, pure_helpers(list(part.functions.values()))


def _plan(text: str):
    fn, helpers = _kernel(text)
    return plan_privatization(fn, helpers, {})


TALLY = """
__global__ void tally(int* counts, unsigned long long* sums, const int* labels, const int* w, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int c = labels[i];
  if (c < 0 || c >= k) return;
  atomicAdd(&counts[c], 1);
  atomicAdd(sums + c, (unsigned long long)w[i]);
}
"""

GRID_STRIDE_BITS = """
__device__ unsigned int bucket_of(unsigned int v) { return (v * 2654435761u) >> 22; }
__global__ void mark(const unsigned int* keys, unsigned int* seen, int* top, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)blockDim.x * gridDim.x) {
    unsigned int b = bucket_of(keys[i]);
    assert(b < 1024u);
    atomicOr(&seen[b >> 5], 1u << (b & 31u));
    atomicMax(&top[b & 63u], (int)keys[i]);
  }
}
"""


def test_a_kernel_of_integer_adds_into_two_tables_is_taken():
    tables = _plan(TALLY)
    assert [(t.name, t.op, len(t.adds)) for t in tables] == [("counts", "atomicAdd", 1), ("sums", "atomicAdd", 1)]


def test_a_grid_stride_kernel_with_or_and_max_tables_and_an_assertion_is_taken():
    tables = _plan(GRID_STRIDE_BITS)
    assert [(t.name, t.op) for t in tables] == [("seen", "atomicOr"), ("top", "atomicMax")]


def test_the_rewrite_routes_the_adds_and_reads_the_baselines_block_and_grid():
    fn, helpers = _kernel(GRID_STRIDE_BITS)
    text = private_kernel(fn, plan_privatization(fn, helpers, {}))
    assert "kl_private_atomicOr(seen, kl_private0, kl_bins, (b >> 5), (1u << (b & 31u)));" in text
    assert "kl_private_atomicMax(top, kl_private1, kl_bins, (b & 63u), ((int)keys[i]));" in text
    # the body's own block and grid are the baseline's, run once for each baseline block this one takes
    assert "i = kl_block_x * (long)blockDim.x + threadIdx.x" in text and "(long)blockDim.x * kl_grid_x" in text
    assert "for (unsigned int kl_b = blockIdx.x; kl_b < kl_grid_x; kl_b += gridDim.x) kl_run_block(kl_b);" in text
    # private entries start at the operation's identity and only changed ones are written back
    assert "if (kl_private0[kl_j] != kl_type0(0)) atomicOr(&seen[kl_j], kl_private0[kl_j]);" in text
    assert "unsigned int kl_grid_x)" in text and set(OPERATIONS) >= {"atomicOr", "atomicMax"}


@pytest.mark.parametrize("body, why", [
    ("int p = atomicAdd(&counts[0], 1); out[p] = 1;", "old value"),
    ("out[i] = atomicAdd(&counts[i & 7], 1);", "old value"),
    ("atomicAdd(&fcounts[i & 7], 1.0f);", "fcounts, whose element type float"),
    ("atomicAdd(&counts[i & 7], 1); out[i] = counts[0];", "reads or stores counts"),
    ("atomicAdd(&counts[i & 7], 1); atomicMax(&counts[3], i);", "several atomic operations"),
    ("atomicAdd(&counts[counts[0] & 7], 1);", "counts"),
    ("__shared__ int s[8]; s[0] = 1; atomicAdd(&counts[i & 7], s[0]);", "shared memory"),
    ("atomicAdd(&counts[i & 7], 1); __syncthreads();", "calls __syncthreads"),
    ("atomicAdd(&counts[__shfl_sync(0xffffffffu, i, 0) & 7], 1);", "uses __shfl_sync"),
    ("atomicCAS(&counts[i & 7], 0, 1);", "calls atomicCAS"),
    ("atomicExch(&counts[i & 7], 1);", "calls atomicExch"),
    ("int* p = counts; atomicAdd(&p[i & 7], 1);", "adds into p, which is not a pointer parameter"),
    ("atomicAdd(&ccounts[i & 7], 1);", "ccounts"),
    ("static int calls; calls++; atomicAdd(&counts[i & 7], 1);", "static local"),
    ("dim3 b = blockIdx; atomicAdd(&counts[b.x & 7], 1);", "blockIdx other than"),
    ("out[i] = 1.0f;", "uses no atomics"),
])
def test_what_could_tell_the_grouping_is_refused(body, why):
    text = ("__global__ void k(int* counts, float* fcounts, const int* ccounts, float* out, int n) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n  " + body + "\n}\n")
    with pytest.raises(NotARowKernel, match=why):
        _plan(text)


def _program_rewrites(name: str):
    text = generate((OUTSIDE / name).read_text(), SPECS[name], name).program
    split = split_program(text, name)
    return split, privatization_rewrites(read_editable(split.editable, split.harness, split.exported), split.harness,
                                         split.preamble)


def test_the_llmc_style_launcher_keeps_its_zeroing_kernel_and_checks():
    split, (rewrites, refused) = _program_rewrites("class_tally_llmc.cu")
    (r,) = rewrites
    assert r.label == "atomics tier: private tables for class_tally_kernel1", refused
    assert "zero_tally_kernel<<<ceil_div(num_classes, block_size), block_size>>>(counts, totals, num_classes);" in r.source
    assert r.source.count("cudaCheck(cudaGetLastError());") == 2
    assert f"kl_baseline_x < {GRID_CAP}u ? kl_baseline_x : {GRID_CAP}u" in r.source
    # the baseline's kernel and launch stay for the launches the guard does not take
    assert "else { class_tally_kernel1<<<kl_grid, kl_block, kl_shmem>>>" in r.source
    assert any("zero_tally_kernel uses no atomics" in x for x in refused)


def test_the_template_launcher_is_rewritten_for_the_verified_instantiation_only():
    _, (rewrites, refused) = _program_rewrites("bucket_counts_ext.cu")
    (r,) = rewrites
    assert "if constexpr (::kl_same_type<scalar_t, float>::value)" in r.source, refused
    assert "cudaMemsetAsync(hist, 0, bins * sizeof(uint32_t), stream);" in r.source
    assert "kl_shmem, stream>>>(values, hist, numel, bins, lo, hi, kl_baseline_x)" in r.source


@pytest.mark.parametrize("name, kernel", [("class_tally_llmc.cu", "class_tally_kernel1"),
                                          # its bin number converts a float to int: the tier keeps it as written
                                          ("bucket_counts_ext.cu", "bucket_counts_kernel")])
def test_the_offline_optimizer_proposes_the_tier_once_where_no_template_fits(name, kernel):
    from .test_offline_optimizer import request_for
    text = generate((OUTSIDE / name).read_text(), SPECS[name], name).program
    opt = OfflineOptimizer()
    p = opt.propose(request_for(text, kernel, iteration=1))
    assert p.approach == f"atomics tier: private tables for {kernel}"
    failed = [FailedAttempt(iteration=1, approach=p.approach, kind="not_faster", reason="slower", source=p.source)]
    with pytest.raises(NoMoreCandidates):
        opt.propose(request_for(text, kernel, iteration=2, failed_attempts=failed))


@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["class_tally_llmc.cu", "bucket_counts_ext.cu"])
def test_the_rewrite_passes_the_static_gates(name):
    split, ((rewrite,), _) = _program_rewrites(name)
    editable, _ = candidate_editable_part(rewrite.source, split)
    assert_passes_the_static_gates(split, editable)
