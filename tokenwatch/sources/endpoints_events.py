"""Tail the MLCommons ``endpoints`` harness's ``events.jsonl`` while it is written.

The ``endpoints`` harness (LoadGen's successor for HTTP endpoints) publishes every event of a run on
its event bus, and its event logger writes each as one JSON line (msgspec, fields in this order)::

    {"event_type":"sample.issued","timestamp_ns":812,"sample_uuid":"9f..","conversation_id":"",
     "turn":null,"data":["PromptData",null,[1,2,3],...]}

``event_type`` is ``session.{started,ended,start_performance_tracking,stop_performance_tracking,...}``,
``sample.{issued,recv_first,recv_non_first,complete}`` or ``error.*``; ``timestamp_ns`` is the
harness's monotonic clock. We read them as the harness's own metrics aggregator does: a sample counts
when it is issued inside the performance-tracking window (warm-up samples before it do not), its
end-to-end latency is ``complete - issued`` and its TTFT ``recv_first - issued`` (one per first
chunk). The events carry no output token counts (the harness tokenizes the text afterwards), so
``tokens_done`` is known only from a fixed ``tokens_per_sample``; prompt tokens are counted where the
``issued`` event carries token ids. Like the LoadGen trace parser, ``feed`` gives per chunk the
completed samples' ``LatencyBatch`` (``e2e``, ``ttft``, seconds), one cumulative ``Progress`` and, at
``session.ended``, ``NodeStatus(finished)``.
"""

from __future__ import annotations

import re

import numpy as np
import orjson

from tokenwatch.base.events import Event, LatencyBatch, NodeStatus, Progress
from tokenwatch.sources.lines import LineParser, LineSplitter, NoticeLog, checked_tokens_per_sample, snippet

# The head msgspec writes first: enough to read an event whose payload was cut at the line limit.
_HEAD = re.compile(
    rb'\{"event_type":"([a-z_]+\.[a-z_]+)","timestamp_ns":(\d{1,19}),"sample_uuid":"([^"\\]*)"'
)
_MAX_LINE_BYTES = (
    8 << 20
)  # a long prompt or chain-of-thought rides on its event: keep the head of anything longer
_BACKLOG_SLICE = 64 * 1024
_MAX_NS = 2**63 - 1
_MAX_LATENCY_NS = 1e15  # ~11.6 days: a latency above that is corrupt input
MAX_OPEN_SAMPLES = 1_000_000  # samples issued and not completed, kept at most (oldest forgotten first)


class _Sample:
    __slots__ = ("first_chunks", "issued_ns", "prompt_tokens")

    def __init__(self, issued_ns: int, prompt_tokens: int | None) -> None:
        self.issued_ns = issued_ns
        self.first_chunks: list[int] = []
        self.prompt_tokens = prompt_tokens


