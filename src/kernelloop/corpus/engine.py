"""Retrieval over the index: BM25 (bm25s), dense (MiniLM, optional) and their RRF fusion.

The in-memory part (the BM25 matrix over every chunk, the chunk metadata, the dense
vectors once loaded) is rebuilt from the `chunks` table when this process first needs it,
and kept until the index's generation counter moves (any write, by any process).

Results are per document: each document is scored by its best chunk, and that chunk is
what the hit shows. Hybrid fuses the two document rankings with reciprocal-rank fusion,
score = sum over retrievers of 1 / (RRF_K + rank).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import bm25s
import numpy as np

from ..config import Settings, load_settings
from ..errors import EnvironmentProblem, InputError
from ..profiler.diagnosis import Diagnosis
from . import dense, ingest, nvidia, store
from .ingest import Skip
from .models import AddReport, CorpusStats, DocumentInfo, Hit, Mode
from .text import tokenize

T = TypeVar("T")

RRF_K = 60
CANDIDATES = 50  # documents each retriever contributes to the fusion
RERANK_CANDIDATES = 20  # fused documents the NVIDIA reranker reorders (at least k)
BM25_K1 = 1.2
BM25_B = 0.75
STATE_CACHE = 4  # indexes whose in-memory state this process keeps
MODES = ("auto", "bm25", "dense", "hybrid")


@dataclass
class _Doc:
    doc_id: str
    title: str
    source: str
    kind: str
    rules: list[str]


@dataclass
class _State:
    key: tuple
    docs: list[_Doc]
    by_id: dict[str, int]
    chunk_doc: np.ndarray  # doc index of each chunk
    headings: list[str]
    texts: list[str]
    index_texts: list[str]
    hashes: list[str]
    bm25: bm25s.BM25 | None
    vocab: set[str]
    vectors: np.ndarray | None = None
    vectors_model: str | None = None  # the embeddings-table model (backend-prefixed) of `vectors`
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def empty(self) -> bool:
        return not self.texts


_states: OrderedDict[str, _State] = OrderedDict()
_states_lock = threading.Lock()


def _settings(settings: Settings | None) -> Settings:
    return settings if settings is not None else load_settings()


def _run(settings: Settings | None, fn: Callable[[store.Index], T]) -> T:
    """Open the index, run `fn` on it, close it. Corruption found mid-way (past the checks
    at open) is repaired once and `fn` run again; a locked, read-only or full disk becomes
    a one-line EnvironmentProblem."""
    s = _settings(settings)
    for attempt in (0, 1):
        index = store.open_index(s)
        try:
            return fn(index)
        except sqlite3.DatabaseError as exc:
            if attempt == 0 and index.persistent and store.is_corruption(exc):
                index.close()
                store.recover(s, exc)
                continue
            if store.is_unusable(exc):
                raise EnvironmentProblem(f"corpus index {index.path}: {exc}") from exc
            raise
        finally:
            index.close()
    raise AssertionError("unreachable")  # pragma: no cover


def _load_state(index: store.Index) -> _State:
    instance, gen = store.generation(index.conn)
    key = (str(index.path), index.persistent, instance, gen)
    with _states_lock:
        state = _states.get(str(index.path))
        if state is not None and state.key == key:
            _states.move_to_end(str(index.path))
            return state
    docs: list[_Doc] = []
    by_pk: dict[int, int] = {}
    for pk, doc_id, title, source, kind, rules in index.conn.execute(
            "SELECT id, doc_id, title, source, kind, rules FROM documents ORDER BY id"):
        by_pk[pk] = len(docs)
        docs.append(_Doc(doc_id, title, source, kind, json.loads(rules or "[]")))
    rows = index.conn.execute(
        "SELECT doc, heading, text, index_text, text_hash FROM chunks ORDER BY doc, ord").fetchall()
    rows = [r for r in rows if r[0] in by_pk]
    tokens = [tokenize(r[3]) for r in rows]
    bm25 = None
    vocab: set[str] = set()
    if rows:
        bm25 = bm25s.BM25(k1=BM25_K1, b=BM25_B)
        bm25.index(tokens, show_progress=False)
        vocab = {t for toks in tokens for t in toks}
    state = _State(key=key, docs=docs, by_id={d.doc_id: i for i, d in enumerate(docs)},
                   chunk_doc=np.array([by_pk[r[0]] for r in rows], dtype=np.int64),
                   headings=[r[1] for r in rows], texts=[r[2] for r in rows], index_texts=[r[3] for r in rows],
                   hashes=[r[4] for r in rows], bm25=bm25, vocab=vocab)
    with _states_lock:
        _states[str(index.path)] = state
        _states.move_to_end(str(index.path))
        while len(_states) > STATE_CACHE:
            _states.popitem(last=False)
    return state


def _vectors(state: _State, index: store.Index, which: str = "local") -> np.ndarray:
    """The chunks' dense vectors for backend `which` ("local" or "nvidia"): stored ones read
    back, missing ones embedded and stored. Rows are keyed by (text hash, backend-prefixed
    model), so local and NVIDIA vectors never mix. NVIDIA failures raise nvidia.NimError."""
    model_key = dense.cache_model(which)
    with state.lock:
        if state.vectors is not None and state.vectors_model == model_key:
            return state.vectors
        stored: dict[str, np.ndarray] = {}
        if which == "local":
            dim: int | None = dense.dimension()
            rows = index.conn.execute("SELECT text_hash, vector FROM embeddings WHERE model = ? AND dim = ?",
                                      (model_key, dim))
        else:
            row = index.conn.execute("SELECT dim, count(*) AS n FROM embeddings WHERE model = ? GROUP BY dim "
                                     "ORDER BY n DESC LIMIT 1", (model_key,)).fetchone()
            dim = int(row[0]) if row else None
            rows = index.conn.execute("SELECT text_hash, vector FROM embeddings WHERE model = ? AND dim = ?",
                                      (model_key, dim)) if dim is not None else []
        for h, blob in rows:
            stored[h] = np.frombuffer(blob, dtype=np.float32)
        missing = sorted({h for h in state.hashes if h not in stored})
        if missing:
            text_of = dict(zip(state.hashes, state.index_texts, strict=True))
            texts = [text_of[h] for h in missing]
            fresh = dense.encode_cached(missing, texts) if which == "local" else nvidia.embed_passages(missing, texts)
            if dim is not None and fresh.shape[1] != dim:  # the service's model changed: drop the old ones
                stored = {}
                missing = sorted(set(state.hashes))
                fresh = nvidia.embed_passages(missing, [text_of[h] for h in missing])
            dim = int(fresh.shape[1])
            for h, v in zip(missing, fresh, strict=True):
                stored[h] = v
            try:  # not a generation bump: the chunks did not change, only what is cached about them
                index.conn.execute("BEGIN IMMEDIATE")
                index.conn.executemany(
                    "INSERT OR REPLACE INTO embeddings(text_hash, model, dim, vector) VALUES (?, ?, ?, ?)",
                    [(h, model_key, dim, np.ascontiguousarray(stored[h], dtype=np.float32).tobytes())
                     for h in missing])
                index.conn.execute("COMMIT")
            except sqlite3.Error:  # read-only or busy: keep them in memory only
                try:
                    index.conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
        state.vectors = (np.stack([stored[h] for h in state.hashes]) if state.hashes
                         else np.zeros((0, dim or 0), dtype=np.float32))
        state.vectors_model = model_key
        return state.vectors


def _per_doc(state: _State, scores: np.ndarray, *, positive: bool) -> list[tuple[int, int, float]]:
    """(doc index, best chunk index, score), best documents first."""
    order = np.argsort(-scores, kind="stable")
    seen: set[int] = set()
    out: list[tuple[int, int, float]] = []
    for ci in order:
        s = float(scores[ci])
        if positive and s <= 0.0:
            break
        d = int(state.chunk_doc[ci])
        if d in seen:
            continue
        seen.add(d)
        out.append((d, int(ci), s))
    return out


def _bm25_scores(state: _State, query: str) -> np.ndarray:
    toks = [t for t in tokenize(query) if t in state.vocab]
    if not toks or state.bm25 is None:
        return np.zeros(len(state.texts), dtype=np.float32)
    return np.asarray(state.bm25.get_scores(toks), dtype=np.float32)


def _dense_scores(state: _State, index: store.Index, query: str, which: str = "local") -> np.ndarray:
    vectors = _vectors(state, index, which)
    q = dense.encode([query])[0] if which == "local" else nvidia.embed_query(query)
    if q.shape[0] != vectors.shape[1]:
        raise nvidia.NimError(f"query vector has {q.shape[0]} dimensions, the stored ones {vectors.shape[1]}")
    return vectors @ q


def _hit(state: _State, d: int, ci: int, score: float, retriever: str) -> Hit:
    doc = state.docs[d]
    source = str(ingest.bundled_source(doc.source)) if doc.kind in ("note", "exemplar") else doc.source
    return Hit(doc_id=doc.doc_id, title=doc.title, source=source, kind=doc.kind,  # type: ignore[arg-type]
               chunk=state.texts[ci], score=round(score, 6), retriever=retriever, heading=state.headings[ci])


def _resolve_mode(mode: str) -> str:
    if mode not in MODES:
        raise InputError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
    if mode == "auto":
        return "hybrid" if dense.available() else "bm25"
    if mode in ("dense", "hybrid") and not dense.available():
        raise EnvironmentProblem(f"{mode} search: {dense.unavailable_reason()}")
    return mode


def _bm25_hits(state: _State, query: str, k: int, retriever: str = "bm25") -> list[Hit]:
    return [_hit(state, d, ci, s, retriever) for d, ci, s in _per_doc(state, _bm25_scores(state, query),
                                                                       positive=True)[:k]]


def _semantic(state: _State, index: store.Index, query: str, k: int, mode: str,
              which: str) -> list[tuple[int, int, float, str]]:
    """(doc, chunk shown, score, retriever) from dense or hybrid retrieval, best first;
    for the NVIDIA backend, the fused candidates reordered by NVIDIA's reranker."""
    want = max(k, RERANK_CANDIDATES) if which == "nvidia" else k
    semantic = _per_doc(state, _dense_scores(state, index, query, which), positive=False)
    if mode == "dense":
        ranked = [(d, ci, s, "dense") for d, ci, s in semantic[:want]]
    else:
        lexical = _per_doc(state, _bm25_scores(state, query), positive=True)[:CANDIDATES]
        fused: dict[int, float] = {}
        shown: dict[int, int] = {}
        for ranking in (lexical, semantic[:CANDIDATES]):
            for rank, (d, ci, _) in enumerate(ranking, start=1):
                fused[d] = fused.get(d, 0.0) + 1.0 / (RRF_K + rank)
                shown.setdefault(d, ci)  # the lexical best chunk where BM25 found the document
        best = sorted(fused.items(), key=lambda t: (-t[1], t[0]))[:want]
        ranked = [(d, shown[d], s, "hybrid") for d, s in best]
    if which != "nvidia" or len(ranked) < 2 or not nvidia.settings().rerank_model:
        return ranked[:k]
    passages = [f"{state.headings[ci]}\n{state.texts[ci]}".strip() for _, ci, _, _ in ranked]
    try:
        order = nvidia.rerank(query, passages)
    except nvidia.NimError as exc:
        note = f"NVIDIA rerank unavailable: {exc}"
        nvidia.note_fallback(note)
        return [(d, ci, s, f"{r} ({note})") for d, ci, s, r in ranked[:k]]
    seen = {i for i, _ in order if 0 <= i < len(ranked)}
    out = [(ranked[i][0], ranked[i][1], score, f"{ranked[i][3]}+rerank") for i, score in order if 0 <= i < len(ranked)]
    out += [(d, ci, s, r) for i, (d, ci, s, r) in enumerate(ranked) if i not in seen]
    return out[:k]


