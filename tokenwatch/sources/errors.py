"""The one error type of the source parsers: printed by the CLI as one line, exit status 2."""

from __future__ import annotations


class SourceFormatError(ValueError):
    """Input that cannot be used at all: ``file[:line]: problem`` (skippable lines become Notices)."""