class EndpointsEventsParser(LineParser):
    """Incremental parser of one node's ``events.jsonl``; ``t=None`` uses the events' own clock
    (seconds from the first event to the latest one read)."""

    def __init__(
        self, node: str, source: str = "endpoints-events", tokens_per_sample: float | None = None
    ) -> None:
        self.node = node
        self.source = source
        self.tokens_per_sample = checked_tokens_per_sample(tokens_per_sample)
        self.samples_done = 0
        self.prompt_tokens_done: int | None = None
        self.finished = False
        self.tracking: bool | None = None  # None until the harness says when performance tracking starts
        self.origin_ns: int | None = None
        self.latest_ns: int | None = None
        self.open: dict[str, _Sample] = {}
        self._forgot_warned = False
        self._lines = LineSplitter(_MAX_LINE_BYTES)
        self.notices = NoticeLog(source, node)
        self.run_errors = NoticeLog(source, node)  # failed samples are the run's news, not bad input
        self._reset_chunk()

    def _reset_chunk(self) -> None:
        self._e2e: list[float] = []
        self._ttft: list[float] = []
        self._progressed = False
        self._finished_now = False

    # The base class skips cut lines; here their head still says what happened.
    def feed(self, data: bytes, t: float | None = None) -> list[Event]:
        split = self._lines.feed(data)
        return self._read(split.first_line, split.lines, set(split.cut), t)

    def close(self, t: float | None = None) -> list[Event]:
        split = self._lines.flush()
        return self._read(split.first_line, split.lines, set(split.cut), t)

    def feed_backlog(self, data: bytes) -> list[Event]:
        """Bytes written before the watch began, on the events' own clock, in slices small enough that
        each batch keeps its own time."""
        out: list[Event] = []
        for start in range(0, len(data), _BACKLOG_SLICE):
            out += self.feed(data[start : start + _BACKLOG_SLICE])
        return out

    def end_backlog(self) -> tuple[list[Event], tuple[float, float] | None]:
        """Nothing more, and (the first event, the latest) on the events' clock, in seconds; None before
        any event."""
        if self.origin_ns is None or self.latest_ns is None:
            return [], None
        return [], (0.0, (self.latest_ns - self.origin_ns) / 1e9)

    def _read(self, first: int, lines: list[bytes], cut: set[int], t: float | None) -> list[Event]:
        out: list[Event] = []
        for offset, line in enumerate(lines):
            number = first + offset
            if line.strip():
                self._line(number, line, number in cut, out, t)
        if self._e2e or self._ttft or self._progressed or self._finished_now:
            now = self._time(t)
            if self._e2e:
                out.append(LatencyBatch(now, self.node, "e2e", np.array(self._e2e, dtype=np.float64)))
            if self._ttft:
                out.append(LatencyBatch(now, self.node, "ttft", np.array(self._ttft, dtype=np.float64)))
            if self._progressed:
                tokens = (
                    None
                    if self.tokens_per_sample is None
                    else round(self.samples_done * self.tokens_per_sample)
                )
                out.append(Progress(now, self.node, self.samples_done, tokens, self.prompt_tokens_done))
            if self._finished_now:
                out.append(NodeStatus(now, self.node, "finished", "endpoints harness session ended"))
        self._reset_chunk()
        return out

    def _line(self, number: int, line: bytes, was_cut: bool, out: list[Event], t: float | None) -> None:
        head = _HEAD.match(line)
        if head is not None:
            kind, ts, uuid = head.group(1).decode(), int(head.group(2)), head.group(3).decode()
        elif was_cut:
            self._warn(out, number, f"longer than {_MAX_LINE_BYTES} bytes and not an event head", line, t)
            return
        else:
            event = _loads(line)
            fields = _fields(event)
            if fields is None:
                self._warn(out, number, "not an endpoints event", line, t)
                return
            kind, ts, uuid = fields
        if not 0 <= ts <= _MAX_NS:
            self._warn(out, number, "timestamp_ns out of range", line, t)
            return
        if self.origin_ns is None:
            self.origin_ns = ts
        self.latest_ns = ts if self.latest_ns is None else max(self.latest_ns, ts)
        if (
            kind == "sample.recv_non_first"
        ):  # one per streamed chunk: the commonest line, and nothing to count
            return
        if kind.startswith("sample.") and not uuid:
            self._warn(out, number, f"{kind} without a sample_uuid", line, t)
            return
        if kind == "sample.issued":
            self._issued(uuid, ts, None if was_cut else line, out, t)
        elif kind == "sample.recv_first":
            sample = self.open.get(uuid)
            if sample is not None:
                sample.first_chunks.append(ts)
        elif kind == "sample.complete":
            self._complete(uuid, ts, number, line, out, t)
        elif kind == "session.start_performance_tracking":
            self.tracking = True
            self.open.clear()  # issued before the window: warm-up, as the harness's aggregator counts
        elif kind == "session.stop_performance_tracking":
            self.tracking = False
        elif kind == "session.ended":
            self._finished_now = not self.finished
            self.finished = True
        elif kind.startswith("error."):
            self.run_errors.warn(
                out, self._now(t), f"{kind} for sample {uuid[:12] or '-'}: {_error_text(line)}"
            )

    def _issued(self, uuid: str, ts: int, line: bytes | None, out: list[Event], t: float | None) -> None:
        if self.tracking is False:
            return
        sample = self.open.get(uuid)
        if sample is not None:  # a retried issue: the harness keeps the row and refreshes its issue time
            sample.issued_ns = ts
            return
        if len(self.open) >= MAX_OPEN_SAMPLES:
            self.open.pop(next(iter(self.open)))
            if not self._forgot_warned:
                self._forgot_warned = True
                self.notices.warn(
                    out, self._now(t), f"more than {MAX_OPEN_SAMPLES} samples open: the oldest are forgotten"
                )
        self.open[uuid] = _Sample(ts, _prompt_tokens(line) if line is not None else None)

    def _complete(
        self, uuid: str, ts: int, number: int, line: bytes, out: list[Event], t: float | None
    ) -> None:
        sample = self.open.pop(uuid, None)
        if sample is None:
            return  # issued outside the tracking window (or a warm-up sample)
        latency = ts - sample.issued_ns
        if not 0 <= latency <= _MAX_LATENCY_NS:
            self._warn(out, number, f"completion {latency} ns after its issue", line, t)
            return
        self.samples_done += 1
        self._progressed = True
        self._e2e.append(latency / 1e9)
        self._ttft.extend(
            (first - sample.issued_ns) / 1e9 for first in sample.first_chunks if first >= sample.issued_ns
        )
        if sample.prompt_tokens is not None:
            self.prompt_tokens_done = (self.prompt_tokens_done or 0) + sample.prompt_tokens

    def _time(self, t: float | None) -> float:
        return self._now(t)

    def _now(self, t: float | None) -> float:
        if t is not None:
            return t
        if self.origin_ns is None or self.latest_ns is None:
            return 0.0
        return (self.latest_ns - self.origin_ns) / 1e9

    def _warn(self, out: list[Event], number: int, problem: str, line: bytes, t: float | None) -> None:
        self.notices.warn(out, self._now(t), f"line {number}: {problem}: {snippet(line[:200])}")


def _loads(line: bytes) -> object:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def _fields(event: object) -> tuple[str, int, str] | None:
    """(event_type, timestamp_ns, sample_uuid) of an event written with its fields in another order."""
    if not isinstance(event, dict):
        return None
    kind, ts, uuid = event.get("event_type"), event.get("timestamp_ns"), event.get("sample_uuid", "")
    if not isinstance(kind, str) or "." not in kind or isinstance(ts, bool) or not isinstance(ts, int):
        return None
    return kind, ts, uuid if isinstance(uuid, str) else ""


def _prompt_tokens(line: bytes) -> int | None:
    """Input tokens of an ``issued`` event that carries token ids (``PromptData.token_ids``)."""
    if b'"PromptData"' not in line:
        return None
    event = _loads(line)
    data = event.get("data") if isinstance(event, dict) else None
    if isinstance(data, list) and len(data) >= 3 and data[0] == "PromptData" and isinstance(data[2], list):
        return len(data[2])
    if isinstance(data, dict) and isinstance(data.get("token_ids"), list):
        return len(data["token_ids"])
    return None


def _error_text(line: bytes) -> str:
    event = _loads(line)
    data = event.get("data") if isinstance(event, dict) else None
    if isinstance(data, list) and len(data) >= 2 and data[0] == "ErrorData":
        return ": ".join(str(part)[:200] for part in data[1:3] if part)
    return snippet(line[:200])
