"""The /metrics exporter: byte-for-byte prometheus_client's format, the core's figures, safe under load."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from prometheus_client.utils import floatToGoString

from tests.conftest import PATIENCE_S, REPO_ROOT, cli_env, start_listening, wait_until
from tokenwatch.base.events import GPU_METRICS
from tokenwatch.core import RackCore
from tokenwatch.core.histogram import cumulative_at
from tokenwatch.frontends.metrics import MetricsServer, serve_metrics
from tokenwatch.frontends.metrics.exposition import families, go_floats, render, render_families
from tokenwatch.frontends.metrics.families import Family, take_view
from tokenwatch.inputs.sim.collector import SimulatorCollector
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import SimSettings
from tokenwatch.session import Session

# prometheus_client.utils carries no annotations; this is its signature.
go_string: Callable[[float], str] = floatToGoString
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _labels(text: str) -> dict[str, str]:
    return {
        k: v.replace(r"\"", '"').replace(r"\n", "\n").replace("\\\\", "\\") for k, v in _LABEL.findall(text)
    }


class _Mirror:
    """The same families built the slow, standard way with prometheus_client's own classes."""

    def __init__(self, fams: list[Family]) -> None:
        self.fams = fams

    def collect(self) -> Iterator[Metric]:
        for fam in self.fams:
            if fam.kind == "histogram":
                b = fam.histogram
                assert b is not None
                label_names = sorted(_labels(fam.labels[0]))  # node, and the rack it is in
                hist = HistogramMetricFamily(fam.name, fam.help, labels=label_names)
                for i, lab in enumerate(fam.labels):
                    les = [go_string(x) for x in b.bounds_s] + ["+Inf"]
                    values = [*b.cumulative[i].tolist(), int(b.count[i])]
                    hist.add_metric(
                        [_labels(lab)[n] for n in label_names],
                        list(zip(les, map(float, values), strict=True)),
                        float(b.sum_s[i]),
                    )
                yield hist
                continue
            cls = CounterMetricFamily if fam.kind == "counter" else GaugeMetricFamily
            names = sorted(_labels(fam.labels[0])) if fam.labels[0] else []
            out = cls(fam.name, fam.help, labels=names)
            for lab, value in zip(fam.labels, fam.values.tolist(), strict=True):
                if np.isfinite(value):
                    labels = _labels(lab)
                    out.add_metric([labels[n] for n in names], value)
            yield out


def test_render_is_byte_for_byte_prometheus_client(server_core: RackCore) -> None:
    view = take_view(server_core)
    assert view is not None
    fams = families(view)
    registry = CollectorRegistry()
    registry.register(_Mirror(fams))
    assert render_families(fams) == generate_latest(registry)


def test_scrape_over_http_serves_the_cores_figures(server_core: RackCore) -> None:
    server = MetricsServer(server_core, 0)
    try:
        body = (
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=PATIENCE_S)
            .read()
            .decode()
        )
        gz = urllib.request.Request(
            f"http://127.0.0.1:{server.port}/metrics", headers={"Accept-Encoding": "gzip"}
        )
        assert urllib.request.urlopen(gz, timeout=PATIENCE_S).headers["Content-Encoding"] == "gzip"
        missing = urllib.request.Request(f"http://127.0.0.1:{server.port}/nothing")
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(missing, timeout=PATIENCE_S)
    finally:
        server.close()
    parsed = {f.name: f for f in text_string_to_metric_families(body)}
    run = server_core.run
    assert run is not None
    tokens = {s.labels["node"]: s.value for s in parsed["tokenwatch_node_generated_tokens"].samples}
    assert tokens == {n: float(server_core.state.tokens[i]) for i, n in enumerate(run.nodes)}
    power = {
        (s.labels["node"], int(s.labels["gpu"])): s.value
        for s in parsed["tokenwatch_gpu_power_watts"].samples
    }
    p = GPU_METRICS.index("power_w")
    assert power == {
        (n, g): server_core.state.gpu_values[i, g, p] for i, n in enumerate(run.nodes) for g in range(4)
    }
    clocks = [s.value for s in parsed["tokenwatch_gpu_sm_clock_hertz"].samples]
    assert clocks[0] == server_core.state.gpu_values[0, 0, GPU_METRICS.index("sm_clock_mhz")] * 1e6
    ttft = parsed["tokenwatch_ttft_seconds"].samples
    counts = {s.labels["node"]: s.value for s in ttft if s.name.endswith("_count")}
    assert counts == {n: float(server_core.state.latency["ttft"][i].total) for i, n in enumerate(run.nodes)}
    le_one = {
        s.labels["node"]: s.value for s in ttft if s.name.endswith("_bucket") and s.labels["le"] == "1.0"
    }
    node0 = server_core.state.latency["ttft"][0].counts
    assert le_one[run.nodes[0]] == float(cumulative_at(node0, [1.0])[0])
    status = [s for s in parsed["tokenwatch_node_status"].samples if s.value == 1.0]
    assert len(status) == len(run.nodes)  # exactly one state per node


