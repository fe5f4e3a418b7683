"""`kernelloop bench check` of the bundled suite through the engines on this machine's GPUs (a script
that prints figures, not a test; the issue "The suite across several GPUs of one host").

On a copy of kernels/ (its references), three checks, each with a cold build cache:

1. `--engine local` on GPU 0 alone (CUDA_VISIBLE_DEVICES=0): the verdicts every other run must give;
2. `--engine ray` on a Ray that kernelloop starts over GPU 1 alone (CUDA_VISIBLE_DEVICES=1), at the
   same time as 1 (each on its own GPU, so neither times the other's work): Ray on one GPU;
3. `--engine ray` on a Ray over every GPU of the machine: the suite spread over N GPUs.

Prints each run's wall time and exit code, each kernel's verdict per run (and whether they are the
same), the per-job overhead of Ray on one GPU against the local engine, the speedup of N GPUs over
one, and whether any two jobs ran on one GPU at overlapping times (from each job's own record of
the physical GPU, by uuid, and its start and end in the worker: kernelloop.engine.jobs_sharing_a_gpu).

    python3 benchmarks/engine_gpus.py [--kernels a b ...] [--json out.json] [--memcheck off]
    python3 benchmarks/engine_gpus.py --kernels a b ... --one-gpu-runs out.json   # the N-GPU run alone
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.engine import Placement, jobs_sharing_a_gpu  # noqa: E402
from kernelloop.tools.gpu import detect_gpus  # noqa: E402


def start_check(project: Path, engine: str, gpus: str | None, memcheck: str, names: list[str]) -> tuple:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "KERNELLOOP_ENGINE")}
    env.update(KERNELLOOP_CACHE_DIR=tempfile.mkdtemp(prefix=f"kl-cache-{engine}-"), KERNELLOOP_VERIFY_MEMCHECK=memcheck)
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    else:
        env.pop("CUDA_VISIBLE_DEVICES", None)
    argv = [sys.executable, "-m", "kernelloop", "bench", "check", *names, "--json", "--engine", engine]
    if engine == "ray":
        argv.append("--any-gpu-model")  # the references were recorded on another model; each check reruns them here
    return subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), \
        time.monotonic()


def finish(started: tuple) -> dict:
    proc, t0 = started
    out, err = proc.communicate()
    wall = time.monotonic() - t0
    try:
        parsed = json.loads(out)
    except json.JSONDecodeError:
        parsed = {"kernels": []}
    return {"exit": proc.returncode, "wall_s": wall, "result": parsed, "stderr": err.strip()[-600:]}


def show(runs: dict, json_path: Path | None, everything: dict | None = None) -> None:
    """Each run's figures as soon as it ends (a run cut short by a time limit still leaves the others)."""
    for label, run in runs.items():
        print(f"\n{label}: exit {run['exit']}, {run['wall_s']:.1f} s" + (f"  ({run['stderr']})" if run["exit"] not in
                                                                         (0, 1, 3) else ""))
        for k in run["result"].get("kernels", []):
            where = f" on {Placement(**k['ran_on']).describe()}" if k.get("ran_on") else ""
            print(f"  {k['name']:<14} {k['status']:<8} {k['wall_s']:6.1f} s{where}  {k['summary'][:110]}")
    sys.stdout.flush()
    if json_path is not None:
        json_path.write_text(json.dumps({"runs": everything or runs}, indent=1))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", nargs="*", default=[])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--memcheck", default="off", help="KERNELLOOP_VERIFY_MEMCHECK for every check (default off)")
    ap.add_argument("--one-gpu-runs", type=Path, default=None,
                    help="the --json of an earlier call cut short after its one-GPU runs: take those from it and "
                         "run only the N-GPU check (a suite too long for one call of the lent machine)")
    args = ap.parse_args()
    gpus = detect_gpus()
    if len(gpus) < 2:
        print(f"needs 2 or more GPUs, sees {len(gpus)}")
        return 2
    print(f"GPUs: {len(gpus)} x {gpus[0].name}, driver {gpus[0].driver_version}", flush=True)
    many_label = f"ray, {len(gpus)} GPUs"
    with tempfile.TemporaryDirectory(prefix="kl-engines-") as tmp:
        project = Path(tmp) / "kernels"
        shutil.copytree(ROOT / "kernels", project)
        if args.one_gpu_runs is not None:
            runs = {label: run for label, run in json.loads(args.one_gpu_runs.read_text())["runs"].items()
                    if label in ("local, GPU 0", "ray, GPU 1")}
            print(f"the one-GPU runs from {args.one_gpu_runs}", flush=True)
        else:
            runs = {}
            local, ray_one = (start_check(project, "local", "0", args.memcheck, args.kernels),
                              start_check(project, "ray", "1", args.memcheck, args.kernels))
            runs["local, GPU 0"], runs["ray, GPU 1"] = finish(local), finish(ray_one)
        show(runs, args.json)
        runs[many_label] = finish(start_check(project, "ray", None, args.memcheck, args.kernels))
        show({many_label: runs[many_label]}, args.json, runs)

    verdicts = {label: {k["name"]: k["status"] for k in run["result"].get("kernels", [])} for label, run in runs.items()}
    reference = verdicts["local, GPU 0"]
    same = all(v == reference for v in verdicts.values()) and bool(reference)
    print(f"\nverdicts identical in all three runs: {same}")
    n = len(reference) or 1
    local_wall, one, many = (runs[k]["wall_s"] for k in ("local, GPU 0", "ray, GPU 1", many_label))
    print(f"per-job overhead of Ray on one GPU vs local: {(one - local_wall) / n:+.2f} s "
          f"(command walls {one:.1f} s vs {local_wall:.1f} s over {n} kernels)")
    in_worker = [k["ran_on"]["ended_at"] - k["ran_on"]["started_at"] - k["wall_s"]
                 for label in ("ray, GPU 1", many_label) for k in runs[label]["result"].get("kernels", [])
                 if k.get("ran_on") and k["ran_on"].get("ended_at")]
    if in_worker:
        print(f"  inside the workers, beyond the checks themselves: median {sorted(in_worker)[len(in_worker) // 2]:.2f} s")
    print(f"suite wall: 1 GPU {one:.1f} s, {len(gpus)} GPUs {many:.1f} s: {one / many:.2f}x")
    placements = {f"{label}/{k['name']}": Placement(**k["ran_on"]) for label in ("ray, GPU 1", many_label)
                  for k in runs[label]["result"].get("kernels", []) if k.get("ran_on")}
    shared = jobs_sharing_a_gpu({k: p for k, p in placements.items() if k.startswith(many_label)})
    used = sorted({p.gpu_uuid or str(p.gpu_index) for k, p in placements.items() if k.startswith(many_label)})
    print(f"jobs of the {len(gpus)}-GPU run on {len(used)} GPUs ({', '.join(u[-8:] for u in used)}); "
          f"pairs that ran on one GPU at overlapping times: {shared or 'none'}")
    for key, p in sorted(placements.items(), key=lambda kv: kv[1].started_at):
        print(f"  {key:<36} {p.gpu_uuid[-8:] or p.gpu_index} pid {p.pid} {p.started_at:.1f} -> {p.ended_at:.1f}")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "verdicts_identical": same, "shared": shared}, indent=1))
    return 0 if same and not shared else 1


if __name__ == "__main__":
    sys.exit(main())
