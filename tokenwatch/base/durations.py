"""Human durations: ``80m``, ``1h30m``, ``200ms``, ``1.5h``, ``41:07``, ``1:02:03`` or plain seconds."""

from __future__ import annotations

import math
import re

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|min|s|m|h|d)")
_CLOCK = re.compile(r"^(?:(\d+):)?(\d{1,2}):(\d{1,2}(?:\.\d*)?)$")


class DurationError(ValueError):
    """A duration string that cannot be read."""


def parse_duration(text: str | float | int) -> float:
    """Seconds in ``text``. Raises :class:`DurationError` with the offending text."""
    if isinstance(text, bool):
        raise DurationError(f"bad duration {text!r}")
    seconds = float(text) if isinstance(text, int | float) else _parse_text(text.strip().lower())
    if not math.isfinite(seconds) or seconds < 0:
        raise DurationError(f"bad duration {text!r}: must be a finite, non-negative time")
    return seconds


def _parse_text(s: str) -> float:
    if not s:
        raise DurationError("bad duration '': empty")
    try:
        return float(s)
    except ValueError:
        pass
    clock = _CLOCK.match(s)
    if clock:
        hours, minutes, secs = clock.groups()
        return int(hours or 0) * 3600 + int(minutes) * 60 + float(secs)
    pos, total = 0, 0.0
    for match in _PART.finditer(s):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(s) or pos == 0:
        raise DurationError(f"bad duration {s!r}: use e.g. 30s, 80m, 1h30m, 200ms or 41:07")
    return total


def format_clock(seconds: float) -> str:
    """``4867`` -> ``81:07`` (minutes may exceed 59, as a run's elapsed time reads best)."""
    if not math.isfinite(seconds):
        return "--:--"
    sign = "-" if seconds < 0 else ""
    whole = int(abs(seconds))
    return f"{sign}{whole // 60:02d}:{whole % 60:02d}"


def format_duration(seconds: float) -> str:
    """A duration as it would be written in a config: ``600`` -> ``10m``, ``5400`` -> ``1h30m``, ``0.2`` ->
    ``200ms``, ``0`` -> ``0s`` (whole units from days down; what is left below a second in ms). Reads back
    with :func:`parse_duration` to the same seconds (to the millisecond)."""
    if not math.isfinite(seconds) or seconds < 0:
        return f"{seconds:g}s"
    millis = round(seconds * 1000)
    if millis == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, millis = divmod(millis, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
