"""One truth from board to node: three simulated racks (``tokenwatch sim --racks 3 --prometheus-port``)
scraped by a real Prometheus, with a node down, a node stale and a node throttled, watched through the
server as a new user would (``tokenwatch watch fleet.yaml``). At every headless line, rack01 is the same
on the board (the fleet's JSONL row), in its drill-down (``--rack rack01``: its lines and JSONL), live and
replayed; the drill-down's nodes sum to the board's row; a node down or stale in its rack's own watch is
down or stale on the rack's screen; nothing else raises a stale alert; the summary is what the lines
said, also for a run older than the server's history. A healthy fleet at ``--speed 10`` raises no stale
alert and its projection never has an absurd band.

Each fleet is one simulator process and one Prometheus (about 10 s to start); each watch runs 25-40 s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fleet_sim import SimFleet
from fleet_support import PROMETHEUS

from tests.conftest import prometheus_query, run_tokenwatch, wait_until
from tokenwatch.base.events import RunStarted
from tokenwatch.base.formatting import group
from tokenwatch.recording import read_events

pytestmark = [
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (apt-get install prometheus)"),
    pytest.mark.timeout(400),
]

# rack01's node03 goes down and node05 stale; node21 (rack02's node03) throttles.
FAULTS = "node03:down@10s,node05:stale@10s,node21:throttle@5s"
WATCHED = "rack01"


@pytest.fixture(scope="module")
def faulted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    fleet = SimFleet(tmp_path_factory.mktemp("fleet-truth"), 3, faults=FAULTS)
    fleet.start()
    try:
        yield fleet
    finally:
        fleet.stop()


@pytest.fixture(scope="module")
def healthy_fast(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    fleet = SimFleet(tmp_path_factory.mktemp("fleet-fast"), 3, speed=10)
    fleet.start()
    try:
        yield fleet
    finally:
        fleet.stop()


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def row_of(record: dict[str, Any], rack: str) -> dict[str, Any]:
    return next(row for row in record["fleet"] if row["rack"] == rack)


def same(a: float | None, b: float | None) -> bool:
    """Equal figures (both unknown, or equal to the JSON's rounding)."""
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=2e-3)


def test_one_truth_from_board_to_node_on_every_tick(faulted: SimFleet, tmp_path: Path) -> None:
    config = faulted.config("fleet.yaml")
    recording, rack_live = tmp_path / "fleet.jsonl", tmp_path / "rack-live.jsonl"
    watch = run_tokenwatch(
        "watch", str(config), "--headless", "--rack", WATCHED, "--interval", "2s", "--stop-after", "40s",
        "--jsonl", str(rack_live), "--record", str(recording), timeout=300,
    )  # fmt: skip
    assert watch.returncode == 0, watch.stderr
    # The same recording replayed: the board's rows (the fleet's JSONL) and rack01's drill-down.
    board, rack = tmp_path / "board.jsonl", tmp_path / "rack.jsonl"
    for out, extra in ((board, []), (rack, ["--rack", WATCHED])):
        replay = run_tokenwatch(
            "replay", str(recording), "--speed", "0", "--headless", "--interval", "2s",
            "--jsonl", str(out), *extra, timeout=300,
        )  # fmt: skip
        assert replay.returncode == 0, replay.stderr
    boards, racks, live = lines_of(board), lines_of(rack), lines_of(rack_live)
    assert len(boards) == len(racks) >= 10
    # The live drill-down is the replayed one: a script comparing either reads the same figures.
    assert [r["t"] for r in live] == [r["t"] for r in racks[: len(live)]]
    for a, b in zip(live, racks, strict=False):
        assert a["aggregate"] == b["aggregate"], a["t"]
    down_seen = stale_seen = summed = 0
    for whole, mine in zip(boards, racks, strict=True):
        assert whole["t"] == mine["t"]
        row, agg = row_of(whole, WATCHED), mine["aggregate"]
        assert "fleet" not in mine  # the drill-down is one rack's screen
        for key in ("tokens_per_s", "per_gpu_tokens_per_s", "power_w"):
            assert same(agg[key], row[key]), (mine["t"], key, agg[key], row[key])
        assert (agg["nodes"], agg["nodes_up"], agg["gpus"]) == (row["nodes"], row["nodes_up"], row["gpus"])
        assert same(mine["node_spread"]["spread_pct"], row["spread_pct"])
        names = [n["name"] for n in mine["nodes"]]
        assert len(set(names)) == len(names) == 18
        assert all(n.startswith(f"{WATCHED}/") for n in names)
        state = {n["name"]: n["status"] for n in mine["nodes"]}
        down_seen += state[f"{WATCHED}/node03"] == "down"
        stale_seen += state[f"{WATCHED}/node05"] == "stale"
        # The nodes' own rates (from their counters, read every interval) add up to the row the server
        # summed: never a rate over a longer span than the counters cover (it read 3.3x the board).
        rates = [n["tokens_per_s"] for n in mine["nodes"] if n["status"] == "up"]
        if row["tokens_per_s"] and len(rates) == row["nodes_up"] and all(rates) and mine["t"] >= 15:
            summed += 1
            assert sum(rates) == pytest.approx(row["tokens_per_s"], rel=0.2), mine["t"]
        # Only the node that is stale in its rack's own watch is stale: every node is read through the
        # server (an alerting pass every 10 s), never judged by 5 s of silence between two passes.
        for record in (whole, mine):
            stale = {a["node"] for a in record["alerts"] if a["kind"] == "stale"}
            assert stale <= {f"{WATCHED}/node05"}, (record["t"], stale)
    assert down_seen
    assert stale_seen
    assert summed >= 3
    # The throttled node is rack02's slowest, said with its cause on the board.
    assert any(row_of(b, "rack02")["worst_cause"] == "throttling" for b in boards)
    # The rack's lines say the row's figures.
    human = run_tokenwatch(
        "replay", str(recording), "--speed", "0", "--headless", "--interval", "2s", "--rack", WATCHED,
        timeout=300,
    )  # fmt: skip
    lines = [line for line in human.stdout.splitlines() if " tok/s " in line][: len(boards)]
    for line, whole in zip(lines, boards, strict=False):
        row = row_of(whole, WATCHED)
        if row["tokens_per_s"] is not None and "run figures" not in line:  # the end's line: the run's
            shown = float(line.split(" tok/s")[0].split()[-1].replace(",", ""))
            assert abs(shown - row["tokens_per_s"]) <= 1.0, line  # the line's figure is the row's
            assert f"nodes {row['nodes_up']}/{row['nodes']}" in line, line
    # The summary is what the lines said: the fleet's tokens/s over the time its figures cover.
    end = boards[-1]["end"]
    times = [b["t"] for b in boards[:-1]]
    sums = [sum(r["tokens_per_s"] or 0.0 for r in b["fleet"]) for b in boards[:-1]]
    weights = [b - a for a, b in itertools.pairwise(times)] + [times[-1] - times[-2]]
    mean = sum(w * s for w, s in zip(weights, sums, strict=True)) / sum(weights)
    assert end["tokens_per_s"] == pytest.approx(mean, rel=0.1)
    # One final figure: the watch's own summary, `summarize --json` and the report say the same.
    total = group(end["tokens_per_s"], 1)
    said = next(line for line in watch.stdout.splitlines() if line.startswith("Total aggregate"))
    assert said.split()[-1] == total
    summary = run_tokenwatch("summarize", str(recording), "--json", timeout=300)
    assert orjson.loads(summary.stdout)["aggregate"]["tokens_per_s"] == pytest.approx(end["tokens_per_s"])
    report = run_tokenwatch("report", str(recording), "-o", str(tmp_path / "report.html"), timeout=300)
    assert report.returncode == 0, report.stderr
    assert total in (tmp_path / "report.html").read_text(encoding="utf-8")
    # The server's own freshness, read when the watch started: Prometheus scrapes every second here.
    started = read_events(recording)[0][0]
    assert isinstance(started, RunStarted)
    assert started.meta["fleet"]["scrape_interval_s"] == 1.0


