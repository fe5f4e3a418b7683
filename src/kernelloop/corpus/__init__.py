"""The knowledge corpus: bundled notes and exemplar kernels, plus the user's own files,
searched with BM25 and (when the `embeddings` extra is installed) dense vectors.

    from kernelloop.corpus import search, search_for_diagnosis, add_path
    hits = search("my global loads are uncoalesced", k=5)

Why one SQLite file (and not LanceDB): the corpus is small (hundreds to tens of thousands
of chunks) and must be robust on a laptop or CI runner. SQLite is a single file under
`<data_dir>/corpus/index.sqlite3`, driven by the standard library's `sqlite3` (nothing to
install, no server, no background process), and its writes are ACID transactions: a crash
or a kill mid-write leaves the previous index whole. LanceDB would bring a large native
wheel (Arrow, Lance), a folder of fragment files to keep consistent, and approximate
indexes that only pay off at millions of vectors.

Why the vectors are plain float32 BLOBs in an ordinary table rather than a sqlite-vec
`vec0` virtual table: sqlite-vec is a loadable extension, and the Python builds this
project runs on (pyenv's CPython 3.10-3.13 here) are compiled without
`Connection.enable_load_extension`, so the extension cannot be loaded at all; worse, a
file holding a `vec0` table can then not have that table read or dropped (“no such
module: vec0”). vec0 searches by brute force anyway; so does `engine` here, as one NumPy
matrix-vector product over the cached, unit-length vectors (exact cosine; ~1 ms for 10k
chunks). The BLOB layout is sqlite-vec's own, so moving to vec0 later is one table copy.

BM25 (bm25s) is rebuilt in memory from the `chunks` table when a process first searches,
and cached until the index changes. The bundled part is re-indexed whenever the hash of
the bundled files differs from the one stored; user documents are kept across that.
"""

from __future__ import annotations

from .engine import (
    add_path,
    corpus_stats,
    list_documents,
    rebuild_index,
    remove_document,
    search,
    search_for_diagnosis,
)
from .ingest import MAX_FILE_BYTES, SUFFIXES
from .models import AddReport, CorpusStats, DocumentInfo, Hit

__all__ = [
    "AddReport", "CorpusStats", "DocumentInfo", "Hit", "MAX_FILE_BYTES", "SUFFIXES", "add_path", "corpus_stats",
    "list_documents", "rebuild_index", "remove_document", "search", "search_for_diagnosis",
]
