"""Files -> documents: the bundled notes and exemplars, and a user's own files.

A user file that cannot be indexed is skipped with a one-line reason, never an error:
binary content, a file over MAX_FILE_BYTES, an unsupported type, an unreadable PDF.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..package_files import package_path
from .text import (
    Chunk,
    Parsed,
    content_hash,
    exemplar_document,
    html_document,
    markdown_document,
    plain_document,
    text_hash,
)

MAX_FILE_BYTES = 20 * 1024 * 1024  # larger user files are skipped
SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".html": "html", ".htm": "html",
            ".pdf": "pdf"}
BINARY_SNIFF_BYTES = 8192
MAX_REPLACEMENT_RATIO = 0.02  # undecodable bytes tolerated in a text file before it counts as binary

# Where the bundled corpus lives. Module globals (not constants captured at import) so tests
# can point them elsewhere.
NOTES_DIR = package_path("knowledge", "notes")
EXEMPLARS_DIR = package_path("exemplars")


@dataclass
class Document:
    doc_id: str
    kind: str  # note | exemplar | user
    title: str
    source: str  # bundled: "notes/<file>" or "exemplars/<file>"; user: absolute path
    content_hash: str
    size: int
    chunks: list[Chunk]
    tags: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)


class Skip(Exception):
    """A file that is not indexed; str() is the reason."""


# -- bundled -------------------------------------------------------------------------------

def bundled_files() -> list[tuple[str, Path]]:
    """(kind, path) of every bundled source, in a stable order."""
    out: list[tuple[str, Path]] = []
    notes, exemplars = NOTES_DIR, EXEMPLARS_DIR
    if notes.is_dir():
        out += [("note", p) for p in sorted(notes.glob("*.md"))
                if p.is_file() and not p.name.startswith(("_", ".")) and p.stem.lower() not in ("readme", "index")]
    if exemplars.is_dir():
        out += [("exemplar", p) for p in sorted(exemplars.glob("*.cu")) if p.is_file() and not p.name.startswith(".")]
    return out


def bundled_source(source: str) -> Path:
    """A bundled document's stored source ("notes/x.md") -> its path now."""
    folder, _, name = source.partition("/")
    return (NOTES_DIR if folder == "notes" else EXEMPLARS_DIR) / name


def bundled_documents() -> tuple[list[Document], list[str]]:
    """Parse every bundled file. Returns (documents, warnings)."""
    docs: list[Document] = []
    problems: list[str] = []
    seen: set[str] = set()
    for kind, path in bundled_files():
        try:
            data = path.read_bytes()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"bundled {kind} {path.name} skipped: {exc}")
            continue
        if kind == "note":
            parsed = markdown_document(text, fallback_title=path.stem.replace("-", " "), note=True)
            doc_id = parsed.doc_id or path.stem
            source = f"notes/{path.name}"
        else:
            parsed = exemplar_document(text, name=path.name)
            doc_id = f"exemplar:{path.stem}"
            source = f"exemplars/{path.name}"
        if doc_id in seen:
            problems.append(f"bundled {kind} {path.name} skipped: id {doc_id!r} is used by another file")
            continue
        if not parsed.chunks:
            problems.append(f"bundled {kind} {path.name} skipped: no text")
            continue
        seen.add(doc_id)
        docs.append(Document(doc_id=doc_id, kind=kind, title=parsed.title, source=source,
                             content_hash=content_hash(data), size=len(data), chunks=parsed.chunks,
                             tags=parsed.tags, rules=parsed.rules))
    return docs, problems


_HASH_CACHE: dict[tuple, str] = {}
INDEX_FORMAT = "kernelloop-corpus-1"  # bump when chunking or tokenizing changes: forces a rebuild


def bundled_hash() -> str:
    """sha256 over the bundled files' names and contents (and the index format).

    Cached on the files' (name, size, mtime) so calling it on every search costs a few stats.
    """
    files = bundled_files()
    signature: list[tuple] = []
    for kind, p in files:
        try:
            st = p.stat()
            signature.append((kind, str(p), st.st_size, st.st_mtime_ns))
        except OSError:
            signature.append((kind, str(p), -1, -1))
    key = (INDEX_FORMAT, tuple(signature))
    cached = _HASH_CACHE.get(key)
    if cached is not None:
        return cached
    h = hashlib.sha256(INDEX_FORMAT.encode())
    for kind, p in files:
        h.update(f"\0{kind}\0{p.name}\0".encode())
        try:
            h.update(hashlib.sha256(p.read_bytes()).digest())
        except OSError:
            h.update(b"unreadable")
    digest = h.hexdigest()
    _HASH_CACHE.clear()
    _HASH_CACHE[key] = digest
    return digest


