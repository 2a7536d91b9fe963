"""Each rack can feed a fleet: every series /metrics serves names its rack, so one
Prometheus scraping 64 racks' exporters tells them apart; ``--prometheus-host`` binds another address."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import PATIENCE_S, REPO_ROOT, cli_env, listening_addresses, start_listening
from tokenwatch.base.events import RACK_FIGURES, Event, RackFiguresBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.frontends.metrics.exposition import render
from tokenwatch.frontends.metrics.families import take_view
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings


def rack_core(meta: dict[str, object], until_s: float = 30.0) -> RackCore:
    settings = SimSettings(
        load_profile("gb300-nvl72"), seed=3, duration_s=300.0, name="llama-run", extra_meta=meta
    )
    core = RackCore()
    for event in RackSimulation(settings).events():
        if event.t > until_s:
            break
        core.ingest(event)
    return core


def samples(core: RackCore) -> list[tuple[str, dict[str, str], float]]:
    body = render(take_view(core)).decode()
    return [(s.name, s.labels, s.value) for fam in text_string_to_metric_families(body) for s in fam.samples]


def test_every_series_of_a_rack_names_it() -> None:
    got = samples(rack_core({"rack": "rack07"}))
    run_series = [s for s in got if s[0] != "tokenwatch_up"]
    assert len(run_series) > 1000
    assert all(labels.get("rack") == "rack07" for _, labels, _ in run_series)
    assert ("tokenwatch_up", {}, 1.0) in got  # the process itself is nobody's rack


def test_the_rack_label_name_and_the_run_name_as_default() -> None:
    got = samples(rack_core({"rack_label": "cluster_rack"}))
    node = next(labels for name, labels, _ in got if name == "tokenwatch_node_up")
    assert node["cluster_rack"] == "llama-run"  # no rack named: the run's name
    assert "rack" not in node


def test_each_node_says_how_many_gpus_it_has_and_the_rack_its_projection() -> None:
    core = rack_core({"rack": "rack07"}, until_s=120.0)
    got = samples(core)
    gpus = [v for name, _, v in got if name == "tokenwatch_node_gpus"]
    assert gpus == [4.0] * 18
    snap = core.snapshot()
    assert snap.verdict is not None
    band = snap.verdict.forecast.tokens_per_s
    projected = [v for name, _, v in got if name == "tokenwatch_rack_projected_tokens_per_second"]
    assert projected == ([band.value] if band is not None else [])


def test_a_run_of_many_racks_labels_each_node_with_its_own() -> None:
    """A fleet whose table places each rack's nodes: node series carry their rack, the run-wide ones
    (the whole fleet's) none."""
    nodes = tuple(f"{r}/n{k}" for r in ("rack01", "rack02") for k in range(3))
    meta = {"fleet": {"racks": [["rack01", 0, 3], ["rack02", 3, 3]]}}
    values = np.full((2, len(RACK_FIGURES)), 1.0)
    events: list[Event] = [
        RunStarted(0.0, "fleet", "Offline", nodes, 4, None, None, "live", 1.7e9, meta),
        RackFiguresBatch(1.0, ("rack01", "rack02"), values, np.zeros(2, bool), ("", ""), ("", "")),
    ]
    core = RackCore()
    for event in events:
        core.ingest(event)
    got = samples(core)
    racks = {labels["node"]: labels["rack"] for name, labels, _ in got if name == "tokenwatch_node_gpus"}
    assert racks == {n: n.split("/")[0] for n in nodes}
    rack_wide = next(labels for name, labels, _ in got if name == "tokenwatch_rack_nodes")
    assert "rack" not in rack_wide


def _start(*extra: str) -> subprocess.Popen[str]:
    argv = ["sim", "--duration", "1m", "--speed", "10", "--headless", "--interval", "30s", *extra]
    return subprocess.Popen(
        [sys.executable, "-m", "tokenwatch", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        cwd=REPO_ROOT,
    )


def _fetch(url: str, timeout_s: float = PATIENCE_S) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                return str(answer.read().decode())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_prometheus_host_binds_that_address() -> None:
    """127.0.0.2 is loopback (no warning) but not 127.0.0.1: only the address asked for answers."""
    proc, port = start_listening(
        lambda port: _start("--prometheus-port", str(port), "--prometheus-host", "127.0.0.2"), "the exporter"
    )
    try:
        assert "tokenwatch_up" in _fetch(f"http://127.0.0.2:{port}/metrics")
        # asked of the process, not of 127.0.0.1: another process may listen there on the same port
        assert listening_addresses(proc.pid, port) == {"127.0.0.2"}
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert f"serving /metrics on http://127.0.0.2:{port}/metrics" in err
    assert "warning" not in err


def test_a_public_address_is_warned_about() -> None:
    proc, port = start_listening(
        lambda port: _start("--prometheus-port", str(port), "--prometheus-host", "0.0.0.0"), "the exporter"
    )
    try:
        assert "tokenwatch_up" in _fetch(f"http://127.0.0.1:{port}/metrics")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "warning: /metrics listens on 0.0.0.0: anyone who can reach it can read" in err


def test_prometheus_host_without_a_port_is_a_usage_error() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tokenwatch",
            "sim",
            "--speed",
            "0",
            "--headless",
            "--prometheus-host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=REPO_ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "tokenwatch sim: --prometheus-host needs --prometheus-port (the port /metrics is served on)"
    ]
