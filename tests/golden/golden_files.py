"""Byte comparison against a golden file, with a diff a person can read when it fails.

JSON lines are long (one snapshot of 18 nodes is ~3 KB on one line), so a JSONL mismatch is shown as
a diff of the differing snapshots pretty-printed, key by key, not of the raw lines.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

MAX_DIFF_LINES = 150
UPDATE_HINT = "if the change is intended: pytest tests/golden --update-goldens, and read the git diff"


def _text_lines(data: bytes) -> list[str]:
    return data.decode("utf-8", errors="replace").splitlines()


def _pretty_jsonl(data: bytes) -> list[list[str]]:
    """Each JSONL line as indented JSON lines (the raw line where it is not JSON)."""
    out = []
    for raw in data.splitlines():
        try:
            out.append(json.dumps(json.loads(raw), indent=1).splitlines())
        except ValueError:
            out.append([raw.decode("utf-8", errors="replace")])
    return out


def readable_diff(name: str, expected: bytes, actual: bytes) -> str:
    """A unified diff of ``expected`` (the golden file) and ``actual``, cut to MAX_DIFF_LINES."""
    if name.endswith(".jsonl"):
        old, new = _pretty_jsonl(expected), _pretty_jsonl(actual)
        changed = [i for i in range(max(len(old), len(new))) if old[i : i + 1] != new[i : i + 1]]
        lines = [f"{len(changed)} of {len(old)} golden / {len(new)} current snapshots differ"]
        for i in changed[:3]:  # the first few differing snapshots, each as its own diff
            a = old[i] if i < len(old) else []
            b = new[i] if i < len(new) else []
            lines += difflib.unified_diff(a, b, f"{name} line {i + 1} (golden)", f"line {i + 1} (now)", n=2)
    else:
        lines = list(
            difflib.unified_diff(_text_lines(expected), _text_lines(actual), f"{name} (golden)", "now", n=2)
        )
    if not lines or (len(lines) == 1 and name.endswith(".jsonl")):
        lines.append("same text, different bytes (line endings, trailing newline or encoding)")
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... {len(lines) - MAX_DIFF_LINES} more diff lines"]
    return "\n".join(line.rstrip("\n") for line in lines)


def check_golden(path: Path, actual: bytes, *, update: bool) -> None:
    """Fail with a readable diff unless ``actual`` equals the golden file byte for byte.

    With ``update`` the golden file is (re)written instead, and the check passes.
    """
    __tracebackhide__ = True  # the diff is the message; the frames only repeat the bytes
    if update:
        if not path.exists() or path.read_bytes() != actual:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(actual)
        return
    if not path.exists():
        raise AssertionError(f"{path.name}: no golden file yet; {UPDATE_HINT}")
    expected = path.read_bytes()
    if expected != actual:
        raise AssertionError(
            f"{path.name} differs from the golden file\n{readable_diff(path.name, expected, actual)}\n"
            f"{UPDATE_HINT}"
        )
