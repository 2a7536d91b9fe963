"""Progress out of any harness's log lines: built-in presets (vLLM, SGLang, NVIDIA's MLPerf harness)
and regex rules from YAML.

The rules and their groups are described in :mod:`tokenwatch.sources.log_rules`; how a rate line
becomes tokens (per writer, between the lines' own timestamps) in :mod:`tokenwatch.sources.rate_streams`.
Every line also becomes a ``LogLine`` for the node screen (ANSI colours removed, tqdm's ``\\r``
rewrites read as they arrive but shown only as the terminal would keep them). A preset file::

    description: my harness
    interval: 10s                     # optional: the writer's longest logging interval
    timestamp: '(?P<hour>\\d\\d):(?P<minute>\\d\\d):(?P<second>\\d\\d)'   # optional, or a list
    patterns:
      progress: 'done (?P<samples_done>\\d+)/(?P<total_samples>\\d+), (?P<tokens_per_s>[0-9.]+) tok/s'
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path

from tokenwatch.base.events import Event, LogLine, Progress
from tokenwatch.sources.filled_span import BacklogItem
from tokenwatch.sources.lines import NoticeLog, snippet
from tokenwatch.sources.log_rules import (
    KNOWN_GROUPS,
    LogPatternError,
    LogPresetSpec,
    TimeOfDayCarry,
    compile_rule,
    compile_timestamps,
    elapsed_seconds,
    load_preset,
    load_rules_file,
    preset_names,
    stamp_seconds,
)
from tokenwatch.sources.progress_spread import ProgressSpreader
from tokenwatch.sources.rate_streams import StreamClock, StreamCounts, totals
from tokenwatch.sources.terminal_lines import Piece, TerminalLineSplitter

__all__ = [
    "KNOWN_GROUPS",
    "LogPatternError",
    "LogPresetSpec",
    "LogProgressParser",
    "compile_rule",
    "preset_names",
]

MAX_VALUE = 1e15
MAX_LOG_LINE_CHARS = 2000
MAX_STREAMS = 256  # writers per log: far above any real server's engines
MAX_MATCHES_PER_LINE = 1000
_MAX_SEGMENT_BYTES = 64 * 1024
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NUMBER_GROUPS = tuple(g for g in KNOWN_GROUPS if g not in ("process", "engine", "elapsed"))
StreamKey = tuple[str, str]


def _clean(raw: bytes) -> str:
    return _ANSI.sub("", raw.decode("utf-8", "replace")).rstrip()


def _shown(text: str) -> str:
    return text if len(text) <= MAX_LOG_LINE_CHARS else text[:MAX_LOG_LINE_CHARS] + "…"


def _number(group: str, raw: str) -> float:
    number = float(raw.replace(",", "").replace("_", ""))
    if not (math.isfinite(number) and 0 <= number <= MAX_VALUE):
        raise ValueError(f"{group} = {raw[:30]} out of range")
    return number


class LogProgressParser:
    """One node's log: ``feed(data, t)`` -> LogLine per line, Progress per feed with new progress."""

    def __init__(
        self,
        rules: Mapping[str, str],
        node: str,
        source: str = "harness-log",
        interval_s: float | None = None,
        timestamp: str | list[str] | None = None,
        marker: str | None = None,
    ) -> None:
        if not rules:
            raise LogPatternError("no log patterns given")
        if interval_s is not None and not (math.isfinite(interval_s) and interval_s > 0):
            raise LogPatternError(f"log interval must be a positive duration, not {interval_s}")
        self.rules = [(name, compile_rule(name, pattern)) for name, pattern in rules.items()]
        self.timestamps = compile_timestamps(timestamp)
        self.marker = compile_marker(marker)
        self.node = node
        self.source = source
        self.interval_s = interval_s
        self.total_samples: int | None = None
        self.matched_lines = 0
        self.streams: dict[StreamKey, StreamCounts] = {}
        self._credited = False  # some stream has credited time: a writer that appears now is new
        self._changed = False
        self._pieces = TerminalLineSplitter(_MAX_SEGMENT_BYTES)
        self.notices = NoticeLog(source, node)
        self._backlog_stamps: tuple[float, float] | None = None  # first and last stamp of the backlog
        self._backlog_group: list[Piece] = []  # backlog pieces of one stamp, read together
        self._backlog_group_t = 0.0
        self._latest_stamp = 0.0  # the stamp of the latest stamped backlog line (0.0 before any)
        self._covered = 0.0  # the longest interval a rate line of the current group covered
        self._spreader = ProgressSpreader()
        self._time_of_day = TimeOfDayCarry()  # stamps with no date carried past midnight

    @classmethod
    def from_patterns(cls, patterns: Mapping[str, str], node: str) -> LogProgressParser:
        return cls(patterns, node)

    @classmethod
    def from_spec(cls, spec: LogPresetSpec, node: str, source: str) -> LogProgressParser:
        return cls(spec.patterns, node, source, spec.interval_s, spec.timestamp, spec.marker)

    @classmethod
    def from_yaml(cls, path: Path | str, node: str) -> LogProgressParser:
        """Rules from a YAML file (errors name the file, line and key: :func:`load_rules_file`)."""
        return cls.from_spec(load_rules_file(path), node, f"log:{Path(path).stem}")

    @classmethod
    def preset(cls, name: str, node: str) -> LogProgressParser:
        """A built-in preset (``vllm``, ``sglang``, ``nvidia-mlperf``); see :func:`preset_names`."""
        return cls.from_spec(load_preset(name), node, f"log:{name}")

    # ------------------------------------------------------------------ feed
    def feed(self, data: bytes, t: float) -> list[Event]:
        return self._parse(self._pieces.feed(data), t)

    def close(self, t: float) -> list[Event]:
        """End of input: a last line without a newline still counts."""
        return self._parse(self._pieces.flush(), t)

    # ------------------------------------------------------------- backlog
    def feed_backlog(self, data: bytes) -> list[BacklogItem]:
        """Bytes written before the watch began: each line's events at the line's own time, its stamp on
        the log's clock (:func:`~tokenwatch.sources.log_rules.stamp_seconds`); a line without a stamp
        takes the latest stamp before it (0.0 before the first). The lines of one stamp (data-parallel
        engines log in the same second) are read together, and the tokens they state are spread over the
        interval they cover (:mod:`~tokenwatch.sources.progress_spread`). Later ``feed`` calls go on
        from here: the writers' clocks carry over, so the first live line is credited the time since
        the last backlog line."""
        out: list[BacklogItem] = []
        for piece in self._pieces.feed(data):
            stamp = self._stamp(_clean(piece.data)) if piece.kind != "cut" else None
            if stamp is not None:
                self._latest_stamp = stamp
                # the first line's stamp and the newest: a clock that went back moves neither
                known = self._backlog_stamps or (stamp, stamp)
                self._backlog_stamps = (known[0], max(known[1], stamp))
            t = self._latest_stamp
            if self._backlog_group and t != self._backlog_group_t:
                out += self._backlog_flush()
            self._backlog_group.append(piece)
            self._backlog_group_t = t
        return out

    def end_backlog(self) -> tuple[list[BacklogItem], tuple[float, float] | None]:
        """The backlog's last events, and its first line's stamp and the newest (None: no line had one,
        so it cannot be placed in time)."""
        return self._backlog_flush(), self._backlog_stamps

    def _backlog_flush(self) -> list[BacklogItem]:
        pieces, self._backlog_group = self._backlog_group, []
        self._covered = 0.0
        events = self._parse(pieces, self._backlog_group_t)
        return self._spreader.spread(events, self._covered)

    def _parse(self, pieces: list[Piece], t: float) -> list[Event]:
        out: list[Event] = []
        for piece in pieces:
            if piece.kind == "cut":
                self.notices.warn(
                    out, t, f"line {piece.number}: longer than {_MAX_SEGMENT_BYTES} bytes, skipped"
                )
                continue
            text = _clean(piece.data)
            if not text:
                continue
            if piece.kind in ("line", "shown"):
                out.append(LogLine(t, self.node, _shown(text)))
            if piece.kind != "shown":  # a shown line was read when it was written as a rewrite
                self._read(piece.number, text, t, out)
        if self._changed:  # one Progress per chunk that moved a counter, however many lines did
            self._changed = False
            samples, tokens, prompt = totals(list(self.streams.values()))
            out.append(Progress(t, self.node, samples, tokens, prompt))
        return out

    def _read(self, number: int, text: str, t: float, out: list[Event]) -> None:
        if self.marker is not None and not self.marker.search(text):
            return
        read_any = False
        for name, regex in self.rules:
            start = 0
            for count, match in enumerate(regex.finditer(text)):
                if count >= MAX_MATCHES_PER_LINE:
                    break
                # Interleaved writers may put several records on one line: each match is read with
                # the timestamp written just before it.
                record = text[start : match.end()]
                start = match.end()
                read_any = True
                try:
                    self._apply(match, record, number, t, out)
                except ValueError as exc:
                    self.notices.warn(out, t, f"line {number}: rule {name!r}: {exc}: {snippet(text)}")
        if not read_any and self.marker is not None:
            self.notices.warn(
                out,
                t,
                f"line {number}: a form no pattern of this preset reads (another version?): {snippet(text)}",
            )

    def _apply(self, match: re.Match[str], record: str, number: int, t: float, out: list[Event]) -> None:
        groups = match.groupdict()
        values = {g: _number(g, raw) for g, raw in groups.items() if raw is not None and g in _NUMBER_GROUPS}
        elapsed = elapsed_seconds(groups["elapsed"]) if groups.get("elapsed") else None
        stream = self._stream(
            ((groups.get("process") or "").strip(), (groups.get("engine") or "").strip()), number, t, out
        )
        if stream is None:
            return
        self.matched_lines += 1
        self._changed = True
        if values.get("total_samples"):  # a bar's total of 0 means "not known yet"
            self.total_samples = int(values["total_samples"])
        if "samples_done" in values:
            stream.samples = int(values["samples_done"])
        if "tokens_done" in values:
            stream.tokens = values["tokens_done"]
        if "prompt_tokens_done" in values:
            stream.prompt_tokens = values["prompt_tokens_done"]
        if "mean_tokens_per_s" in values:
            samples, per_s = values.get("samples_done"), values.get("mean_samples_per_s")
            duration = samples / per_s if samples is not None and per_s else elapsed
            if duration is not None:
                stream.set_from_mean(values["mean_tokens_per_s"] * duration, samples, elapsed)
        tokens_per_s, prompt_per_s = values.get("tokens_per_s"), values.get("prompt_tokens_per_s")
        if tokens_per_s is None and prompt_per_s is None:
            return
        seconds, problem = stream.clock.covered(self._stamp(record), t)
        if problem:
            self.notices.warn(out, t, f"line {number}: {problem}: {snippet(record)}")
        if seconds > 0:
            self._credited = True
            self._covered = max(self._covered, seconds)
        stream.add_rates(tokens_per_s, prompt_per_s, seconds)

    def _stream(self, key: StreamKey, number: int, t: float, out: list[Event]) -> StreamCounts | None:
        stream = self.streams.get(key)
        if stream is not None:
            return stream
        who = " ".join(part for part in key if part) or "the log"
        if len(self.streams) >= MAX_STREAMS:
            self.notices.warn(out, t, f"line {number}: more than {MAX_STREAMS} writers; {who!r} skipped")
            return None
        if self._credited:
            self.notices.warn(
                out, t, f"line {number}: new writer {who!r}: its rates count from its next line"
            )
        stream = self.streams[key] = StreamCounts(StreamClock(self.interval_s))
        return stream

    def _stamp(self, record: str) -> float | None:
        for regex in self.timestamps:
            match = regex.search(record)
            if match:
                stamp = stamp_seconds(match)
                if stamp is not None:
                    dated = "day" in regex.groupindex and match.group("day")
                    return stamp if dated else self._time_of_day.place(stamp)
        return None


def compile_marker(pattern: str | None) -> re.Pattern[str] | None:
    """A preset's ``marker``: a plain regex (no groups needed)."""
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise LogPatternError(f"marker pattern: bad regular expression: {exc}") from None