def test_before_the_run_only_up_is_served() -> None:
    assert render(take_view(RackCore())) == (
        b"# HELP tokenwatch_up 1 while tokenwatch is serving.\n"
        b"# TYPE tokenwatch_up gauge\ntokenwatch_up 1.0\n"
    )


async def test_scrapes_during_a_run_read_a_consistent_core() -> None:
    """Scrapes from another thread while the loop feeds the core: each one is a consistent snapshot."""
    profile = load_profile("gb300-nvl72")
    # Ten minutes at x20: half a minute of wall time, room for the scrapes on a loaded machine (two minutes
    # at x80 ended after 1.5 s); the scraper stops the run once it has read enough.
    settings = SimSettings(profile, scenario="Server", seed=3, duration_s=600.0)
    core = RackCore()
    session = Session(core, [SimulatorCollector(settings, speed=20.0)], flush_interval_s=None)
    server = serve_metrics(core, 0)  # inside the running loop: attaches to it
    bodies: list[str] = []
    errors: list[BaseException] = []
    loop = asyncio.get_running_loop()

    def with_figures() -> int:
        return sum("tokenwatch_rack_generated_tokens" in body for body in bodies)

    def scrape() -> None:
        while not session.stopped and with_figures() < 10:
            try:
                bodies.append(
                    urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=PATIENCE_S)
                    .read()
                    .decode()
                )
            except BaseException as exc:
                errors.append(exc)
            time.sleep(0.01)  # a scraper's pace: the run moves on between scrapes
        loop.call_soon_threadsafe(session.stop)

    thread = threading.Thread(target=scrape)
    thread.start()
    try:
        await session.run()
    finally:
        session.stopped = True
        await asyncio.to_thread(thread.join, PATIENCE_S)
        server.close()
    assert not errors
    assert with_figures() >= 10
    for body in bodies:
        fams = {f.name: f for f in text_string_to_metric_families(body)}
        if "tokenwatch_rack_generated_tokens" not in fams:
            continue
        rack = fams["tokenwatch_rack_generated_tokens"].samples[0].value
        nodes = sum(s.value for s in fams["tokenwatch_node_generated_tokens"].samples)
        assert rack == nodes  # one instant: the rack total is the sum of the nodes


def test_cli_sim_serves_metrics() -> None:
    proc, port = start_listening(
        lambda port: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tokenwatch",
                "sim",
                "--duration",
                "1m",
                "--speed",
                "20",
                "--headless",
                "--interval",
                "30s",
                "--prometheus-port",
                str(port),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli_env(),
            cwd=REPO_ROOT,
        ),
        "the exporter",
    )
    try:
        body = ""

        def served() -> bool:
            nonlocal body
            with contextlib.suppress(OSError):
                body = (
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=PATIENCE_S)
                    .read()
                    .decode()
                )
            return "tokenwatch_rack_tokens_per_second" in body or proc.poll() is not None

        wait_until(served, "the run's figures served", poll_s=0.2)
        # Every series names its rack: a one-rack run's is the run's name (no config names it here).
        assert (
            'tokenwatch_gpu_power_watts{gpu="3",node="node18",rack="gb300-nvl72 offline (simulated)"}' in body
        )
    finally:
        _out, err = proc.communicate(timeout=PATIENCE_S)
    assert proc.returncode == 0, err


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=50))
def test_fast_float_spelling_is_prometheus_clients(values: list[float]) -> None:
    assert go_floats(np.array(values, dtype=np.float64)) == [go_string(v) for v in values]
