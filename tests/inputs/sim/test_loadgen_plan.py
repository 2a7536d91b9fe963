"""The simulated LoadGen: each node's settings and query plan at t = 0, from its profile's benchmark."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tokenwatch.base.events import Event, LatencyLimitCounts, LoadGenDetail, Scenario
from tokenwatch.base.yaml_schema import SchemaError
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings


def first_events(scenario: Scenario, **changes: Any) -> list[Event]:
    profile = dataclasses.replace(load_profile("gb300-nvl72"), **changes)
    settings = SimSettings(profile, scenario=scenario, seed=1, duration_s=60.0)
    return [e for e in RackSimulation(settings).events() if e.t <= 10.0]


def test_offline_nodes_state_their_share_of_the_samples_and_the_rules_minimum() -> None:
    details = [e for e in first_events("Offline") if isinstance(e, LoadGenDetail)]
    assert [d.node for d in details] == list(load_profile("gb300-nvl72").node_names())
    assert all(d.t == 0.0 for d in details)
    total = round(1_056_000 * 60 / 4800)  # the profile's samples, scaled to the 60-s run
    assert sum(d.values["generated_samples_per_query"] for d in details) == total
    first = details[0].values
    assert first["effective_min_sample_count"] == 24_576  # llama2-70b Offline (mlperf.conf)
    assert first["effective_min_duration_ms"] == 600_000
    assert "effective_qsl_rng_seed" not in first  # seeds are not simulated


def test_server_nodes_state_the_benchmarks_limits_and_a_schedule_as_long_as_the_run() -> None:
    events = first_events("Server", benchmark="llama3.1-405b")
    details = [e for e in events if isinstance(e, LoadGenDetail)]
    values = details[0].values
    assert (values["requested_server_ttft_latency"], values["requested_server_tpot_latency"]) == (
        6_000_000_000,
        175_000_000,
    )
    assert values["generated_query_duration"] == 60_000_000_000
    assert "generated_query_count" not in values  # arrivals are drawn as the run goes
    counters = [e for e in events if isinstance(e, LatencyLimitCounts)]
    assert {(c.metric, c.limit_s) for c in counters} == {("ttft", 6.0), ("tpot", 0.175)}


def test_without_a_benchmark_nothing_is_invented() -> None:
    events = first_events("Server", benchmark=None)
    assert not any(isinstance(e, LoadGenDetail | LatencyLimitCounts) for e in events)


def test_a_profile_naming_an_unknown_benchmark_is_refused_in_one_line(tmp_path: Path) -> None:
    builtin = Path(str(load_profile.__globals__["builtin_profiles"]()["h100-dgx"]))
    bad = tmp_path / "rack.yaml"
    bad.write_text(builtin.read_text().replace("benchmark: llama2-70b-99", "benchmark: llama9-1t"))
    with pytest.raises(SchemaError, match="unknown MLPerf benchmark 'llama9-1t'"):
        load_profile(str(bad))
