"""Number formatting shared by every front end (plain text, no Rich): one way to print a figure."""

from __future__ import annotations

import math

from tokenwatch.durations import format_clock

__all__ = ["format_clock", "group", "kilowatts", "pct", "projection", "rate", "seconds_ms", "verdict_word"]

DASH = "—"


def _ok(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def group(value: float | None, decimals: int = 0) -> str:
    """``1100948.3`` -> ``1,100,948`` (thousands separators)."""
    return f"{value:,.{decimals}f}" if _ok(value) else DASH


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
