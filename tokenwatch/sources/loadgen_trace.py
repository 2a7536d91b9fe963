"""Tail MLPerf LoadGen's ``mlperf_log_trace.json`` while it is being written.

With ``LogSettings.enable_trace`` LoadGen writes a Chrome trace progressively: ``{"traceEvents":[``,
then one event per line (each ending in ``,``), and only at the very end ``{"name":"LastTrace"}`` and
the closing ``]``. So the file is an unterminated JSON array for the whole run and must be read line
by line. What the lines say (checked against LoadGen 6.0.17's own summary, to the nanosecond):

* ``{"name":"Sample","ph":"b","ts":<scheduled µs>,"args":{...,"complete_ns":N}}``: one per completed
  sample, written when it completes; ``complete_ns`` is LoadGen's latency (from the scheduled time),
  the figure its summary's latency percentiles are made of. The matching ``"ph":"e"`` line adds nothing.
* ``{"name":"Token","ph":"b",...,"args":{...,"complete_ns":N}}`` (Offline): first token at ``N`` ns
  after scheduling, i.e. TTFT.
* ``{"name":"Token_Latency","ph":"C","ts":...,"args":{"issue_delay":a,"issue_to_done":b}}`` (Server):
  TTFT = ``a + b`` ns.
* ``LogDetail`` / ``LogSummary`` lines, which LoadGen writes with broken JSON (``""key""``): ignored.

The trace holds no token counts, so ``tokens_done`` is only known when the caller gives the harness's
fixed ``tokens_per_sample``; otherwise it is ``None`` (unknown) and tokens come from another source. LoadGen
versions before 4.0 do not trace Offline samples at all (progress then stays at 0).
"""

from __future__ import annotations

import math

import numpy as np
import orjson

from tokenwatch.base.events import Event, LatencyBatch, NodeStatus, Progress
from tokenwatch.sources.lines import LineSplitter, NoticeLog, checked_tokens_per_sample, snippet

_SAMPLE = b'{"name":"Sample"'
_TOKEN = b'{"name":"Token"'
_TOKEN_LATENCY = b'{"name":"Token_Latency"'
_LAST = b'{"name":"LastTrace"'
_EVENT = b'{"name":'
_END = b'"ph":"e"'
# The array's frame: lines that are not events but belong to the file.
_FRAME = (b"{", b"}", b"]", b'"displayTimeUnit"', b'"otherData"', b'"ts"', b'"version"', b'{"traceEvents"')
_MAX_NS = 1e15  # ~11.6 days: a latency above that is corrupt input
_MAX_LINE_BYTES = 1 << 20
_BACKLOG_SLICE = 64 * 1024  # ~300 trace lines: a backlog's batches keep sub-second times on real runs


