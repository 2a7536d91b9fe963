"""Progress out of any harness's log lines: a vLLM preset and regex rules from YAML.

A rule is a regular expression with named groups: ``samples_done`` / ``tokens_done`` /
``prompt_tokens_done`` (cumulative counts), ``tokens_per_s`` / ``prompt_tokens_per_s`` (rates, integrated
over time into cumulative counts) and ``total_samples`` (the run's size). Rates are integrated over the
time between the lines' own timestamps when the preset says how to read them (``timestamp`` regex
with ``month``, ``day``, ``hour``, ``minute``, ``second`` and optionally ``year`` groups), else over the
time between feeds; ``interval`` caps the step (a logger that skips idle intervals must not be
credited for them). Every line also becomes a ``LogLine`` (tqdm's ``\\r`` rewrites and ANSI colours
removed) for the node screen. A preset file::

    description: my harness
    interval: 10s                     # optional
    timestamp: '(?P<hour>\\d\\d):(?P<minute>\\d\\d):(?P<second>\\d\\d)'   # optional
    patterns:
      progress: 'done (?P<samples_done>\\d+)/(?P<total_samples>\\d+), (?P<tokens_per_s>[0-9.]+) tok/s'
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path

from tokenwatch.events import Event, LogLine, Progress
from tokenwatch.sources.errors import SourceFormatError
from tokenwatch.sources.lines import LineParser, LineSplitter, NoticeLog, snippet
from tokenwatch.yaml_schema import Reader, SchemaError, duration_field, load_yaml, parse_yaml

COUNT_GROUPS = ("samples_done", "tokens_done", "prompt_tokens_done", "total_samples")
RATE_GROUPS = ("tokens_per_s", "prompt_tokens_per_s")
KNOWN_GROUPS = COUNT_GROUPS + RATE_GROUPS
TIME_GROUPS = ("year", "month", "day", "hour", "minute", "second")
MAX_VALUE = 1e15
MAX_LOG_LINE_CHARS = 2000
_MAX_LINE_BYTES = 64 * 1024
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class LogPatternError(SourceFormatError):
    """A rule that cannot work: bad regex, no known group, unknown group name."""


@dataclass(frozen=True, slots=True)
class LogPresetSpec:
    """A log preset file (YAML): named regex rules and how to read time."""

    patterns: dict[str, str]
    description: str = ""
    interval_s: float | None = duration_field(None, key="interval")
    timestamp: str | None = None


def compile_rule(name: str, pattern: str) -> re.Pattern[str]:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise LogPatternError(f"log pattern {name!r}: bad regular expression: {exc}") from None
    groups = set(regex.groupindex)
    unknown = groups - set(KNOWN_GROUPS)
    if unknown:
        raise LogPatternError(
            f"log pattern {name!r}: unknown group(s) {', '.join(sorted(unknown))}"
            f" (known: {', '.join(KNOWN_GROUPS)})"
        )
    if not groups:
        raise LogPatternError(f"log pattern {name!r}: no named group (use one of {', '.join(KNOWN_GROUPS)})")
    return regex


def compile_timestamp(pattern: str | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise LogPatternError(f"timestamp pattern: bad regular expression: {exc}") from None
    missing = {"hour", "minute", "second"} - set(regex.groupindex)
    if missing or not set(regex.groupindex) <= set(TIME_GROUPS):
        raise LogPatternError(
            f"timestamp pattern: needs groups hour, minute, second (may add {', '.join(TIME_GROUPS[:3])})"
        )
    return regex


def _clean(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    if "\r" in text:
        text = text.rstrip("\r").rsplit("\r", 1)[-1]  # what a terminal shows after tqdm's rewrites
    text = _ANSI.sub("", text).rstrip()
    return text if len(text) <= MAX_LOG_LINE_CHARS else text[:MAX_LOG_LINE_CHARS] + "…"


def _seconds(match: re.Match[str]) -> float | None:
    """A log timestamp as seconds on one axis (year 2000 when the log gives none), None if impossible."""
    parts = match.groupdict()
    try:
        stamp = datetime(
            int(parts.get("year") or 2000),
            int(parts.get("month") or 1),
            int(parts.get("day") or 1),
            int(parts["hour"]),
            int(parts["minute"]),
            int(float(parts["second"])),
        )
    except (TypeError, ValueError, OverflowError):
        return None
    return (stamp - datetime(2000, 1, 1)).total_seconds() + float(parts["second"]) % 1


@dataclass(slots=True)
class _State:
    tokens: float | None = None
    prompt_tokens: float | None = None
    samples: int | None = None
    last_stamp: float | None = None  # log time of the last rate line
    last_t: float | None = None  # run time of the last rate line
    changed: bool = False
    matched_lines: int = 0
    seen: set[str] = field(default_factory=set)


class LogProgressParser(LineParser):
    """One node's log: ``feed(data, t)`` -> LogLine per line, Progress per feed with new progress."""

    def __init__(
        self,
        rules: Mapping[str, str],
        node: str,
        source: str = "harness-log",
        interval_s: float | None = None,
        timestamp: str | None = None,
    ) -> None:
        if not rules:
            raise LogPatternError("no log patterns given")
        if interval_s is not None and not (math.isfinite(interval_s) and interval_s > 0):
            raise LogPatternError(f"log interval must be a positive duration, not {interval_s}")
        self.rules = [(name, compile_rule(name, pattern)) for name, pattern in rules.items()]
        self.timestamp = compile_timestamp(timestamp)
        self.node = node
        self.source = source
        self.interval_s = interval_s
        self.total_samples: int | None = None
        self.state = _State()
        self._lines = LineSplitter(_MAX_LINE_BYTES)
        self.notices = NoticeLog(source, node)

    @classmethod
    def from_patterns(cls, patterns: Mapping[str, str], node: str) -> LogProgressParser:
        return cls(patterns, node)

    @classmethod
    def from_spec(cls, spec: LogPresetSpec, node: str, source: str) -> LogProgressParser:
        return cls(spec.patterns, node, source, spec.interval_s, spec.timestamp)

    @classmethod
    def from_yaml(cls, path: Path | str, node: str) -> LogProgressParser:
        """Rules from a YAML file (errors name the file, line and key)."""
        data, lines = load_yaml(path)
        spec = Reader(str(path), lines).build(LogPresetSpec, data)
        try:
            return cls.from_spec(spec, node, f"log:{Path(path).stem}")
        except LogPatternError as exc:
            raise LogPatternError(f"{path}: {exc}") from None

    @classmethod
    def preset(cls, name: str, node: str) -> LogProgressParser:
        """A built-in preset (``vllm``); see :func:`preset_names`."""
        if name not in preset_names():
            raise LogPatternError(f"unknown log preset {name!r} (known: {', '.join(preset_names())})")
        text = (resources.files("tokenwatch.sources") / "presets" / f"{name}.yaml").read_text("utf-8")
        try:
            data, lines = parse_yaml(text, f"preset {name}")
            spec = Reader(f"preset {name}", lines).build(LogPresetSpec, data)
        except SchemaError as exc:
            raise LogPatternError(str(exc)) from None
        return cls.from_spec(spec, node, f"log:{name}")

    # ------------------------------------------------------------------ feed
    def parse_line(self, number: int, line: bytes, t: float, out: list[Event]) -> None:
        text = _clean(line)
        if not text:
            return
        out.append(LogLine(t, self.node, text))
        for name, regex in self.rules:
            match = regex.search(text)
            if match:
                try:
                    self._apply(match, text, t)
                except ValueError as exc:
                    self.notices.warn(out, t, f"line {number}: rule {name!r}: {exc}: {snippet(text)}")

    def end_of_chunk(self, t: float, out: list[Event]) -> None:
        """One Progress per chunk that moved a counter, however many lines did."""
        state = self.state
        if state.changed:
            state.changed = False
            out.append(
                Progress(
                    t,
                    self.node,
                    state.samples,
                    None if state.tokens is None else round(state.tokens),
                    None if state.prompt_tokens is None else round(state.prompt_tokens),
                )
            )

    def _apply(self, match: re.Match[str], text: str, t: float) -> None:
        values: dict[str, float] = {}
        for group, raw in match.groupdict().items():
            if raw is None:
                continue
            number = float(raw.replace(",", "").replace("_", ""))
            if not (math.isfinite(number) and 0 <= number <= MAX_VALUE):
                raise ValueError(f"{group} = {raw[:30]} out of range")
            values[group] = number
        state = self.state
        state.matched_lines += 1
        if "total_samples" in values:
            self.total_samples = int(values["total_samples"])
        if "samples_done" in values:
            state.samples, state.changed = int(values["samples_done"]), True
        if "tokens_done" in values:
            state.tokens, state.changed = values["tokens_done"], True
        if "prompt_tokens_done" in values:
            state.prompt_tokens, state.changed = values["prompt_tokens_done"], True
        if any(g in values for g in RATE_GROUPS):
            step = self._rate_step(text, t)
            if "tokens_per_s" in values:
                state.tokens = (state.tokens or 0.0) + values["tokens_per_s"] * step
            if "prompt_tokens_per_s" in values:
                state.prompt_tokens = (state.prompt_tokens or 0.0) + values["prompt_tokens_per_s"] * step
            state.changed = True

    def _rate_step(self, text: str, t: float) -> float:
        """Seconds the rate on this line covers: since the previous rate line, capped by ``interval``."""
        state = self.state
        stamp_match = self.timestamp.search(text) if self.timestamp else None
        stamp = _seconds(stamp_match) if stamp_match else None
        step: float | None = None
        if stamp is not None and state.last_stamp is not None and stamp >= state.last_stamp:
            step = stamp - state.last_stamp
        elif stamp is None and state.last_t is not None:
            step = t - state.last_t
        if stamp is not None:
            state.last_stamp = stamp
        state.last_t = t
        if step is None or step < 0:  # the first line (or a clock that went back): one interval
            step = self.interval_s or 0.0
        return min(step, self.interval_s) if self.interval_s else step


def preset_names() -> list[str]:
    folder = resources.files("tokenwatch.sources") / "presets"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))
