"""The rules the live verdict shows are the final verdict's: a rack's latency rule is its worst node's while
the run goes (each node's LoadGen has written its result, the verdict DECIDED) as in the final verdict, named
where that node alone has its figure, and marked where the figure is a histogram's estimate; a run that
ended before any node finished states no projected rule as final."""

from __future__ import annotations

from tests.sources.conftest import LOADGEN
from tokenwatch.base.events import Event, NodeStatus, RunEnded, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.core.snapshot_json import snapshot_json
from tokenwatch.core.verdict.view import check_cells, rule_figure
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
from tokenwatch.sources.loadgen_detail import DetailLogParser

_KEY = b'"result_first_token_99.00_percentile_latency_ns", "value": '
_RACKS_OWN_NS = 276316453  # the GB300 NVL72 rack's own Server log: LoadGen's TTFT p99


def _detail_events(node: str, log: bytes) -> list[Event]:
    parser = DetailLogParser(node)
    return parser.feed(log, 1.0) + parser.close(1.0)


def test_every_surface_shows_the_worst_nodes_ttft_p99() -> None:
    log = (LOADGEN / "nvidia-gb300-nvl72-server" / "mlperf_log_detail.txt").read_bytes()
    assert _KEY + str(_RACKS_OWN_NS).encode() in log
    slower_ns = 1_500_000_000  # under the 2 s limit: both nodes pass, the second by less
    slower = log.replace(_KEY + str(_RACKS_OWN_NS).encode(), _KEY + str(slower_ns).encode())
    core = RackCore()
    core.ingest(RunStarted(0.0, "gb300", "Server", ("node01", "node02"), 8, None, None, "live", 0.0))
    finished: list[Event] = []  # held back: the run goes on, its verdict decided by LoadGen's results
    for node, text in (("node01", log), ("node02", slower)):
        for event in _detail_events(node, text):
            if isinstance(event, NodeStatus):
                finished.append(event)
            else:
                core.ingest(event)
    live = core.snapshot(2.0)
    assert not live.ended
    assert live.verdict is not None
    assert live.verdict.forecast.decided == "every node's LoadGen wrote VALID"
    shown = {r.name: r for r in live.verdict.forecast.rules}
    assert shown["ttft_p99"].now == slower_ns / 1e9
    assert shown["ttft_p99"].node == "node02"  # the engineer's next look: which node
    assert not shown["ttft_p99"].estimated  # LoadGen's own figure
    # ... to the 0.1 ms the latency tables give LoadGen's figures, on the panel as in the final rows
    assert rule_figure(shown["ttft_p99"].now, shown["ttft_p99"]) == "1,500.0 ms"
    assert shown["min_queries"].node == ""  # both nodes' LoadGen issued the same count: no one node's
    for event in [*finished, RunEnded(2.5)]:
        core.ingest(event)
    final = core.snapshot(3.0)
    assert final.ended
    assert final.summary is not None
    assert final.summary.verdict is not None
    checks = {c.name: c for c in final.summary.verdict.checks}
    assert checks["ttft_p99"].value == slower_ns / 1e9
    assert checks["ttft_p99"].node == "node02"
    assert not checks["ttft_p99"].estimated
    assert check_cells(checks["ttft_p99"])[3] == "1,500.0 ms"
    assert checks["min_queries"].node == ""


def test_a_p99_read_from_histograms_is_an_estimate_named_at_its_node() -> None:
    """The simulator's nodes (as an engine's /metrics) state their latencies as histograms: the rack's
    TTFT p99 rule is the worst node's bucket estimate, marked as such on the panel (``~``) and in the
    JSONL, and named at that node where it alone has it. One node made slower than the rest is that node."""
    profile = load_profile("gb300-nvl72")
    faults = parse_faults("node11:slow@1m", profile.node_names())
    core = RackCore()
    for event in RackSimulation(SimSettings(profile, "Server", 3, 300.0, faults)).events():
        if event.t > 240.0:
            break
        core.ingest(event)
    snap = core.snapshot(240.0)
    assert snap.verdict is not None
    rule = {r.name: r for r in snap.verdict.forecast.rules}["ttft_p99"]
    state = core.state
    p99 = [float(h.quantiles([0.99])[0]) for h in state.latency["ttft"]]
    worst = max(p99)
    assert rule.now == worst
    assert rule.estimated
    assert rule_figure(rule.now, rule).startswith("~")
    assert p99.count(worst) == 1  # the slowed node alone (the others' p99 fall in one bucket)
    assert state.run.nodes[p99.index(worst)] == "node11"
    assert rule.node == "node11"
    checks = {c["name"]: c for c in snapshot_json(snap)["verdict"]["checks"]}
    assert checks["ttft_p99"]["estimated"] is True
    assert checks["ttft_p99"].get("node", "") == rule.node


def test_a_run_ended_before_any_node_finished_states_no_projected_rule() -> None:
    """An interrupted run has no LoadGen result on any node: its final verdict names no rule, and the
    dashboard's rows (the JSONL's checks) say only that no node finished, not a projection's
    `✓ min duration 877 s` as if it were final."""
    core = RackCore()
    for event in RackSimulation(SimSettings(load_profile("gb300-nvl72"), "Offline", 1, 900.0)).events():
        if event.t > 120.0:
            break
        core.ingest(event)
    core.ingest(RunEnded(120.0, "interrupted"))
    snap = core.snapshot()
    assert snap.ended
    assert snap.summary is not None
    assert snap.summary.verdict is not None
    assert snap.summary.verdict.checks == ()
    assert snap.verdict is not None
    assert [r.name for r in snap.verdict.forecast.rules] == ["every_node_finished"]
    assert snap.verdict.valid is False
