"""`bench check --against REV`: the suite, its settings and its references as a trusted revision has them.

Everything `bench check` decides with would otherwise come from the change it checks: a pull
request could re-record a reference from its own slower or wrong program (the check then compares
the program with itself and says SAME), raise a kernel's regression threshold, loosen a tolerance,
switch memcheck off or drop a kernel from the suite (red team round 46). With `--against REV` (the
branch the change goes into, e.g. `origin/main`) the kernels to check, their references and
every `[verify]` and `[bench]` setting are read from REV with git; only the programs under test
come from the working tree. A kernel the change adds is checked against the reference the change
brings, and said to be new; a kernel REV has and the change removed is an error."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

from ..config import PROJECT_FILE, Settings, load_settings
from ..errors import InputError

GIT_TIMEOUT_S = 60.0


_REF_NAMESPACES = ("refs/heads/", "refs/remotes/", "refs/tags/")


class Revision:
    """Files of one git revision, addressed by their paths in the working tree. The revision is
    resolved to its commit once; a name two kinds of ref share (a tag named like the remote
    branch) is refused rather than resolved by git's precedence (red team round 47)."""

    def __init__(self, rev: str, project_dir: Path) -> None:
        self.rev = rev
        self.project_dir = project_dir.resolve()
        top = self._git("rev-parse", "--show-toplevel", cwd=self.project_dir)
        if top is None:
            raise InputError(f"--against {rev}: {self.project_dir} is not inside a git repository")
        self.root = Path(top.strip()).resolve()
        if rev.startswith("-"):
            raise InputError(f"--against {rev}: not a revision")
        sharing = [ns + rev for ns in _REF_NAMESPACES
                   if self._git("show-ref", "--verify", "--quiet", ns + rev, cwd=self.root) is not None]
        if len(sharing) > 1:
            raise InputError(f"--against {rev}: ambiguous, {' and '.join(sharing)} both exist; name one in full "
                             f"(e.g. --against {sharing[0]}) or give a commit")
        commit = self._git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", cwd=self.root)
        if commit is None:
            raise InputError(f"--against {rev}: no such revision here (fetch it first, e.g. `git fetch origin "
                             f"{rev.split('/', 1)[-1]}`, or check out with history: actions/checkout's fetch-depth: 0)")
        self.commit = commit.strip()

    def _git(self, *args: str, cwd: Path) -> str | None:
        try:
            run = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                                 errors="surrogateescape")
        except FileNotFoundError:
            raise InputError("--against needs git on PATH") from None
        except subprocess.TimeoutExpired:
            raise InputError(f"--against {self.rev}: git did not answer within {GIT_TIMEOUT_S:.0f} s") from None
        return run.stdout if run.returncode == 0 else None

    def relative(self, path: Path) -> str:
        """PATH (in the working tree) as git names it: by its words alone, never through the working
        tree's symbolic links (which the change under check could place)."""
        absolute = Path(os.path.normpath(path if path.is_absolute() else self.project_dir / path))
        try:
            return str(PurePosixPath(absolute.relative_to(self.root)))
        except ValueError:
            raise InputError(f"--against {self.rev}: {absolute} is outside the repository {self.root}") from None

    def read(self, path: Path) -> str | None:
        """The file's text at the revision (a regular file of its tree); None when it has none."""
        where = f"{self.commit}:{self.relative(path)}"
        if (self._git("cat-file", "-t", where, cwd=self.root) or "").strip() != "blob":
            return None
        return self._git("cat-file", "blob", where, cwd=self.root)

    def label(self, path: Path) -> str:
        return f"{self.rev}:{self.relative(path)}"


def trusted_settings(revision: Revision, cli: dict[str, Any] | None = None) -> Settings:
    """The settings as REV's kernelloop.toml gives them (then the environment and flags, as always:
    those come from the CI job's own definition)."""
    project_file = revision.project_dir / PROJECT_FILE
    return load_settings(cli, project_dir=revision.project_dir,
                         project_text=(revision.label(project_file), revision.read(project_file)))
