"""Live collection against real OpenSSH servers: 8 loopback nodes, each its own sshd and host key,
streaming the fake nvidia-smi (4 GPUs) and tailing a log through the real connection code."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from live_support import N_NODES, expected_node_power_w, gpu_rows, live_run, needs_sshd, write_config
from sshd_cluster import LoopbackCluster

from tests.conftest import progress_counts
from tokenwatch.base.events import LogLine, Progress
from tokenwatch.core.snapshot import FRESH, STALE_GPU

pytestmark = [needs_sshd, pytest.mark.timeout(120)]

LOG_EXTRA = """progress:
  - kind: log
    path: {logs}/{{name}}/harness.log
    patterns:
      done: 'done (?P<samples_done>\\d+) samples (?P<tokens_done>\\d+) tokens'
"""


def log_line(samples: int) -> str:
    return f"INFO done {samples} samples {samples * 100} tokens\n"


def write_logs(root: Path, cluster: LoopbackCluster, upto: int) -> None:
    for node in cluster.nodes:
        folder = root / node.name
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "harness.log", "a") as fh:
            for s in range(1, upto + 1):
                fh.write(log_line(s * node.index))


def rows_of(run, node: str) -> int:
    return sum(1 for r in gpu_rows(run.events) if r.node == node)


def node_power(run, node: str) -> float:
    snap = run.snapshot()
    return float(snap.nodes.power_w[snap.nodes.index(node)])


def last_tokens(run, node: str) -> int | None:
    progress = [e for e in run.events if isinstance(e, Progress) and e.node == node]
    return progress[-1].tokens_done if progress else None


async def test_every_node_streams_gpus_and_tails_its_log(healthy: LoopbackCluster, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    cfg = write_config(tmp_path / "w.yaml", healthy, extra=LOG_EXTRA.format(logs=logs))
    async with live_run(cfg) as run:
        await run.wait_for("the watch to start", lambda: run.core.started)
        write_logs(logs, healthy, 3)  # written while watched (a backlog from before is a baseline)
        names = [n.name for n in healthy.nodes]
        await run.wait_for("4 GPUs from every node", lambda: all(rows_of(run, n) >= 8 for n in names))
        await run.wait_for("every log read", lambda: all(last_tokens(run, n.name) for n in healthy.nodes))
        for node in healthy.nodes:  # appended while watching: the tail follows
            with open(logs / node.name / "harness.log", "a") as fh:
                fh.write(log_line(1000 + node.index))
        await run.wait_for(
            "appended lines",
            lambda: all(last_tokens(run, n.name) == (1000 + n.index) * 100 for n in healthy.nodes),
        )
        snap = run.snapshot()
    assert len(names) == N_NODES
    assert snap.aggregate.nodes_up == N_NODES
    for node in healthy.nodes:
        assert node_power(run, node.name) == pytest.approx(expected_node_power_w(node.index))
        gpus = {r.gpu for r in gpu_rows(run.events) if r.node == node.name}
        assert gpus == {0, 1, 2, 3}
    expected_total = sum(expected_node_power_w(n.index) for n in healthy.nodes)
    assert snap.aggregate.power_w == pytest.approx(expected_total)
    assert snap.aggregate.tokens_done == sum((1000 + n.index) * 100 for n in healthy.nodes)
    starts = [e for e in run.events if type(e).__name__ == "RunStarted"]
    assert len(starts) == 1
    assert starts[0].source == "live"
    assert starts[0].nodes == tuple(names)
    assert type(run.events[-1]).__name__ == "RunEnded"


async def test_killed_node_goes_down_others_go_on_and_it_comes_back_without_double_counting(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    victim = healthy["node03"]
    cfg = write_config(tmp_path / "w.yaml", healthy, extra=LOG_EXTRA.format(logs=logs))
    async with live_run(cfg, backoff_cap_s=1.0) as run:
        await run.wait_for("the watch to start", lambda: run.core.started)
        write_logs(logs, healthy, 2)
        names = [n.name for n in healthy.nodes]
        await run.wait_for("all nodes up with GPUs", lambda: all(rows_of(run, n) >= 4 for n in names))
        await run.wait_for("victim's log", lambda: last_tokens(run, "node03") == 2 * 3 * 100)
        full_power = run.snapshot().aggregate.power_w

        before_kill = len(run.statuses("node03"))
        victim.kill()
        await run.wait_for("node03 down", lambda: run.state("node03") == "down")
        down = [s for s in run.statuses("node03") if s.state == "down"][-1]
        assert down.reason  # the engineer is told why
        others_before = {n: rows_of(run, n) for n in names if n != "node03"}
        victim_rows = rows_of(run, "node03")
        # the others go on: more rows arrive from every other node while node03 is down
        await run.wait_for(
            "others streaming", lambda: all(rows_of(run, n) >= others_before[n] + 8 for n in others_before)
        )
        assert rows_of(run, "node03") == victim_rows
        snap = run.snapshot()
        assert all(snap.nodes.state[snap.nodes.index(n)] == "up" for n in others_before)
        assert snap.aggregate.nodes_up == N_NODES - 1
        assert snap.aggregate.power_w == pytest.approx(full_power - expected_node_power_w(victim.index))

        with open(logs / "node03" / "harness.log", "a") as fh:  # the node's harness went on meanwhile
            fh.write(log_line(77))
        victim.start()
        await run.wait_for("node03 back up", lambda: run.state("node03") == "up")
        await run.wait_for("node03's new line", lambda: last_tokens(run, "node03") == 7700)
        await run.wait_for("node03 streaming", lambda: rows_of(run, "node03") >= victim_rows + 8)
        snap = run.snapshot()
    states = [s.state for s in run.statuses("node03")[before_kill:]]
    changes = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]
    assert changes == ["down", "up"]  # down may be re-published with a new reason (lost, refused)
    tokens = snap.nodes.tokens_done[snap.nodes.index("node03")]
    # written: 300, 600 (cumulative counters), then 7700 after the restart: counted once, no replay
    progress = progress_counts(
        (e for e in run.events if isinstance(e, Progress) and e.node == "node03"), tokens=True
    )
    assert progress == sorted(progress)
    assert progress[-1] == 7700
    assert progress.count(600) == 1
    assert tokens == 7700
    assert snap.aggregate.power_w == pytest.approx(full_power)
    assert any("reconnected" in n.message for n in run.notices("node03"))


async def test_dropped_connection_reconnects_and_resumes_the_tail(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    """Only the node's SSH session dies (its sshd stays): dropped, reconnected, tail resumed."""
    import psutil

    logs = tmp_path / "logs"
    cfg = write_config(tmp_path / "w.yaml", healthy, extra=LOG_EXTRA.format(logs=logs))
    node = healthy["node05"]
    async with live_run(cfg) as run:
        await run.wait_for("the watch to start", lambda: run.core.started)
        write_logs(logs, healthy, 1)
        await run.wait_for("node05 log", lambda: last_tokens(run, "node05") == 500)
        assert node.proc is not None
        for child in psutil.Process(node.proc.pid).children():  # the per-connection sshd processes
            child.kill()
        await run.wait_for("node05 down", lambda: any(s.state == "down" for s in run.statuses("node05")))
        with open(logs / "node05" / "harness.log", "a") as fh:
            fh.write(log_line(9))
        await run.wait_for("node05 back", lambda: [s.state for s in run.statuses("node05")][-1] == "up")
        await run.wait_for("line after reconnect", lambda: last_tokens(run, "node05") == 900)
    progress = [e.tokens_done for e in run.events if isinstance(e, Progress) and e.node == "node05"]
    assert progress == [500, 900]  # the first line was not read again


