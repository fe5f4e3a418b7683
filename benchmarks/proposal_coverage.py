"""Which programs of a kept-aside set the offline optimizer makes an attempt on, without a GPU (a
script that prints figures, not a test).

For each program of a set folder's specs.json: `kernelloop init FILE -o OUT <its init options>` as
the set's author ran it, then the offline optimizer's `propose` until it has nothing more (or
`--most` proposals), with no diagnosis and every earlier proposal reported as failed, so each tier
and template it would try shows once. Prints one line per program: its expectation (headroom or
negative control), init's outcome, the approaches proposed, or the optimizer's one-line reason for
making none; then the share of programs with headroom that get at least one attempt. An attempt is
not an acceptance: the GPU decides that (benchmarks/kept_aside.py).

    python3 benchmarks/proposal_coverage.py --set tests/fixtures/kept_aside_21 [--only NAME ...] [--most 6]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

from kernelloop.optimizers.base import FailedAttempt, NoMoreCandidates, OptimizeRequest
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.program.split import split_program


def _init(folder: Path, name: str, entry: dict, out: Path) -> str:
    words = shlex.split(entry["init_command"])
    options = words[words.index("-o") + 2:]
    done = subprocess.run([sys.executable, "-m", "kernelloop", "init", str(folder / name), "-o", str(out), *options],
                          capture_output=True, text=True, timeout=600)
    return "ok" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["failed"])[-1][:200]


def proposals(program: str, kernel: str, most: int, cache: Path) -> tuple[list[str], str]:
    """The approaches proposed in turn, each reported as failed before the next; and why it stopped."""
    split = split_program(program, kernel)
    optimizer = OfflineOptimizer(cache_dir=cache)
    failed: list[FailedAttempt] = []
    labels: list[str] = []
    for iteration in range(1, most + 1):
        request = OptimizeRequest(kernel_name=kernel, program=program, baseline_editable=split.editable,
                                  current_editable=split.editable, preamble=split.preamble, harness=split.harness,
                                  exported=split.exported, arch="sm_90", gpu_name="NVIDIA H100 80GB HBM3",
                                  iteration=iteration, failed_attempts=failed)
        try:
            proposal = optimizer.propose(request)
        except NoMoreCandidates as exc:
            return labels, str(exc)
        labels.append(proposal.approach)
        failed.append(FailedAttempt(iteration=iteration, approach=proposal.approach, kind="not_faster",
                                    reason="reported as failed to see the next proposal", source=proposal.source))
    return labels, f"stopped after {most} proposals"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, required=True)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--most", type=int, default=6, help="proposals asked for per program")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    specs = json.loads((args.set / "specs.json").read_text())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in args.only or list(specs):
            entry = specs[name]
            out = work / f"{Path(name).stem}_kl.cu"
            row = {"program": name, "expect": entry.get("expect", ""), "init": _init(args.set, name, entry, out)}
            if row["init"] == "ok":
                program = out.read_text()
                kernel = Path(name).stem
                try:
                    row["proposals"], row["stopped"] = proposals(program, kernel, args.most, work / "cache")
                except Exception:  # a defect of the optimizer: said, and the other programs still measured
                    row["proposals"], row["stopped"] = [], "CRASH " + traceback.format_exc()
            rows.append(row)
            attempts = ", ".join(row.get("proposals") or []) or "none"
            print(f"{name:44s} {row['expect']:9s} init {row['init'][:60]:10s} attempts: {attempts}", flush=True)
            if not row.get("proposals"):
                print(f"    {row.get('stopped', '')[:4000]}", flush=True)
    headroom = [r for r in rows if r["expect"] == "headroom"]
    negative = [r for r in rows if r["expect"] == "negative"]
    print(f"attempted: {sum(bool(r.get('proposals')) for r in headroom)} of {len(headroom)} with headroom, "
          f"{sum(bool(r.get('proposals')) for r in negative)} of {len(negative)} negative controls")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
