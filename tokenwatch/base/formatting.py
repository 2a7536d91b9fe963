"""Formatting shared by every front end (plain text, no Rich): one way to print a figure, and the one
function that makes text from outside safe to print (:func:`printable`)."""

from __future__ import annotations

import math
import re

from tokenwatch.base.durations import format_clock

__all__ = [
    "BAND_UNKNOWN",
    "DASH",
    "format_clock",
    "group",
    "json_number",
    "kilowatts",
    "natural_key",
    "one_line",
    "pct",
    "printable",
    "projection",
    "rate",
    "seconds_label",
    "seconds_ms",
    "si",
    "verdict_word",
]

# C0 and C1 controls, DEL, line and paragraph separators, and the bidi overrides that reorder text.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character escaped (ESC -> ``\\x1b``, a newline -> ``\\x0a``).

    Run and node names, reasons, messages and log lines come from recordings and from nodes: printed
    as they are, an ESC starts a terminal control sequence (colours, clearing the screen, OSC 52
    clipboard writes). Everything from outside goes through this before a terminal or a text file.
    """
    return text if text.isprintable() else _CONTROL.sub(_escape, text)


def one_line(detail: object) -> str:
    """An error (an exception, or a piece of one) as one line of a message: its lines and runs of
    white space folded to single spaces; an asyncssh error's ``reason`` rather than its longer text;
    an exception that says nothing, by its type's name."""
    reason = getattr(detail, "reason", None)
    text = " ".join((reason if isinstance(reason, str) and reason else str(detail)).split())
    return text or (type(detail).__name__ if isinstance(detail, BaseException) else "")


DASH = "—"


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """rack2 before rack10: a name's runs of digits compared as numbers."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name) if p)


_SI_PREFIXES = ((1e9, "G"), (1e6, "M"), (1e3, "k"))


def _ok(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def group(value: float | None, decimals: int = 0) -> str:
    """``1100948.3`` -> ``1,100,948`` (thousands separators)."""
    return f"{value:,.{decimals}f}" if _ok(value) else DASH


def part_of(part: int, whole: int) -> str:
    """``1152, 1152`` -> ``1,152/1,152``: a count of a whole (nodes up, GPUs reporting, racks up)."""
    return f"{part:,}/{whole:,}"


def latency_cell(value_ms: float | None, estimated: bool) -> str:
    """A latency percentile in ms for a table: LoadGen's exact value to 0.1 ms (``918.4``), or an estimate
    from 1 % log buckets to the three digits they hold, marked (``~918``, ``~58,900``), never a bucket's
    value with more digits than the bucket knows."""
    if not _ok(value_ms):
        return DASH
    assert value_ms is not None
    if not estimated:
        return group(value_ms, 1)
    if value_ms == 0:
        return "~0"
    rounded = float(f"{value_ms:.3g}")  # three significant digits (9.996 -> 10.0)
    digits = 2 - math.floor(math.log10(abs(rounded)))
    return f"~{group(rounded, max(0, digits))}"


def latency_figure(seconds: float | None, estimated: bool) -> str:
    """A latency percentile in ms beside other figures (a verdict rule, a check, a histogram's legend), to
    the digits the latency tables give the same value (:func:`latency_cell`): LoadGen's own to 0.1 ms
    (``276.3 ms``), a histogram's estimate to its three digits, marked (``~88.5 ms`` beside the table's
    ``~88.5``, where the panel wrote ``~88 ms``)."""
    cell = latency_cell(None if seconds is None else seconds * 1000.0, estimated)
    return cell if cell == DASH else f"{cell} ms"


def json_number(value: float | None, digits: int = 3) -> float | None:
    """A figure for JSON: rounded to ``digits`` decimals; None (null) where it is missing or not finite
    (JSON has no NaN or infinity)."""
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def rate(value: float | None) -> str:
    return f"{group(value)} tok/s" if _ok(value) else DASH


def kilowatts(watts: float | None, decimals: int = 1) -> str:
    """``6387100`` -> ``6,387.1 kW`` (a fleet's power has thousands of kW)."""
    return f"{watts / 1000:,.{decimals}f} kW" if _ok(watts) else DASH  # type: ignore[operator]


def energy(joules: float | None) -> str:
    """GPU energy for people: kWh for a rack's run, Wh below a tenth of one (a single GPU's minute of
    work is 8 Wh, which one decimal of kWh would show as 0.0, a zero that is not true)."""
    if not _ok(joules):
        return DASH
    wh = joules / 3600  # type: ignore[operator]
    if wh >= 100:
        return f"{wh / 1000:,.1f} kWh"
    return f"{wh:,.1f} Wh" if wh < 10 else f"{wh:,.0f} Wh"


def pct(value: float | None, decimals: int = 1) -> str:
    return f"{value:.{decimals}f}%" if _ok(value) else DASH


def seconds_ms(seconds: float | None) -> str:
    """A latency for people: ``0.412`` -> ``412 ms``, ``3.2`` -> ``3.20 s``."""
    if not _ok(seconds):
        return DASH
    assert seconds is not None
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms" if seconds >= 0.01 else f"{seconds * 1000:.2f} ms"
    return f"{seconds:.2f} s"


def si(value: float, digits: int = 3, *, fixed: bool = False) -> str:
    """Axis labels with a k/M/G prefix: ``digits`` significant digits (1,100,000 -> 1.1M, 62,000 -> 62k,
    0.055 -> 0.055); with ``fixed``, ``digits`` decimals and none below 1,000 (61,759 -> 61.8k)."""
    if not math.isfinite(value):
        return DASH
    style = "f" if fixed else "g"
    for scale, prefix in _SI_PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}{style}}{prefix}"
    return f"{value:.0f}" if fixed else f"{value:.{digits}g}"


