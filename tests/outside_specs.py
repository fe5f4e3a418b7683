"""How `kernelloop init` is told about each outside-style program in tests/fixtures/outside/
(shared by the CPU and GPU tests)."""

from __future__ import annotations

from kernelloop.program.init import InitSpec

from .conftest import FIXTURES

OUTSIDE = FIXTURES / "outside"
SPECS: dict[str, InitSpec] = {
    # cuda-samples style: its own main and checks; one integer argument, so counts and launch are guessed
    # llm.c style GELU as a grid-stride loop on a grid fixed at 40 blocks (the grid tier's case)
    "gelu_gridstride_fixed.cu": InitSpec(values={"N": ["33554432", "1000003"], "block_size": ["256"]},
                                         counts={"out": "N", "inp": "N"}, roles={"out": "output"}),
    # a thread per row whose loop over the row holds an inner 7-tap loop (the row tier's inner loops)
    "window_sum_rows.cu": InitSpec(values={"height": ["8192", "1001"], "width": ["2048", "777"]},
                                   counts={"img": "height * width", "taps": "7", "out": "height * width"},
                                   roles={"out": "output"}, ranges={"taps": ("0.5", "1.5")}),
    # rows dealt out by a grid-stride loop, one row per iteration (the row tier over grid-stride
    # loops): llm.c's RMS norm on 4 blocks an SM, a C-style row max with the stride in a local and
    # size_t counters, an embedding gather on a grid clamped in its launcher; and its negative
    # control, a running sum along each row
    "rmsnorm_gridstride_llmc.cu": InitSpec(values={"N": ["32768", "1000"], "C": ["768", "100"],
                                                   "block_size": ["256", "128"]},
                                           counts={"out": "N * C", "inp": "N * C", "weight": "C"},
                                           roles={"out": "output"}, launcher="rmsnorm_forward"),
    "rowmax_gridstride_c.cu": InitSpec(values={"rows": ["65536", "1001"], "cols": ["512", "77"]},
                                       counts={"a": "rows * cols", "m": "rows"}, roles={"m": "output"},
                                       launcher="launch_row_max"),
    "embed_gridstride_clamp.cu": InitSpec(values={"B": ["8", "3"], "T": ["1024", "100"], "C": ["768", "96"]},
                                          counts={"out": "B * T * C", "tokens": "B * T", "wte": "4096 * C",
                                                  "wpe": "T * C"},
                                          roles={"out": "output"}, ranges={"tokens": ("0", "4096")},
                                          launcher="embed_forward"),
    "row_prefix_gridstride.cu": InitSpec(values={"rows": ["16384", "1001"], "cols": ["1024", "77"]},
                                         counts={"out": "rows * cols", "in": "rows * cols"}, roles={"out": "output"},
                                         launcher="row_prefix_forward"),
    # the same loops written as a declaration and a `while` (C89 style, C style): read as their `for`
    "clamp_while_c89.cu": InitSpec(values={"count": ["16777216", "1000003"], "lo": ["-0.5"], "hi": ["0.5"]},
                                   counts={"dst": "count", "src": "count"}, roles={"dst": "output"},
                                   launcher="clamp_on_device"),
    "rownorm_while_c.cu": InitSpec(values={"rows": ["32768", "1001"], "cols": ["1024", "77"]},
                                   counts={"norms": "rows", "m": "rows * cols"}, roles={"norms": "output"},
                                   launcher="launch_row_norms"),
    "vector_add.cu": InitSpec(values={"numElements": ["16777216", "16777215"]}),
    # a course-exercise grid-stride loop on a fixed <<<NBLK, NTHR>>>, its mixer working on its own
    # copies of its arguments (the grid tier, with a helper that assigns its by-value parameters)
    "mix_words_fixedgrid.cu": InitSpec(values={"count": ["16777216", "1000003"], "key": ["19088743", "305419896"]},
                                       counts={"d_src": "count", "d_dst": "count"}, roles={"d_dst": "output"}),
    # a kernel file without main: bf16 in and out, a float scale
    "bf16_scale.cu": InitSpec(values={"alpha": ["1.25"], "n": ["33554432", "33554431"]}),
    # a PyTorch-extension style launcher: float2 buffers (lanes), `long`/`long long` sizes and indices, a
    # cudaStream_t parameter (the harness passes the default stream)
    "gather_cmul_ext.cu": InitSpec(values={"n": ["4194304", "1000003"]}, counts={"a": "n", "b": "n", "idx": "n", "out": "n"},
                                   roles={"out": "output"}, ranges={"idx": ("0", "1000003")}),
    # a read-only pointer written without const (guessed inout), counts only written, a wide integer range
    "popcount_words.cu": InitSpec(values={"n": ["16777216", "16777215"]}, roles={"counts": "output"},
                                  ranges={"words": ("0", "2147483647")}),
    # GEMMs as real code writes them: llm.c's linear layer whose sum starts at an optional bias, a fused
    # bias + ReLU where the sum is stored, a template kernel reading through __ldg
    "linear_bias_llmc.cu": InitSpec(
        values={"BT": ["2048", "777"], "C": ["768", "129"], "OC": ["1024", "333"], "sqrt_block_size": ["16"]},
        counts={"out": "BT * OC", "inp": "BT * C", "weight": "OC * C", "bias": "OC"}, roles={"out": "output"}),
    "gemm_bias_relu.cu": InitSpec(
        values={"M": ["1024", "333"], "N": ["1024", "257"], "K": ["1024", "129"]},
        counts={"A": "M * K", "B": "K * N", "bias": "N", "C": "M * N"}, roles={"C": "output"},
        ranges={"A": ("-1", "1"), "B": ("-1", "1"), "bias": ("-1", "1")}),
    # a tutorial GEMM on a 1-D grid: its flat thread index split into row = idx / n and col = idx % n
    "gemm_flat_index.cu": InitSpec(
        values={"m": ["1024", "333"], "n": ["1024", "257"], "k": ["1024", "129"]},
        counts={"a": "m * k", "b": "k * n", "c": "m * n"}, roles={"c": "output"}),
    "gemm_template_ldg.cu": InitSpec(
        values={"M": ["1024", "333"], "N": ["1024", "257"], "K": ["1024", "129"]},
        counts={"A": "M * K", "B": "K * N", "C": "M * N"}, roles={"C": "output"}),
    # a GEMM that reads its output (C = alpha AB + beta C): inout, 2-D launch, explicit counts
    "gemm_accumulate.cu": InitSpec(
        values={"M": ["512", "333"], "N": ["512", "257"], "K": ["256", "129"], "alpha": ["1.5"], "beta": ["0.5"]},
        counts={"A": "M * K", "B": "K * N", "C": "M * N"}, roles={"C": "inout"},
        grid="dim3((N + 15) / 16, (M + 15) / 16)", block="dim3(16, 16)"),
    # llm.c dev/cuda style: a cudaCheck macro over a non-static cuda_check(), a CPU reference, and a
    # launcher that takes the block size and launches two kernels (init wraps the launcher itself)
    "layernorm_llmc.cu": InitSpec(
        values={"N": ["8192", "1531"], "C": ["768", "333"], "block_size": ["256"]},
        counts={"out": "N * C", "inp": "N * C", "weight": "C"}, roles={"out": "output"}),
    # a template kernel <typename T, int BLOCK>: --template-args gives both; one thread per element
    "block_sums_template.cu": InitSpec(
        template_args="float, 256", values={"n": ["16777216", "16777215"]},
        counts={"x": "n", "sums": "(n + 255) / 256"}, roles={"sums": "output"}),
    # a gradient that accumulates (dbias += column sums of dout): in-out
    "bias_backward.cu": InitSpec(
        values={"N": ["4096", "1023"], "OC": ["3072", "2049"]}, counts={"dbias": "OC", "dout": "N * OC"},
        roles={"dbias": "inout"}, grid="(OC + 255) / 256", block="256"),
    # a workspace the kernel writes before it reads (scratch: never compared), and a plain output
    "smooth_scratch.cu": InitSpec(values={"n": ["16777216", "16777215"]}, roles={"workspace": "scratch", "y": "output"}),
    # a launcher given the caller's stream (PyTorch-extension style): the template launches on it too
    "row_softmax_stream.cu": InitSpec(
        values={"rows": ["16384", "1001"], "cols": ["1024", "333"]},
        counts={"x": "rows * cols", "y": "rows * cols"}, roles={"y": "output"}),
    # an elementwise kernel whose flat index is split channel-first (uncoalesced: the remap tier), a
    # launcher returning cudaError_t through a macro, unsigned sizes
    "channel_affine_colfirst.cu": InitSpec(
        values={"pixels": ["65536", "4099"], "channels": ["256", "67"]},
        counts={"x": "pixels * channels", "y": "pixels * channels", "gamma": "channels", "beta": "channels"},
        roles={"y": "output"}),
}
SPECS.update({
    # llm.c's first layernorm kernel: one thread per row, mean and rstd stored per row (the row tier)
    "layernorm_rows_llmc.cu": InitSpec(
        values={"B": ["8"], "T": ["1024", "333"], "C": ["768", "257"], "block_size": ["256"]},
        counts={"out": "B * T * C", "mean": "B * T", "rstd": "B * T", "inp": "B * T * C", "weight": "C",
                "bias": "C"},
        roles={"out": "output", "mean": "output", "rstd": "output"}),
    # RMS norm, one thread per row, an early return and size_t row offsets (the row tier)
    # a launcher that dispatches on the batch size: the one kernel launched in both branches (another block)
    "l2norm_rows_dispatch.cu": InitSpec(
        values={"rows": ["8192", "1001"], "cols": ["1024", "777"], "eps": ["1e-6"]},
        counts={"out": "rows * cols", "in": "rows * cols"}),
    "rmsnorm_rows.cu": InitSpec(
        values={"rows": ["16384", "3001"], "cols": ["1024", "509"]},
        counts={"y": "rows * cols", "inv_rms": "rows", "x": "rows * cols", "gain": "cols"},
        roles={"y": "output", "inv_rms": "output"}),
    # a PyTorch-extension template launcher (float and double instantiations, a namespace, the caller's
    # stream, a `(void)numel;`): init wraps the float instantiation, the row tier rewrites the template
    # an embedding-style row gather with a device assert on each id, behind the file's own macro
    # llm.c style: a zeroing kernel, then one thread per sample with two int atomicAdds into 100-entry
    # tables (labels out of range skipped): the atomics tier's private tables
    "class_tally_llmc.cu": InitSpec(
        values={"N": ["33554432", "1000003"], "num_classes": ["100", "37"], "block_size": ["256", "128"]},
        counts={"counts": "num_classes", "totals": "num_classes", "labels": "N", "scores": "N"},
        roles={"counts": "output", "totals": "output"}, ranges={"labels": ("-2", "102"), "scores": ("-512", "512")}),
    # a PyTorch-extension template launcher: a torch.histc-like grid-stride kernel capped at 65535 blocks,
    # cudaMemsetAsync of the bins on the caller's stream, uint32 bins (the atomics tier)
    "bucket_counts_ext.cu": InitSpec(
        launcher="bucket_counts_cuda", template_args="float",
        values={"numel": ["33554432", "1000003"], "bins": ["512", "37"], "lo": ["-1"], "hi": ["1"]},
        counts={"values": "numel", "hist": "bins"}, roles={"hist": "output"}, ranges={"values": ("-1.1", "1.1")}),
    # a thread per row whose loop bound carries the neighbour's offset (`c + 1 < cols`): the row tier
    "row_variation_ext.cu": InitSpec(
        launcher="row_variation_cuda",
        values={"rows": ["16384", "3001"], "cols": ["1024", "509"]},
        counts={"x": "rows * cols", "tv": "rows"}, roles={"tv": "output"}),
    # scientific C89 style: extern "C", column-major double, the loop counter declared at the top
    # (`int i; ... for (i = 0; ...)`): the row tier, one warp per column
    "colnorms_c89_ext.cu": InitSpec(
        values={"m": ["2048", "777"], "n": ["8192", "1001"], "lda": ["2048", "777"]},
        counts={"d_a": "lda * n", "d_norms": "n"}, roles={"d_norms": "output"}),
    "gather_rows_assert_ext.cu": InitSpec(
        launcher="gather_rows_cuda", template_args="float",
        values={"num_ids": ["16384", "3001"], "table_rows": ["50257", "50257"], "width": ["768", "509"]},
        counts={"table": "table_rows * width", "ids": "num_ids", "out": "num_ids * width"},
        roles={"out": "output", "table": "table"}, ranges={"ids": ("0", "50257")}),
    # ATen's launch-check spelling: EXT_KERNEL_LAUNCH_CHECK() wraps EXT_CUDA_CHECK, which prints `#expr`,
    # the file and the line (kept-aside set 20: refused as build-identity until the qualified build
    # expanded the nested macro first)
    "row_center_launch_check_ext.cu": InitSpec(
        values={"rows": ["8192", "3001"], "cols": ["512", "257"]},
        counts={"in": "rows * cols", "out": "rows * cols"}, roles={"out": "output"}),
    "row_sumsq_ext.cu": InitSpec(
        launcher="row_sumsq_cuda", template_args="float",
        values={"rows": ["16384", "3001"], "cols": ["1024", "509"], "numel": ["0"]},
        counts={"x": "rows * cols", "out": "rows"}, roles={"out": "output"}),
    # kernels in a detail namespace the launcher reaches with `using namespace`, local type aliases in
    # the launcher, two launches (the scales, then the scaled copy)
    "row_absmax_scale_ns.cu": InitSpec(
        launcher="absmax_quantize",
        values={"rows": ["16384", "3001"], "cols": ["1024", "509"]},
        counts={"x": "rows * cols", "scale": "rows", "y": "rows * cols"},
        roles={"scale": "output", "y": "output"}),
    # llm.c style: asserts in the launcher, one spread over two lines (assert's __FILE__ and __LINE__,
    # expanded in a system header, differ in the generated program: init compares code with them equal)
    "row_mean_asserts.cu": InitSpec(
        launcher="row_mean", values={"rows": ["2048", "1000"], "cols": ["1024", "777"]},
        counts={"in": "rows * cols", "out": "rows"}, roles={"out": "output"}),
    # the launcher checks its launch with the project's own macro wrapping assert (its condition and the
    # stringized call in the message): kept-aside set 7 found verify refusing such a program against itself
    "bias_add_check_macro.cu": InitSpec(
        launcher="add_bias", values={"rows": ["4096", "1001"], "cols": ["1024", "777"]},
        counts={"act": "rows * cols", "bias": "cols"}),
    # the same style with eight integer-class launcher arguments (two on the stack): the rewritten kernel's
    # seventh (the row count) makes the instantiation pass its launch's 7th argument through its own slot
    "row_dot_pairs_ext.cu": InitSpec(
        launcher="row_dot_cuda", template_args="float",
        values={"rows": ["16384", "3001"], "cols": ["512", "333"], "ld": ["520", "340"], "scale": ["0.5"],
                "block": ["128"]},
        counts={"a": "rows * ld", "b": "rows * ld", "out": "rows"}, roles={"out": "output"}),
    # types named by aliases (a typedef in a namespace, a using-alias of an alias) in the launcher's signature
    "smooth_typedef.cu": InitSpec(launcher="dsp::smooth", values={"n": ["16777216", "16777215"], "gain": ["1.5"]},
                                  counts={"in": "n", "out": "n"}, roles={"out": "output"}),
    # negative control: a running sum along each row (a sequential dependence the row tier refuses)
    "row_running_sum.cu": InitSpec(
        values={"rows": ["8192", "3001"], "cols": ["512", "257"]},
        counts={"out": "rows * cols", "in": "rows * cols"}, roles={"out": "output"}),
    # a transposed matrix-vector product, one thread per column of A: loads already coalesced,
    # but only `cols` threads (the column tier); the launcher takes the block size and checks it
    "matvec_transposed.cu": InitSpec(
        values={"rows": ["4096", "1021"], "cols": ["2048", "777"], "alpha": ["0.75"], "block": ["256"]},
        counts={"y": "cols", "A": "rows * cols", "x": "rows"}, roles={"y": "output"}),
    # cuda-samples' naive transpose spelling: macros, a fixed loop over rows per thread, no guards
    "transpose_tiles_sample.cu": InitSpec(
        values={"width": ["2048", "1024"], "height": ["4096", "1024"]},
        counts={"odata": "width * height", "idata": "width * height"}, roles={"odata": "output"}),
})

