"""The run log: every `kernelloop optimize` run and every attempt, in one SQLite file.

`<data dir>/runs.sqlite` (platformdirs' user data directory, or KERNELLOOP_DATA_DIR).
`kernelloop runs list|show` read it; the optimizer's prompt reads a kernel's past attempts
from it (memory across runs). A kernel is known by the SHA-256 of its baseline program;
attempts on an earlier version of the same file name are remembered too, marked as such.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import InputError, KernelloopError

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    kernel TEXT NOT NULL,
    kernel_path TEXT NOT NULL,
    kernel_sha256 TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL,
    optimizer TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    iterations INTEGER NOT NULL DEFAULT 0,
    best_speedup REAL,
    gpu TEXT NOT NULL DEFAULT '',
    run_dir TEXT NOT NULL,
    options_json TEXT NOT NULL DEFAULT '{}',
    summary_json TEXT NOT NULL DEFAULT '{}',
    reason TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS attempts (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    iteration INTEGER NOT NULL,
    approach TEXT NOT NULL,
    optimizer TEXT NOT NULL,
    accepted INTEGER NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT NOT NULL,
    speedup REAL,
    kernel TEXT NOT NULL,
    kernel_sha256 TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS attempts_by_kernel ON attempts(kernel_sha256, kernel);
"""


class RunRecord(BaseModel):
    run_id: str
    kernel: str
    kernel_path: str
    kernel_sha256: str
    started_at: str
    finished_at: str | None = None
    status: str  # running | accepted | exhausted | error | interrupted
    optimizer: str
    model: str = ""
    iterations: int = 0
    best_speedup: float | None = None
    gpu: str = ""
    run_dir: str
    options: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    reason: str = ""  # why a run ended in error or was interrupted, one line ("" otherwise)


class AttemptRecord(BaseModel):
    run_id: str
    iteration: int
    approach: str
    optimizer: str
    accepted: bool
    kind: str  # "accepted", or the failure kind
    reason: str
    speedup: float | None = None
    kernel: str
    kernel_sha256: str
    created_at: str = ""
    same_program: bool = True  # False: an earlier version of a file with this name