def _retrieve(state: _State, index: store.Index, query: str, k: int, mode: str) -> list[Hit]:
    """Network failures of the NVIDIA backend never fail a search: the local model (where
    installed) or BM25 answers instead, and the hits' retriever says why."""
    if state.empty:
        return []
    if mode == "bm25":
        return _bm25_hits(state, query, k)
    which = dense.backend()
    note = ""
    if which == "nvidia":
        try:
            ranked = _semantic(state, index, query, k, mode, "nvidia")
            if not any("unavailable" in r for _, _, _, r in ranked):
                nvidia.note_fallback(None)
            return [_hit(state, d, ci, s, r) for d, ci, s, r in ranked]
        except nvidia.NimError as exc:
            note = f"NVIDIA embeddings unavailable: {exc}"
            nvidia.note_fallback(note)
            which = "local" if dense.requested_backend() == "auto" and dense.local_available() else None
    if which is None:
        return _bm25_hits(state, query, k, f"bm25 ({note})" if note else "bm25")
    ranked = _semantic(state, index, query, k, mode, which)
    return [_hit(state, d, ci, s, f"{r} ({note})" if note else r) for d, ci, s, r in ranked]


def _check_query(query: str, k: int) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InputError("empty query")
    if k < 1:
        raise InputError(f"k must be at least 1 (got {k})")


