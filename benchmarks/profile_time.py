"""Benchmark of `kernelloop profile` (a script that prints figures, not a test).

Wall time of profiling kernels/naive_matmul.cu, split into compile, finding the hot kernel
(one traced run), ncu and parsing, for the full and the fast section set, cold (empty
cache) and warm. Goal: <= 10 s in total with the default (full) set; parsing <= 0.5 s.

    python3 benchmarks/profile_time.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.config import Settings  # noqa: E402
from kernelloop.profiler.run import profile_file  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(cache_dir=Path(tmp) / "cache", data_dir=Path(tmp) / "data")
        print(f"{'set':5} {'cache':5} {'total s':>8} {'compile':>8} {'locate':>8} {'ncu':>8} {'parse':>8}  verdict")
        for section_set, cache in (("full", "cold"), ("full", "warm"), ("fast", "warm")):
            r = profile_file(ROOT / "kernels" / "naive_matmul.cu", settings, section_set=section_set)  # type: ignore[arg-type]
            t = r.timings
            rows.append({"set": section_set, "cache": cache, **t.model_dump(), "verdict": r.diagnosis.subtype,
                         "device": r.diagnosis.device})
            print(f"{section_set:5} {cache:5} {t.total_s:8.2f} {t.compile_s:8.2f} {t.locate_s:8.2f} {t.ncu_s:8.2f} "
                  f"{t.parse_s:8.2f}  {r.diagnosis.subtype} ({r.diagnosis.device})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
