"""What travels over a node's SSH connection besides nvidia-smi: node-local /metrics fetched through
direct-tcpip channels, and file paths full of shell metacharacters that must stay inert."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_support import (
    DCGM,
    VLLM_STEP,
    MetricsServer,
    gpu_rows,
    live_run,
    needs_sshd,
    scraped_tokens,
    write_config,
)
from sshd_cluster import LoopbackCluster

from tokenwatch.base.events import LogLine, Progress

pytestmark = [needs_sshd, pytest.mark.timeout(120)]


@pytest.fixture
def metrics() -> Iterator[MetricsServer]:
    server = MetricsServer()
    yield server
    server.close()


async def test_node_local_metrics_come_through_the_ssh_connection(
    healthy: LoopbackCluster, metrics: MetricsServer, tmp_path: Path
) -> None:
    extra = f"""progress:
  - kind: prometheus
    url: http://localhost:{metrics.port}/{{name}}/vllm
    preset: vllm
    interval: 300ms
"""
    cfg = write_config(tmp_path / "w.yaml", healthy, extra=extra)
    victim = healthy["node02"]
    async with live_run(cfg) as run:

        def progressed(node: str) -> bool:
            return len(scraped_tokens(run.events, node)) >= 3

        await run.wait_for("every node's scrapes", lambda: all(progressed(n.name) for n in healthy.nodes))
        victim.kill()  # the HTTP server stays up: only the SSH path to it goes
        await run.wait_for("node02 down", lambda: run.state("node02") == "down")
        hits_then = metrics.hits[f"/{victim.name}/vllm"]
        other = metrics.hits["/node01/vllm"]
        await run.wait_for("others still scraped", lambda: metrics.hits["/node01/vllm"] >= other + 3)
        assert metrics.hits[f"/{victim.name}/vllm"] == hits_then  # node02's fetches went through its sshd
        snap = run.snapshot()
    # The first scrape of the busy server is the baseline; each later one credits what it grew by, once.
    credited = scraped_tokens(run.events, "node01")
    # (a scrape that timed out under load was served but not read: the next credits both steps)
    assert credited[0] == 0
    assert credited == sorted(credited)
    assert all(c % VLLM_STEP == 0 for c in credited)
    assert credited[-1] > 0
    assert snap.nodes.tokens_done[snap.nodes.index("node01")] in credited  # counted once, as credited
    assert all(metrics.hits[f"/{n.name}/vllm"] >= 1 for n in healthy.nodes)


async def test_dcgm_exporter_as_the_gpu_source(
    healthy: LoopbackCluster, metrics: MetricsServer, tmp_path: Path
) -> None:
    cfg = write_config(tmp_path / "w.yaml", healthy)
    text = cfg.read_text().replace(
        "  source: nvidia-smi\n",
        f"  source: dcgm-exporter\n  url: http://127.0.0.1:{metrics.port}/{{name}}/dcgm\n",
    )
    cfg.write_text(text)
    # the excerpt is partial: these are the GPUs with a power limit or utilisation line in it
    rows = re.findall(
        r'^DCGM_FI_DEV_(POWER_MGMT_LIMIT|GPU_UTIL)\{gpu="(\d+)"[^}]*\} (\S+)$', DCGM.read_text(), re.M
    )
    limits = {int(g): float(v) for name, g, v in rows if name == "POWER_MGMT_LIMIT"}
    wanted = {int(g) for _, g, _ in rows}
    async with live_run(cfg) as run:
        await run.wait_for(
            "GPU samples from dcgm-exporter",
            lambda: all(
                {r.gpu for r in gpu_rows(run.events) if r.node == n.name} == wanted for n in healthy.nodes
            ),
        )
        snap = run.snapshot()
    assert limits
    assert wanted
    for gpu, limit in limits.items():
        assert snap.gpus.metric("power_limit_w")[snap.nodes.index("node01"), gpu] == limit


NASTY = [
    'it\'s {name} $(touch {marker}) `touch {marker}`; touch {marker} | cat && echo "x" * ?.log',
    "spaces  and\ttab & {name} > {marker}.log",
    "-dash-first {name}.log",
]


@pytest.mark.parametrize("pattern", NASTY)
async def test_shell_metacharacters_in_paths_stay_inert(
    healthy: LoopbackCluster, tmp_path: Path, pattern: str
) -> None:
    marker = "PWNED"  # a shell that ran any of it would create this in the session's HOME or folder
    folder = tmp_path / 'we\'ird "dir" $HOME'
    folder.mkdir()
    template = str(folder / pattern.format(marker=marker, name="{name}"))
    for node in healthy.nodes[:2]:
        path = Path(template.replace("{name}", node.name))
        path.write_text(f"INFO done 1 samples {node.index * 10} tokens\n")
    extra = f"""progress:
  - kind: log
    path: '{template.replace("'", "''")}'
    patterns:
      done: 'done (?P<samples_done>\\d+) samples (?P<tokens_done>\\d+) tokens'
"""
    cfg = write_config(tmp_path / "w.yaml", healthy, extra=extra)
    async with live_run(cfg) as run:
        await run.wait_for("the watch to start", lambda: run.core.started)
        for node in healthy.nodes[:2]:  # what was there (read by the backlog command) is the baseline
            with open(template.replace("{name}", node.name), "a") as fh:
                fh.write(f"INFO done 2 samples {node.index * 11} tokens\n")
        await run.wait_for(
            "both logs read",
            lambda: (
                {(e.node, e.tokens_done) for e in run.events if isinstance(e, Progress)}
                >= {("node01", 1), ("node02", 2)}
            ),
        )
    for place in (healthy.home, tmp_path, folder, Path.cwd()):
        assert not any(p.name.startswith(marker) for p in place.rglob("*")), place
    lines = [e.text for e in run.events if isinstance(e, LogLine) and e.node == "node01"]
    # the file's lines, nothing a shell printed
    assert lines == ["INFO done 1 samples 10 tokens", "INFO done 2 samples 11 tokens"]
