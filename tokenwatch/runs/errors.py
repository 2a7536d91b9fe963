"""The one error type of run loading (kept import-free: the CLI imports it on every error path)."""

from __future__ import annotations


class RunLoadError(ValueError):
    """A run that cannot be loaded at all: one line naming the path (the CLI prints it, exit status 2)."""
