"""One red-team pair through the whole verifier on the GPU, its verdict printed gate by gate (memcheck off: the
rounds' GPU tests judge the other gates)."""

from __future__ import annotations

from pathlib import Path

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Verdict


def verify_shown(base: Path, cand: Path, tmp_path: Path) -> Verdict:
    v = verify_files(base, cand, Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n" + "\n".join(f"{g.gate}: {g.status}: {g.detail}" for g in v.gates))
    return v