# -- public API ----------------------------------------------------------------------------

def search(query: str, *, k: int = 5, mode: Mode = "auto", settings: Settings | None = None) -> list[Hit]:
    """The `k` documents that best answer `query`, best first (one hit per document).

    mode: "bm25", "dense", "hybrid" (RRF of both), or "auto" (hybrid where the embeddings
    extra is installed, else bm25). An empty corpus gives []; an empty query is an InputError.
    """
    _check_query(query, k)
    if mode not in MODES:
        raise InputError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")

    def run(index: store.Index) -> list[Hit]:
        state = _load_state(index)
        if state.empty:
            return []
        return _retrieve(state, index, query, k, _resolve_mode(mode))

    return _run(settings, run)


def _best_chunk_of(state: _State, d: int, query: str) -> int:
    chunks = np.flatnonzero(state.chunk_doc == d)
    scores = _bm25_scores(state, query)[chunks]
    return int(chunks[int(np.argmax(scores))]) if scores.size and scores.max() > 0 else int(chunks[0])


def search_for_diagnosis(diagnosis: Diagnosis, *, k: int = 5, settings: Settings | None = None) -> list[Hit]:
    """Notes for a profiled kernel: first the notes its findings name (`finding.note`, most
    severe finding first), then notes whose front matter lists a fired rule, then text
    retrieval (mode auto) on the diagnosis summary; one hit per document, at most `k`."""
    if k < 1:
        raise InputError(f"k must be at least 1 (got {k})")

    def run(index: store.Index) -> list[Hit]:
        state = _load_state(index)
        if state.empty:
            return []
        hits: list[Hit] = []
        seen: set[str] = set()

        def add_rule_hit(d: int, query: str) -> None:
            doc = state.docs[d]
            if doc.doc_id in seen or doc.kind != "note" or not (state.chunk_doc == d).any():
                return
            seen.add(doc.doc_id)
            hits.append(_hit(state, d, _best_chunk_of(state, d, query), 1.0, "rule"))

        for f in diagnosis.findings:
            if f.note in state.by_id:
                add_rule_hit(state.by_id[f.note], f"{f.title} {f.finding} {f.action}")
        for f in diagnosis.findings:
            for d, doc in enumerate(state.docs):
                if f.rule in doc.rules:
                    add_rule_hit(d, f"{f.title} {f.finding} {f.action}")
        if len(hits) < k and diagnosis.summary.strip():
            for h in _retrieve(state, index, diagnosis.summary, k + len(hits), _resolve_mode("auto")):
                if h.doc_id not in seen:
                    seen.add(h.doc_id)
                    hits.append(h)
        return hits[:k]

    return _run(settings, run)


