"""The knowledge corpus: building from the bundled notes, BM25 search, the diagnosis
hand-off, user documents (md/txt/html/pdf, and what is skipped), removal, and recovery
from a corrupt index or changed bundled notes. No network, no GPU.

Dense retrieval is switched off here (KERNELLOOP_CORPUS_DENSE=off) so these tests are
quick and deterministic; test_retrieval_quality.py measures dense and hybrid.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from kernelloop.config import Settings
from kernelloop.corpus import (
    MAX_FILE_BYTES,
    add_path,
    corpus_stats,
    list_documents,
    rebuild_index,
    remove_document,
    search,
    search_for_diagnosis,
)
from kernelloop.corpus import engine, ingest, store
from kernelloop.errors import EnvironmentProblem, InputError
from kernelloop.profiler.rules import RULES

from .conftest import FIXTURES

NOTES = ingest.NOTES_DIR
needs_notes = pytest.mark.skipif(not any(NOTES.glob("*.md")), reason="bundled notes not present yet")


@pytest.fixture(autouse=True)
def bm25_only(monkeypatch):
    monkeypatch.setenv("KERNELLOOP_CORPUS_DENSE", "off")


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(cache_dir=tmp_path / "cache", data_dir=tmp_path / "data")


@pytest.fixture
def own_notes(tmp_path, monkeypatch) -> Path:
    """A private copy of the bundled notes (and no exemplars) that a test may edit."""
    folder = tmp_path / "notes"
    if any(NOTES.glob("*.md")):
        shutil.copytree(NOTES, folder)
    else:  # pragma: no cover - only before the notes land
        folder.mkdir()
        (folder / "uncoalesced-access.md").write_text(
            "---\nid: uncoalesced-access\ntitle: Uncoalesced global memory access\ntags: [coalescing]\n---\n"
            "# Uncoalesced global memory access\n\n## Signal\nMany sectors per request; coalesce the loads.\n")
    monkeypatch.setattr(ingest, "NOTES_DIR", folder)
    monkeypatch.setattr(ingest, "EXEMPLARS_DIR", tmp_path / "no-exemplars")
    return folder


def minimal_pdf(text: str, title: str | None = None) -> bytes:
    """A one-page PDF with `text` in Helvetica, written by hand (valid xref offsets)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    if title:
        objects.append(f"<< /Title ({title}) >>".encode())
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    info = b" /Info %d 0 R" % len(objects) if title else b""
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, info, xref)
    return bytes(out)


# -- the bundled corpus ------------------------------------------------------------------------

@needs_notes
def test_builds_from_the_bundled_notes(settings):
    stats = corpus_stats(settings)
    notes = sorted(p.stem for p in NOTES.glob("*.md"))
    assert stats.by_kind.get("note") == len(notes)
    assert stats.chunks > stats.documents >= len(notes)
    assert Path(stats.index_path) == settings.data_dir / "corpus" / "index.sqlite3"
    assert Path(stats.index_path).is_file()
    assert stats.built_at and len(stats.bundled_hash) == 64
    assert stats.warnings == []
    assert stats.dense is None  # switched off in this module
    docs = {d.doc_id: d for d in list_documents(settings)}
    assert {d for d, info in docs.items() if info.kind == "note"} == set(notes)  # front-matter id == file name
    missing = {r.note for r in RULES} - set(docs)
    assert not missing, f"rules name notes that do not exist: {missing}"
    for info in docs.values():
        assert info.chunks >= 1 and Path(info.source).is_file()


@needs_notes
def test_search_finds_the_coalescing_note(settings):
    hits = search("neighbouring threads read addresses far apart, how do I coalesce my global loads?",
                  k=5, mode="bm25", settings=settings)
    assert hits[0].doc_id == "uncoalesced-access"
    assert hits[0].kind == "note" and hits[0].retriever == "bm25" and hits[0].score > 0
    assert hits[0].chunk.strip() and Path(hits[0].source).name == "uncoalesced-access.md"
    assert len({h.doc_id for h in hits}) == len(hits) <= 5  # one hit per document
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # auto falls back to BM25 where dense retrieval is unavailable
    assert [h.retriever for h in search("uncoalesced access", settings=settings)] == ["bm25"] * 5


