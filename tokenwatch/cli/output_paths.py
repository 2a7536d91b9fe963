"""Where outputs may go: never onto an input, never two outputs on one file, never over a file by accident.

A typo must not destroy a recording (``report run.jsonl -o run.jsonl``, ``--jsonl X --record X``). The
same file is recognised by any of its names: another spelling, a symlink or a hard link (inode).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenwatch.cli.usage import UsageError

STDOUT = "-"


@dataclass(frozen=True, slots=True)
class Output:
    flag: str  # how the command line named it: "--jsonl", "-o"
    path: str
    overwrites: bool = True  # False: the writer itself never replaces a file (--record)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (inode when both exist; the resolved path otherwise)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(inputs: Sequence[str | Path], outputs: Sequence[Output], *, force: bool) -> None:
    """Raise :class:`UsageError` (one line) for an output that would destroy something.

    An output that is one of the ``inputs`` is refused even with ``force``; so are two outputs on one
    file. An output onto an existing file is refused unless ``force``.
    """
    chosen = [o for o in outputs if o.path and o.path != STDOUT]
    for out in chosen:
        for source in inputs:
            if same_file(out.path, source):
                raise UsageError(f"{out.flag} {out.path}: is the input {source}; refusing to overwrite it")
    for i, a in enumerate(chosen):
        for b in chosen[i + 1 :]:
            if same_file(a.path, b.path):
                raise UsageError(
                    f"{a.flag} {a.path} and {b.flag} {b.path} are the same file: give each its own"
                )
    if not force:
        for out in chosen:
            if out.overwrites and os.path.lexists(out.path) and not os.path.isdir(out.path):
                raise UsageError(
                    f"{out.flag} {out.path}: already exists; choose another name, or --force to overwrite it"
                )
