"""AMD and Intel GPU telemetry through the real connection code: ``amd-smi`` and ``xpu-smi`` on loopback
sshd nodes (fakes replaying real captures: tests/live/fake_amd_smi.py, fake_xpu_smi.py) and as local
processes. A node without the tool says so in one line; figures the GPUs do not report stay unknown."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from live_support import LiveRun, gpu_rows, live_run, needs_sshd
from sshd_cluster import LoopbackCluster, missing_binaries

from tokenwatch.base.events import GPU_METRICS, GpuBatch
from tokenwatch.base.yaml_schema import SchemaError
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.watch import WatchSetupError, build_collector

HERE = Path(__file__).resolve().parent
FAKE_AMD_SMI = HERE / "fake_amd_smi.py"
FAKE_XPU_SMI = HERE / "fake_xpu_smi.py"
AURORA = (HERE.parent / "data" / "xpu-smi" / "max1550-aurora-6gpu.csv").read_text().splitlines()

pytestmark = [needs_sshd, pytest.mark.timeout(120)]


def aurora_power(device: int) -> float:
    """GPU Power of device ``device`` in the capture's first round (its 4th column)."""
    return float(AURORA[1 + device].split(",")[3])


@pytest.fixture(scope="module")
def vendor_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    """Two nodes: node01 has amd-smi and xpu-smi on its PATH, node02 has neither."""
    reason = missing_binaries()
    if reason:
        pytest.skip(reason)
    cluster = LoopbackCluster(tmp_path_factory.mktemp("vendor"), 2)
    tools = cluster.root / "vendor-bin"
    tools.mkdir()
    (tools / "amd-smi").symlink_to(FAKE_AMD_SMI)
    (tools / "xpu-smi").symlink_to(FAKE_XPU_SMI)
    with_tools = cluster.nodes[0]
    with_tools.env["PATH"] = f"{tools}:{cluster.bin_dir}:/usr/local/bin:/usr/bin:/bin"
    with_tools.write_config(cluster.authorized_keys, cluster.bin_dir)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def config(path: Path, cluster: LoopbackCluster, source: str, interval: str) -> Path:
    path.write_text(
        f"""run: {{name: vendor-rack, scenario: Offline}}
nodes:
  gpus_per_node: 4
  hosts:
{cluster.hosts_yaml()}ssh:
  known_hosts: {cluster.known_hosts}
  client_keys: [{cluster.client_key}]
  connect_timeout: 5s
gpu: {{source: {source}, interval: {interval}}}
"""
    )
    return path


def node_power(run: LiveRun, node: str) -> float:
    snap = run.snapshot()
    return float(snap.nodes.power_w[snap.nodes.index(node)])


def said(run: LiveRun, node: str, text: str) -> bool:
    return any(text in n.message for n in run.notices(node))


async def test_amd_smi_over_ssh_and_a_node_without_it(vendor_nodes: LoopbackCluster, tmp_path: Path) -> None:
    async with live_run(config(tmp_path / "amd.yaml", vendor_nodes, "amd-smi", "200ms")) as run:
        await run.wait_for(
            "two reads of 4 GPUs from node01",
            lambda: sum(1 for r in gpu_rows(run.events) if r.node == "node01") >= 8,
        )
        await run.wait_for("node02 to say it has no amd-smi", lambda: said(run, "node02", "amd-smi: command"))
        await run.wait_for("node01's figures", lambda: node_power(run, "node01") > 0)
        await run.wait_for("what node01 does not report", lambda: said(run, "node01", "report no"))
        power = node_power(run, "node01")
    # Independent figure: the capture's 6 W + GPU number + node number (1), per GPU.
    assert power == pytest.approx(sum(6 + g + 1 for g in range(4)))
    batch = next(e for e in run.events if isinstance(e, GpuBatch))
    row = dict(zip(GPU_METRICS, batch.values[0], strict=True))
    assert (row["sm_clock_mhz"], row["hbm_total_mib"], row["temp_c"]) == (800.0, 8176.0, 37.0)
    assert math.isnan(row["energy_j"])  # the Radeon's 0.0 J counter is no counter
    assert said(run, "node01", "the 4 GPUs of node01 report no energy counter: shown as unknown")
    missing = [n.message for n in run.notices("node02") if "amd-smi" in n.message]
    assert "amd-smi: command not found on the node" in missing[0]
    assert not any(r.node == "node02" for r in gpu_rows(run.events))


