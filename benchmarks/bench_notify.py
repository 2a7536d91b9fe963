"""1,000 alerts a minute across a 64-rack fleet, pushed out: what the notifier adds to a run.

    python benchmarks/bench_notify.py [--racks 64] [--per-minute 1000] [--seconds 30]

1. delivery: a core holding the simulator's ``--racks``-rack fleet (18 nodes x 4 GPUs a rack) raises
   ``--per-minute`` alerts a minute through its own alert log (nodes across the racks going stale and
   coming back, as its rules raise them), paced in wall time for ``--seconds``. After each, the notifier
   looks at the core as the session makes it after every event, and delivers to a webhook (grouped
   messages) and to an Alertmanager-format receiver (every alert), both served by another process, so
   their CPU is not counted. Figure: this process's CPU time over the wall time, as % of one core, less
   the same paced loop without the notifier (the floor). Target: < 1 % of one core. Every alert must
   arrive: the counts are checked.
2. per event: the notifier's check after an event that raised no alert (the case of nearly every event),
   in ns, and what it adds over the fleet simulator's events of one minute of run time.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from bench_common import add_short_option, target  # noqa: E402

from tokenwatch.base.events import Heartbeat  # noqa: E402
from tokenwatch.core import RackCore  # noqa: E402
from tokenwatch.frontends.notify.delivery import Courier  # noqa: E402
from tokenwatch.frontends.notify.notifier import Notifier  # noqa: E402
from tokenwatch.frontends.notify.receivers import runtime_receivers  # noqa: E402
from tokenwatch.inputs.notify_config import NotifyConfig, ReceiverConfig  # noqa: E402
from tokenwatch.inputs.sim.profile import load_profile  # noqa: E402
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings  # noqa: E402

RECEIVER = textwrap.dedent(
    """
    import http.server, json, sys
    counts = {"posts": 0, "alerts": 0}
    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            counts["posts"] += 1
            counts["alerts"] += len(body) if isinstance(body, list) else body["count"]
            self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
        def do_GET(self):
            data = json.dumps(counts).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(data))); self.end_headers()
            self.wfile.write(data)
        def log_message(self, *a): pass
    server = http.server.HTTPServer(("127.0.0.1", 0), H)
    print(server.server_address[1], flush=True)
    server.serve_forever()
    """
)


def fleet_settings(racks: int) -> SimSettings:
    profile = load_profile("gb300-nvl72")
    fleet = dataclasses.replace(
        profile, nodes=profile.nodes * racks, total_samples=profile.total_samples * racks
    )
    return SimSettings(fleet, duration_s=600.0, extra_meta={"nodes_per_rack": profile.nodes})


def fleet_core(settings: SimSettings) -> RackCore:
    core = RackCore()
    core.ingest(RackSimulation(settings).run_started())
    return core


async def paced_alerts(core: RackCore, notifier: Notifier | None, per_minute: int, seconds: float) -> int:
    """Raise ``per_minute`` alerts a minute for ``seconds`` of wall time; the notifier (if any) looks after
    each. Returns how many were raised."""
    nodes = core.state.run.nodes
    stale: set[str] = set()
    step = 60.0 / per_minute
    start = time.monotonic()
    raised = 0
    beat = Heartbeat(0.0)
    for k in itertools.count():
        due = start + k * step
        if due - start >= seconds:
            break
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        node = nodes[(k // 2 * 7919) % len(nodes)]  # stale, then back; spread over every rack
        holds = node not in stale
        (stale.add if holds else stale.discard)(node)
        core.state.alerts.condition(
            float(k),
            node,
            "stale",
            holds,
            f"{node} stale: no data for 5 s",
            cleared_message=f"{node} reporting again",
        )
        raised += 1
        if notifier is not None:
            notifier.observe(core, beat)
    return raised


async def warm_up(config: NotifyConfig) -> None:
    """What a run pays once: aiohttp imported, a first request to each receiver."""
    from tokenwatch.frontends.notify.receivers import HttpPoster

    poster = HttpPoster(config.timeout_s)
    for receiver in runtime_receivers(config):
        await poster.post(receiver, [] if receiver.kind == "alertmanager" else {"count": 0})


def counts(port: int) -> dict[str, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
        return dict(orjson.loads(answer.read()))


async def measure(
    core: RackCore, notifier: Notifier | None, per_minute: int, seconds: float
) -> tuple[float, int]:
    if notifier is not None:
        notifier.follow(core)
    cpu0, wall0 = time.process_time(), time.monotonic()
    raised = await paced_alerts(core, notifier, per_minute, seconds)
    if notifier is not None:
        await notifier.close()
    return (time.process_time() - cpu0) / (time.monotonic() - wall0) * 100.0, raised


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=64)
    parser.add_argument("--per-minute", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30.0)
    add_short_option(parser)
    args = parser.parse_args()
    if args.short:
        args.seconds = 10.0
    settings = fleet_settings(args.racks)

    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    assert receiver.stdout is not None
    port = int(receiver.stdout.readline())
    try:
        url = f"http://127.0.0.1:{port}"
        config = NotifyConfig(
            to=[ReceiverConfig(webhook=f"{url}/hook"), ReceiverConfig(alertmanager=url)],
            hold_s=0.0,
            resend_s=3600.0,
        )
        cpu0 = time.process_time()
        asyncio.run(warm_up(config))
        start_cost = time.process_time() - cpu0
        floor, _ = asyncio.run(measure(fleet_core(settings), None, args.per_minute, args.seconds))
        core = fleet_core(settings)
        notifier = Notifier(config, Courier(config, runtime_receivers(config), print))
        with_notifier, raised = asyncio.run(measure(core, notifier, args.per_minute, args.seconds))
        got = counts(port)
    finally:
        receiver.terminate()
        receiver.wait()
    nodes = len(core.state.run.nodes)
    print(
        f"fleet: {args.racks} racks, {nodes:,} nodes; {raised:,} alerts over {args.seconds:g} s "
        f"({args.per_minute:,} a minute)"
    )
    print(
        f"delivered: {got['alerts']:,} alerts in {got['posts']:,} requests "
        f"(webhook, grouped; Alertmanager format, each alert) of {2 * raised:,} expected"
    )
    once = f"{start_cost * 1000:.0f} ms of CPU (aiohttp's import, a first request to each receiver)"
    print(f"once per run: {once}, not counted below")
    added = with_notifier - floor
    target(
        "what the notifier adds",
        f"{added:.2f} % of one core ({with_notifier:.2f} % with it, {floor:.2f} % without)",
        "< 1 % of one core",
        added < 1,
    )
    target(
        "alerts delivered, none lost", f"{got['alerts']:,}", f">= {2 * raised:,}", got["alerts"] >= 2 * raised
    )

    # 2. The check after an event that raised nothing, and the fleet's events in a minute of run time.
    beat = Heartbeat(0.0)
    idle = Notifier(config, Courier(config, [], print))
    idle.observe(core, beat)
    calls = 200_000
    t0 = time.perf_counter()
    for _ in range(calls):
        idle.observe(core, beat)
    per_call_ns = (time.perf_counter() - t0) / calls * 1e9
    events = sum(1 for e in itertools.takewhile(lambda e: e.t <= 60.0, RackSimulation(settings).events()))
    share = per_call_ns * events / 60e9 * 100
    print(
        f"per event with no new alert: {per_call_ns:.0f} ns; the fleet simulator's {events:,} events of one "
        f"minute cost {per_call_ns * events / 1e6:.2f} ms a minute ({share:.4f} % of a core)"
    )


if __name__ == "__main__":
    main()
