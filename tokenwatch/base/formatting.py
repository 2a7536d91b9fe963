"""Formatting shared by every front end (plain text, no Rich): one way to print a figure, and the one
function that makes text from outside safe to print (:func:`printable`)."""

from __future__ import annotations

import math
import re

from tokenwatch.base.durations import format_clock

__all__ = [
    "format_clock",
    "group",
    "json_number",
    "kilowatts",
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
_SI_PREFIXES = ((1e9, "G"), (1e6, "M"), (1e3, "k"))


def _ok(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def group(value: float | None, decimals: int = 0) -> str:
    """``1100948.3`` -> ``1,100,948`` (thousands separators)."""
    return f"{value:,.{decimals}f}" if _ok(value) else DASH


def json_number(value: float | None, digits: int = 3) -> float | None:
    """A figure for JSON: rounded to ``digits`` decimals; None (null) where it is missing or not finite
    (JSON has no NaN or infinity)."""
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def rate(value: float | None) -> str:
    return f"{group(value)} tok/s" if _ok(value) else DASH


def kilowatts(watts: float | None, decimals: int = 1) -> str:
    return f"{watts / 1000:.{decimals}f} kW" if _ok(watts) else DASH  # type: ignore[operator]


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


def projection(value: float | None, low: float | None, high: float | None) -> str:
    """A projected tokens/s and its band: ``1,094k ±0.4 %`` (half the band's width, as a share)."""
    if not (_ok(value) and _ok(low) and _ok(high)) or not value:
        return DASH
    assert value is not None
    assert low is not None
    assert high is not None
    half = 100.0 * (high - low) / 2.0 / value
    figure = f"{group(value / 1000)}k" if abs(value) >= 10_000 else group(value)
    return f"{figure} ±{half:.1f} %" if half < 10 else f"{figure} ±{half:.0f} %"


def verdict_word(valid: bool | None) -> str:
    """VALID, INVALID or UNDECIDED: a projected (or final) MLPerf verdict."""
    return "VALID" if valid else "INVALID" if valid is False else "UNDECIDED"
