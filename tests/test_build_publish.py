"""The build cache's entries are published whole and never changed afterwards (a flake once showed
a host-code scan reading a relocation of another compile of the same source: nvcc's objects differ
between compiles, and the cache entry was rewritten file by file while another process read it)."""

from __future__ import annotations

import threading
from pathlib import Path

from kernelloop.tools.nvcc import publish_build


def _work(root: Path, tag: str) -> Path:
    work = root / f"work-{tag}"
    work.mkdir()
    (work / "program").write_text(f"program of build {tag}")
    (work / "editable.o").write_text(f"object of build {tag}")
    return work


def test_the_first_published_build_is_kept_and_nothing_is_left_behind(tmp_path):
    out = tmp_path / "builds" / "key"
    publish_build(_work(tmp_path, "a"), ("program", "editable.o"), out)
    inode = (out / "editable.o").stat().st_ino
    publish_build(_work(tmp_path, "b"), ("program", "editable.o"), out)
    assert (out / "program").read_text() == "program of build a"
    assert (out / "editable.o").read_text() == "object of build a"
    assert (out / "editable.o").stat().st_ino == inode  # a reader holding the path sees one file
    assert sorted(p.name for p in out.parent.iterdir()) == ["key"]  # no staging folder left


def test_an_entry_missing_an_output_is_filled_in_and_what_it_holds_is_kept(tmp_path):
    out = tmp_path / "builds" / "key"
    out.mkdir(parents=True)
    (out / "program").write_text("program of an older build")
    publish_build(_work(tmp_path, "b"), ("program", "editable.o"), out)
    assert (out / "program").read_text() == "program of an older build"
    assert (out / "editable.o").read_text() == "object of build b"


def test_builds_published_at_once_leave_every_output_of_one_build(tmp_path):
    out = tmp_path / "builds" / "key"
    works = [_work(tmp_path, str(k)) for k in range(8)]
    start = threading.Barrier(len(works))

    def publish(work: Path) -> None:
        start.wait()
        publish_build(work, ("program", "editable.o"), out)

    threads = [threading.Thread(target=publish, args=(w,)) for w in works]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tag = (out / "program").read_text().rsplit(" ", 1)[1]
    assert (out / "editable.o").read_text() == f"object of build {tag}"
    assert sorted(p.name for p in out.parent.iterdir()) == ["key"]