def seconds_label(seconds: float, space: str = " ") -> str:
    """Latency axis labels: 0.005 -> ``5 ms``, 2 -> ``2 s`` (``space=""``: ``5ms``, for narrow axes)."""
    if seconds < 1:
        return f"{seconds * 1000:g}{space}ms"
    return f"{seconds:g}{space}s"


# Why a projection's band is shown as unknown (the core states none wider than the figure itself).
BAND_UNKNOWN = "band wider than the figure"


def projection(value: float | None, low: float | None, high: float | None, why: bool = False) -> str:
    """A projected tokens/s and its band: ``1,094k ±0.4 %`` (half the band's width, as a share).

    A band the core could not state (NaN bounds) reads ``1,094k ±—``, with ``why`` followed by its reason;
    an unknown figure reads ``—``."""
    if not _ok(value) or not value:
        return DASH
    assert value is not None
    figure = f"{group(value / 1000)}k" if abs(value) >= 10_000 else group(value)
    if not (_ok(low) and _ok(high)):
        return f"{figure} ±{DASH}" + (f" ({BAND_UNKNOWN})" if why else "")
    assert low is not None
    assert high is not None
    half = 50.0 * ((high - low) / value)  # divided first: a figure near the float's top stays finite
    return f"{figure} ±{half:.1f} %" if half < 10 else f"{figure} ±{half:.0f} %"


def verdict_word(valid: bool | None) -> str:
    """VALID, INVALID or UNDECIDED: a projected (or final) MLPerf verdict."""
    return "VALID" if valid else "INVALID" if valid is False else "UNDECIDED"


_FIRST_FIGURE = re.compile(r"(?<!\w)\d[\d,.]*(?:\s?%)?")  # a figure, not the digits of a name (node03)


def elide_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle with ``…`` at word boundaries: the start
    is kept through its first figure (``node03 straggler: 14.8%``) and the end (often the cause, or
    another figure) as far as it fits, so neither what happened nor why is lost to a narrow panel."""
    if len(text) <= width:
        return text
    if width < 8:
        return text[: max(0, width - 1)] + "…" if width > 0 else ""
    found = _FIRST_FIGURE.search(text)
    through_figure = found.end() if found is not None else 0
    head = (width - 1) * 3 // 5
    if through_figure <= width - 4:  # the figure fits with a few characters of the end
        head = max(head, through_figure)
    tail = text[len(text) - (width - 1 - head) :]
    cut = tail.find(" ")
    if not text[len(text) - len(tail) - 1].isspace() and 0 <= cut < len(tail) - 1:
        tail = tail[cut + 1 :]  # from a word's start
    start = text[: width - 1 - len(tail)]
    space = start.rfind(" ")
    if not text[len(start)].isspace() and space >= max(through_figure, len(start) // 2):
        start = start[:space]  # to a word's end
    return start.rstrip() + "…" + tail
