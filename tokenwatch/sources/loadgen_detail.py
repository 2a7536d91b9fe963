"""MLPerf LoadGen's ``mlperf_log_detail.txt``: one ``:::MLLOG {json}`` record per line.

What we keep: the LoadGen version, the ``result_*`` keys (validity, throughput, latency percentiles),
the ``effective_*`` settings the run really used, and every record LoadGen flagged as a warning or an
error (``metadata.is_warning`` / ``is_error``). Values can be integers above 2**63 (RNG seeds), which
the JSON reader keeps exact. A line that is not a record is skipped with a warning naming the file and
line. :class:`DetailLogParser` reads the log while LoadGen writes it (Notices for its warnings/errors, and
:class:`~tokenwatch.base.events.LoadGenDetail` events with the settings, the query plan and the result,
which the MLPerf verdict is made from).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from tokenwatch.base.events import Event, LoadGenDetail, NodeStatus, Notice, NoticeLevel
from tokenwatch.sources.errors import SourceFormatError, read_bounded
from tokenwatch.sources.lines import LineParser, LineSplitter, NoticeLog, snippet

DETAIL_NAME = "mlperf_log_detail.txt"
MARKER = b":::MLLOG "
MAX_DETAIL_BYTES = 256 << 20
_MAX_LINE_BYTES = 64 << 20  # loaded_qsl_set lines of large runs reach megabytes
_POWER_TIME = "%m-%d-%Y %H:%M:%S.%f"
# What the verdict needs of a detail log (settings, the generated query plan, the result), not its bulk
# (``loaded_qsl_set`` lists every sample index; ``loadgen_file_sha1`` every source file).
VERDICT_PREFIXES = ("requested_", "effective_", "generated_", "result_", "early_stopping_")
VERDICT_KEYS = frozenset({"power_begin", "power_end", "loadgen_version", "num_errors", "num_warnings"})
# Records after which the verdict's values are sent: the query plan (written right before the first
# query), LoadGen's judgement, and the log's last record.
_SEND_AFTER = frozenset({"generated_query_duration", "result_validity", "num_errors"})
_MAX_TEXT = 2000
_MAX_TIME_MS = 1e11  # ~3 years of LoadGen time: beyond it a record's time is corrupt


@dataclass(frozen=True, slots=True)
class DetailRecord:
    key: str
    value: Any
    time_ms: float
    line: int
    is_warning: bool = False
    is_error: bool = False


@dataclass(slots=True)
class DetailLog:
    """The records of one detail log, by kind. ``values`` holds the last value of every key."""

    path: str
    values: dict[str, Any] = field(default_factory=dict)
    warnings: list[DetailRecord] = field(default_factory=list)
    errors: list[DetailRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "file:line: why"
    records: int = 0

    @property
    def loadgen_version(self) -> str | None:
        value = self.values.get("loadgen_version")
        return str(value) if value is not None else None

    @property
    def results(self) -> dict[str, Any]:
        return {k: v for k, v in self.values.items() if k.startswith("result_")}

    @property
    def effective(self) -> dict[str, Any]:
        """``effective_*`` settings, keyed without the prefix (``scenario``, ``min_duration_ms``...)."""
        return {k.removeprefix("effective_"): v for k, v in self.values.items() if k.startswith("effective_")}

    @property
    def scenario(self) -> str | None:
        value = self.values.get("effective_scenario")
        return str(value) if value is not None else None

    @property
    def valid(self) -> bool | None:
        value = self.values.get("result_validity")
        return None if value is None else str(value).upper() == "VALID"

    @property
    def tokens_per_s(self) -> float:
        return _first_number(self.values, "result_tokens_per_second", "result_completed_tokens_per_second")

    @property
    def samples_per_s(self) -> float:
        return _first_number(self.values, "result_samples_per_second", "result_completed_samples_per_sec")

    @property
    def samples_completed(self) -> int | None:
        """Samples LoadGen counted: queries x samples per query (``result_query_count`` is queries)."""
        queries = self.values.get("result_query_count")
        per_query = self.values.get(
            "generated_samples_per_query", self.values.get("effective_samples_per_query")
        )
        if isinstance(queries, int) and isinstance(per_query, int):
            return queries * per_query
        return None

    def duration_s(self) -> float:
        """The timed part of the run, from LoadGen's ``power_begin`` / ``power_end`` stamps."""
        try:
            # The stamps carry no zone; read both as UTC (only their difference counts).
            begin = datetime.strptime(str(self.values["power_begin"]), _POWER_TIME).replace(tzinfo=UTC)
            end = datetime.strptime(str(self.values["power_end"]), _POWER_TIME).replace(tzinfo=UTC)
        except (KeyError, ValueError):
            return math.nan
        seconds = (end - begin).total_seconds()
        return seconds if seconds >= 0 else math.nan


