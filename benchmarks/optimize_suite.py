"""Benchmark of `kernelloop optimize` on the bundled suite (a script that prints figures, not a test).

For each kernel: `kernelloop optimize kernels/<k>.cu --json` as a new user runs it (no key:
the offline optimizer; fresh data and build caches), then

* baseline and accepted kernel ms (the verifier's medians of interleaved runs), speedup,
  iterations;
* a reference: % of cuBLAS for the matmul (cuBLAS time / accepted time; cuBLAS is never
  allowed in candidates, it is only a yardstick), else the accepted kernel's DRAM traffic
  (Nsight Compute, from the winner's profile) as % of the bandwidth a plain copy kernel
  reaches on this GPU;
* wall time of the whole command, split into profile / research / optimize / check /
  verify / re-profile, and what is left (MCP server start, graph, checkpoints, artifacts);
* loop overhead per iteration: everything but the optimizer's thinking and the GPU work
  of the verify gate and the profiles, divided by the iterations;
* the suite score (runs/suite_score.py, as KernelBench reports it): the share of kernels
  correct and at least p x faster (fast_p, p = 1, 1.2, 2) and the geometric-mean speedup, over
  the cold runs (one per kernel; a run that errored counts as not correct).

Goals (issue 5): naive_matmul >= 3x with the offline optimizer; whole run <= 30 s; loop
overhead per iteration <= 5 s.

    python3 benchmarks/optimize_suite.py [kernel ...] [--warm] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelloop.runs.suite_score import score_markdown, score_summary, suite_score

ROOT = Path(__file__).resolve().parent.parent
SUITE = ["naive_matmul", "row_softmax", "sum_reduction", "transpose", "stencil2d", "histogram"]
GPU_PHASES = ("profile", "verify", "reprofile")


def reference_program(name: str, work: Path, *args: str) -> float | None:
    """Build and run one of benchmarks/reference/*.cu; its one printed figure, or None."""
    source = ROOT / "benchmarks" / "reference" / f"{name}.cu"
    binary = work / name
    libs = ["-lcublas"] if "cublas" in name else []
    build = subprocess.run(["nvcc", "-O3", "-o", str(binary), str(source), *libs], capture_output=True, text=True)
    if build.returncode != 0:
        return None
    run = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=120)
    found = re.search(r"[A-Z_]+ ([0-9.]+)", run.stdout)
    return float(found.group(1)) if run.returncode == 0 and found else None


def optimize(kernel: str, work: Path, cache: Path) -> tuple[dict, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("NVIDIA_API_KEY", "KERNELLOOP_BASE_URL")}
    env.update(KERNELLOOP_DATA_DIR=str(work / "data"), KERNELLOOP_CACHE_DIR=str(cache))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kernelloop", "optimize", str(ROOT / "kernels" / f"{kernel}.cu"),
                           "--runs-dir", str(work / "runs"), "--json"], env=env, cwd=work, capture_output=True,
                          text=True, timeout=1800)
    wall = time.monotonic() - started
    if not proc.stdout.strip().startswith("{"):
        return {"status": "error", "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}, wall
    return json.loads(proc.stdout), wall


def winner_dram_gbps(summary: dict) -> float | None:
    path = Path(summary.get("run_dir", "")) / "profile-best.json"
    if not path.is_file():
        return None
    roof = json.loads(path.read_text())["diagnosis"]["roofline"]
    return roof["dram_bytes_per_s"] / 1e9 if roof.get("dram_bytes_per_s") else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernels", nargs="*", default=SUITE)
    ap.add_argument("--warm", action="store_true", help="also run naive_matmul again with the build cache warm")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    scored = []  # one per kernel: its cold run
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        copy_gbps = reference_program("copy_bandwidth", work)
        cublas_ms = reference_program("cublas_sgemm", work, "1024")
        print(f"reference: copy kernel {copy_gbps or float('nan'):.0f} GB/s; cuBLAS sgemm 1024 "
              f"{cublas_ms if cublas_ms is not None else float('nan'):.4f} ms")
        plan = [(k, "cold") for k in args.kernels]
        if args.warm and "naive_matmul" in args.kernels:
            plan.append(("naive_matmul", "warm"))
        for kernel, temperature in plan:
            cache = work / "cache-shared" if temperature == "warm" else work / f"cache-{kernel}"
            if temperature == "warm":  # fill the cache first, then measure
                optimize(kernel, work / "warmup", cache)
            summary, wall = optimize(kernel, work / f"{kernel}-{temperature}", cache)
            v = summary.get("verify") or {}
            split = summary.get("time_split_seconds") or {}
            iterations = max(1, summary.get("iterations") or 1)
            thinking = split.get("optimize", 0.0)
            overhead = (wall - thinking - sum(split.get(p, 0.0) for p in GPU_PHASES)) / iterations
            if kernel.endswith("matmul") and cublas_ms and v.get("candidate_kernel_ms"):
                reference = f"{100 * cublas_ms / v['candidate_kernel_ms']:.0f}% of cuBLAS"
            else:
                gbps = winner_dram_gbps(summary)
                reference = f"{100 * gbps / copy_gbps:.0f}% of copy bw" if gbps and copy_gbps else "-"
            row = {"kernel": kernel, "cache": temperature, "status": summary.get("status"), "gpu": summary.get("gpu"),
                   "baseline_ms": v.get("baseline_kernel_ms"), "accepted_ms": v.get("candidate_kernel_ms"),
                   "speedup": v.get("speedup"), "reference": reference, "iterations": summary.get("iterations"),
                   "wall_s": round(wall, 1), "loop_s": summary.get("loop_time_seconds"),
                   "mcp_start_s": summary.get("mcp_start_seconds"), "split_s": split, "overhead_per_iteration_s": round(overhead, 2),
                   "approach": next((a["approach"] for a in summary.get("attempts", []) if a["outcome"] == "accepted"), None),
                   "error": summary.get("error")}
            rows.append(row)
            if temperature == "cold":
                scored.append(score_summary(summary, kernel=kernel))
            print(json.dumps(row), flush=True)
    print()
    print(f"GPU: {rows[0]['gpu'] if rows else '?'}")
    print("| kernel | cache | status | baseline ms | accepted ms | speedup | reference | iterations | wall s | loop s | "
          "MCP start s | profile / research / optimize / check / verify / re-profile s | overhead per iteration s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["split_s"]
        phases = " / ".join(f"{s.get(p, 0.0):.1f}" for p in ("profile", "research", "optimize", "check", "verify", "reprofile"))
        print(f"| {r['kernel']} | {r['cache']} | {r['status']} | {r['baseline_ms']} | {r['accepted_ms']} | "
              f"{r['speedup']}x | {r['reference']} | {r['iterations']} | {r['wall_s']} | {r['loop_s']} | "
              f"{r['mcp_start_s']} | {phases} | "
              f"{r['overhead_per_iteration_s']} |")
    score = suite_score(scored)
    print()
    print("Suite score:")
    print(score_markdown(score))
    if args.json:
        args.json.write_text(json.dumps({"copy_gbps": copy_gbps, "cublas_ms": cublas_ms, "rows": rows,
                                         "suite_score": score.model_dump(mode="json")}, indent=2))


if __name__ == "__main__":
    main()
