"""Errors a user can cause. The CLI turns each into one line and exit code 2."""

from __future__ import annotations


class KernelloopError(Exception):
    """A problem the user can fix; `str(err)` is the one line to show."""


class InputError(KernelloopError):
    """A file is missing, unreadable or not a CUDA program that follows the contract."""


class EnvironmentProblem(KernelloopError):
    """The machine lacks something kernelloop needs (nvcc, a GPU, a permission)."""


class ConfigError(KernelloopError):
    """A setting has a value kernelloop cannot use."""
