"""The files kernelloop ships inside its package (prompts, exemplars and their templates, knowledge
notes, the harness header), found through importlib.resources: an installed wheel reads the same files
a checkout does, and nothing looks outside the package."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from .errors import EnvironmentProblem


def package_path(*parts: str) -> Path:
    """The shipped file or folder PARTS inside the kernelloop package, as a file-system path (nvcc and
    the corpus read them by path). A package imported from somewhere that is not a folder (a zip) is
    one clear line."""
    resource = files(__package__).joinpath(*parts)
    if not isinstance(resource, Path):
        raise EnvironmentProblem(f"kernelloop's shipped files are not in a folder ({resource}); "
                                 "install kernelloop with pip, not from a zip")
    return resource
