"""The folder a run leaves behind: `runs/<kernel>/<run id>/` (the run id starts with its timestamp).

    baseline.cu                 the program as it was when the run started
    profile-baseline.json       the baseline's profile and diagnosis
    research.json               the passages the researcher found
    iter-01/                    one folder per iteration (round)
        candidate.cu            the candidate as a whole program (builds and runs on its own)
        candidate.diff          unified diff against the baseline
        prompt.md, response.md  what the LLM optimizer was sent and answered (LLM optimizers)
        proposal.json           the optimizer's label, notes, tokens and time
        compile.log             the static check: policy and nvcc
        verdict.json            the verify gate's verdict
        fix-1/ ...              the inner compile-fix loop's tries, same files (the verdict sits with the try it judged)
    best.cu, certificate.json   the accepted kernel and its proof certificate
    profile-best.json           the winner's profile
    report.md, summary.json     what happened, for people and for machines
"""

from __future__ import annotations

import difflib
import json
import secrets
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..optimizers.base import Proposal


def new_run_id(now: datetime | None = None) -> str:
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(2)}"


def kernel_name(path: Path) -> str:
    """The program's name as one folder name under runs_dir (`...cu` has the stem `..`: red team round 85)."""
    stem = path.stem
    return "kernel" if stem in ("", ".", "..") else stem


def unified_diff(before: str, after: str, before_name: str = "baseline.cu", after_name: str = "candidate.cu") -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=before_name, tofile=after_name))


def _render_messages(proposal: Proposal) -> str:
    return "\n\n".join(f"## {m.role}\n\n{m.content}" for m in proposal.prompt)


class RunArtifacts:
    """Writes one run's files. Every write goes through here, so the layout is documented once."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def prepare(self, baseline_text: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "baseline.cu").write_text(baseline_text)
        (self.root / "baseline.cu").chmod(0o444)  # the reference of every round and of a resume

    @property
    def baseline_path(self) -> Path:
        return self.root / "baseline.cu"

    def write_json(self, name: str, data: BaseModel | dict[str, Any] | list[Any]) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = data.model_dump_json(indent=2) if isinstance(data, BaseModel) else json.dumps(data, indent=2)
        path.write_text(text + "\n")
        return path

    def write_text(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def attempt_dir(self, iteration: int, fix: int) -> str:
        base = f"iter-{iteration:02d}"
        return base if fix == 0 else f"{base}/fix-{fix}"

    def write_proposal(self, iteration: int, fix: int, proposal: Proposal, program: str, baseline: str) -> str:
        where = self.attempt_dir(iteration, fix)
        self.write_text(f"{where}/candidate.cu", program)
        self.write_text(f"{where}/candidate.diff", unified_diff(baseline, program))
        if proposal.prompt:
            self.write_text(f"{where}/prompt.md", _render_messages(proposal))
        if proposal.response:
            self.write_text(f"{where}/response.md", proposal.response)
        self.write_json(f"{where}/proposal.json", proposal.model_dump(mode="json", exclude={"source", "prompt", "response"}))
        return where
