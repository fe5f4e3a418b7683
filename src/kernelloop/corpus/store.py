"""The index: one SQLite file, `<data_dir>/corpus/index.sqlite3`.

Tables: `meta` (schema version, bundled hash, build time, a generation counter bumped by
every write), `documents`, `chunks` (text shown + text indexed, one row per section), and
`embeddings` (dense vectors keyed by the chunk text's hash and the model, float32 BLOBs;
present only once dense retrieval has run).

Every write is one `BEGIN IMMEDIATE ... COMMIT` transaction: SQLite's rollback journal
makes it atomic, so a crash (or a kill) mid-write leaves the previous index intact.
A file that is not a database, or is corrupt, or comes from an incompatible version, is
moved aside as `index.sqlite3.corrupt-<timestamp>` and the bundled part rebuilt; the user
documents are re-indexed from `user_sources.json` (a list of the paths added, rewritten
atomically after each add/remove) where the files still exist. Where the folder cannot be
written at all, an in-memory index serves the bundled corpus. Each of these leaves a
warning for CorpusStats / AddReport, never an exception.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..config import Settings
from ..errors import EnvironmentProblem
from . import ingest
from .ingest import Document, Skip

SCHEMA_VERSION = "1"
INDEX_NAME = "index.sqlite3"
MANIFEST_NAME = "user_sources.json"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  doc_id TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL CHECK (kind IN ('note', 'exemplar', 'user')),
  title TEXT NOT NULL,
  source TEXT NOT NULL,
  tags TEXT NOT NULL DEFAULT '[]',
  rules TEXT NOT NULL DEFAULT '[]',
  content_hash TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  added_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  doc INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  ord INTEGER NOT NULL,
  heading TEXT NOT NULL,
  text TEXT NOT NULL,
  index_text TEXT NOT NULL,
  text_hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc);
CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(text_hash);
CREATE TABLE IF NOT EXISTS embeddings (
  text_hash TEXT NOT NULL,
  model TEXT NOT NULL,
  dim INTEGER NOT NULL,
  vector BLOB NOT NULL,
  PRIMARY KEY (text_hash, model)
) WITHOUT ROWID;
"""

# SQLite primary result codes
_CORRUPT = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_BUSY = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_UNWRITABLE = {3, 8, 10, 13, 14}  # PERM, READONLY, IOERR, FULL, CANTOPEN


class Incompatible(Exception):
    """The file is a SQLite database, but not an index this version can use."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def index_path(settings: Settings) -> Path:
    return Path(settings.data_dir) / "corpus" / INDEX_NAME


def _code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    msg = str(exc).lower()
    if "not a database" in msg:
        return 26
    if "malformed" in msg or "corrupt" in msg:
        return 11
    if "locked" in msg or "busy" in msg:
        return 5
    if "readonly" in msg or "read-only" in msg or "unable to open" in msg or "disk i/o" in msg:
        return 8
    return None


def _connect(path: Path | str) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


@contextmanager
def write_txn(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One atomic write; bumps the generation so every process's caches see the change."""
    with _immediate(conn):
        yield conn
        conn.execute("UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'generation'")


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception (the previous state stays whole)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        raise


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                 (key, value))


def _init_schema(conn: sqlite3.Connection) -> None:
    try:
        version = get_meta(conn, "schema_version")
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        version = None
    if version == SCHEMA_VERSION:
        return
    if version is not None:
        raise Incompatible(f"index schema version {version}, this kernelloop uses {SCHEMA_VERSION}")
    with _immediate(conn):
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        version = get_meta(conn, "schema_version")
        if version is None:
            if conn.execute("SELECT count(*) FROM documents").fetchone()[0]:
                raise Incompatible("index has documents but no schema version")
            set_meta(conn, "schema_version", SCHEMA_VERSION)
            set_meta(conn, "instance", uuid.uuid4().hex)
            set_meta(conn, "generation", "0")
            set_meta(conn, "created_at", now_iso())
        elif version != SCHEMA_VERSION:
            raise Incompatible(f"index schema version {version}, this kernelloop uses {SCHEMA_VERSION}")