def failure_reason(exc: BaseException) -> str:
    """Why a run failed, in one line for the run log."""
    text = " ".join(str(exc).split())
    if isinstance(exc, KernelloopError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class RunStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.path, timeout=30)
            conn.row_factory = sqlite3.Row
        except sqlite3.Error as exc:
            raise self._unusable(exc) from exc
        try:
            with conn:  # one transaction: committed on success, rolled back on error
                try:
                    conn.executescript(SCHEMA)
                    columns = {row["name"] for row in conn.execute("PRAGMA table_info(runs)")}
                    if "reason" not in columns:  # a run log written before runs had a reason
                        conn.execute("ALTER TABLE runs ADD COLUMN reason TEXT NOT NULL DEFAULT ''")
                except sqlite3.OperationalError as exc:  # a folder that exists but cannot be written (a read-only mount)
                    raise self._unusable(exc) from exc
                yield conn
        finally:
            conn.close()

    def _unusable(self, exc: sqlite3.Error) -> InputError:
        return InputError(f"cannot use the run log {self.path} ({exc}): point KERNELLOOP_DATA_DIR (or data_dir in "
                          "kernelloop.toml) at a folder you can write")

    def start_run(self, record: RunRecord) -> None:
        with self._connect() as c:
            c.execute("INSERT OR REPLACE INTO runs (run_id, kernel, kernel_path, kernel_sha256, started_at, finished_at,"
                      " status, optimizer, model, iterations, best_speedup, gpu, run_dir, options_json, summary_json,"
                      " reason) VALUES (:run_id, :kernel, :kernel_path, :kernel_sha256, :started_at,"
                      " :finished_at, :status, :optimizer, :model, :iterations, :best_speedup, :gpu, :run_dir,"
                      " :options_json, :summary_json, :reason)",
                      {**record.model_dump(exclude={"options", "summary"}),
                       "options_json": json.dumps(record.options), "summary_json": json.dumps(record.summary)})

    def update_run(self, run_id: str, **fields: Any) -> None:
        allowed = {"finished_at", "status", "iterations", "best_speedup", "gpu", "summary", "model", "reason"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"run fields cannot be updated: {sorted(unknown)}")
        columns = {("summary_json" if k == "summary" else k): (json.dumps(v) if k == "summary" else v)
                   for k, v in fields.items()}
        sets = ", ".join(f"{k} = :{k}" for k in columns)
        with self._connect() as c:
            c.execute(f"UPDATE runs SET {sets} WHERE run_id = :run_id", {**columns, "run_id": run_id})

    def add_attempt(self, attempt: AttemptRecord) -> None:
        with self._connect() as c:
            c.execute("INSERT INTO attempts VALUES (:run_id, :iteration, :approach, :optimizer, :accepted, :kind,"
                      " :reason, :speedup, :kernel, :kernel_sha256, :created_at)",
                      attempt.model_dump(exclude={"same_program"}) | {"created_at": attempt.created_at or now()})

    def list_runs(self, *, kernel: str | None = None, limit: int = 20) -> list[RunRecord]:
        query = "SELECT * FROM runs" + (" WHERE kernel = ?" if kernel else "") + " ORDER BY started_at DESC, rowid DESC LIMIT ?"
        with self._connect() as c:
            rows = c.execute(query, ((kernel,) if kernel else ()) + (limit,)).fetchall()
        return [_run(r) for r in rows]

    def get_run(self, run_id: str) -> RunRecord:
        with self._connect() as c:
            row = c.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:  # a unique prefix is enough
                found = c.execute("SELECT * FROM runs WHERE run_id LIKE ? ESCAPE '\\'",
                                  (run_id.replace("%", "\\%").replace("_", "\\_") + "%",)).fetchall()
                if len(found) == 1:
                    row = found[0]
                elif len(found) > 1:
                    raise InputError(f"run id {run_id!r} is ambiguous ({len(found)} runs); give more of it")
        if row is None:
            raise InputError(f"no run {run_id!r} in {self.path}; `kernelloop runs list` shows the runs")
        return _run(row)

    def attempts(self, run_id: str) -> list[AttemptRecord]:
        with self._connect() as c:
            rows = c.execute("SELECT * FROM attempts WHERE run_id = ? ORDER BY iteration, rowid", (run_id,)).fetchall()
        return [AttemptRecord(**{**dict(r), "accepted": bool(r["accepted"])}) for r in rows]

    def memory(self, kernel: str, kernel_sha256: str, *, limit: int, exclude_run: str | None = None) -> list[AttemptRecord]:
        """Past attempts on this program (or an earlier version of the same file name), newest first."""
        if limit <= 0:
            return []
        with self._connect() as c:
            rows = c.execute(
                "SELECT * FROM attempts WHERE (kernel_sha256 = ? OR kernel = ?) AND run_id != ?"
                " ORDER BY (kernel_sha256 = ?) DESC, created_at DESC, rowid DESC LIMIT ?",
                (kernel_sha256, kernel, exclude_run or "", kernel_sha256, limit)).fetchall()
        return [AttemptRecord(**{**dict(r), "accepted": bool(r["accepted"]),
                                 "same_program": r["kernel_sha256"] == kernel_sha256}) for r in rows]


def run_store(settings: Any) -> RunStore:
    """The run log of these settings (`<data dir>/runs.sqlite`). Light: reading the run log never
    loads the agent loop."""
    return RunStore(settings.data_dir / "runs.sqlite")


def _run(row: sqlite3.Row) -> RunRecord:
    data = dict(row)
    data["options"] = json.loads(data.pop("options_json") or "{}")
    data["summary"] = json.loads(data.pop("summary_json") or "{}")
    return RunRecord(**data)
