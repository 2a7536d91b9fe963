"""Provenance helpers: the digest of what was read, and times in ISO 8601."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path


def sha256_file(path: Path) -> tuple[str, int]:
    """The SHA-256 (hex) and size in bytes of a file, read in 1 MiB pieces."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def sha256_tree(root: Path, files: list[Path]) -> tuple[str, int]:
    """One SHA-256 over ``files`` (each prefixed by its path relative to ``root``) and their total size."""
    digest = hashlib.sha256()
    size = 0
    for file in files:
        data = file.read_bytes()
        digest.update(str(file.parent.relative_to(root)).encode() + b"\0" + data)
        size += len(data)
    return digest.hexdigest(), size


def iso_utc(epoch: float) -> str:
    """``epoch`` (s) as ISO 8601 UTC to the second; "" when unknown (0 or less)."""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds") if epoch > 0 else ""