async def test_xpu_smi_over_ssh_and_a_node_without_it(vendor_nodes: LoopbackCluster, tmp_path: Path) -> None:
    async with live_run(config(tmp_path / "xpu.yaml", vendor_nodes, "xpu-smi", "1s")) as run:
        await run.wait_for(
            "two reads of 4 GPUs from node01",
            lambda: sum(1 for r in gpu_rows(run.events) if r.node == "node01") >= 8,
        )
        await run.wait_for("node02 to say it has no xpu-smi", lambda: said(run, "node02", "xpu-smi: command"))
        power = node_power(run, "node01")
    assert power == pytest.approx(sum(aurora_power(d) + 1 for d in range(4)))
    batch = next(e for e in run.events if isinstance(e, GpuBatch))
    assert np.isnan(batch.values[:, GPU_METRICS.index("util_pct")]).all()  # N/A in the capture
    assert batch.values[0, GPU_METRICS.index("sm_clock_mhz")] == 1600.0


async def test_local_amd_smi_counts_its_gpus_and_runs_as_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "amd-smi").symlink_to(FAKE_AMD_SMI)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVSMI_NODE", "3")
    monkeypatch.setenv("FAKE_AMDSMI_GPUS", "8")
    cfg = tmp_path / "local.yaml"
    cfg.write_text("run: {name: one-box}\ngpu: {source: amd-smi, interval: 200ms}\n")
    loaded = load_watch_config(cfg)
    collector = build_collector(loaded)
    assert collector.gpus_per_node == 8  # counted with one amd-smi metric --json before the run
    async with LiveRun(loaded, collector) as run:
        await run.wait_for("8 GPUs", lambda: {r.gpu for r in gpu_rows(run.events)} == set(range(8)))
        await run.wait_for("the node's power", lambda: run.snapshot().aggregate.power_w > 0)
        snap = run.snapshot()
    assert snap.aggregate.power_w == pytest.approx(sum(6 + g + 3 for g in range(8)))


async def test_a_failing_amd_smi_is_one_line_naming_its_status(
    vendor_nodes: LoopbackCluster, tmp_path: Path
) -> None:
    failing = vendor_nodes.nodes[0].control / "fail"
    failing.touch()
    try:
        async with live_run(config(tmp_path / "amd.yaml", vendor_nodes, "amd-smi", "200ms")) as run:
            await run.wait_for(
                "node01 to say why", lambda: said(run, "node01", "amd-smi exited with status 3")
            )
    finally:
        failing.unlink()
    (message,) = {n.message for n in run.notices("node01") if "status 3" in n.message}
    assert message.endswith(
        "amd-smi exited with status 3: AMD SMI Library Error: amdgpu driver not initialized"
    )
    assert not gpu_rows(run.events)


@pytest.mark.parametrize("tool", ["amd-smi", "xpu-smi"])
def test_a_local_watch_without_the_tool_says_so(
    tool: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    cfg = tmp_path / "local.yaml"
    cfg.write_text(f"run: {{name: one-box}}\ngpu: {{source: {tool}, interval: 1s}}\n")
    with pytest.raises(WatchSetupError, match=f"nothing to watch: gpu.source {tool}: {tool} is not on this"):
        build_collector(load_watch_config(cfg))


def test_xpu_smi_cannot_sample_faster_than_a_second(tmp_path: Path) -> None:
    cfg = tmp_path / "w.yaml"
    cfg.write_text("run: {name: x}\ngpu: {source: xpu-smi, interval: 500ms}\n")
    with pytest.raises(SchemaError, match=r"w\.yaml:2: gpu\.interval: xpu-smi samples at most once a second"):
        load_watch_config(cfg)


async def test_local_nvidia_smi_dmon_streams_every_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "nvidia-smi").symlink_to(HERE / "fake_nvidia_smi_dmon.py")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVSMI_GPUS", "3")
    cfg = tmp_path / "local.yaml"
    cfg.write_text("run: {name: one-box}\ngpu: {source: nvidia-smi-dmon, interval: 1s}\n")
    loaded = load_watch_config(cfg)
    collector = build_collector(loaded)
    assert collector.gpus_per_node == 3  # nvidia-smi -L
    async with LiveRun(loaded, collector) as run:
        await run.wait_for("3 GPUs", lambda: {r.gpu for r in gpu_rows(run.events)} == {0, 1, 2})
        await run.wait_for("the node's power", lambda: run.snapshot().aggregate.power_w > 0)
        snap = run.snapshot()
        batches = [e for e in run.events if isinstance(e, GpuBatch)]
    # Each GPU's row is a row of the capture (109 or 108 W) plus the GPU number; the rack is the sum of each
    # GPU's latest row (a read may end inside a round of rows, so the last batch can hold only some GPUs).
    latest: dict[int, float] = {}
    for batch in batches:
        power = batch.values[:, GPU_METRICS.index("power_w")]
        assert set((power - batch.gpu).tolist()) <= {108.0, 109.0}
        latest.update(zip(batch.gpu.tolist(), power.tolist(), strict=True))
    assert sorted(latest) == [0, 1, 2]
    assert snap.aggregate.power_w == pytest.approx(sum(latest.values()))