async def test_a_log_truncated_while_away_and_regrown_is_read_from_its_start(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    """The node was unreachable while its harness restarted: the log was truncated and grew past the
    offset already read. Every line of the new file is read (the tail used to resume at the old offset
    and skip them), with a notice."""
    import psutil

    logs = tmp_path / "logs"
    write_logs(logs, healthy, 1)
    log = logs / "node05" / "harness.log"
    log.write_text("")  # written while watched: a file's content at the watch's start is its backlog
    old = "".join(f"12:00:0{k} run1 " + log_line(k) for k in range(1, 6))
    new = "".join(f"13:30:{k:02d} run2 " + log_line(k) for k in range(1, 12))
    assert len(new) > len(old)
    cfg = write_config(tmp_path / "w.yaml", healthy, extra=LOG_EXTRA.format(logs=logs))
    node = healthy["node05"]
    async with live_run(cfg) as run:
        await run.wait_for("node05 up", lambda: any(s.state == "up" for s in run.statuses("node05")))
        with open(log, "a") as fh:
            fh.write(old)
        await run.wait_for("node05 log", lambda: last_tokens(run, "node05") == 500)
        assert node.proc is not None
        for child in psutil.Process(node.proc.pid).children():  # the node's sessions die
            child.kill()
        await run.wait_for("node05 down", lambda: any(s.state == "down" for s in run.statuses("node05")))
        with open(log, "r+") as fh:  # same inode, truncated, regrown past the offset
            fh.truncate(0)
            fh.write(new)
        await run.wait_for("node05 back", lambda: [s.state for s in run.statuses("node05")][-1] == "up")
        await run.wait_for("the new file's last line", lambda: last_tokens(run, "node05") == 1100)
    shown = [e.text for e in run.events if isinstance(e, LogLine) and e.node == "node05"]
    assert shown == (old + new).splitlines()  # each line once, none skipped
    assert any("from the start" in n.message for n in run.notices("node05"))


async def test_silent_stream_makes_the_node_stale_then_up_again(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    cfg = write_config(tmp_path / "w.yaml", healthy, stale_after="2s")
    node = healthy["node06"]
    async with live_run(cfg) as run:
        await run.wait_for("node06 streaming", lambda: rows_of(run, "node06") >= 4)
        (node.control / "stall").touch()
        await run.wait_for(
            "node06 reported stale",
            lambda: any(s.state == "stale" for s in run.statuses("node06")),
        )
        assert run.state("node06") == "stale"
        stale = [s for s in run.statuses("node06") if s.state == "stale"][-1]
        assert "nvidia-smi" in stale.reason
        snap = run.snapshot()
        assert all(snap.nodes.state[i] == "up" for i, n in enumerate(snap.nodes.names) if n != "node06")
        (node.control / "stall").unlink()
        await run.wait_for("node06 up again", lambda: run.state("node06") == "up")
    assert [s.state for s in run.statuses("node06")][-1] == "up"


def fake_gpu_power_w(node_index: int, gpu: int) -> float:
    """Independent figure: the fake reports the captured power.draw + GPU number + node number."""
    return float(
        expected_node_power_w(node_index, gpus=gpu + 1) - expected_node_power_w(node_index, gpus=gpu)
    )


async def test_a_lost_gpu_goes_stale_and_leaves_the_power_total(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    """nvidia-smi prints "Unable to determine the device handle" in place of one GPU's row: that GPU is
    shown missing (stale) and the rack's power drops by exactly its power; its node stays up."""
    cfg = write_config(tmp_path / "w.yaml", healthy, stale_after="2s")
    node = healthy["node03"]
    full = sum(expected_node_power_w(n.index) for n in healthy.nodes)
    async with live_run(cfg) as run:
        await run.wait_for(
            "every GPU reporting", lambda: run.snapshot().aggregate.gpus_reporting == 4 * N_NODES
        )
        assert run.snapshot().aggregate.power_w == pytest.approx(full)
        (node.control / "lost").write_text("2\n")
        i = run.snapshot().nodes.index("node03")
        await run.wait_for("GPU 2 of node03 stale", lambda: run.snapshot().gpus.freshness[i, 2] == STALE_GPU)
        snap = run.snapshot()
        assert snap.aggregate.power_w == pytest.approx(full - fake_gpu_power_w(node.index, 2))
        assert snap.aggregate.gpus_reporting == 4 * N_NODES - 1
        assert [int(f) for f in snap.gpus.freshness[i]] == [FRESH, FRESH, STALE_GPU, FRESH]
        assert run.state("node03") == "up"  # three GPUs still report
        assert any("Unable to determine the device handle" in n.message for n in run.notices("node03"))
        (node.control / "lost").unlink()
        await run.wait_for("GPU 2 back", lambda: run.snapshot().gpus.freshness[i, 2] == FRESH)
        assert run.snapshot().aggregate.power_w == pytest.approx(full)


async def test_a_babbling_nvidia_smi_makes_its_node_stale(healthy: LoopbackCluster, tmp_path: Path) -> None:
    """Only garbage on the stream: bytes keep coming but no sample parses. Liveness counts parsed samples,
    so the node goes stale and its GPUs leave the power total."""
    cfg = write_config(tmp_path / "w.yaml", healthy, stale_after="2s")
    node = healthy["node05"]
    full = sum(expected_node_power_w(n.index) for n in healthy.nodes)
    async with live_run(cfg) as run:
        await run.wait_for(
            "every GPU reporting", lambda: run.snapshot().aggregate.gpus_reporting == 4 * N_NODES
        )
        (node.control / "garbage").touch()
        await run.wait_for(
            "node05 reported stale",
            lambda: any(s.state == "stale" for s in run.statuses("node05")),
        )
        assert "nvidia-smi" in [s for s in run.statuses("node05") if s.state == "stale"][-1].reason
        snap = run.snapshot()
        i = snap.nodes.index("node05")
        assert all(int(f) != FRESH for f in snap.gpus.freshness[i])
        assert snap.aggregate.power_w == pytest.approx(full - expected_node_power_w(node.index))
        (node.control / "garbage").unlink()
        await run.wait_for("node05 up again", lambda: run.state("node05") == "up")


async def test_failing_command_is_reported_and_retried(healthy: LoopbackCluster, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "w.yaml", healthy, stale_after="2s")
    node = healthy["node07"]
    async with live_run(cfg) as run:
        await run.wait_for("node07 streaming", lambda: rows_of(run, "node07") >= 4)
        (node.control / "fail").touch()
        await run.wait_for(
            "the failure reported",
            lambda: any("status 3" in n.message for n in run.notices("node07")),
        )
        message = next(n.message for n in run.notices("node07") if "status 3" in n.message)
        assert "GPU is lost" in message  # the command's own stderr, for the engineer
        await run.wait_for(
            "node07 reported stale",
            lambda: any(s.state == "stale" for s in run.statuses("node07")),
        )
        (node.control / "fail").unlink()
        rows = rows_of(run, "node07")
        await run.wait_for("retried", lambda: rows_of(run, "node07") > rows)
        await run.wait_for("node07 up", lambda: run.state("node07") == "up")


async def test_unknown_and_changed_host_keys_fail_only_their_node(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    from sshd_cluster import keygen

    impostor = keygen(tmp_path / "impostor").split()
    lines = []
    for node in healthy.nodes:
        if node.name == "node02":
            continue  # unknown
        if node.name == "node04":  # changed: known_hosts holds another key for it
            lines.append(f"[127.0.0.1]:{node.port} {impostor[0]} {impostor[1]}")
        else:
            lines.append(node.known_hosts_line)
    known = tmp_path / "known_hosts"
    known.write_text("\n".join(lines) + "\n")
    cfg = write_config(tmp_path / "w.yaml", healthy, known_hosts=known)
    async with live_run(cfg) as run:
        ok = [n.name for n in healthy.nodes if n.name not in ("node02", "node04")]
        await run.wait_for("the others stream", lambda: all(rows_of(run, n) >= 4 for n in ok))
        await run.wait_for(
            "node02 and node04 down", lambda: run.statuses("node02") and run.statuses("node04")
        )
    unknown = run.statuses("node02")[0]
    changed = run.statuses("node04")[0]
    assert unknown.state == "down"
    assert "unknown host key" in unknown.reason
    assert "--accept-new-host-keys" in unknown.reason
    assert changed.state == "down"
    assert "HOST KEY CHANGED" in changed.reason
    assert rows_of(run, "node02") == 0
    assert rows_of(run, "node04") == 0
    assert known.read_text() == "\n".join(lines) + "\n"  # nothing recorded without the flag


async def test_failure_reasons_name_no_user_and_no_local_path(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    """Reasons go into recordings, snapshots and reports: they name the node's address, never the SSH
    user or a path on this machine (known_hosts, keys)."""
    from sshd_cluster import keygen

    impostor = keygen(tmp_path / "impostor").split()
    stranger = tmp_path / "stranger_key"
    keygen(stranger)  # a key no node accepts
    lines = [n.known_hosts_line for n in healthy.nodes if n.name not in ("node02", "node04")]
    lines.append(f"[127.0.0.1]:{healthy['node04'].port} {impostor[0]} {impostor[1]}")
    known = tmp_path / "known_hosts"
    known.write_text("\n".join(lines) + "\n")
    cfg = write_config(tmp_path / "w.yaml", healthy, known_hosts=known)
    cfg.write_text(cfg.read_text().replace(str(healthy.client_key), str(stranger)))
    async with live_run(cfg) as run:
        await run.wait_for("every node down", lambda: all(run.statuses(n.name) for n in healthy.nodes))
    reasons = {n.name: run.statuses(n.name)[0].reason for n in healthy.nodes}
    assert "unknown host key" in reasons["node02"]
    assert "HOST KEY CHANGED" in reasons["node04"]
    assert "authentication failed" in reasons["node01"]
    for node, reason in reasons.items():
        assert f"{healthy.user}@" not in reason, (node, reason)
        assert str(tmp_path) not in reason, (node, reason)
        assert str(Path.home()) not in reason, (node, reason)
        assert "known_hosts" not in reason.replace("ssh.known_hosts", ""), (node, reason)


async def test_accept_new_host_keys_records_new_keys_never_changed_ones(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    from sshd_cluster import keygen

    impostor = keygen(tmp_path / "impostor").split()
    node_new, node_changed = healthy["node06"], healthy["node08"]
    lines = [
        n.known_hosts_line for n in healthy.nodes if n.name not in (node_new.name, node_changed.name)
    ] + [f"[127.0.0.1]:{node_changed.port} {impostor[0]} {impostor[1]}"]
    known = tmp_path / "known_hosts"
    known.write_text("\n".join(lines) + "\n")
    cfg = write_config(tmp_path / "w.yaml", healthy, known_hosts=known)
    async with live_run(cfg, accept_new_host_keys=True) as run:
        await run.wait_for("node06 streams", lambda: rows_of(run, "node06") >= 4)
        await run.wait_for("node08 refused", lambda: bool(run.statuses("node08")))
    recorded = known.read_text().splitlines()
    assert node_new.known_hosts_line in recorded  # exactly the key the node proved it holds
    assert not any(node_changed.known_hosts_line == line for line in recorded)
    assert "HOST KEY CHANGED" in run.statuses("node08")[0].reason


async def test_handshakes_in_flight_never_exceed_max_concurrent(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    cfg = write_config(tmp_path / "w.yaml", healthy)
    cfg.write_text(
        cfg.read_text().replace("  connect_timeout: 5s\n", "  connect_timeout: 5s\n  max_concurrent: 2\n")
    )
    async with live_run(cfg) as run:
        await run.wait_for("all up", lambda: all(run.statuses(n.name) for n in healthy.nodes))
        connector = run.collector.connector
    assert connector is not None
    assert 1 <= connector.max_in_flight <= 2
    assert all(run.statuses(n.name)[0].state == "up" for n in healthy.nodes)


def test_power_figure_is_independent_of_the_code_under_test() -> None:
    # guard on the helper itself: 4 GPUs of node 1 at 631.95 W + g + 1
    assert expected_node_power_w(1) == pytest.approx(4 * 631.95 + (0 + 1 + 2 + 3) + 4 * 1)
    assert not math.isnan(expected_node_power_w(8))
