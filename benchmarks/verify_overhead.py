"""Benchmark of `kernelloop verify` (a script that prints figures, not a test).

1. Wall time of verifying kernels/naive_matmul.cu against the tiled candidate, split into
   compile, program runs and verifier overhead (everything else: policy scans, audit,
   statistics, process set-up). Goal: overhead <= 1 s. Run cold (empty build cache) and warm.
2. A/A: naive_matmul against itself, repeated; the spread of the reported speedup.
   Goal: 1.00 +/- 0.02, never accepted.
3. A true 1.25x control (tests/fixtures/controls: the same kernel launched 5 times against 4
   times, identical numerics), repeated. Goal: accepted every time at the default 1.2x bar.

    python3 benchmarks/verify_overhead.py [--aa-repeats 20] [--control-repeats 20] [--skip-overhead] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.config import Settings, VerifySettings  # noqa: E402
from kernelloop.verify.gate import verify_files  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--aa-repeats", type=int, default=20)
    ap.add_argument("--control-repeats", type=int, default=20)
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    naive = ROOT / "kernels" / "naive_matmul.cu"
    tiled = ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu"
    results: dict = {"verify": [], "aa": [], "control": []}
    with tempfile.TemporaryDirectory() as cache:
        settings = Settings(cache_dir=Path(cache))
        if not args.skip_overhead:
            print(f"{'run':6} {'total s':>8} {'compile':>8} {'runs':>8} {'overhead':>9} {'speedup':>8}  verdict")
        for label in () if args.skip_overhead else ("cold", "warm"):
            t = time.monotonic()
            v = verify_files(naive, tiled, settings)
            wall = time.monotonic() - t
            d = v.durations
            results["verify"].append({"run": label, "wall_s": wall, **d.model_dump(), "overhead_s": d.overhead_s,
                                      "speedup": v.speed.speedup if v.speed else None, "gpu": v.gpu.name})
            print(f"{label:6} {wall:8.2f} {d.compile_s:8.2f} {d.program_runs_s:8.2f} {d.overhead_s:9.2f} "
                  f"{v.speed.speedup if v.speed else float('nan'):8.2f}  {v.summary[:60]}")
        aa_settings = Settings(cache_dir=Path(cache), verify=VerifySettings(memcheck="off", seeds=1))
        speedups = []
        for i in range(args.aa_repeats):
            v = verify_files(naive, naive, aa_settings)
            speedups.append(v.speed.speedup)
            results["aa"].append({"speedup": v.speed.speedup, "accepted": v.accepted, "lower": v.speed.lower,
                                  "upper": v.speed.upper})
            print(f"A/A {i + 1}: {v.speed.speedup:.4f} ({v.speed.lower:.4f}-{v.speed.upper:.4f}) "
                  f"{'ACCEPTED' if v.accepted else 'rejected'}", flush=True)
        if speedups:
            print(f"A/A over {len(speedups)} verifications on {v.gpu.name}: median {statistics.median(speedups):.4f}, "
                  f"min {min(speedups):.4f}, max {max(speedups):.4f}, stdev {statistics.pstdev(speedups):.4f}; "
                  f"accepted {sum(r['accepted'] for r in results['aa'])} of {len(speedups)}")
        controls = ROOT / "tests" / "fixtures" / "controls"
        control_speedups = []
        for i in range(args.control_repeats):
            v = verify_files(controls / "repeat5_matmul.cu", controls / "repeat4.cu", aa_settings)
            control_speedups.append(v.speed.speedup if v.speed else float("nan"))
            results["control"].append({"speedup": control_speedups[-1], "accepted": v.accepted, "summary": v.summary})
            print(f"control {i + 1}: {control_speedups[-1]:.4f} {v.summary[:90]}", flush=True)
        if control_speedups:
            print(f"true 1.25x control over {len(control_speedups)} verifications on {v.gpu.name}: median "
                  f"{statistics.median(control_speedups):.4f}, min {min(control_speedups):.4f}, "
                  f"max {max(control_speedups):.4f}; accepted {sum(r['accepted'] for r in results['control'])} "
                  f"of {len(control_speedups)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
