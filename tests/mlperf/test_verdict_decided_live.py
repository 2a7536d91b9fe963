"""Decided beats projected, against the real LoadGen: a rule broken beyond recovery turns the projection to
DECIDED INVALID at the first read after it is (the reason ends in what LoadGen will say, in its words, with
what stopping now saves), and LoadGen's final verdict agrees; a run LoadGen passes is never decided INVALID,
and is DECIDED VALID once LoadGen has written its result."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.sources.conftest import needs_loadgen
from tokenwatch.base.events import LatencyBatch, LoadGenDetail
from tokenwatch.core import RackCore
from tokenwatch.mlperf.early_stopping import overlatency_budget
from tokenwatch.mlperf.forecast import Forecast

from .live_runs import TailedRun, run_and_tail
from .test_verdict_live import CONFIG

pytestmark = needs_loadgen

_SERVER = ["--scenario", "Server", "--workers", "16", "--tokens-per-s", "4000", "--target-qps", "400"]
_LIMIT_MS = 100.0
RUNS: dict[str, list[str]] = {
    # 600 queries, every 25th first token 250 ms late against a 100 ms limit: the p99 allows 5 over
    "p99-beyond-recovery": [
        *_SERVER,
        *["--min-duration-ms", "1500", "--min-queries", "600", "--ttft-limit-ms", f"{_LIMIT_MS:g}"],
        *["--slow-first-token-every", "25", "--slow-first-token-ms", "250"],
    ],
    # every 150th of 600: early stopping allows none at 600 queries, the p99 allows 5
    "early-stopping-beyond-recovery": [
        *_SERVER,
        *["--min-duration-ms", "1500", "--min-queries", "600", "--ttft-limit-ms", f"{_LIMIT_MS:g}"],
        *["--slow-first-token-every", "150", "--slow-first-token-ms", "250"],
    ],
    # 80 queries: fewer than early stopping needs (459) whatever their latency
    "too-few-queries": [*_SERVER, "--min-duration-ms", "200", "--min-queries", "80"],
    # 600 queries, every first token in time: VALID
    "valid": [*_SERVER, "--min-duration-ms", "1500", "--min-queries", "600"],
}
LOADGEN_SAYS = {
    "p99-beyond-recovery": "Performance constraints satisfied : NO",
    "early-stopping-beyond-recovery": "Early stopping satisfied: NO",
    "too-few-queries": "Early stopping satisfied: NO",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TailedRun]:
    return {run.name: run for run in run_and_tail(tmp_path_factory.mktemp("decided-live"), RUNS)}


def forecasts(run: TailedRun) -> list[tuple[float, Forecast]]:
    """The forecast after each read of the files (every event of that read in), as the snapshot says it."""
    core = RackCore(CONFIG)
    core.ingest(run.run_started())
    out = []
    times = sorted({e.t for e in run.events})
    k = 0
    for t in times:
        while k < len(run.events) and run.events[k].t <= t:
            core.ingest(run.events[k])
            k += 1
        core.advance(t)
        view = core.snapshot(t).verdict
        assert view is not None
        out.append((t, view.forecast))
    return out


def first_read_beyond_recovery(run: TailedRun) -> float:
    """When the run's own TTFTs put it past recovery, counted here from the raw latencies read: the first
    read after which more queries are over the limit than the planned count allows, by the 99th
    percentile (``N - floor(0.99 N) - 1``) or by early stopping (its budget at ``N``), whichever is less."""
    planned = next(
        int(e.values["generated_query_count"])
        for e in run.events
        if isinstance(e, LoadGenDetail) and "generated_query_count" in e.values
    )
    allowed = min(planned - int(np.floor(planned * 0.99)) - 1, overlatency_budget(planned))
    over = 0
    for event in run.events:
        if isinstance(event, LatencyBatch) and event.metric == "ttft":
            over += int(np.count_nonzero(np.round(event.values_s * 1e9) > _LIMIT_MS * 1e6))
            if over > allowed:
                return event.t
    raise AssertionError(f"{run.name}: never beyond recovery")


@pytest.mark.parametrize("name", list(LOADGEN_SAYS))
def test_a_rule_broken_beyond_recovery_decides_the_verdict_at_once(
    runs: dict[str, TailedRun], name: str
) -> None:
    run = runs[name]
    assert any(LOADGEN_SAYS[name] in line for line in run.result_lines())  # the setup, as LoadGen judged it
    _, end = run.span()
    broken = first_read_beyond_recovery(run)
    assert broken < end  # decided before LoadGen finished
    ticks = forecasts(run)
    assert not any(fc.decided for t, fc in ticks if t < broken)
    t, fc = next((t, fc) for t, fc in ticks if t >= broken)
    assert t == broken  # at the read that broke it: within one tick
    assert fc.valid is False
    reason: str = fc.decided
    assert reason.startswith("cannot be VALID: ")
    said = re.search(r"LoadGen will write '([^']*)'", reason)
    assert said is not None, reason
    assert said[1] in [line.strip() for line in run.result_lines()]  # what LoadGen then said, word for word
    if said[1].startswith("Early stopping"):
        assert re.search(r"Processed \d+ queries\. Would need to run at least \d+ more queries", reason)
    saving = re.search(r"stopping now saves (\d+) s x 1 GPUs", reason)
    if fc.warming_up:  # no end can be projected yet, so no saving is claimed
        assert saving is None, reason
    else:
        assert saving is not None, reason
        assert abs(int(saving[1]) - (end - t)) <= 1.5  # the rest of the run, to a second and a half
    # every later read stays decided, and LoadGen's own result ends it INVALID in its words
    assert all(fc.decided and fc.valid is False for t2, fc in ticks if t2 >= broken)
    assert "-1" not in reason


def test_a_run_loadgen_passes_is_never_decided_invalid_and_is_decided_valid_by_its_result(
    runs: dict[str, TailedRun],
) -> None:
    run = runs["valid"]
    assert run.result_lines()[0] == "Result is : VALID"
    ticks = forecasts(run)
    assert not any(fc.decided and fc.valid is False for _, fc in ticks)
    result_t = next(e.t for e in run.events if isinstance(e, LoadGenDetail) and "result_validity" in e.values)
    _, fc = next((t, fc) for t, fc in ticks if t >= result_t)
    assert fc.valid is True
    assert fc.decided == "LoadGen wrote VALID"
    figure = run.detail()["result_completed_tokens_per_second"]
    band = fc.tokens_per_s
    assert band is not None
    assert band.value == pytest.approx(figure)
    assert band.low == band.high == band.value