def _first_number(values: dict[str, Any], *keys: str) -> float:
    for key in keys:
        value = values.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return math.nan


def parse_record(line: bytes) -> tuple[DetailRecord | None, str]:
    """One line -> (record, "") or (None, why it is not one). ``line`` has no newline."""
    start = line.find(MARKER)
    if start < 0:
        return None, "not a :::MLLOG record"
    payload = line[start + len(MARKER) :].strip()
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        try:  # orjson stops at 64-bit integers; the standard reader keeps any size exactly
            data = json.loads(payload.decode("utf-8", "replace"))
        except ValueError:
            return None, "bad JSON after :::MLLOG"
    if not isinstance(data, dict) or not isinstance(data.get("key"), str):
        return None, "record without a key"
    metadata = data.get("metadata")
    meta = metadata if isinstance(metadata, dict) else {}
    time_ms = data.get("time_ms")
    time_value = math.nan
    if isinstance(time_ms, int | float) and not isinstance(time_ms, bool) and 0 <= time_ms <= _MAX_TIME_MS:
        time_value = float(time_ms)  # NaN, inf, negative and absurd times are no times
    return (
        DetailRecord(
            data["key"],
            data.get("value"),
            time_value,
            0,
            is_warning=meta.get("is_warning") is True,
            is_error=meta.get("is_error") is True,
        ),
        "",
    )


def _add(log: DetailLog, record: DetailRecord) -> None:
    log.records += 1
    log.values[record.key] = record.value
    if record.is_error:
        log.errors.append(record)
    elif record.is_warning:
        log.warnings.append(record)


def parse_detail_bytes(data: bytes, path: str = DETAIL_NAME) -> DetailLog:
    log = DetailLog(path)
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        record, why = parse_record(line)
        if record is None:
            log.skipped.append(f"{path}:{number}: skipped: {why}")
            continue
        _add(
            log,
            DetailRecord(
                record.key, record.value, record.time_ms, number, record.is_warning, record.is_error
            ),
        )
    return log


def read_detail(path: Path | str) -> DetailLog:
    """Read one detail log; a file with no record at all is a :class:`SourceFormatError`."""
    path = Path(path)
    data = read_bounded(path, MAX_DETAIL_BYTES, "LoadGen detail log")
    log = parse_detail_bytes(data, str(path))
    if log.records == 0:
        raise SourceFormatError(f"{path}: no :::MLLOG records: not a LoadGen detail log")
    return log


