"""Live collection speed: 64 loopback nodes, each a real OpenSSH sshd on 127.0.0.1 streaming the fake
nvidia-smi (4 GPUs at 1 s) and a harness log line a second.

    python benchmarks/bench_live.py [--nodes 64] [--seconds 60] [--warmup 15] [--rounds 10]

What it measures, in one run:

1. ``tokenwatch watch CONFIG --headless`` (the real CLI, one child process) against all nodes: its
   CPU time (user + system) over ``--seconds`` after ``--warmup``, as % of one core, and its RSS
   (peak and mean of 1-s samples). Targets: <= 3 % of one core, < 150 MB RSS.
2. A full sampling round across all nodes, side by side, interleaved ``--rounds`` times:
   ``pdsh -R ssh -f N -w bench[01-N] nvidia-smi --query-gpu=...`` (a fresh SSH handshake per node per
   round) against the same query run on tokenwatch's persistent connections (one new channel per node).
3. What a round costs tokenwatch when it streams (``nvidia-smi -lms``, as ``watch`` does): for the
   k-th row block of every node, the time from its own timestamp to its arrival here; the round's
   figure is the slowest node's. Target: a round at least 10x faster than pdsh's.

Every node is its own sshd (own port and host key); all share this machine's cores, so the fake
nvidia-smi's own start-up (about 18 ms of bash, paid by both sides in part 2) competes with SSH.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests" / "live"), str(REPO / "benchmarks")]

from bench_common import add_short_option, target  # noqa: E402
from sshd_cluster import LoopbackCluster  # noqa: E402

from tokenwatch.base.events import GpuBatch  # noqa: E402
from tokenwatch.inputs.live.ssh_connect import SshConnector, SshSettings  # noqa: E402
from tokenwatch.inputs.live.targets import NodeTarget  # noqa: E402
from tokenwatch.inputs.live.transport import SshTransport  # noqa: E402
from tokenwatch.sources.nvidia_smi import DEFAULT_QUERY_FIELDS, NvidiaSmiParser, query_command  # noqa: E402

VLLM_LINE = (
    "INFO {stamp} [loggers.py:273] Engine 000: Avg prompt throughput: 6.8 tokens/s, "
    "Avg generation throughput: {rate:.1f} tokens/s, Running: 64 reqs, Waiting: 0 reqs, "
    "GPU KV cache usage: 41.0%\n"
)


class LogWriters:
    """One vLLM stats line a second into every node's harness log (what the watch tails)."""

    def __init__(self, root: Path, cluster: LoopbackCluster) -> None:
        self.paths = []
        for node in cluster.nodes:
            path = root / "logs" / node.name / "harness.log"
            path.parent.mkdir(parents=True)
            path.touch()
            self.paths.append(path)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            stamp = dt.datetime.now().astimezone().strftime("%m-%d %H:%M:%S")  # vLLM logs local time
            for i, path in enumerate(self.paths):
                with open(path, "a") as fh:
                    fh.write(VLLM_LINE.format(stamp=stamp, rate=15000.0 + i))


def write_watch_config(path: Path, root: Path, cluster: LoopbackCluster) -> None:
    path.write_text(
        f"""run: {{name: bench-{len(cluster.nodes)}-nodes, scenario: Offline}}
nodes:
  gpus_per_node: 4
  hosts:
{cluster.hosts_yaml()}ssh:
  known_hosts: {cluster.known_hosts}
  client_keys: [{cluster.client_key}]
gpu: {{source: nvidia-smi, interval: 1s}}
progress:
  - {{kind: log, path: '{root}/logs/{{name}}/harness.log', preset: vllm}}
"""
    )


