"""`kernelloop corpus add|list|search|remove|stats` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT


def kl(tmp_path, *args):
    env = {**os.environ, "KERNELLOOP_DATA_DIR": str(tmp_path / "data"), "KERNELLOOP_CORPUS_DENSE": "off"}
    return subprocess.run([sys.executable, "-m", "kernelloop", "corpus", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


def test_corpus_round_trip(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "prefetch.md").write_text("# Prefetching\nUse cp.async double buffering to overlap tile loads with math.\n")
    (docs / "junk.bin").write_bytes(os.urandom(2048))
    stats = json.loads(kl(tmp_path, "stats", "--json").stdout)
    assert stats["by_kind"]["note"] >= 15
    added = kl(tmp_path, "add", str(docs))
    assert added.returncode == 0 and "added 1 document" in added.stdout and "junk.bin" in added.stderr
    hits = json.loads(kl(tmp_path, "search", "cp.async double buffering", "--json").stdout)
    assert hits[0]["kind"] == "user"
    listed = json.loads(kl(tmp_path, "list", "--json").stdout)
    assert any(d["kind"] == "user" for d in listed)
    assert kl(tmp_path, "remove", str(docs)).returncode == 0
    hits = json.loads(kl(tmp_path, "search", "cp.async double buffering", "--json").stdout)
    assert all(h["kind"] != "user" for h in hits)


def test_corpus_errors_are_one_line(tmp_path):
    for args, message in ((["search", "  "], "empty query"), (["add", "no/such/dir"], "no such file"),
                          (["remove", "nothing"], "no document you added")):
        r = kl(tmp_path, *args)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_adding_to_a_data_folder_that_cannot_be_used_fails_in_one_line(tmp_path):
    # issue 12: `corpus add` printed "added 1 document(s)" and exited 0 with the document kept nowhere (an
    # in-memory index, lost on exit) where the data folder was a file or could not be made
    doc = tmp_path / "tiles.md"
    doc.write_text("# Tiles\nStage [a tile] in shared memory.\n")
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for folder in (blocker, Path("/proc/kernelloop-none")):
        env = {**os.environ, "KERNELLOOP_DATA_DIR": str(folder), "KERNELLOOP_CORPUS_DENSE": "off"}
        run = subprocess.run([sys.executable, "-m", "kernelloop", "corpus", "add", str(doc)], capture_output=True,
                             text=True, cwd=ROOT, env=env, timeout=300)
        assert run.returncode == 2 and "added" not in run.stdout, (run.stdout, run.stderr)
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and "nothing added" in lines[0] and "KERNELLOOP_DATA_DIR" in lines[0], run.stderr
    search = kl(tmp_path, "search", "shared memory tiles", "--json")  # searching still works on the bundled notes
    assert search.returncode == 0, search.stderr


def test_a_file_where_the_data_folder_goes_is_named_as_such(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    env = {**os.environ, "KERNELLOOP_DATA_DIR": str(blocker)}
    run = subprocess.run([sys.executable, "-m", "kernelloop", "runs", "list"], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=300)
    assert run.returncode == 2 and f"{blocker} is a file, not a folder" in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_text_with_brackets_is_printed_literally_and_never_breaks_a_later_search(tmp_path):
    # rich markup would eat `[l]`, and `[/i]` (a closing tag with no opening one) would crash every search
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tiles.md").write_text("# Register tiles\nLoad a register tile from As and Bs: `ra[l] = As[k][l];` "
                                   "then close the italic run x[/i] and move on.\n")
    assert kl(tmp_path, "add", str(docs)).returncode == 0
    for _ in range(2):
        r = kl(tmp_path, "search", "register tile As Bs")
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert "ra[l] = As[k][l]" in r.stdout and "x[/i]" in r.stdout
