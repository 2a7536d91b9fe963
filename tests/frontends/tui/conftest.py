"""The snapshot comparison says what differs: a mismatch prints the screen rows whose text (or, where the
text is the same, whose colours) differ, so a failure in CI can be read from its log alone (the plugin's
HTML report stays on the machine that ran it)."""

from __future__ import annotations

import html
import pickle
import re
from collections.abc import Callable
from typing import Any

import pytest
from pytest_textual_snapshot import node_to_report_path

_CELL = re.compile(r'<text class="([^"]*)" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>')


def screen_rows(svg: str) -> list[tuple[str, str]]:
    """The screenshot's rows, top to bottom: (text, the style classes of its cells in order)."""
    rows: dict[float, list[tuple[float, str, str]]] = {}
    for style, x, y, text in _CELL.findall(svg):
        rows.setdefault(float(y), []).append(
            (float(x), html.unescape(text).replace("\xa0", " ").rstrip("\n"), style)
        )
    out = []
    for y in sorted(rows):
        cells = sorted(rows[y])
        out.append(("".join(text for _, text, _ in cells), " ".join(style for _, _, style in cells)))
    return out


def screen_difference(expected: str, actual: str, most: int = 12) -> str:
    """The rows that differ between two screenshots, as text; colours only where no text differs."""
    want, got = screen_rows(expected), screen_rows(actual)
    lines = [f"rows: expected {len(want)}, actual {len(got)}"]
    texts = [(i, a[0], b[0]) for i, (a, b) in enumerate(zip(want, got, strict=False)) if a[0] != b[0]]
    for i, a, b in texts[:most]:
        lines += [f"row {i}: expected {a!r}", f"row {i}:   actual {b!r}"]
    if not texts:
        styles = [i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a[1] != b[1]]
        lines.append(
            f"the same text; the colours differ in rows {styles[:most]}" if styles else "the same cells"
        )
    return "\n".join(lines)


@pytest.fixture
def snap_compare(snap_compare: Callable[..., bool], request: pytest.FixtureRequest) -> Callable[..., bool]:
    def compare(*args: Any, **kwargs: Any) -> bool:
        if snap_compare(*args, **kwargs):
            return True
        data = pickle.loads(node_to_report_path(request.node).read_bytes())
        expected, actual, exists = data[1], data[2], data[-1]
        print("no snapshot stored yet" if not exists else screen_difference(expected, actual))
        return False

    return compare
