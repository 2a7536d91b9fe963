"""The rules that read a harness's log lines: named-group regexes, timestamp patterns, preset files.

A rule is a regular expression whose named groups say what the line holds:

* cumulative counts: ``samples_done``, ``tokens_done``, ``prompt_tokens_done``, ``total_samples``;
* rates over the time since the writer's previous line: ``tokens_per_s``, ``prompt_tokens_per_s``
  (integrated between the lines' own timestamps);
* means since the run began (tqdm-style progress bars): ``mean_tokens_per_s`` with ``elapsed``
  (``[H:]MM:SS`` or seconds), or with ``mean_samples_per_s`` and ``samples_done`` (the run's own
  duration is then samples / samples-per-second, finer than the bar's whole-second clock);
* which writer the line is from: ``process`` and ``engine``. Lines of different writers are separate
  streams (a data-parallel server writes one line per engine); the node's figures are their sum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from tokenwatch.base.yaml_schema import Reader, SchemaError, duration_field, load_yaml, parse_yaml
from tokenwatch.sources.errors import SourceFormatError

COUNT_GROUPS = ("samples_done", "tokens_done", "prompt_tokens_done", "total_samples")
RATE_GROUPS = ("tokens_per_s", "prompt_tokens_per_s")
MEAN_GROUPS = ("mean_tokens_per_s", "mean_samples_per_s", "elapsed")
STREAM_GROUPS = ("process", "engine")
KNOWN_GROUPS = COUNT_GROUPS + RATE_GROUPS + MEAN_GROUPS + STREAM_GROUPS
# A rule must read at least one of these, or it reads nothing.
VALUE_GROUPS = COUNT_GROUPS + RATE_GROUPS + ("mean_tokens_per_s",)
TIME_GROUPS = ("year", "month", "day", "hour", "minute", "second")
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # stamps carry no zone: read as UTC, only differences count


class LogPatternError(SourceFormatError):
    """A rule that cannot work: bad regex, no known group, unknown group name."""


@dataclass(frozen=True, slots=True)
class LogPresetSpec:
    """A log preset file (YAML): named regex rules and how to read time.

    ``timestamp`` is one pattern or a list tried in order (a docker/RFC 3339 prefix before the
    writer's own). ``marker`` (optional) picks the lines the patterns are for: only lines it matches
    are read (a cheap test before the patterns' own), and a marked line that no pattern reads (a
    writer version the preset does not know) is skipped with a warning, never silently.
    """

    patterns: dict[str, str]
    description: str = ""
    interval_s: float | None = duration_field(None, key="interval")
    timestamp: str | list[str] | None = None
    marker: str | None = None


def compile_rule(name: str, pattern: str) -> re.Pattern[str]:
    try:
        regex = re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise LogPatternError(f"log pattern {name!r}: bad regular expression: {exc}") from None
    groups = set(regex.groupindex)
    unknown = groups - set(KNOWN_GROUPS)
    if unknown:
        raise LogPatternError(
            f"log pattern {name!r}: unknown group(s) {', '.join(sorted(unknown))}"
            f" (known: {', '.join(KNOWN_GROUPS)})"
        )
    if not groups:
        raise LogPatternError(f"log pattern {name!r}: no named group (use one of {', '.join(VALUE_GROUPS)})")
    if not groups & set(VALUE_GROUPS):
        raise LogPatternError(
            f"log pattern {name!r}: no group with a value (use one of {', '.join(VALUE_GROUPS)})"
        )
    if "mean_tokens_per_s" in groups and not (
        "elapsed" in groups or {"mean_samples_per_s", "samples_done"} <= groups
    ):
        raise LogPatternError(
            f"log pattern {name!r}: mean_tokens_per_s needs elapsed, or mean_samples_per_s and samples_done"
        )
    return regex


def compile_timestamps(patterns: str | list[str] | None) -> list[re.Pattern[str]]:
    """Timestamp patterns, tried in order; each needs hour, minute, second (and may add year, month, day)."""
    if patterns is None:
        return []
    compiled = []
    for pattern in [patterns] if isinstance(patterns, str) else patterns:
        try:
            regex = re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:
            raise LogPatternError(f"timestamp pattern: bad regular expression: {exc}") from None
        missing = {"hour", "minute", "second"} - set(regex.groupindex)
        if missing or not set(regex.groupindex) <= set(TIME_GROUPS):
            raise LogPatternError(
                f"timestamp pattern: needs groups hour, minute, second (may add {', '.join(TIME_GROUPS[:3])})"
            )
        compiled.append(regex)
    return compiled


def stamp_seconds(match: re.Match[str]) -> float | None:
    """A log timestamp as seconds on one axis (year 2000 when the log gives none), None if impossible.

    ``second`` may carry a fraction, with a dot (RFC 3339) or a comma (Python logging's asctime).
    """
    parts = match.groupdict()
    try:
        second = float(parts["second"].replace(",", "."))
        stamp = datetime(
            int(parts.get("year") or 2000),
            int(parts.get("month") or 1),
            int(parts.get("day") or 1),
            int(parts["hour"]),
            int(parts["minute"]),
            int(second),
            tzinfo=UTC,
        )
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None
    return (stamp - _EPOCH).total_seconds() + second % 1


@dataclass(slots=True)
class TimeOfDayCarry:
    """Stamps with a time and no date (``[04:40:55 TP0]``) on one axis: a time that falls back by more
    than half a day has passed midnight, so it is carried into the next day (a log running past midnight
    never reads as a clock that went back 24 hours)."""

    days: int = 0
    last: float | None = None  # the latest time-only stamp, days carried

    def place(self, stamp: float) -> float:
        placed = stamp + self.days * 86400.0
        if self.last is not None and placed < self.last - 43200.0:
            self.days += 1
            placed += 86400.0
        self.last = placed if self.last is None else max(self.last, placed)
        return placed


def elapsed_seconds(text: str) -> float:
    """tqdm's elapsed time: ``MM:SS``, ``H:MM:SS`` or plain seconds."""
    parts = text.strip().split(":")
    if not 1 <= len(parts) <= 3 or not all(parts):
        raise ValueError(f"elapsed = {text[:30]!r} is not [H:]MM:SS")
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + float(part)
    return seconds


def check_inline_settings(timestamp: str | list[str] | None, marker: str | None) -> tuple[str, str] | None:
    """(key, problem) for a ``timestamp`` or ``marker`` that cannot work, None when both can."""
    try:
        compile_timestamps(timestamp)
    except LogPatternError as exc:
        return "timestamp", str(exc)
    if marker is not None:
        try:
            re.compile(marker)
        except (re.error, RecursionError, OverflowError) as exc:
            return "marker", f"marker pattern: bad regular expression: {exc}"
    return None


def load_rules_file(path: Path | str) -> LogPresetSpec:
    """A rules file (the YAML of a preset: ``description``, ``interval``, ``timestamp``, ``marker``,
    ``patterns``), every rule checked; a problem is one line naming the file, line and key
    (``rules.yaml:5: patterns.done: log pattern 'done': bad regular expression: ...``)."""
    data, lines = load_yaml(path)
    reader = Reader(str(path), lines)
    spec = reader.build(LogPresetSpec, data)
    if not spec.patterns:
        raise reader.error(("patterns",), "no patterns given")
    for name, pattern in spec.patterns.items():
        try:
            compile_rule(name, pattern)
        except LogPatternError as exc:
            raise reader.error(("patterns", name), str(exc)) from None
    problem = check_inline_settings(spec.timestamp, spec.marker)
    if problem is not None:
        raise reader.error((problem[0],), problem[1])
    if spec.interval_s is not None and not spec.interval_s > 0:
        raise reader.error(("interval",), "must be longer than zero")
    return spec


def preset_names() -> list[str]:
    folder = resources.files("tokenwatch.sources") / "presets"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_preset(name: str) -> LogPresetSpec:
    """A built-in preset by name (``vllm``, ``sglang``, ...); see :func:`preset_names`."""
    if name not in preset_names():
        raise LogPatternError(f"unknown log preset {name!r} (known: {', '.join(preset_names())})")
    text = (resources.files("tokenwatch.sources") / "presets" / f"{name}.yaml").read_text("utf-8")
    try:
        data, lines = parse_yaml(text, f"preset {name}")
        return Reader(f"preset {name}", lines).build(LogPresetSpec, data)
    except SchemaError as exc:
        raise LogPatternError(str(exc)) from None
