"""Fixtures for report, export and Prometheus tests: loaded sample runs, a gb200 recording, a real
Prometheus server scraping tokenwatch's /metrics and static exposition files, headless Chromium."""

from __future__ import annotations

import contextlib
import http.server
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.conftest import (
    PATIENCE_S,
    REPO_ROOT,
    SAMPLE_RUNS,
    cli_env,
    prometheus_query,
    start_prometheus,
    stop_process,
)
from tokenwatch.core import RackCore
from tokenwatch.frontends.metrics import MetricsServer
from tokenwatch.runs.from_core import ingest_recording
from tokenwatch.runs.loading import load_run
from tokenwatch.runs.run_data import RunData

DATA = Path(__file__).resolve().parent.parent / "data" / "report"
SERVER_RUN = SAMPLE_RUNS / "gb300-nvl72-server.jsonl.zst"
OFFLINE_RUN = SAMPLE_RUNS / "gb300-nvl72-offline.jsonl.zst"
FAILURE_RUN = SAMPLE_RUNS / "gb300-nvl72-node-failure.jsonl.zst"
STATIC_FILES = {
    "/dcgm": DATA / "dcgm_datadog_fixture.prom",
    "/dcgm-v100": DATA / "dcgm_v100x4_excerpt.prom",
    "/vllm": DATA / "vllm_bloom560m_excerpt.prom",
}


@pytest.fixture(scope="session")
def server_run() -> RunData:
    return load_run(SERVER_RUN)


@pytest.fixture(scope="session")
def failure_run() -> RunData:
    return load_run(FAILURE_RUN)


@pytest.fixture(scope="session")
def gb200_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 10-minute gb200-nvl72 Offline run made by the simulator (the comparison's run A)."""
    path = tmp_path_factory.mktemp("gb200") / "gb200-nvl72.jsonl.zst"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tokenwatch",
            "sim",
            "--profile",
            "gb200-nvl72",
            "--duration",
            "10m",
            "--seed",
            "5",
            "--speed",
            "0",
            "--headless",
            "--interval",
            "10m",
            "--record",
            str(path),
        ],
        check=True,
        capture_output=True,
        env=cli_env(),
        cwd=REPO_ROOT,
        timeout=120,
    )
    return path


@pytest.fixture(scope="session")
def server_core() -> RackCore:
    core, _ = ingest_recording(SERVER_RUN)
    return core


# ----------------------------------------------------------------------------- Chromium
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(tmp: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    profile = tmp / f"chromium-profile-{time.monotonic_ns()}"
    profile.mkdir()
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)


# ----------------------------------------------------------------------------- Prometheus
PROMETHEUS = shutil.which("prometheus")


class _StaticHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = STATIC_FILES.get(self.path)
        if path is None:
            self.send_error(404)
            return
        body = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class PromFleet:
    """A running Prometheus and what it scrapes."""

    def __init__(self, url: str, core: RackCore, exporter: MetricsServer) -> None:
        self.url = url
        self.core = core
        self.exporter = exporter

    def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        return prometheus_query(self.url, promql)


def _wait_for_targets(
    url: str, jobs: set[str], proc: subprocess.Popen[bytes], timeout_s: float = PATIENCE_S
) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {proc.returncode}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=10) as r:
                doc = orjson.loads(r.read())
            targets = doc["data"]["activeTargets"]
            health = {t["labels"]["job"]: (t["health"], t.get("lastError", "")) for t in targets}
            last = str(health)
            if jobs <= set(health) and all(health[j][0] == "up" for j in jobs):
                return
        time.sleep(0.25)
    raise RuntimeError(f"prometheus targets not up in {timeout_s} s: {last}")


@pytest.fixture(scope="module")
def prom_fleet(tmp_path_factory: pytest.TempPathFactory, server_core: RackCore) -> Iterator[PromFleet]:
    """Prometheus on loopback scraping tokenwatch's /metrics (the Server sample run) every second, plus
    real dcgm-exporter and vLLM expositions served as static files."""
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    tmp = tmp_path_factory.mktemp("prometheus")
    exporter = MetricsServer(server_core, 0)
    static = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StaticHandler)
    threading.Thread(target=static.serve_forever, daemon=True).start()
    static_port = static.server_address[1]
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        f"  - job_name: tokenwatch\n    static_configs:\n      - targets: ['127.0.0.1:{exporter.port}']\n"
        f"  - job_name: dcgm\n    metrics_path: /dcgm\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{static_port}']\n"
        f"  - job_name: dcgm-v100\n    metrics_path: /dcgm-v100\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{static_port}']\n"
        f"  - job_name: vllm\n    metrics_path: /vllm\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{static_port}']\n        labels: {{node: vllm-node}}\n"
    )

    try:
        proc, url = start_prometheus(PROMETHEUS, config, tmp / "data", tmp / "prometheus.log")
    except BaseException:
        exporter.close()
        static.shutdown()
        static.server_close()
        raise
    try:
        _wait_for_targets(url, {"tokenwatch", "dcgm", "dcgm-v100", "vllm"}, proc)
        yield PromFleet(url, server_core, exporter)
    finally:
        stop_process(proc)
        exporter.close()
        static.shutdown()
        static.server_close()
