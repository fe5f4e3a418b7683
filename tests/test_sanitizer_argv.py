"""compute-sanitizer's command line (tools/sanitizer.py): the options a given compute-sanitizer
has (its --help says so) are used, the others left out, so an older toolkit still runs."""

from __future__ import annotations

from pathlib import Path

from kernelloop.tools.sanitizer import MEMCHECK_EXIT_CODE, memcheck_argv, supports_option


def _fake(tmp_path: Path, name: str, help_text: str) -> Path:
    tool = tmp_path / name
    tool.write_text(f"#!/bin/sh\ncat <<'EOF'\n{help_text}\nEOF\n")
    tool.chmod(0o755)
    return tool


def test_padding_and_stream_ordered_race_tracking_are_used_where_the_sanitizer_has_them(tmp_path):
    new = _fake(tmp_path, "new-sanitizer", "  --padding arg\n  --track-stream-ordered-races arg  (all, none)")
    argv = memcheck_argv(new, Path("program"), padding=1 << 20)
    assert argv[:5] == [str(new), "--tool", "memcheck", "--error-exitcode", str(MEMCHECK_EXIT_CODE)]
    assert argv[argv.index("--padding") + 1] == str(1 << 20)
    assert argv[argv.index("--track-stream-ordered-races") + 1] == "all" and argv[-1] == "program"
    old = _fake(tmp_path, "old-sanitizer", "  --leak-check arg")
    argv = memcheck_argv(old, Path("program"), padding=1 << 20)
    assert "--padding" not in argv and "--track-stream-ordered-races" not in argv
    assert not supports_option(tmp_path / "missing", "--padding")