def corpus_stats(settings: Settings | None = None) -> CorpusStats:
    def run(index: store.Index) -> CorpusStats:
        conn = index.conn
        by_kind = {kind: n for kind, n in conn.execute("SELECT kind, count(*) FROM documents GROUP BY kind")}
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        which = dense.backend()
        embedded = conn.execute(
            "SELECT count(*) FROM chunks c JOIN embeddings e ON e.text_hash = c.text_hash AND e.model = ?",
            (dense.cache_model(which),)).fetchone()[0]
        warnings = list(index.warnings)
        warnings += [w for w in store.stored_warnings(conn) if w not in warnings]
        if which == "nvidia" and nvidia.last_warning and nvidia.last_warning not in warnings:
            warnings.append(nvidia.last_warning)  # the latest search fell back
        return CorpusStats(
            documents=sum(by_kind.values()), chunks=chunks, by_kind=by_kind, index_path=str(index.path),
            dense=dense.describe(which), built_at=store.get_meta(conn, "built_at"),
            bundled_hash=store.get_meta(conn, "bundled_hash") or ingest.bundled_hash(), embedded_chunks=embedded,
            warnings=warnings)

    return _run(settings, run)


def add_path(path: Path, settings: Settings | None = None) -> AddReport:
    """Index a file, or every supported file under a folder (recursively; hidden entries
    left out). Supported: .md .markdown .txt .html .htm .pdf. A file added again replaces
    its earlier version; an unchanged one is skipped. All files land in one transaction."""
    given = Path(path).expanduser()
    if not given.exists():
        raise InputError(f"{given}: no such file or folder")
    root = given.resolve()
    files = ingest.walk(root) if root.is_dir() else [root]

    def run(index: store.Index) -> AddReport:
        if not index.persistent:  # a document added to the in-memory fallback would be lost on exit
            reason = index.warnings[0] if index.warnings else f"corpus index {index.path} cannot be used"
            raise EnvironmentProblem(f"{reason.split('; ')[0]}: nothing added; set KERNELLOOP_DATA_DIR "
                                     "(or data_dir in kernelloop.toml) to a folder you can write")
        conn = index.conn
        known = dict(conn.execute("SELECT doc_id, content_hash FROM documents WHERE kind = 'user'").fetchall())
        docs: list[ingest.Document] = []
        skipped: list[tuple[str, str]] = []
        for f in files:
            try:
                doc = ingest.ingest_file(f)
            except Skip as why:
                skipped.append((str(f), str(why)))
                continue
            if known.get(doc.doc_id) == doc.content_hash:
                skipped.append((str(f), "already indexed, unchanged"))
                continue
            docs.append(doc)
        if docs:
            with store.write_txn(conn):
                for doc in docs:
                    store.insert_document(conn, doc)
            if index.persistent:
                store.write_manifest(conn, index.path.parent)
        return AddReport(added=[d.source for d in docs], skipped=skipped, doc_ids=[d.doc_id for d in docs],
                         warnings=list(index.warnings))

    return _run(settings, run)


