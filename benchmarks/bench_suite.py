"""`kernelloop bench` on the bundled suite (kernels/kernelloop.toml): figures for docs/bench.md.

Works on a copy of kernels/ (the tree is never touched). Prints, per `bench check`, its exit
code, wall time and each kernel's verdict with its figures.

    python3 benchmarks/bench_suite.py --record            # record the six references (copied back with --keep)
    python3 benchmarks/bench_suite.py --repeats 3         # the unchanged suite, three times: all SAME, exit 0
    python3 benchmarks/bench_suite.py --regressions       # row_softmax launched twice, transpose off by 1 %: exit 1

--kernels limits the suite; --keep DIR copies the references the run recorded to DIR; --html-dir DIR
writes each check's HTML report there.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def kernelloop(project: Path, *args: str) -> tuple[int, dict | list | None, float, str]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kernelloop", *args, "--json"], cwd=project, capture_output=True,
                          text=True)
    wall = time.monotonic() - started
    try:
        parsed = json.loads(done.stdout)
    except json.JSONDecodeError:
        parsed = None
    return done.returncode, parsed, wall, done.stderr.strip()[-400:]


def report_check(label: str, project: Path, names: list[str], html: Path | None = None) -> int:
    code, result, wall, stderr = kernelloop(project, "bench", "check", *names,
                                            *(["--html", str(html.resolve())] if html else []))
    print(f"\n{label}: exit {code}, {wall:.0f} s wall")
    if not isinstance(result, dict):
        print(f"  no result: {stderr}")
        return code
    for k in result["kernels"]:
        d = k.get("decision")
        figures = (f"ratio {d['ratio']:.3f} [{d['lower']:.3f}, {d['upper']:.3f}] {d['pairs']} pairs; reference "
                   f"{d['reference']['median']:.4f} ms (IQR {d['reference']['relative_iqr']:.2%}), current "
                   f"{d['current']['median']:.4f} ms" if d else k["summary"][:160])
        print(f"  {k['name']:14s} {k['status'].upper():9s} {k['wall_s']:5.0f} s  {figures}")
    return code


def break_two(project: Path) -> None:
    """row_softmax launched twice (same results, twice the work); transpose's results off by 1 %."""
    softmax = project / "row_softmax.cu"
    launch = "naive_softmax_kernel<<<grid, block>>>(in, out, rows, cols);"
    softmax.write_text(softmax.read_text().replace(launch, launch + "\n  " + launch))
    transpose = project / "transpose.cu"
    store = "out[(size_t)col * rows + row] = in[(size_t)row * cols + col];"
    transpose.write_text(transpose.read_text().replace(store, store.replace("];", "] * 1.01f;")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record", action="store_true", help="record the references first")
    parser.add_argument("--repeats", type=int, default=0, help="checks of the unchanged suite")
    parser.add_argument("--regressions", action="store_true", help="then a check with one slowed and one wrong kernel")
    parser.add_argument("--kernels", nargs="*", default=[], help="only these kernels of the suite")
    parser.add_argument("--keep", type=Path, help="copy the recorded references here")
    parser.add_argument("--html-dir", type=Path, help="write each check's HTML report here (check-1.html, ...)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kernelloop-bench-") as tmp:
        project = Path(tmp) / "kernels"
        shutil.copytree(ROOT / "kernels", project)
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
        print(f"GPU: {gpu}")
        if args.record:
            code, result, wall, stderr = kernelloop(project, "bench", "record", *args.kernels)
            print(f"\nrecord: exit {code}, {wall:.0f} s wall")
            for r in result or []:
                ref = r["reference"]
                print(f"  {ref['kernel']:14s} {ref['kernel_ms']['median']:.4f} ms (IQR {ref['kernel_ms']['relative_iqr']:.2%}),"
                      f" self-check {ref['self_check']['outcome'].upper() if ref['self_check'] else '-'}"
                      + (f"; {'; '.join(r['notes'])}" if r["notes"] else ""))
            if code:
                print(f"  {stderr}")
                return code
            if args.keep:
                shutil.copytree(project / "bench-references", args.keep, dirs_exist_ok=True)
        if args.html_dir:
            args.html_dir.mkdir(parents=True, exist_ok=True)
        for repeat in range(args.repeats):
            report_check(f"unchanged suite, check {repeat + 1} of {args.repeats}", project, args.kernels,
                         args.html_dir / f"check-{repeat + 1}.html" if args.html_dir else None)
        if args.regressions:
            break_two(project)
            report_check("row_softmax slowed, transpose wrong", project, args.kernels,
                         args.html_dir / "check-regressions.html" if args.html_dir else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