@needs_notes
def test_search_for_diagnosis_puts_the_named_note_first(settings):
    from kernelloop.profiler.diagnosis import diagnose
    from kernelloop.tools.ncu_report_reader import read_report

    diagnosis = diagnose(read_report(FIXTURES / "ncu" / "suite" / "naive_matmul.ncu-rep"))
    assert diagnosis.findings[0].note == "smem-tiling"
    hits = search_for_diagnosis(diagnosis, k=5, settings=settings)
    assert hits[0].doc_id == "smem-tiling" and hits[0].retriever == "rule"
    ids = [h.doc_id for h in hits]
    assert len(ids) == len(set(ids)) == 5
    named = list(dict.fromkeys(f.note for f in diagnosis.findings))
    assert ids[: len(named)] == named  # every note a finding names, in severity order
    assert all(h.retriever in ("rule", "bm25") for h in hits)
    assert len(search_for_diagnosis(diagnosis, k=1, settings=settings)) == 1


# -- user documents ---------------------------------------------------------------------------

def _user_folder(root: Path) -> Path:
    folder = root / "mydocs"
    (folder / "sub").mkdir(parents=True)
    (folder / "tma.md").write_text("# Tensor memory accelerator\n\n## Bulk copies\n\n"
                                   "The quokkatron pattern issues cp.async.bulk copies from one elected thread.\n")
    (folder / "sub" / "log.txt").write_text("Profiling log.\n\nThe zebrafinch kernel stalled on a barrier.\n")
    (folder / "page.html").write_text(
        "<html><head><title>Wombat tuning guide</title><style>.x{color:red}</style></head>"
        "<body><h1>Wombat tuning</h1><p>Use the wombatize flag for persistent kernels.</p>"
        "<script>var hidden = 'scriptword';</script></body></html>")
    (folder / "paper.pdf").write_bytes(minimal_pdf("Pangolin scheduling hides memory latency", title="Pangolin"))
    (folder / "blob.txt").write_bytes(b"\x7fELF\x00\x01\x02\x00binary\x00stuff" * 100)
    (folder / "image.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with open(folder / "huge.md", "wb") as f:  # 25 MB (sparse): over the 20 MB limit
        f.truncate(25 * 1024 * 1024)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf at all\n%%EOF\n")
    (folder / ".hidden.md").write_text("# hidden\n\nsecretword\n")
    return folder


def test_add_path_indexes_a_folder_and_skips_with_reasons(settings, tmp_path, own_notes):
    folder = _user_folder(tmp_path)
    report = add_path(folder, settings)
    added = {Path(p).name for p in report.added}
    assert added == {"tma.md", "log.txt", "page.html", "paper.pdf"}
    assert len(report.doc_ids) == 4 and all(d.startswith("user:") for d in report.doc_ids)
    reasons = {Path(p).name: why for p, why in report.skipped}
    assert set(reasons) == {"blob.txt", "image.bin", "huge.md", "broken.pdf"}
    assert "binary" in reasons["blob.txt"]
    assert "unsupported file type" in reasons["image.bin"]
    assert "larger than 20 MB" in reasons["huge.md"] and MAX_FILE_BYTES == 20 * 1024 * 1024
    assert reasons["broken.pdf"].startswith("unreadable PDF")
    assert report.warnings == []

    for word, name, title in (("quokkatron", "tma.md", "Tensor memory accelerator"),
                              ("zebrafinch", "log.txt", "log"),
                              ("wombatize", "page.html", "Wombat tuning guide"),
                              ("pangolin", "paper.pdf", "Pangolin")):
        hits = search(f"{word} please", mode="bm25", settings=settings)
        assert hits and hits[0].kind == "user" and Path(hits[0].source).name == name, (word, hits[:1])
        assert hits[0].title == title
    assert search("scriptword secretword", mode="bm25", settings=settings) == []  # <script> and hidden files
    stats = corpus_stats(settings)
    assert stats.by_kind["user"] == 4

    # the same folder again: nothing changed, nothing re-indexed
    again = add_path(folder, settings)
    assert again.added == [] and sum("unchanged" in why for _, why in again.skipped) == 4
    # a changed file replaces its earlier version
    (folder / "tma.md").write_text("# Tensor memory accelerator\n\nNow about the capybara barrier.\n")
    changed = add_path(folder / "tma.md", settings)
    assert [Path(p).name for p in changed.added] == ["tma.md"]
    assert search("quokkatron", mode="bm25", settings=settings) == []
    assert Path(search("capybara", mode="bm25", settings=settings)[0].source).name == "tma.md"
    assert corpus_stats(settings).by_kind["user"] == 4


def test_add_path_single_files_and_missing_path(settings, tmp_path, own_notes):
    with pytest.raises(InputError, match="no such file"):
        add_path(tmp_path / "nope", settings)
    f = tmp_path / "notes.markdown"
    f.write_text("---\ntitle: Lemur notes\ntags: [lemurs]\n---\nLemur kernels fuse well.\n")
    report = add_path(f, settings)
    assert report.added == [str(f.resolve())]
    hit = search("lemur", mode="bm25", settings=settings)[0]
    assert hit.title == "Lemur notes" and hit.doc_id == report.doc_ids[0]
    odd = tmp_path / "data.csv"
    odd.write_text("a,b\n")
    assert add_path(odd, settings).skipped[0][1].startswith("unsupported file type")


def test_remove_document(settings, tmp_path, own_notes):
    folder = _user_folder(tmp_path)
    report = add_path(folder, settings)
    by_name = {Path(p).name: d for p, d in zip(report.added, report.doc_ids, strict=True)}
    assert remove_document(by_name["tma.md"], settings) is True
    assert search("quokkatron", mode="bm25", settings=settings) == []
    assert remove_document(by_name["tma.md"], settings) is False  # already gone
    assert remove_document(str(folder / "page.html"), settings) is True  # by path
    assert search("wombatize", mode="bm25", settings=settings) == []
    assert remove_document(str(folder), settings) is True  # everything under a folder
    assert "user" not in corpus_stats(settings).by_kind
    assert remove_document("user:nothing-00000000", settings) is False
    with pytest.raises(InputError, match="bundled"):
        remove_document(next(d.doc_id for d in list_documents(settings) if d.kind == "note"), settings)
    with pytest.raises(InputError):
        remove_document("  ", settings)


# -- errors and empty corpora -------------------------------------------------------------------

def test_empty_query_is_an_input_error(settings):
    for q in ("", "   ", "\n\t"):
        with pytest.raises(InputError, match="empty query"):
            search(q, settings=settings)
    with pytest.raises(InputError):
        search("tiling", k=0, settings=settings)
    with pytest.raises(InputError):
        search("tiling", mode="fuzzy", settings=settings)  # type: ignore[arg-type]


def test_missing_corpus_gives_no_hits(settings, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "NOTES_DIR", tmp_path / "no-notes")
    monkeypatch.setattr(ingest, "EXEMPLARS_DIR", tmp_path / "no-exemplars")
    assert search("shared memory tiling", settings=settings) == []
    assert search("shared memory tiling", mode="dense", settings=settings) == []  # empty beats "unavailable"
    stats = corpus_stats(settings)
    assert stats.documents == 0 and stats.chunks == 0 and stats.by_kind == {}
    from kernelloop.profiler.diagnosis import diagnose
    from kernelloop.tools.ncu_report_reader import read_report

    d = diagnose(read_report(FIXTURES / "ncu" / "suite" / "naive_matmul.ncu-rep"))
    assert search_for_diagnosis(d, settings=settings) == []


def test_dense_mode_without_the_extra_is_a_one_line_error(settings, own_notes):
    with pytest.raises(EnvironmentProblem, match="KERNELLOOP_CORPUS_DENSE"):
        search("tiling", mode="dense", settings=settings)


def test_unwritable_data_dir_falls_back_to_memory(tmp_path, own_notes):
    blocker = tmp_path / "file-not-folder"
    blocker.write_text("x")
    s = Settings(cache_dir=tmp_path / "c", data_dir=blocker)
    stats = corpus_stats(s)
    assert stats.documents > 0 and any("in-memory" in w for w in stats.warnings)
    assert search("coalescing uncoalesced", mode="bm25", settings=s)[0].doc_id == "uncoalesced-access"


# -- robustness ---------------------------------------------------------------------------------

def test_corrupt_index_is_moved_aside_and_rebuilt(settings, tmp_path, own_notes):
    doc = tmp_path / "mine.md"
    doc.write_text("# Mine\n\nThe narwhal kernel.\n")
    add_path(doc, settings)
    index = settings.data_dir / "corpus" / "index.sqlite3"
    index.write_bytes(b"this is garbage, not a database\x00" * 200)
    stats = corpus_stats(settings)  # no exception
    assert stats.by_kind.get("note", 0) > 0
    assert any("corrupt" in w and "moved aside" in w for w in stats.warnings), stats.warnings
    aside = list(index.parent.glob("index.sqlite3.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"this is garbage")
    # the user document came back from the manifest of added paths
    assert stats.by_kind.get("user") == 1
    assert Path(search("narwhal", mode="bm25", settings=settings)[0].source) == doc.resolve()
    report = add_path(doc, settings)  # later calls are quiet again
    assert report.warnings == []


def test_malformed_database_pages_are_detected(settings, own_notes):
    corpus_stats(settings)
    index = settings.data_dir / "corpus" / "index.sqlite3"
    data = bytearray(index.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for i in range(page, len(data)):  # keep the header, scramble every page after the first
        data[i] = (data[i] * 7 + 13) % 256
    index.write_bytes(bytes(data))
    store._CHECKED.clear()
    engine._states.clear()  # as a fresh process would
    hits = search("bank conflicts padding", mode="bm25", settings=settings)
    assert hits and hits[0].doc_id == "bank-conflicts"
    assert any("corrupt" in w for w in corpus_stats(settings).warnings)


def test_a_failed_write_leaves_the_index_as_it_was(settings, tmp_path, own_notes, monkeypatch):
    folder = _user_folder(tmp_path)
    before = corpus_stats(settings)
    calls = {"n": 0}
    real = store.insert_document

    def crash_on_second(conn, doc, added_at=None):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("simulated crash mid-write")
        real(conn, doc, added_at)

    monkeypatch.setattr(store, "insert_document", crash_on_second)
    with pytest.raises(RuntimeError):
        add_path(folder, settings)
    monkeypatch.setattr(store, "insert_document", real)
    after = corpus_stats(settings)
    assert (after.documents, after.chunks) == (before.documents, before.chunks)
    assert search("quokkatron", mode="bm25", settings=settings) == []
    conn = sqlite3.connect(after.index_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_changed_bundled_notes_rebuild_and_keep_user_documents(settings, tmp_path, own_notes):
    doc = tmp_path / "mine.txt"
    doc.write_text("Okapi kernels are mine.\n")
    add_path(doc, settings)
    first = corpus_stats(settings)
    note = next(own_notes.glob("*.md"))
    note_id = ingest.markdown_document(note.read_text(), fallback_title="", note=True).doc_id or note.stem
    assert search("axolotlize", mode="bm25", settings=settings) == []
    note.write_text(note.read_text() + "\n## Extra\n\nAxolotlize the loop.\n")
    second = corpus_stats(settings)
    assert second.bundled_hash != first.bundled_hash
    assert search("axolotlize", mode="bm25", settings=settings)[0].doc_id == note_id
    assert second.by_kind.get("user") == 1
    assert search("okapi", mode="bm25", settings=settings)[0].kind == "user"
    # a new note appears, a removed one disappears
    (own_notes / "zz-new.md").write_text("---\nid: zz-new\ntitle: Brand new note\n---\n# Brand new note\n\nGecko.\n")
    assert search("gecko", mode="bm25", settings=settings)[0].doc_id == "zz-new"
    (own_notes / "zz-new.md").unlink()
    assert search("gecko", mode="bm25", settings=settings) == []
    assert rebuild_index(settings).by_kind.get("user") == 1


def test_exemplar_kernels_are_indexed(settings, tmp_path, monkeypatch, own_notes):
    ex = tmp_path / "exemplars"
    ex.mkdir()
    (ex / "tiled_matmul.cu").write_text("// Tiled matmul: 32x32 shared-memory tiles, register blocking\n"
                                        "__global__ void tiled(const float* A) {\n  __shared__ float As[32][33];\n}\n")
    monkeypatch.setattr(ingest, "EXEMPLARS_DIR", ex)
    hits = search("tiled matmul exemplar kernel", mode="bm25", settings=settings)
    exemplar = next(h for h in hits if h.kind == "exemplar")
    assert exemplar.doc_id == "exemplar:tiled_matmul" and exemplar.title.startswith("Tiled matmul")
    assert Path(exemplar.source) == ex / "tiled_matmul.cu" and "__shared__" in exemplar.chunk


def test_tokenizer_and_chunking():
    from kernelloop.corpus.text import markdown_document, tokenize

    assert tokenize("Coalescing coalesced loads") == ["coalesc", "coalesc", "load"]
    assert {"threadidx", "thread", "idx"} <= set(tokenize("threadIdx.x"))
    assert tokenize("GPUs and SMs, 97% busy") == ["gpu", "sm", "busy"]
    doc = markdown_document("---\nid: n\ntitle: T\ntags: [a b, c]\n---\n# T\n\nintro\n\n## One\n\nx\n\n"
                            "```\n## not a heading\n```\n\n## See also\n- other\n", fallback_title="f", note=True)
    assert doc.doc_id == "n" and doc.tags == ["a b", "c"]
    assert [c.heading for c in doc.chunks] == ["overview", "One"]
    assert "## not a heading" in doc.chunks[1].text and all("T\nT" in c.extra for c in doc.chunks)


def test_corruption_found_mid_query_is_repaired_once(settings, own_notes, monkeypatch):
    corpus_stats(settings)
    real = engine._load_state
    calls = {"n": 0}

    def flaky(index):
        calls["n"] += 1
        if calls["n"] == 1:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(index)

    monkeypatch.setattr(engine, "_load_state", flaky)
    hits = search("bank conflicts padding", mode="bm25", settings=settings)
    assert hits[0].doc_id == "bank-conflicts" and calls["n"] == 2
    assert list((settings.data_dir / "corpus").glob("index.sqlite3.corrupt-*"))