def verdict_values(values: dict[str, Any]) -> dict[str, Any]:
    """The records the MLPerf verdict reads (see ``VERDICT_PREFIXES``), as plain JSON scalars: a value a
    recording could not hold exactly (a structure, an integer beyond 64 bits, NaN) is left out."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if not (key.startswith(VERDICT_PREFIXES) or key in VERDICT_KEYS) or not _encodable(key):
            continue
        if value is None or isinstance(value, bool):
            out[key] = value
        elif isinstance(value, int):
            if -(1 << 63) <= value < (1 << 64):
                out[key] = value
        elif isinstance(value, float):
            if math.isfinite(value):
                out[key] = value
        elif isinstance(value, str) and len(value) <= _MAX_TEXT and _encodable(value):
            out[key] = value
    return out


def _printable(text: str) -> str:
    """``text`` with anything that is not valid Unicode replaced (a recording must be able to hold it)."""
    return text if _encodable(text) else text.encode("utf-8", "replace").decode("utf-8")


def _encodable(text: str) -> bool:
    """Whether ``text`` is valid Unicode (a lone surrogate, which Python's JSON reader lets through from
    ``\\ud800`` escapes, cannot be written to a recording)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class DetailLogParser(LineParser):
    """Tail a detail log while LoadGen writes it: LoadGen's warnings and errors become Notices,
    the result becomes an info (VALID) or warning (INVALID) Notice; ``log`` accumulates the rest.

    A :class:`LoadGenDetail` with the verdict's records follows the settings, the query plan (before the
    first query), LoadGen's judgement and the log's last record: once per block of records LoadGen wrote
    together (one ``time_ms``), at the latest at the end of the chunk that holds it. Once the result
    block has been read the node's LoadGen run is over: a ``NodeStatus(finished)`` follows it.

    A log that already holds records when the watch begins is read from its first byte as a backlog
    (:meth:`feed_backlog`), each record at its own time on LoadGen's clock (``time_ms``, from LoadGen's
    start): the watch places them in run time, so a plan read late still says when LoadGen started."""

    def __init__(self, node: str, source: str = "loadgen-detail") -> None:
        self.node = node
        self.source = source
        self.log = DetailLog(source)
        self._lines = LineSplitter(_MAX_LINE_BYTES)
        self.notices = NoticeLog(source, node)
        self._settings_sent = False
        self._pending: float | None = None  # the LoadGen time (ms) of a block whose records are to be sent
        self._backlog = False  # reading a backlog: events at LoadGen's own time, not the caller's
        self._clock_s = 0.0  # the latest record's LoadGen time, s (never goes back)
        self._result_read = False
        self.finished = False

    def feed_backlog(self, data: bytes) -> list[Event]:
        """Bytes written before the watch began, each record's events at its LoadGen time (s)."""
        self._backlog = True
        try:
            return self.feed(data, self._clock_s)
        finally:
            self._backlog = False

    def end_backlog(self) -> tuple[list[Event], tuple[float, float] | None]:
        """The block still pending, and (LoadGen's start, its latest record) on LoadGen's clock; None
        before any timed record."""
        out: list[Event] = []
        self._send_pending(self._clock_s, out)
        self._finish(self._clock_s, out)
        if not self.log.records or not math.isfinite(self._clock_s):
            return out, None
        return out, (0.0, self._clock_s)

    def end_of_chunk(self, t: float, out: list[Event]) -> None:
        if self._backlog:
            return  # a backlog's blocks are sent as the next block begins, or by end_backlog
        self._send_pending(t, out)
        self._finish(t, out)

    def _send_pending(self, t: float, out: list[Event]) -> None:
        if self._pending is not None:
            self._pending = None
            out.append(LoadGenDetail(t, self.node, verdict_values(self.log.values)))

    def _finish(self, t: float, out: list[Event]) -> None:
        if self._result_read and not self.finished:
            self.finished = True
            out.append(NodeStatus(t, self.node, "finished", "LoadGen wrote its result (detail log)"))

    def parse_line(self, number: int, line: bytes, t: float, out: list[Event]) -> None:
        if not line.strip():
            return
        record, why = parse_record(line)
        if record is None:
            self.notices.warn(
                out, self._clock_s if self._backlog else t, f"line {number}: {why}: {snippet(line)}"
            )
            return
        block_ms = record.time_ms if math.isfinite(record.time_ms) else self._clock_s * 1e3
        if self._pending is not None and block_ms != self._pending:  # the block before has ended
            self._send_pending(self._clock_s if self._backlog else t, out)
            self._finish(self._clock_s if self._backlog else t, out)
        self._clock_s = max(self._clock_s, block_ms / 1e3)
        at = self._clock_s if self._backlog else t
        _add(self.log, record)
        if (
            record.key in _SEND_AFTER
            or (not self._settings_sent and record.key.startswith("effective_"))
            or (self._result_read and record.key.startswith(VERDICT_PREFIXES))
        ):  # the settings block arrives in one piece: one event for it, another with the plan
            self._pending, self._settings_sent = block_ms, True
        if record.key == "result_validity":
            self._result_read = True
        if record.is_error or record.is_warning:
            level: NoticeLevel = "error" if record.is_error else "warning"
            message = _printable(f"LoadGen {level}: {record.value}")
            out.append(Notice(at, level, message, self.node, self.source))
        elif record.key == "result_validity":
            valid = str(record.value).upper() == "VALID"
            reason = self.log.values.get("result_invalid_reason")
            text = f"LoadGen result {record.value}" + (f" ({reason})" if reason and not valid else "")
            out.append(Notice(at, "info" if valid else "warning", _printable(text), self.node, self.source))
