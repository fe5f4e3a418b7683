"""ptxas resource reports of candidates, cached in memory and on disk.

A candidate's translation unit (the frozen preamble + its editable part) is compiled for the
target arch with `--cubin` (device code only: half the time of a full object) and `-Xptxas
-v`; the registers, shared memory and spills of its kernels feed the cost model, and a
candidate that does not compile or spills is never proposed. Results are keyed by a hash of
the arch, nvcc's version and the unit's text, so a run repeats no compile of an earlier run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


from ...config import default_cache_dir
from ...errors import EnvironmentProblem, InputError
from ...tools.nvcc import find_toolchain
from ...tools.resources import KernelResources, kernel_resources

PROBE_VERSION = "1"  # bump when what is stored changes


@dataclass
class ProbeResult:
    ok: bool  # compiled
    error: str = ""  # first compiler error when not
    kernels: list[KernelResources] = field(default_factory=list)
    cached: bool = False


class ResourceProbe:
    def __init__(self, cache_dir: Path | None = None) -> None:
        self.dir = (cache_dir or default_cache_dir()) / "offline-ptxas"
        self.memory: dict[str, ProbeResult] = {}
        self.unavailable: str | None = None  # why probing is impossible (no nvcc)

    def check(self, unit: str, arch: str) -> ProbeResult | None:
        """The report for `unit`, or None when nvcc is not available."""
        try:
            toolchain = find_toolchain()
        except EnvironmentProblem as exc:
            self.unavailable = str(exc)
            return None
        key = hashlib.sha256(f"{PROBE_VERSION}\0{arch}\0{toolchain.version}\0{unit}".encode()).hexdigest()
        if key in self.memory:
            return self.memory[key]
        result = self._load(key)
        if result is None:
            try:
                kernels = kernel_resources(unit, arch=arch, toolchain=toolchain, extra_flags=["--cubin"])
                result = ProbeResult(ok=True, kernels=kernels)
            except InputError as exc:
                result = ProbeResult(ok=False, error=str(exc))
            self._store(key, result)
        self.memory[key] = result
        return result

    def _load(self, key: str) -> ProbeResult | None:
        path = self.dir / f"{key}.json"
        try:
            data = json.loads(path.read_text())
            return ProbeResult(ok=data["ok"], error=data["error"],
                               kernels=[KernelResources(**k) for k in data["kernels"]], cached=True)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _store(self, key: str, result: ProbeResult) -> None:
        data = {"ok": result.ok, "error": result.error, "kernels": [k.model_dump() for k in result.kernels]}
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.dir, delete=False, suffix=".tmp") as tmp:
                json.dump(data, tmp)
            os.replace(tmp.name, self.dir / f"{key}.json")
        except OSError:
            pass  # an unwritable cache only costs a recompile next time