def list_documents(settings: Settings | None = None) -> list[DocumentInfo]:
    def run(index: store.Index) -> list[DocumentInfo]:
        rows = index.conn.execute(
            "SELECT d.doc_id, d.title, d.source, d.kind, d.bytes, d.added_at, d.tags, "
            "(SELECT count(*) FROM chunks c WHERE c.doc = d.id) FROM documents d "
            "ORDER BY CASE d.kind WHEN 'note' THEN 0 WHEN 'exemplar' THEN 1 ELSE 2 END, d.doc_id").fetchall()
        out = []
        for doc_id, title, source, kind, size, added_at, tags, chunks in rows:
            shown = str(ingest.bundled_source(source)) if kind in ("note", "exemplar") else source
            out.append(DocumentInfo(doc_id=doc_id, title=title, source=shown, kind=kind, chunks=chunks, bytes=size,
                                    added_at=added_at, tags=json.loads(tags or "[]")))
        return out

    return _run(settings, run)


def remove_document(doc_id_or_path: str, settings: Settings | None = None) -> bool:
    """Remove a user document by id, by its file's path, or every one under a folder path.
    True if something was removed. Bundled notes and exemplars cannot be removed."""
    key = str(doc_id_or_path).strip()
    if not key:
        raise InputError("no document id or path given")
    def run(index: store.Index) -> bool:
        conn = index.conn
        row = conn.execute("SELECT id, kind FROM documents WHERE doc_id = ?", (key,)).fetchone()
        if row is not None and row[1] != "user":
            raise InputError(f"{key} is a bundled {row[1]}; only documents you added can be removed")
        with store.write_txn(conn):
            if row is not None:
                removed = conn.execute("DELETE FROM documents WHERE id = ?", (row[0],)).rowcount
            else:
                p = str(Path(key).expanduser().resolve())
                prefix = p.rstrip("/") + "/"
                removed = conn.execute(
                    "DELETE FROM documents WHERE kind = 'user' AND (source = ? OR substr(source, 1, ?) = ?)",
                    (p, len(prefix), prefix)).rowcount
            store.prune_embeddings(conn)
        if removed and index.persistent:
            store.write_manifest(conn, index.path.parent)
        return removed > 0

    return _run(settings, run)


def rebuild_index(settings: Settings | None = None) -> CorpusStats:
    """Re-index the bundled notes and exemplars now (user documents stay)."""
    s = _settings(settings)
    _run(s, lambda index: store.rebuild_bundled(index.conn, force=True))
    return corpus_stats(s)
