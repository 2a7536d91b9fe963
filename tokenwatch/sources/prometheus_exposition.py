"""Prometheus text exposition -> flat samples, with bad lines skipped instead of failing the scrape.

prometheus_client's parser rejects a whole scrape at its first bad line. A scrape is parsed whole
first (the normal, fast case); if that fails, each line is checked on its own, bad ones are reported
with their numbers and the rest is parsed again, so one corrupt line costs one line, not the scrape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from tokenwatch.sources.lines import snippet

MAX_SCRAPE_CHARS = 64 << 20


@dataclass(frozen=True, slots=True)
class Series:
    """One sample line: its full sample name (``..._total``, ``..._bucket``), labels and value."""

    name: str
    labels: Mapping[str, str]
    value: float


def _parse(text: str) -> list[Series]:
    out: list[Series] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.append(Series(sample.name, sample.labels, float(sample.value)))
    return out


def _line_ok(line: str) -> bool:
    try:
        _parse(line + "\n")
    except Exception:  # the third-party parser raises several types for bad input; any means "bad line"
        return False
    return True


def parse_exposition(text: str) -> tuple[list[Series], list[tuple[int, str]]]:
    """All samples of a scrape, and ``(line number, excerpt)`` of each line that had to be skipped."""
    if len(text) > MAX_SCRAPE_CHARS:
        return [], [(1, f"scrape of {len(text)} characters is over the {MAX_SCRAPE_CHARS >> 20} Mi limit")]
    text = text.replace("\x00", "\ufffd")
    try:
        return _parse(text), []
    except Exception:
        pass
    kept: list[str] = []
    bad: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not stripped.startswith("# TYPE")):
            kept.append(line)  # comments and HELP lines never break a parse
        elif _line_ok(stripped):
            kept.append(line)
        else:
            bad.append((number, snippet(line)))
    try:
        return _parse("\n".join(kept) + "\n"), bad
    except Exception:
        # Lines fine alone but not together (e.g. a sample clashing with a TYPE): read them untyped.
        series: list[Series] = []
        for number, line in enumerate(kept, start=1):
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                try:
                    series += _parse(stripped + "\n")
                except Exception:
                    bad.append((number, snippet(line)))
        return series, bad
