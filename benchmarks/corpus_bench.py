"""Benchmark of the knowledge corpus (a script that prints figures, not a test).

1. Index build time of the bundled corpus (notes + exemplars) into an empty data dir, and
   the first search after it (the in-memory BM25 build); with the embeddings extra, also
   the time to embed every chunk.
2. A corpus of >= 1,000 chunks (the bundled notes plus synthetic CUDA-like documents added
   as user files), then p50/p95 latency of 200 queries through `search`, for BM25 and,
   where the extra is installed, hybrid (which includes embedding the query on the CPU).

Goals: bundled build <= 30 s; p95 search latency <= 50 ms.

    python3 benchmarks/corpus_bench.py [--chunks 1000] [--queries 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.config import Settings  # noqa: E402
from kernelloop.corpus import add_path, corpus_stats, dense, search  # noqa: E402
from kernelloop.corpus.text import CHUNK_WORDS, markdown_document  # noqa: E402

WORDS = """
kernel warp thread block grid shared memory global load store coalesced uncoalesced sector request
L1 L2 DRAM HBM bandwidth latency occupancy register spill local tile tiling stride transpose matmul
reduction shuffle atomic histogram barrier syncthreads divergence branch predicate vectorized float4
half bf16 tensor core mma wgmma TMA async copy pipeline prefetch cache hit miss throughput issue slot
scheduler stall scoreboard throttle MIO LG wave tail launch graph stream event fusion epilogue
softmax layernorm stencil convolution gemm split-K persistent cooperative cluster distributed
""".split()
IDENTS = ["threadIdx.x", "blockIdx.y", "__syncthreads()", "__shfl_down_sync", "atomicAdd", "cudaMemcpyAsync",
          "__ldg", "cp.async", "float4", "__launch_bounds__(256)", "blockDim.x", "gridDim.x"]


def synthetic_docs(folder: Path, chunks_needed: int, rng: random.Random) -> int:
    """Markdown files of 5 sections of about one chunk each; returns the chunks they make."""
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    n = 0
    while written < chunks_needed:
        n += 1
        lines = [f"# Synthetic note {n}: {' '.join(rng.sample(WORDS, 3))}", ""]
        for s in range(5):
            lines += [f"## Section {s}: {' '.join(rng.sample(WORDS, 2))}", ""]
            body = [rng.choice(WORDS) if rng.random() > 0.1 else rng.choice(IDENTS) for _ in range(CHUNK_WORDS - 25)]
            lines += [" ".join(body) + ".", "", "```cuda", f"out[{rng.choice(IDENTS)}] = in[i] * {rng.random():.3f}f;",
                      "```", ""]
        text = "\n".join(lines)
        written += len(markdown_document(text, fallback_title="synthetic").chunks)
        (folder / f"synthetic_{n:04d}.md").write_text(text)
    return written


def queries(n: int, rng: random.Random) -> list[str]:
    labelled = ROOT / "tests" / "fixtures" / "retrieval" / "queries.json"
    out = [q["query"] for q in json.loads(labelled.read_text())] if labelled.is_file() else []
    while len(out) < n:
        out.append(" ".join(rng.sample(WORDS, rng.randint(3, 9))) + rng.choice(["", "?", " " + rng.choice(IDENTS)]))
    return out[:n]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rng = random.Random(20261121)
    report: dict = {"goals": {"build_s": 30.0, "p95_ms": 50.0}}
    have_dense = dense.installed()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(cache_dir=Path(tmp) / "cache", data_dir=Path(tmp) / "data")
        t0 = time.perf_counter()
        stats = corpus_stats(settings)
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        search("shared memory tiling", k=5, mode="bm25", settings=settings)
        first = time.perf_counter() - t0
        report["bundled"] = {"documents": stats.documents, "chunks": stats.chunks, "build_s": build,
                             "first_search_s": first}
        print(f"bundled corpus: {stats.documents} documents, {stats.chunks} chunks")
        print(f"  index build {build:.3f} s, first BM25 search (in-memory index build) {first * 1000:.1f} ms")
        if have_dense:
            t0 = time.perf_counter()
            dense.model()
            load = time.perf_counter() - t0
            t0 = time.perf_counter()
            search("shared memory tiling", k=5, mode="hybrid", settings=settings)
            embed = time.perf_counter() - t0
            report["bundled"].update(model_load_s=load, embed_all_chunks_s=embed)
            print(f"  embeddings: model load {load:.2f} s, embedding all {stats.chunks} chunks {embed:.2f} s "
                  f"(total build with dense {build + first + load + embed:.2f} s)")

        synthetic = synthetic_docs(Path(tmp) / "synthetic", max(0, args.chunks - stats.chunks), rng)
        t0 = time.perf_counter()
        add_path(Path(tmp) / "synthetic", settings)
        added = time.perf_counter() - t0
        stats = corpus_stats(settings)
        print(f"large corpus: {stats.documents} documents, {stats.chunks} chunks "
              f"({synthetic} synthetic, added in {added:.2f} s)")
        report["large"] = {"documents": stats.documents, "chunks": stats.chunks, "add_s": added}
        qs = queries(args.queries, rng)
        for mode in ("bm25", "hybrid") if have_dense else ("bm25",):
            t0 = time.perf_counter()
            search("warm-up", k=5, mode=mode, settings=settings)  # in-memory BM25 (+ embedding the new chunks)
            warm = time.perf_counter() - t0
            times = []
            for q in qs:
                t0 = time.perf_counter()
                search(q, k=5, mode=mode, settings=settings)
                times.append((time.perf_counter() - t0) * 1000)
            row = {"warm_up_s": warm, "p50_ms": statistics.median(times), "p95_ms": percentile(times, 95),
                   "max_ms": max(times), "queries": len(times)}
            report[mode] = row
            print(f"  {mode:6} warm-up {warm:6.2f} s; {len(times)} queries: p50 {row['p50_ms']:.2f} ms, "
                  f"p95 {row['p95_ms']:.2f} ms, max {row['max_ms']:.2f} ms")
        if not have_dense:
            print(f"  hybrid not measured: {dense.unavailable_reason()}")
    ok_build = report["bundled"]["build_s"] <= 30.0
    ok_p95 = all(report[m]["p95_ms"] <= 50.0 for m in ("bm25", "hybrid") if m in report)
    print(f"goals: build <= 30 s {'met' if ok_build else 'MISSED'}; p95 <= 50 ms {'met' if ok_p95 else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
