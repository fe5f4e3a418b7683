"""`kernelloop corpus add|list|search|remove|stats` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