def test_a_run_older_than_the_servers_history_is_summarised_over_what_is_retained(
    faulted: SimFleet, tmp_path: Path
) -> None:
    """The server's history (here the watch's lookback) begins after the run did: the summary covers what
    is retained and says so, and its figure is what the lines read (it read ~3x as much)."""
    # The run has counted for longer than the history the watch is given (8 s) reaches back.
    wait_until(
        lambda: bool(
            prometheus_query(faulted.url, "sum(tokenwatch_node_generated_tokens_total offset 12s) > 0")
        ),
        "the run counting for over 12 s in the server",
        poll_s=0.5,
    )
    config = faulted.config("short-history.yaml", lookback="8s")
    jsonl = tmp_path / "lines.jsonl"
    watch = run_tokenwatch(
        "watch", str(config), "--headless", "--interval", "2s", "--stop-after", "20s", "--jsonl", str(jsonl),
        timeout=300,
    )  # fmt: skip
    assert watch.returncode == 0, watch.stderr
    assert "the run began before the server's history does" in watch.stdout
    records = lines_of(jsonl)
    live = [r["aggregate"]["tokens_per_s"] for r in records[:-1] if r["aggregate"]["tokens_per_s"]]
    assert len(live) >= 4
    assert records[-1]["end"]["tokens_per_s"] == pytest.approx(sum(live) / len(live), rel=0.15)
    assert records[-1]["end"]["power_mean_w"] == pytest.approx(
        sum(r["aggregate"]["power_w"] for r in records[:-1] if r["aggregate"]["power_w"])
        / len([r for r in records[:-1] if r["aggregate"]["power_w"]]),
        rel=0.15,
    )


def test_a_rack_the_run_does_not_have_is_one_line_and_exit_2(faulted: SimFleet) -> None:
    config = faulted.config("fleet.yaml")
    watch = run_tokenwatch("watch", str(config), "--headless", "--rack", "rack99", "--stop-after", "30s")
    assert watch.returncode == 2, watch.stderr
    said = [line for line in watch.stderr.splitlines() if "rack99" in line]
    assert said == ["tokenwatch: --rack rack99: the run has no such rack (its racks: rack01, rack02, rack03)"]
    assert "Traceback" not in watch.stderr


def test_a_healthy_fleet_at_speed_10_raises_no_stale_alert_and_no_absurd_band(
    healthy_fast: SimFleet, tmp_path: Path
) -> None:
    """With every node up (the source at --speed 10), the watch raised 54 stale alerts (each node judged
    by 5 s of silence between two 30-s passes) and projected ``29,843k ±11330533...``."""
    config = healthy_fast.config("fleet.yaml")
    jsonl = tmp_path / "lines.jsonl"
    watch = run_tokenwatch(
        "watch", str(config), "--headless", "--interval", "2s", "--stop-after", "35s", "--jsonl", str(jsonl),
        timeout=300,
    )  # fmt: skip
    assert watch.returncode == 0, watch.stderr
    records = lines_of(jsonl)
    assert len(records) >= 10
    for record in records:
        assert not [a for a in record["alerts"] if a["kind"] == "stale"], record["t"]
        projected = (record["verdict"] or {}).get("projected")
        if projected and projected["low"] is not None and projected["high"] is not None:
            assert projected["high"] - projected["low"] < projected["tokens_per_s"], record["t"]
    assert any(r["aggregate"]["nodes_up"] == 54 for r in records)
