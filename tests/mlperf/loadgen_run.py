"""A finished real LoadGen run (fake SUT) read back per sample, independently of tokenwatch's parsers.

The trace gives, per sample, LoadGen's own latency (``complete_ns``, from the scheduled time), the query's
scheduled time (``ts``, µs with ns digits) and the dataset index; in Server, a ``Token_Latency`` counter
event per query carries the first-token latency (``issue_delay + issue_to_done``) at the same ``ts``. The
fake SUT's tokens per sample are a fixed function of the index (``tokens_for``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from tokenwatch.mlperf.figures import tpot_per_sample
from tokenwatch.mlperf.forecast import NodeProgress, OverLimit

_TOKENS_RANGE = (8, 16)  # fake_sut.py defaults (--tokens-min / --tokens-max)


def tokens_for(index: int, low: int = _TOKENS_RANGE[0], high: int = _TOKENS_RANGE[1]) -> int:
    """fake_sut.tokens_for, restated so this module imports without mlperf_loadgen."""
    return low + (index * 7919) % (high - low + 1)


def _ns(ts: str) -> int:
    return int(Decimal(ts) * 1000)


@dataclass
class LoadGenRun:
    folder: Path
    sample_seq: np.ndarray  # LoadGen's sequence ids, in trace order of completion
    scheduled_ns: np.ndarray  # the query's scheduled time, ns from the first query's
    latency_ns: np.ndarray
    first_token_ns: np.ndarray | None  # Server only (Offline shares one scheduled time: no pairing)
    tokens: np.ndarray
    completed_at_ns: np.ndarray  # scheduled + latency

    @property
    def summary(self) -> str:
        return (self.folder / "mlperf_log_summary.txt").read_text()

    def detail(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for line in (self.folder / "mlperf_log_detail.txt").read_text().splitlines():
            record = json.loads(line.removeprefix(":::MLLOG "))
            values[record["key"]] = record["value"]
        return values

    def summary_value(self, label: str) -> str:
        match = re.search(rf"^{re.escape(label)}\s*:\s*(.*)$", self.summary, re.M)
        assert match, f"{label!r} not in {self.folder}"
        return match.group(1).strip()

    def summary_block(self, title: str) -> str:
        """The lines after ``title`` up to the next block title or blank line (early-stopping results)."""
        lines = self.summary.splitlines()
        start = lines.index(title) + 1
        out = []
        for line in lines[start:]:
            if not line.startswith(" ") or not line.strip():
                break
            out.append(line)
        return "\n".join(out)


def progress_at(run: LoadGenRun, now_s: float, tick_s: float = 0.05) -> tuple[NodeProgress, list[OverLimit]]:
    """What a core fed by this run would hold at ``now_s`` (one node): tokens sampled every ``tick_s``, the
    counts LoadGen's detail log gives at its start, and per-sample TTFT/TPOT counts over the limits."""
    detail = run.detail()
    order = np.argsort(run.completed_at_ns)
    done_s = run.completed_at_ns[order] / 1e9
    cumulative = np.cumsum(run.tokens[order]).astype(np.float64)
    times = np.append(np.arange(0.0, now_s, tick_s), now_s)
    seen = np.searchsorted(done_s, times, side="right")
    tokens = np.where(seen > 0, cumulative[np.maximum(seen - 1, 0)], 0.0)[:, None]
    count = int(seen[-1])
    last = float(done_s[count - 1]) if count else 0.0
    offline = detail["effective_scenario"] == "Offline"
    total = float(detail["generated_samples_per_query"] if offline else detail["generated_query_count"])
    schedule = None if offline else np.array([detail["generated_query_duration"] / 1e9])
    done = order[:count]
    latency = None if offline else np.array([float(np.median(run.latency_ns[done])) / 1e9 if count else 0.0])
    progress = NodeProgress(
        "Offline" if offline else "Server",
        now_s,
        times,
        tokens,
        tokens[-1],
        np.array([float(count)]),
        np.zeros(1),
        np.array([last]),
        np.array([count == len(order)]),
        np.array([total]),
        schedule,
        None,
        latency,
    )
    over: list[OverLimit] = []
    if not offline and run.first_token_ns is not None and count:
        first = run.first_token_ns[done]
        tpot = tpot_per_sample(run.latency_ns[done], first, run.tokens[done])
        for metric, values, key in (
            ("ttft", first, "requested_server_ttft_latency"),
            ("tpot", tpot, "requested_server_tpot_latency"),
        ):
            limit = detail[key]
            n_over = float(np.count_nonzero(values > limit))
            p99 = float(np.sort(values)[int(count * 0.99)]) / 1e9
            over.append(
                OverLimit(
                    metric,
                    limit / 1e9,
                    np.array([float(count)]),
                    np.array([n_over]),
                    np.array([n_over]),
                    np.array([p99]),
                )
            )
    return progress, over


def read_run(folder: Path, tokens_range: tuple[int, int] = _TOKENS_RANGE) -> LoadGenRun:
    seq, sched, lat, idx = [], [], [], []
    first_by_ts: dict[int, int] = {}
    with open(folder / "mlperf_log_trace.json") as fh:
        for line in fh:
            if line.startswith('{"name":"Sample"') and '"ph":"b"' in line:
                event = json.loads(line.rstrip().rstrip(","), parse_float=str)
                args = event["args"]
                seq.append(args["sample_seq"])
                sched.append(_ns(event["ts"]))
                lat.append(args["complete_ns"])
                idx.append(args["sample_idx"])
            elif line.startswith('{"name":"Token_Latency"'):
                event = json.loads(line.rstrip().rstrip(","), parse_float=str)
                args = event["args"]
                first_by_ts[_ns(event["ts"])] = args["issue_delay"] + args["issue_to_done"]
    scheduled = np.array(sched, np.int64)
    origin = scheduled.min()
    server = len(set(sched)) == len(sched)
    first = np.array([first_by_ts[s] for s in sched], np.int64) if server and first_by_ts else None
    latency = np.array(lat, np.int64)
    return LoadGenRun(
        folder,
        np.array(seq, np.int64),
        scheduled - origin,
        latency,
        first,
        np.array([tokens_for(i, *tokens_range) for i in idx], np.int64),
        scheduled - origin + latency,
    )