def insert_document(conn: sqlite3.Connection, doc: Document, added_at: str | None = None) -> None:
    conn.execute("DELETE FROM documents WHERE doc_id = ?", (doc.doc_id,))
    cur = conn.execute(
        "INSERT INTO documents(doc_id, kind, title, source, tags, rules, content_hash, bytes, added_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (doc.doc_id, doc.kind, doc.title, doc.source, json.dumps(doc.tags), json.dumps(doc.rules),
         doc.content_hash, doc.size, added_at or now_iso()))
    pk = cur.lastrowid
    conn.executemany(
        "INSERT INTO chunks(doc, ord, heading, text, index_text, text_hash) VALUES (?, ?, ?, ?, ?, ?)",
        [(pk, i, c.heading, c.text, c.index_text, ingest.text_hash(c.index_text)) for i, c in enumerate(doc.chunks)])


def prune_embeddings(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM embeddings WHERE text_hash NOT IN (SELECT text_hash FROM chunks)")


def rebuild_bundled(conn: sqlite3.Connection, *, force: bool = False) -> bool:
    """Replace the notes and exemplars when their hash changed (or `force`). User documents
    stay. Returns whether it rebuilt."""
    current = ingest.bundled_hash()
    if not force and get_meta(conn, "bundled_hash") == current:
        return False
    docs, problems = ingest.bundled_documents()
    with write_txn(conn):
        if not force and get_meta(conn, "bundled_hash") == current:  # another process was first
            return False
        conn.execute("DELETE FROM documents WHERE kind IN ('note', 'exemplar')")
        stamp = now_iso()
        for doc in docs:
            insert_document(conn, doc, stamp)
        prune_embeddings(conn)
        set_meta(conn, "bundled_hash", current)
        set_meta(conn, "built_at", stamp)
        set_meta(conn, "bundled_warnings", json.dumps(problems))
    return True


# -- the manifest of user sources (for recovery) -------------------------------------------------

def write_manifest(conn: sqlite3.Connection, folder: Path) -> None:
    rows = conn.execute("SELECT doc_id, source, added_at FROM documents WHERE kind = 'user' ORDER BY id").fetchall()
    payload = [{"doc_id": d, "path": s, "added_at": a} for d, s, a in rows]
    tmp = folder / f".{MANIFEST_NAME}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(payload, indent=1))
        os.replace(tmp, folder / MANIFEST_NAME)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


def read_manifest(folder: Path) -> list[dict[str, str]]:
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return []
    return [d for d in data if isinstance(d, dict) and isinstance(d.get("path"), str)] if isinstance(data, list) else []


# -- opening, with recovery ----------------------------------------------------------------

@dataclass
class Index:
    conn: sqlite3.Connection
    path: Path  # the file (or where it would be, for an in-memory fallback)
    persistent: bool
    warnings: list[str] = field(default_factory=list)

    def close(self) -> None:
        if not self.persistent:
            return  # the shared in-memory fallback lives as long as the process
        try:
            self.conn.close()
        except sqlite3.Error:
            pass


_CHECKED: set[tuple[str, int, int]] = set()  # files quick_check'ed in this process (path, inode, mtime)
_MEMORY: dict[str, sqlite3.Connection] = {}  # in-memory fallbacks, one per unusable path
_LOCK = threading.RLock()


def _move_aside(path: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    os.replace(path, target)
    for suffix in ("-journal", "-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            try:
                os.replace(side, target.with_name(target.name + suffix))
            except OSError:
                pass
    return target


def _quick_check(conn: sqlite3.Connection, path: Path) -> None:
    try:
        st = path.stat()
        key = (str(path), st.st_ino, st.st_mtime_ns)
    except OSError:
        return
    if key in _CHECKED:
        return
    rows = conn.execute("PRAGMA quick_check").fetchall()
    if [r[0] for r in rows] != ["ok"]:
        raise sqlite3.DatabaseError(f"database disk image is malformed ({rows[0][0]})")
    _CHECKED.add(key)


def _restore_user_documents(conn: sqlite3.Connection, entries: list[dict[str, str]]) -> tuple[int, list[str]]:
    docs: list[tuple[Document, str | None]] = []
    lost: list[str] = []
    for entry in entries:
        p = Path(entry["path"])
        try:
            docs.append((ingest.ingest_file(p), entry.get("added_at")))
        except Skip as why:
            lost.append(f"{p} ({why})")
        except OSError as exc:
            lost.append(f"{p} ({exc})")
    if docs:
        with write_txn(conn):
            for doc, added_at in docs:
                insert_document(conn, doc, added_at)
    return len(docs), lost


def _open_file(path: Path) -> Index:
    conn = _connect(path)
    try:
        _init_schema(conn)
        _quick_check(conn, path)
        rebuild_bundled(conn)
    except BaseException:
        conn.close()
        raise
    return Index(conn=conn, path=path, persistent=True)


def _memory_index(path: Path, reason: str) -> Index:
    with _LOCK:
        conn = _MEMORY.get(str(path))
        if conn is None:
            conn = _connect(":memory:")
            _init_schema(conn)
            _MEMORY[str(path)] = conn
        rebuild_bundled(conn)
    return Index(conn=conn, path=path, persistent=False,
                 warnings=[f"corpus index {path} cannot be used ({reason}); using a temporary in-memory index "
                           "of the bundled notes: documents added now are not kept"])


def open_index(settings: Settings) -> Index:
    """Open (creating or repairing as needed) the index with its bundled part up to date."""
    path = index_path(settings)
    with _LOCK:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return _memory_index(path, exc.strerror or str(exc))
        if path.is_dir():
            return _memory_index(path, "it is a folder")
        recovery_note: str | None = None
        for attempt in range(3):
            try:
                index = _open_file(path)
                if recovery_note:
                    index.warnings.append(recovery_note)
                return index
            except (sqlite3.DatabaseError, Incompatible) as exc:
                code = None if isinstance(exc, Incompatible) else _code(exc)
                if isinstance(exc, Incompatible) or code in _CORRUPT:
                    if attempt == 2:
                        return _memory_index(path, str(exc))
                    recovery_note = _recover(path, exc)
                    continue
                if code in _BUSY:
                    raise EnvironmentProblem(f"corpus index {path} is locked by another process; try again") from exc
                if code in _UNWRITABLE or isinstance(exc, sqlite3.OperationalError):
                    return _memory_index(path, str(exc))
                raise
            except OSError as exc:
                return _memory_index(path, exc.strerror or str(exc))
        return _memory_index(path, "repeated failures")  # pragma: no cover


def is_corruption(exc: BaseException) -> bool:
    return isinstance(exc, Incompatible) or (isinstance(exc, sqlite3.DatabaseError) and _code(exc) in _CORRUPT)


def is_unusable(exc: BaseException) -> bool:
    """Busy, read-only, disk full and the like: the environment's problem, not a bug."""
    return isinstance(exc, sqlite3.OperationalError) and _code(exc) in (_BUSY | _UNWRITABLE)


def recover(settings: Settings, exc: BaseException) -> str:
    """Corruption found after opening (mid-query): move the file aside and rebuild."""
    with _LOCK:
        _CHECKED.clear()
        return _recover(index_path(settings), exc)


def _recover(path: Path, exc: BaseException) -> str:
    """Move a bad index aside, build a fresh one, re-add the user sources we know of."""
    what = "from an incompatible version" if isinstance(exc, Incompatible) else "corrupt"
    try:
        aside = _move_aside(path) if path.exists() else None
    except OSError:
        aside = None
        try:
            path.unlink()
        except OSError:
            pass
    entries = read_manifest(path.parent)
    restored, lost = 0, []
    try:
        conn = _connect(path)
        try:
            _init_schema(conn)
            rebuild_bundled(conn, force=True)
            restored, lost = _restore_user_documents(conn, entries)
            stamp = now_iso()
            note = (f"corpus index was {what} ({' '.join(str(exc).split())[:100]}); "
                    f"{'moved aside to ' + aside.name if aside else 'removed'} and rebuilt at {stamp}: "
                    f"bundled notes re-indexed, {restored} of {len(entries)} user documents re-added")
            if lost:
                note += f"; not re-added: {', '.join(lost[:5])}" + (" …" if len(lost) > 5 else "")
            with write_txn(conn):
                set_meta(conn, "recovery", note)
            write_manifest(conn, path.parent)
        finally:
            conn.close()
    except sqlite3.Error:
        note = f"corpus index was {what}; moved aside"
    return note


def stored_warnings(conn: sqlite3.Connection) -> list[str]:
    out: list[str] = []
    note = get_meta(conn, "recovery")
    if note:
        out.append(note)
    try:
        out.extend(json.loads(get_meta(conn, "bundled_warnings") or "[]"))
    except ValueError:
        pass
    return out


def generation(conn: sqlite3.Connection) -> tuple[str, str]:
    return get_meta(conn, "instance") or "", get_meta(conn, "generation") or "0"
