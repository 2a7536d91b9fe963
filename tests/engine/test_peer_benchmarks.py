"""Client-side benchmarks against the real vLLM engine: what tokenwatch reads from them must be what the
engine itself counted.

AIPerf (its own venv, ``scripts/install_aiperf.sh``) runs against the engine with its live ``/metrics`` on;
while it runs, tokenwatch scrapes that ``/metrics`` with the ``aiperf`` preset and the engine's with the
``vllm`` preset. At the end, over AIPerf's own window, three independent figures agree within 1 %:
tokenwatch's tok/s (its count from AIPerf's /metrics over AIPerf's duration), AIPerf's output token
throughput (its export, read by ``summarize``), and the engine's own counter growth
(``vllm:generation_tokens_total``, read with prometheus_client). ``vllm bench serve`` (the vLLM venv) runs
against the engine too, and its real result JSON reads the same. Skipped, with the reason, where vLLM or
AIPerf is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import RunCli, free_port, listens
from tests.engine.vllm_server import VllmServer, venv_dir
from tests.machine_share import machine_to_itself
from tokenwatch.base.events import Progress
from tokenwatch.sources.client_results import read_client_results
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

pytestmark = [pytest.mark.xdist_group("vllm-engine"), pytest.mark.timeout(1800)]

HERE = Path(__file__).resolve().parent
# AIPerf's output token throughput divides by its profiling phase's window, a little longer than its
# benchmark_duration (first request to last answer); a run of some 20 s keeps that gap well under 1 %.
REQUESTS = 480
CONCURRENCY = 16
OUTPUT_TOKENS = 32  # every answer full length (ignore_eos): the engine's count is REQUESTS x 32
RUN_CEILING_S = 900.0  # AIPerf's start (tokenizer, workers) and run on a loaded 2-core machine: a ceiling


@pytest.fixture(autouse=True)
def _machine_to_itself(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each client run has the machine to itself (tests/machine_share.py): a client and the engine it
    drives keep every core busy for a minute, and beside them the other worker's fleet test saw a second
    rack's scrapes time out for two patience spans. The server is started first (it takes the machine the
    same way)."""
    request.getfixturevalue("vllm_server")
    with machine_to_itself():
        yield


def aiperf_venv() -> Path:
    return Path(
        os.environ.get("TOKENWATCH_AIPERF_VENV") or "~/.cache/tokenwatch-test/aiperf-venv"
    ).expanduser()


def missing_aiperf() -> str | None:
    aiperf = aiperf_venv() / "bin" / "aiperf"
    if not aiperf.exists():
        return f"aiperf is not installed in {aiperf_venv()} (run scripts/install_aiperf.sh)"
    return None


def _scrape(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, OSError):
        return None  # AIPerf's API server is not up yet, or has gone with its run


