"""A fleet written ahead: every sample of a few racks' nodes, from a minute ago to minutes ahead, written
into a real Prometheus's storage before it starts (``promtool tsdb create-blocks-from openmetrics``),
each sample stamped on a whole second of Unix time.

A scraped fleet's counters grow by whatever the scrapes caught: two readings a second apart can hold
0.9 s or 1.1 s of work, so a node's rate read through the server is the rack's figure only to a few
percent. Here each node's generated-token counter is exactly ``rate x seconds since the fleet began`` at
every stamp and its ``tokenwatch_node_tokens_per_second`` is ``rate``: a rate made of two readings at
two whole-second instants is the node's rate to the last digit, and the rack's figure (the server's sum
of the nodes' rates) is the sum of them, so a test can hold the two to the rounding of the sum.

A rack can begin later than the others (``starts_s``): its series have no sample before then, as when
its exporter first appears; each rack can carry ``site`` and ``row`` labels, as a real fleet's do. A rack
can miss scrapes (``missed``): no sample of its series at those seconds of every :data:`MISS_CYCLE_S`, as
when a loaded server's scrapes come late, so a grid instant's last sample is 0, 1 or 2 s old.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fleet_support import PROMETHEUS

from tests.conftest import prometheus_query, start_prometheus, stop_process, wait_until

PROMTOOL = shutil.which("promtool")
GPUS_PER_NODE = 4
MISS_CYCLE_S = 7  # a rack's missed scrapes repeat every 7 s: at a 2-s grid, every phase comes round


@dataclass(frozen=True)
class WrittenRack:
    """One rack: its nodes' tokens/s (whole numbers, so every counter is a whole number of tokens),
    when its series begin (seconds after the fleet's start), where it stands, and the seconds (after the
    fleet's start, modulo :data:`MISS_CYCLE_S`) at which none of its series has a sample."""

    name: str
    rates: Sequence[int]
    starts_s: float = 0.0
    site: str = ""
    row: str = ""
    missed: tuple[int, ...] = ()

    def node(self, n: int) -> str:
        return f"node{n + 1:02d}"


@dataclass(frozen=True)
class WrittenFleet:
    """The server's ``url``; ``began`` the Unix second the fleet's counters count from."""

    url: str
    began: int
    racks: Sequence[WrittenRack] = field(default_factory=tuple)

    def rack(self, name: str) -> WrittenRack:
        return next(r for r in self.racks if r.name == name)


def _series(rack: WrittenRack) -> Iterator[tuple[str, str, int, Mapping[str, str]]]:
    """(family, type, node, extra labels) of every series a node of ``rack`` has."""
    for n in range(len(rack.rates)):
        yield "tokenwatch_node_up", "gauge", n, {}
        yield "tokenwatch_node_status", "gauge", n, {"status": "up"}
        yield "tokenwatch_node_tokens_per_second", "gauge", n, {}
        yield "tokenwatch_node_measured_tokens_per_second", "gauge", n, {}
        yield "tokenwatch_node_generated_tokens", "counter", n, {}
        yield "tokenwatch_node_samples", "counter", n, {}
        yield "tokenwatch_node_gpus", "gauge", n, {}
        yield "tokenwatch_node_power_watts", "gauge", n, {}


def _value(family: str, rate: int, seconds: int) -> int:
    """A series' value ``seconds`` after the fleet began (whole numbers throughout)."""
    if family == "tokenwatch_node_generated_tokens":
        return rate * seconds
    if family == "tokenwatch_node_samples":
        return rate // 100 * seconds
    if family in ("tokenwatch_node_tokens_per_second", "tokenwatch_node_measured_tokens_per_second"):
        return rate
    if family == "tokenwatch_node_gpus":
        return GPUS_PER_NODE
    if family == "tokenwatch_node_power_watts":
        return 4 * 1000 + rate // 10
    return 1


def openmetrics(racks: Sequence[WrittenRack], began: int, until: int) -> str:
    """The fleet's samples from ``began`` to ``until`` (Unix seconds) as OpenMetrics text, one family
    after another as the format wants."""
    families: dict[tuple[str, str], list[str]] = {}
    for rack in racks:
        place = "".join(f',{k}="{v}"' for k, v in (("site", rack.site), ("row", rack.row)) if v)
        first = began + math.ceil(rack.starts_s)
        for family, kind, n, extra in _series(rack):
            more = "".join(f',{k}="{v}"' for k, v in extra.items())
            name = f"{family}_total" if kind == "counter" else family
            labels = f'{{rack="{rack.name}",node="{rack.node(n)}"{place}{more}}}'
            lines = families.setdefault((family, kind), [])
            lines += [
                f"{name}{labels} {_value(family, rack.rates[n], s - began)} {s}"
                for s in range(first, until)
                if (s - began) % MISS_CYCLE_S not in rack.missed
            ]
    out: list[str] = []
    for (family, kind), lines in families.items():
        out.append(f"# TYPE {family} {kind}")
        out += lines
    return "\n".join([*out, "# EOF"]) + "\n"


@contextlib.contextmanager
def written_fleet(
    tmp: Path, racks: Sequence[WrittenRack], *, before_s: int = 60, ahead_s: int = 600
) -> Iterator[WrittenFleet]:
    """A real Prometheus holding ``racks``' samples from ``before_s`` ago to ``ahead_s`` ahead, scraping
    nothing; skips the test where Prometheus or promtool is missing."""
    if PROMETHEUS is None or PROMTOOL is None:
        pytest.skip("prometheus and promtool are not installed (apt-get install prometheus)")
    began = int(time.time()) - before_s
    source = tmp / "fleet.om"
    source.write_text(openmetrics(racks, began, began + before_s + ahead_s))
    data = tmp / "data"
    made = subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    (tmp / "prometheus.yml").write_text("global:\n  scrape_interval: 1s\n")

    proc, url = start_prometheus(PROMETHEUS, tmp / "prometheus.yml", data, tmp / "prometheus.log")
    try:

        def answers() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(tmp / 'prometheus.log').read_text()[-400:]}")
            with contextlib.suppress(Exception):
                return bool(prometheus_query(url, "count(tokenwatch_node_up)", timeout_s=5))
            return False

        wait_until(answers, "the written fleet answering queries", poll_s=0.25)
        yield WrittenFleet(url, began, tuple(racks))
    finally:
        stop_process(proc)