# -- user files ----------------------------------------------------------------------------

def user_doc_id(path: Path) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-")[:40] or "doc"
    return f"user:{slug}-{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"


def _decode_text(data: bytes) -> str:
    if b"\x00" in data[:BINARY_SNIFF_BYTES] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise Skip("binary file (not text)")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise Skip("binary file (not text)") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        if text.count("\ufffd") > MAX_REPLACEMENT_RATIO * max(1, len(text)):
            raise Skip("binary file (not UTF-8 text)") from None
        return text


def _pdf_document(data: bytes, *, fallback_title: str) -> Parsed:
    if not data.lstrip()[:5] == b"%PDF-":
        raise Skip("unreadable PDF: no %PDF header")
    try:
        from pypdf import PdfReader
    except ImportError as exc:  # pragma: no cover - pypdf is a dependency
        raise Skip("PDF support needs pypdf (pip install pypdf)") from exc
    log = logging.getLogger("pypdf")
    level = log.level
    log.setLevel(logging.CRITICAL)  # pypdf logs recoverable problems; a library stays quiet
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader = PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted:
                try:
                    if not reader.decrypt(""):
                        raise Skip("unreadable PDF: encrypted")
                except Skip:
                    raise
                except Exception as exc:
                    raise Skip(f"unreadable PDF: encrypted ({type(exc).__name__})") from exc
            title = None
            try:
                meta = reader.metadata
                title = (meta.title or "").strip() if meta else None
            except Exception:
                title = None
            title = title or fallback_title
            chunks: list[Chunk] = []
            for number, page in enumerate(reader.pages, start=1):
                try:
                    text = page.extract_text() or ""
                except Exception:
                    continue
                text = re.sub(r"[ \t]+", " ", text).strip()
                if not text:
                    continue
                for piece in plain_document(text, title=title).chunks:
                    chunks.append(Chunk(heading=f"page {number}", text=piece.text, extra=title))
    except Skip:
        raise
    except Exception as exc:
        raise Skip(f"unreadable PDF: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}") from exc
    finally:
        log.setLevel(level)
    if not chunks:
        raise Skip("PDF has no extractable text (a scanned PDF?)")
    return Parsed(title=title, chunks=chunks)


def ingest_file(path: Path, *, max_bytes: int | None = None) -> Document:
    """One user file -> a Document, or Skip with the reason."""
    limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise Skip(f"unsupported file type ({path.suffix or 'no extension'}); "
                   f"supported: {' '.join(sorted(SUFFIXES))}")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise Skip(f"unreadable: {exc.strerror or exc}") from exc
    if size > limit:
        raise Skip(f"larger than {limit / 2**20:.0f} MB ({size / 2**20:.1f} MB)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise Skip(f"unreadable: {exc.strerror or exc}") from exc
    if not data.strip():
        raise Skip("empty file")
    fallback = path.stem.replace("_", " ").replace("-", " ")
    if kind == "pdf":
        parsed = _pdf_document(data, fallback_title=fallback)
    else:
        text = _decode_text(data)
        if kind == "markdown":
            parsed = markdown_document(text, fallback_title=fallback)
        elif kind == "html":
            parsed = html_document(text, fallback_title=fallback)
        else:
            parsed = plain_document(text, title=fallback)
    if not parsed.chunks:
        raise Skip("no text to index")
    return Document(doc_id=user_doc_id(path), kind="user", title=parsed.title, source=str(path),
                    content_hash=content_hash(data), size=len(data), chunks=parsed.chunks, tags=parsed.tags,
                    rules=parsed.rules)


def walk(root: Path) -> list[Path]:
    """Every file under `root` (hidden files and folders left out), sorted; no symlink loops."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out += [Path(dirpath) / f for f in sorted(filenames) if not f.startswith(".")]
    return out


__all__ = ["Document", "Skip", "MAX_FILE_BYTES", "SUFFIXES", "bundled_documents", "bundled_files", "bundled_hash",
           "bundled_source", "ingest_file", "text_hash", "user_doc_id", "walk"]
