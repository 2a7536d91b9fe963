"""``gpu.source: prometheus`` / ``kind: prometheus-query``: the rack-wide Prometheus-query collector
wired into ``watch``, against a real Prometheus scraping a real dcgm-exporter capture."""

from __future__ import annotations

import http.server
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_support import DATA, LiveRun, gpu_rows

from tests.conftest import PATIENCE_S, prometheus_query, start_prometheus, stop_process
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.live.supervisor import LiveOptions
from tokenwatch.inputs.prometheus.query import PrometheusQueryCollector
from tokenwatch.inputs.watch import build_collector

PROMETHEUS = shutil.which("prometheus")
DCGM = DATA / "dcgm-v100x4.excerpt.prom"  # real 4 x V100 lines, Hostname="r6i3n0"
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    body = DCGM.read_bytes()

    class Static(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    static = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Static)
    threading.Thread(target=static.serve_forever, daemon=True).start()
    tmp = tmp_path_factory.mktemp("prometheus")
    (tmp / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n"
        f"  - job_name: dcgm\n    static_configs: [{{targets: ['127.0.0.1:{static.server_address[1]}']}}]\n"
    )

    proc, url = start_prometheus(PROMETHEUS, tmp / "prometheus.yml", tmp / "data", tmp / "prometheus.log")
    try:
        deadline = time.monotonic() + PATIENCE_S
        while True:
            try:
                if prometheus_query(url, "DCGM_FI_DEV_POWER_MGMT_LIMIT", 2):
                    break
            except Exception:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("prometheus did not scrape the dcgm capture in time")
            time.sleep(0.3)
        yield url
    finally:
        stop_process(proc)
        static.shutdown()
        static.server_close()


async def test_gpu_telemetry_from_prometheus_needs_no_ssh(prometheus: str, tmp_path: Path) -> None:
    cfg = tmp_path / "w.yaml"
    cfg.write_text(
        "run: {name: fleet}\n"
        "nodes: {hosts: [r6i3n0, r6i3n1], gpus_per_node: 4}\n"  # nothing listens for SSH on these names
        f"gpu: {{source: prometheus, url: '{prometheus}', node_label: Hostname, interval: 500ms}}\n"
    )
    config = load_watch_config(cfg)
    collector = build_collector(config, options=LiveOptions())
    assert len(collector.rack_collectors) == 1
    run = LiveRun(config, collector)
    async with run:
        await run.wait_for("GPU rows from Prometheus", lambda: len(gpu_rows(run.events)) >= 3)
    assert collector.runners == []  # no per-node source: no SSH connection attempted
    limits = {r.gpu: r.power_limit_w for r in gpu_rows(run.events) if r.node == "r6i3n0"}
    assert limits[2] == 300.0  # DCGM_FI_DEV_POWER_MGMT_LIMIT of GPUs 2 and 3 in the capture
    assert limits[3] == 300.0
    assert not any(r.node == "r6i3n1" for r in gpu_rows(run.events))
    assert all(0 <= r.t < 30 for r in gpu_rows(run.events))  # stamped with the live run's clock


def test_rack_wide_sources_are_configured_from_the_watch_config(tmp_path: Path) -> None:
    cfg = tmp_path / "w.yaml"
    cfg.write_text(
        "run: {name: fleet}\nnodes: {hosts: 'n[1-3]', gpus_per_node: 8}\n"
        "gpu: {source: prometheus, url: 'http://prom:9090', node_label: instance, interval: 2s}\n"
        "progress:\n  - {kind: prometheus-query, url: 'http://prom:9090', node_label: host, interval: 3s}\n"
    )
    collector = build_collector(load_watch_config(cfg))
    gpu, progress = collector.rack_collectors
    assert isinstance(gpu, PrometheusQueryCollector)
    assert isinstance(progress, PrometheusQueryCollector)
    assert (gpu.url, gpu.node_label, gpu.interval_s, gpu.gpus_per_node) == (
        "http://prom:9090",
        "instance",
        2.0,
        8,
    )
    assert gpu.nodes == ("n1", "n2", "n3")
    assert (progress.node_label, progress.interval_s) == ("host", 3.0)
    assert any("power" in q for q in gpu.queries)
    assert not any("power" in q for q in progress.queries)
