"""A fleet as a new user makes one: ``tokenwatch sim --racks N --headless --prometheus-port P`` (one
exporter serving every rack, with faults as ``--faults`` gives them), scraped every second by a real
Prometheus (:class:`fleet_support.Prometheus`), and a fleet config pointing ``watch`` at it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fleet_support import Prometheus

from tests.conftest import REPO_ROOT, cli_env, start_listening, stop_process


class SimFleet:
    """The simulator's racks behind a real Prometheus; :meth:`config` writes a fleet config for them."""

    def __init__(self, tmp: Path, racks: int, *, speed: float = 1.0, faults: str = "") -> None:
        self.tmp = tmp
        self.racks = racks
        # The GB300 rack with a 2-s warm-up: the racks' pace is steady within the seconds a test watches
        # (the exporter's 10-s windows and the readings' spans then measure the same pace).
        shipped = REPO_ROOT / "tokenwatch" / "inputs" / "sim" / "profiles" / "gb300-nvl72.yaml"
        profile = tmp / "gb300-steady.yaml"
        profile.write_text(shipped.read_text(encoding="utf-8").replace("warmup: 90s", "warmup: 2s"))
        args = ["sim", "--racks", str(racks), "--speed", f"{speed:g}", "--headless", "--interval", "1h"]
        args += ["--profile", str(profile)] + (["--faults", faults] if faults else [])

        def exporter(port: int) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                [sys.executable, "-m", "tokenwatch", *args, "--prometheus-port", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=open(tmp / "sim.log", "wb"),
                env=cli_env(),
                cwd=REPO_ROOT,
            )

        # Prometheus scrapes the port only once the simulator's own exporter listens there: a target
        # that is up could otherwise be another worker's simulator, told the same free port
        self.sim, self.port = start_listening(exporter, "the fleet simulator's exporter", tmp / "sim.log")
        self.prometheus = Prometheus(tmp, [f"127.0.0.1:{self.port}"])

    def start(self) -> None:
        self.prometheus.start()
        try:
            self.prometheus.wait_until_scraped()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return str(self.prometheus.url)

    def config(self, name: str, **fleet: str) -> Path:
        """A fleet config for this server; ``fleet`` adds or overrides keys of its ``fleet:`` section."""
        keys = {"url": self.url, "interval": "2s", "detail_interval": "10s", "lookback": "1h", **fleet}
        body = ", ".join(f"{k}: '{v}'" for k, v in keys.items())
        path = self.tmp / name
        path.write_text(f"run: {{name: fleet, scenario: Offline, duration: 80m}}\nfleet: {{{body}}}\n")
        return path

    def stop(self) -> None:
        self.prometheus.stop()
        stop_process(self.sim)
