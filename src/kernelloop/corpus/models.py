"""What the corpus returns: plain pydantic models, nothing printed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

Kind = Literal["note", "exemplar", "user"]
Mode = Literal["auto", "bm25", "dense", "hybrid"]


class Hit(BaseModel):
    """One retrieved document, shown by its best-matching chunk.

    `retriever` is "bm25", "dense" or "hybrid" for text retrieval ("+rerank" when NVIDIA's
    reranker reordered them; a parenthesised reason when a backend fell back), and "rule" for a note
    that `search_for_diagnosis` put first because a finding names it (score 1.0 then; the
    list's order is the ranking, scores of different retrievers are not comparable).
    """

    doc_id: str  # a note's id (front matter), "exemplar:<stem>", or "user:<name>-<hash>"
    title: str
    source: str  # the file's path
    kind: Kind
    chunk: str  # the best-matching section's text
    score: float
    retriever: str
    heading: str = ""  # the chunk's section heading


class DocumentInfo(BaseModel):
    doc_id: str
    title: str
    source: str
    kind: Kind
    chunks: int
    bytes: int
    added_at: str
    tags: list[str] = []


class CorpusStats(BaseModel):
    documents: int
    chunks: int
    by_kind: dict[str, int]
    index_path: str
    dense: str | None  # the embedding model when dense retrieval is available, else None
    built_at: str | None  # when the bundled part was last (re)built, ISO 8601 UTC
    bundled_hash: str
    embedded_chunks: int = 0  # chunks whose dense vector is stored
    warnings: list[str] = []  # e.g. a corrupt index that was moved aside and rebuilt


class AddReport(BaseModel):
    added: list[str]  # paths of the files indexed (new or changed)
    skipped: list[tuple[str, str]]  # (path, reason)
    doc_ids: list[str] = []  # the added files' document ids, same order as `added`
    warnings: list[str] = []
