"""A watch of AIPerf's live /metrics with the ``aiperf`` preset: an HTTP server on 127.0.0.1 serves AIPerf's
real scrapes in the order AIPerf served them (only ``aiperf_info`` before its first stats interval, then the
totals mid-run, then the run's end), and the real local collector scrapes it. The node's tokens are AIPerf's
own totals, counted from its run's start (no baseline), and its export's total at the end."""

from __future__ import annotations

import json
from pathlib import Path

from live_support import LiveRun, ScrapeServer

from tokenwatch.base.events import Progress
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.watch import build_collector

AIPERF = Path(__file__).resolve().parent.parent / "data" / "peers" / "aiperf"
SCRAPES = [
    AIPERF / name for name in ("metrics-before-first-stats.txt", "metrics-mid-run.txt", "metrics-end.txt")
]


class AiperfMetrics:
    """Serves the scrapes in turn, the last one from then on; counts the requests."""

    def __init__(self) -> None:
        bodies = [path.read_bytes() for path in SCRAPES]
        self.served = 0

        def body_for(_path: str) -> bytes:
            body = bodies[min(self.served, len(bodies) - 1)]
            self.served += 1
            return body

        self.server = ScrapeServer(body_for)
        self.port: int = self.server.port

    def close(self) -> None:
        self.server.close()


async def test_a_watch_of_aiperfs_metrics_counts_its_totals(tmp_path: Path) -> None:
    server = AiperfMetrics()
    try:
        cfg = tmp_path / "client.yaml"
        cfg.write_text(
            "run: {name: aiperf-client}\ngpu: {source: none}\n"
            f"progress:\n  - {{kind: prometheus, url: 'http://127.0.0.1:{server.port}/metrics', "
            "preset: aiperf, interval: 200ms}\n"
        )
        config = load_watch_config(cfg)
        run = LiveRun(config, build_collector(config))
        export = json.loads((AIPERF / "profile_export_aiperf.json").read_text())
        total = export["total_usage_completion_tokens"]["avg"]

        def counted() -> list[int]:
            return [
                e.tokens_done for e in run.events if isinstance(e, Progress) and e.tokens_done is not None
            ]

        async with run:
            await run.wait_for("AIPerf's final total", lambda: total in counted())
        assert server.served >= len(SCRAPES)
        tokens = counted()
        assert set(tokens) <= {3776, total}  # the first reading counts in full: AIPerf's own totals
        assert tokens == sorted(tokens)
        assert not [n for n in run.notices() if "recognises none" in n.message]
    finally:
        server.close()