# Kept aside (tests/fixtures/kept_aside/): written before the row tier was tuned further and run
# only at the end, as a user would.
KEPT_ASIDE = FIXTURES / "kept_aside"
KEPT_ASIDE_SPECS: dict[str, InitSpec] = {
    "encoder_rows.cu": InitSpec(
        values={"B": ["8"], "T": ["1024", "317"], "C": ["768", "259"], "block_size": ["256"]},
        counts={"out": "B * T * C", "inp": "B * T", "wte": "50257 * C", "wpe": "T * C"},
        roles={"out": "output", "wte": "table"}, ranges={"inp": ("0", "50256")}),
    "causal_softmax_rows.cu": InitSpec(
        values={"B": ["4"], "T": ["512", "131"], "NH": ["12", "5"]},
        counts={"att": "B * NH * T * T", "preatt": "B * NH * T * T"}, roles={"att": "output"}),
    # written with the column tier, run only at the end: a max over each column, index threadIdx-first
    "column_absmax.cu": InitSpec(
        values={"n_rows": ["8192", "3001"], "n_cols": ["1024", "509"]},
        counts={"scale": "n_cols", "x": "n_rows * n_cols"}, roles={"scale": "output"}),
    "row_argmax.cu": InitSpec(
        values={"rows": ["16384", "3001"], "cols": ["512", "257"]},
        counts={"arg": "rows", "x": "rows * cols"}, roles={"arg": "output"}),
}