def _env(*, offline: bool = True) -> dict[str, str]:
    """The clients' environment: tokenwatch's checkout is no part of theirs; offline where the client
    allows (AIPerf 0.13.0 does not: with HF_HUB_OFFLINE set it takes the local tokenizer folder for a hub
    repo id and fails; its tokenizer is that folder either way, nothing is downloaded)."""
    env = {**os.environ}
    for name in ("PYTHONPATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(name, None)
    if offline:
        env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return env


def test_aiperf_tokenwatch_and_the_engine_agree(
    vllm_server: VllmServer, tmp_path: Path, run_cli: RunCli
) -> None:
    reason = missing_aiperf()
    if reason:
        pytest.skip(reason)
    api_port = free_port()
    engine = MetricsScrapeParser("vllm", node="engine", node_index=0)
    client = MetricsScrapeParser("aiperf", node="client", node_index=0)
    engine.parse(vllm_server.metrics_text(), 0.0)  # the engine's baseline, before AIPerf sends anything
    before = vllm_server.generation_tokens()
    argv = [
        str(aiperf_venv() / "bin" / "aiperf"),
        *["profile", "--model", vllm_server.model, "--tokenizer", str(vllm_server.model_dir)],
        *["--url", vllm_server.url, "--endpoint-type", "completions", "--streaming"],
        *["--request-count", str(REQUESTS), "--concurrency", str(CONCURRENCY)],
        *["--prompt-input-tokens-mean", "32", "--prompt-input-tokens-stddev", "0"],
        *["--prompt-output-tokens-mean", str(OUTPUT_TOKENS), "--prompt-output-tokens-stddev", "0"],
        *["--extra-inputs", "ignore_eos:true", "--use-server-token-count"],
        *["--api-port", str(api_port), "--stats-interval", "1", "--slice-duration", "2"],
        *["--ui-type", "none", "--output-artifact-dir", str(tmp_path / "aiperf")],
    ]
    log = tmp_path / "aiperf.log"
    client_progress: list[Progress] = []
    start = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=_env(offline=False), cwd=tmp_path
        )
        try:
            while process.poll() is None and time.monotonic() - start < RUN_CEILING_S:
                t = time.monotonic() - start
                # AIPerf's own answer: another process may hold a port that was free when asked
                own = listens(process.pid, api_port)
                text = _scrape(f"http://127.0.0.1:{api_port}/metrics") if own else None
                if text is not None:
                    client_progress += [e for e in client.parse(text, t) if isinstance(e, Progress)]
                time.sleep(0.5)  # the scrape cadence while AIPerf runs, not a budget
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
    assert process.returncode == 0, log.read_text()[-2000:]
    growth = vllm_server.generation_tokens() - before
    assert growth == REQUESTS * OUTPUT_TOKENS  # the engine served this run and nothing else
    engine_end = [e for e in engine.parse(vllm_server.metrics_text(), 1.0) if isinstance(e, Progress)]
    assert engine_end[-1].tokens_done == growth  # tokenwatch's count of the engine: its counter's growth

    export = tmp_path / "aiperf" / "profile_export_aiperf.json"
    (result,), warnings = read_client_results(export)
    assert warnings == []
    raw = json.loads(export.read_text())
    assert result.output_tokens_per_s == raw["output_token_throughput"]["avg"]
    window = result.duration_s
    assert client_progress, "tokenwatch never read AIPerf's /metrics while it ran"
    tokenwatch_tokens = client_progress[-1].tokens_done
    assert tokenwatch_tokens is not None
    # Over AIPerf's window: tokenwatch's tok/s, AIPerf's output token throughput and the engine's growth.
    assert tokenwatch_tokens / window == pytest.approx(result.output_tokens_per_s, rel=0.01)
    assert growth / window == pytest.approx(result.output_tokens_per_s, rel=0.01)
    assert tokenwatch_tokens == pytest.approx(growth, rel=0.01)
    # The per-interval export adds up to the same run.
    (sliced,), _ = read_client_results(tmp_path / "aiperf" / "profile_export_aiperf_timeslices.json")
    assert sliced.output_tokens == growth

    shown = run_cli("summarize", str(export), "--json")
    assert shown.returncode == 0, shown.stderr
    (client_json,) = json.loads(shown.stdout)["clients"]
    assert client_json["output_tokens_per_s"] == pytest.approx(
        raw["output_token_throughput"]["avg"], abs=1e-6
    )


def test_vllm_bench_serve_reads_as_the_engine_counted(vllm_server: VllmServer, tmp_path: Path) -> None:
    before = vllm_server.generation_tokens()
    argv = [
        str(venv_dir() / "bin" / "python"),
        str(HERE / "vllm_bench_serve.py"),
        *["--backend", "vllm", "--base-url", vllm_server.url, "--model", vllm_server.model],
        *["--tokenizer", str(vllm_server.model_dir), "--dataset-name", "random"],
        *["--random-input-len", "32", "--random-output-len", str(OUTPUT_TOKENS), "--ignore-eos"],
        *["--num-prompts", str(REQUESTS), "--max-concurrency", str(CONCURRENCY)],
        *["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"],
        *["--save-result", "--result-dir", str(tmp_path), "--result-filename", "bench.json"],
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=_env(), timeout=RUN_CEILING_S, check=False
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    growth = vllm_server.generation_tokens() - before
    (result,), warnings = read_client_results(tmp_path / "bench.json")
    assert warnings == []
    raw = json.loads((tmp_path / "bench.json").read_text())
    assert result.tool == "vllm bench serve"
    assert result.output_tokens == raw["total_output_tokens"] == growth == REQUESTS * OUTPUT_TOKENS
    assert result.output_tokens_per_s == pytest.approx(growth / raw["duration"], rel=0.01)
    assert result.latency_ms["ttft"]["p99"] == raw["p99_ttft_ms"]