def measure_watch(config: Path, warmup: float, seconds: float) -> dict[str, float | str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenwatch", "watch", str(config), "--headless", "--interval", "10s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    ps = psutil.Process(proc.pid)
    time.sleep(warmup)
    cpu0, wall0 = ps.cpu_times(), time.monotonic()
    rss: list[float] = []
    while time.monotonic() - wall0 < seconds:
        rss.append(ps.memory_info().rss / 2**20)
        time.sleep(1.0)
    cpu1, wall1 = ps.cpu_times(), time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    used = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    lines = [line for line in out.splitlines() if " tok/s " in line]
    # Ctrl-C ends a watch as an interrupted run: exit 130 is the clean end here
    if proc.returncode not in (0, 130) or not lines:
        raise SystemExit(f"watch failed ({proc.returncode}): {err[-2000:]}")
    return {
        "cpu_pct": 100 * used / (wall1 - wall0),
        "rss_peak_mb": max(rss),
        "rss_mean_mb": statistics.fmean(rss),
        "last_line": lines[-1],
    }


def write_ssh_config(path: Path, cluster: LoopbackCluster) -> None:
    path.write_text(
        cluster.ssh_config().replace(
            "  User ",
            f"  UserKnownHostsFile {cluster.known_hosts}\n  StrictHostKeyChecking yes\n"
            "  BatchMode yes\n  User ",
        )
    )


def pdsh_round(cluster: LoopbackCluster, ssh_config: Path, query: str) -> float:
    hosts = ",".join(n.name for n in cluster.nodes)
    env = dict(os.environ, PDSH_RCMD_TYPE="ssh", PDSH_SSH_ARGS=f"-F {ssh_config} -x -a -l%u %h")
    began = time.perf_counter()
    done = subprocess.run(
        ["pdsh", "-R", "ssh", "-f", str(len(cluster.nodes)), "-w", hosts, query],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    elapsed = time.perf_counter() - began
    rows = [line for line in done.stdout.splitlines() if ": " in line]
    expected = 4 * len(cluster.nodes)
    if len(rows) != expected:
        raise SystemExit(f"pdsh gave {len(rows)} rows, not {expected}: {done.stderr[-1500:]}")
    return elapsed


async def connect_all(cluster: LoopbackCluster) -> list[tuple[str, SshTransport]]:
    import asyncssh

    key = asyncssh.read_private_key(str(cluster.client_key))
    connector = SshConnector(SshSettings(known_hosts=str(cluster.known_hosts), client_keys=(key,)))
    targets = [NodeTarget(n.name, "127.0.0.1", n.port, cluster.user) for n in cluster.nodes]
    conns = await asyncio.gather(*(connector.connect(t) for t in targets))
    return [(t.name, SshTransport(conn)) for t, (conn, _) in zip(targets, conns, strict=True)]


async def tokenwatch_round(transports: list[tuple[str, SshTransport]], query: str) -> float:
    """The same query on every persistent connection at once, parsed by tokenwatch's parser."""

    async def one(name: str, transport: SshTransport) -> int:
        status, out = await transport.run(query, timeout_s=60)
        events = NvidiaSmiParser(name, DEFAULT_QUERY_FIELDS).feed(out, 0.0)
        rows = sum(len(e.gpu) for e in events if isinstance(e, GpuBatch))
        if status != 0 or rows != 4:
            raise SystemExit(f"{name}: status {status}, {rows} GPU rows")
        return rows

    began = time.perf_counter()
    await asyncio.gather(*(one(name, t) for name, t in transports))
    return time.perf_counter() - began


async def streaming_rounds(transports: list[tuple[str, SshTransport]], seconds: float) -> list[float]:
    """Per row block: arrival here minus the block's own timestamp; per round, the slowest node."""
    fields = ("timestamp", *DEFAULT_QUERY_FIELDS)
    argv = query_command(fields, interval_ms=1000)
    arrivals: dict[str, list[float]] = {}

    async def follow(name: str, transport: SshTransport) -> None:
        stream = await transport.start(argv)
        delays = arrivals.setdefault(name, [])
        buffer = b""
        try:
            while data := await stream.read():
                now = time.time()
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    cells = line.decode().split(", ")
                    if cells[1] == "0":  # one delay per block (GPU 0's row opens it)
                        local = dt.datetime.strptime(cells[0], "%Y/%m/%d %H:%M:%S.%f").astimezone()
                        stamp = local.timestamp()  # nvidia-smi prints local time
                        delays.append(now - stamp)
        finally:
            await stream.aclose()

    tasks = [asyncio.create_task(follow(name, t)) for name, t in transports]
    await asyncio.sleep(seconds)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    rounds = min(len(d) for d in arrivals.values())
    return [max(arrivals[name][k] for name in arrivals) for k in range(1, rounds)]  # skip start-up block


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=64)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--warmup", type=float, default=15.0)
    p.add_argument("--rounds", type=int, default=10)
    add_short_option(p)
    args = p.parse_args()
    if args.short:
        args.nodes, args.seconds, args.warmup, args.rounds = 16, 10.0, 8.0, 3
    if shutil.which("pdsh") is None:
        raise SystemExit("pdsh is not installed (apt-get install pdsh)")
    root = Path(tempfile.mkdtemp(prefix="tokenwatch-bench-"))
    cluster = LoopbackCluster(root / "nodes", args.nodes, prefix="bench")
    began = time.monotonic()
    cluster.start()
    up = time.monotonic() - began
    print(f"{args.nodes} sshd instances (one per node, own port and host key) up in {up:.1f} s")
    writers = LogWriters(root, cluster)
    writers.thread.start()
    try:
        config = root / "watch.yaml"
        write_watch_config(config, root, cluster)
        print(f"1. tokenwatch watch --headless: warm-up {args.warmup:g} s, measuring {args.seconds:g} s")
        watch = measure_watch(config, args.warmup, args.seconds)
        print(
            f"   CPU {watch['cpu_pct']:.2f} % of one core   RSS peak {watch['rss_peak_mb']:.0f} MB "
            f"(mean {watch['rss_mean_mb']:.0f} MB)   load average {os.getloadavg()[0]:.1f}"
        )
        print(f"   last line: {watch['last_line']}")
        cpu, peak = float(watch["cpu_pct"]), float(watch["rss_peak_mb"])
        where = f"watch --headless, {args.nodes} sshd nodes x 4 GPUs at 1 s"
        target(f"{where}: CPU", f"{cpu:.2f} % of one core", "<= 3 % of one core", cpu <= 3)
        target(f"{where}: peak RSS", f"{peak:.0f} MB", "< 150 MB", peak < 150)
        writers.stop.set()

        ssh_config = root / "ssh_config"
        write_ssh_config(ssh_config, cluster)
        query = " ".join(query_command(DEFAULT_QUERY_FIELDS))

        async def side_by_side() -> tuple[list[float], list[float], list[float]]:
            transports = await connect_all(cluster)
            pdsh_times, tw_times = [], []
            await tokenwatch_round(transports, query)  # first channel on each connection: not timed
            for _ in range(args.rounds):
                pdsh_times.append(await asyncio.to_thread(pdsh_round, cluster, ssh_config, query))
                tw_times.append(await tokenwatch_round(transports, query))
            streamed = await streaming_rounds(transports, 12.0)
            return pdsh_times, tw_times, streamed

        print(f"2. sampling round across {args.nodes} nodes, {args.rounds} rounds each, interleaved ...")
        pdsh_times, tw_times, streamed = asyncio.run(side_by_side())
        pdsh_med, tw_med, st_med = (statistics.median(x) for x in (pdsh_times, tw_times, streamed))
        print(
            f"   pdsh -f {args.nodes}, a new SSH handshake per node: median {ms(pdsh_med)} "
            f"(min {ms(min(pdsh_times))}, max {ms(max(pdsh_times))})"
        )
        print(
            f"   tokenwatch, persistent connections:     median {ms(tw_med)} "
            f"(min {ms(min(tw_times))}, max {ms(max(tw_times))})   {pdsh_med / tw_med:.1f}x faster"
        )
        print(
            f"3. tokenwatch streaming (-lms 1000), {len(streamed)} rounds, slowest node's delivery "
            f"per round: median {st_med * 1000:.1f} ms (max {max(streamed) * 1000:.1f})   "
            f"{pdsh_med / st_med:.0f}x faster"
        )
        target(
            f"a streamed sampling round across {args.nodes} nodes against pdsh's",
            f"{pdsh_med / st_med:.0f}x faster",
            ">= 10x faster",
            pdsh_med / st_med >= 10,
        )
    finally:
        writers.stop.set()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
