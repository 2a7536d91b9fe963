"""The options every run command (sim, replay, watch) shares, typed once at the edge of the CLI.

Nothing below the CLI sees ``argparse.Namespace``: the session runner and the dashboard take these.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from dataclasses import dataclass

from tokenwatch.base.events import RunMode
from tokenwatch.core import CoreConfig
from tokenwatch.core.baseline import Baseline
from tokenwatch.inputs.notify_config import NotifyConfig


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Durations in seconds. ``speed`` is None for a live watch (it runs at the pace of the nodes)."""

    mode: RunMode
    headless: bool = False
    interval_s: float = 10.0
    jsonl: str | None = None  # path, or "-" for stdout
    record: str | None = None
    theme: str | None = None
    ttft_sla_s: float | None = None
    tpot_sla_s: float | None = None
    prometheus_port: int | None = None
    prometheus_host: str | None = None  # None: 127.0.0.1
    speed: float | None = None
    start_s: float = 0.0
    benchmark: str | None = None  # MLPerf rules for the verdict (None: the run's own)
    force: bool = False  # --force: --jsonl may overwrite an existing file
    inputs: tuple[str, ...] = ()  # files the run reads (recording, config, profile): never an output
    force_dashboard: bool = False  # tests: the dashboard even when stdout is not a terminal
    baseline: Baseline | None = None  # --baseline, loaded and checked by the command (cli/baseline_option.py)
    notify: NotifyConfig | None = None  # --notify (and a watch config's notify:): where alerts are pushed
    rack: str | None = None  # --rack: headless output of one rack of a fleet (its drill-down)

    @classmethod
    def from_args(cls, args: argparse.Namespace, mode: RunMode, inputs: tuple[str, ...] = ()) -> RunOptions:
        from tokenwatch.cli.notify_option import notify_from_args

        return cls(
            mode=mode,
            headless=args.headless,
            interval_s=args.interval,
            jsonl=args.jsonl,
            record=args.record,
            theme=args.theme,
            ttft_sla_s=args.ttft_sla,
            tpot_sla_s=args.tpot_sla,
            prometheus_port=args.prometheus_port,
            prometheus_host=args.prometheus_host,
            speed=getattr(args, "speed", None),
            start_s=getattr(args, "start", 0.0),
            benchmark=getattr(args, "benchmark", None),
            force=args.force,
            inputs=inputs,
            notify=notify_from_args(getattr(args, "notify", None)),
            rack=getattr(args, "rack", None),
        )

    @property
    def paced(self) -> bool:
        """Whether run time follows the clock (a live watch, or a sim/replay at a speed above 0)."""
        return self.speed is None or self.speed > 0

    def wants_dashboard(self) -> bool:
        """The dashboard unless --headless or stdout is not a terminal (nor a browser: ``serve``)."""
        return (not self.headless and (sys.stdout.isatty() or served_to_browser())) or self.force_dashboard

    def core_config(self, base: CoreConfig | None = None) -> CoreConfig:
        """``base`` (default settings when None) with --ttft-sla / --tpot-sla / --benchmark applied."""
        config = base or CoreConfig()
        if self.ttft_sla_s is not None:
            config = dataclasses.replace(
                config, ttft_sla_s=self.ttft_sla_s, sla_set_by_user=config.sla_set_by_user | {"ttft"}
            )
        if self.tpot_sla_s is not None:
            config = dataclasses.replace(
                config, tpot_sla_s=self.tpot_sla_s, sla_set_by_user=config.sla_set_by_user | {"tpot"}
            )
        if self.benchmark is not None:
            config = dataclasses.replace(config, benchmark=self.benchmark)
        if self.baseline is not None:
            config = dataclasses.replace(config, baseline=self.baseline)
        return config

    def reads_rack_forecasts(self) -> bool:
        """Whether anything reads each rack's forecast as the run goes: the dashboard (the fleet board's
        projected column, a rack's verdict panel and its band over time), ``--jsonl`` (the board's rows,
        each with its projection) and ``--rack`` (one rack's lines: its projection). The headless fleet
        line, /metrics (the run-wide forecast and each node's rack), the recording and the summary do
        not: there the forecasts are work nobody reads."""
        return self.wants_dashboard() or self.jsonl is not None or self.rack is not None


def served_to_browser() -> bool:
    """Whether Textual's web driver runs us (``tokenwatch serve``): stdout is then textual-serve's pipe."""
    return os.environ.get("TEXTUAL_DRIVER", "").endswith(":WebDriver")
