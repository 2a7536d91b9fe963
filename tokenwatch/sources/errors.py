"""The one error type of the source parsers: printed by the CLI as one line, exit status 2."""

from __future__ import annotations

from pathlib import Path


class SourceFormatError(ValueError):
    """Input that cannot be used at all: ``file[:line]: problem`` (skippable lines become Notices)."""


def read_bounded(path: Path, max_bytes: int, what: str) -> bytes:
    """A whole small file, refusing one larger than ``max_bytes`` (not the format, or runaway)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise SourceFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise SourceFormatError(f"{path}: over {max_bytes >> 20} MiB: not a {what}")
    return data