class TraceTailParser:
    """Incremental parser of one node's LoadGen trace: feed it bytes as the file grows.

    ``feed(data, t)`` returns, for the samples completed in ``data``: ``LatencyBatch`` events
    (``e2e``, ``ttft``; raw values in seconds) and one cumulative ``Progress``. ``t=None`` uses the
    trace's own clock: seconds from its first event to the latest completion seen.
    A ``NodeStatus(finished)`` follows LoadGen's ``LastTrace`` event.
    """

    def __init__(
        self, node: str, source: str = "loadgen-trace", tokens_per_sample: float | None = None
    ) -> None:
        self.node = node
        self.source = source
        self.tokens_per_sample = checked_tokens_per_sample(tokens_per_sample)
        self.samples_done = 0
        self.events_seen = 0  # trace events (lines that start an event), for rate figures
        self.finished = False
        self.origin_us: float | None = None  # ts of the first event: the trace's t = 0
        self.last_completion_us = -math.inf
        self._last_t = 0.0
        self._lines = LineSplitter(_MAX_LINE_BYTES)
        self.notices = NoticeLog(source, node)

    def feed(self, data: bytes, t: float | None = None) -> list[Event]:
        split = self._lines.feed(data)
        return self._parse(split.first_line, split.lines, split.cut, t)

    def close(self, t: float | None = None) -> list[Event]:
        """End of input: parse a last line that has no newline yet."""
        split = self._lines.flush()
        return self._parse(split.first_line, split.lines, split.cut, t)

    # ------------------------------------------------------------- backlog
    def feed_backlog(self, data: bytes) -> list[Event]:
        """Bytes written before the watch began, on the trace's own clock (``t=None``), in slices small
        enough that each batch of completions keeps its own time."""
        out: list[Event] = []
        for start in range(0, len(data), _BACKLOG_SLICE):
            out += self.feed(data[start : start + _BACKLOG_SLICE])
        return out

    def end_backlog(self) -> tuple[list[Event], tuple[float, float] | None]:
        """Nothing more, and (LoadGen's start, its latest completion) on the trace's clock, in seconds;
        None before any event. Live ``feed`` calls then take run time: the trace clock's hold ends here."""
        if self.origin_us is None:
            return [], None
        clock = (0.0, self._last_t)
        self._last_t = 0.0
        return [], clock

    def _parse(self, first: int, lines: list[bytes], cut: list[int], t: float | None) -> list[Event]:
        out: list[Event] = []
        e2e: list[float] = []
        ttft: list[float] = []
        finished_now = False
        for offset, line in enumerate(lines):
            if line[:1] != b"{" or not line.startswith(_EVENT):
                stripped = line.strip()
                if stripped and not stripped.startswith(_FRAME):
                    self._warn(out, first + offset, "not a trace event line", line, t)
                continue
            self.events_seen += 1
            if self.origin_us is None:
                self._set_origin(line)
            if _END in line[:64]:
                continue  # the end half of a Sample/Token pair adds nothing: skip the JSON parse
            if line.startswith(_SAMPLE):
                self._sample(line, first + offset, e2e, out, t)
            elif line.startswith(_TOKEN_LATENCY):
                self._token_latency(line, first + offset, ttft, out, t)
            elif line.startswith(_TOKEN):
                self._token(line, first + offset, ttft, out, t)
            elif line.startswith(_LAST):
                finished_now = not self.finished
                self.finished = True
        for number in cut:
            self._warn(out, number, f"longer than {_MAX_LINE_BYTES} bytes, skipped", b"", t)
        if not (e2e or ttft or finished_now):
            return out
        now = self._time(t)
        if e2e:
            out.append(LatencyBatch(now, self.node, "e2e", np.array(e2e, dtype=np.float64)))
        if ttft:
            out.append(LatencyBatch(now, self.node, "ttft", np.array(ttft, dtype=np.float64)))
        if e2e:
            tokens = (
                None if self.tokens_per_sample is None else round(self.samples_done * self.tokens_per_sample)
            )
            out.append(Progress(now, self.node, self.samples_done, tokens))
        if finished_now:
            out.append(NodeStatus(now, self.node, "finished", "LoadGen trace ended (LastTrace)"))
        return out

    def _time(self, t: float | None) -> float:
        if t is None:
            origin = self.origin_us if self.origin_us is not None else 0.0
            t = (
                max(0.0, (self.last_completion_us - origin) / 1e6)
                if math.isfinite(self.last_completion_us)
                else 0.0
            )
        self._last_t = max(self._last_t, t)  # events of one node never go back in time
        return self._last_t

    def _set_origin(self, line: bytes) -> None:
        event = _loads(line)
        if isinstance(event, dict):
            ts = event.get("ts")
            if isinstance(ts, int | float) and math.isfinite(ts):
                self.origin_us = float(ts)

    def _sample(self, line: bytes, number: int, e2e: list[float], out: list[Event], t: float | None) -> None:
        event = _loads(line)
        if not isinstance(event, dict):
            self._warn(out, number, "unreadable Sample event", line, t)
            return
        if event.get("ph") != "b":
            return
        latency = _args_number(event, "complete_ns")
        ts = event.get("ts")
        if latency is None or not isinstance(ts, int | float) or not math.isfinite(ts):
            self._warn(out, number, "Sample event without a valid ts/complete_ns", line, t)
            return
        self.samples_done += 1
        self.last_completion_us = max(self.last_completion_us, ts + latency / 1e3)
        e2e.append(latency / 1e9)

    def _token(self, line: bytes, number: int, ttft: list[float], out: list[Event], t: float | None) -> None:
        event = _loads(line)
        if not isinstance(event, dict):
            self._warn(out, number, "unreadable Token event", line, t)
            return
        if event.get("ph") != "b":
            return
        latency = _args_number(event, "complete_ns")
        if latency is None:
            self._warn(out, number, "Token event without a valid complete_ns", line, t)
            return
        ttft.append(latency / 1e9)

    def _token_latency(
        self, line: bytes, number: int, ttft: list[float], out: list[Event], t: float | None
    ) -> None:
        event = _loads(line)
        delay = _args_number(event, "issue_delay") if isinstance(event, dict) else None
        to_done = _args_number(event, "issue_to_done") if isinstance(event, dict) else None
        if delay is None or to_done is None:
            self._warn(out, number, "Token_Latency event without issue_delay/issue_to_done", line, t)
            return
        ttft.append((delay + to_done) / 1e9)

    def _warn(self, out: list[Event], number: int, problem: str, line: bytes, t: float | None) -> None:
        where = f"line {number}: {problem}"
        self.notices.warn(
            out, self._last_t if t is None else t, f"{where}: {snippet(line)}" if line else where
        )


def _loads(line: bytes) -> object:
    text = line.rstrip(b" \t\r,")
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _args_number(event: object, key: str) -> float | None:
    """``event["args"][key]`` as a float when it is a plausible nanosecond count, else None."""
    if not isinstance(event, dict):
        return None
    args = event.get("args")
    value = args.get(key) if isinstance(args, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if 0 <= number <= _MAX_NS else None
