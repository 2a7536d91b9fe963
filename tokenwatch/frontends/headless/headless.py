"""Headless mode: one human line per interval of run time, optional JSONL snapshots, a summary at the end."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

import orjson

from tokenwatch.base.formatting import (
    format_clock,
    group,
    kilowatts,
    part_of,
    pct,
    printable,
    projection,
    verdict_word,
)
from tokenwatch.core import RackCore, RackSnapshot
from tokenwatch.core.snapshot_json import snapshot_json
from tokenwatch.frontends.headless.group_lines import group_lines
from tokenwatch.mlperf.warm_up import WARMING_UP

MAX_ALERTS_IN_LINE = 4


def human_line(snap: RackSnapshot) -> str:
    """One line: the window's figures while the run goes; once it has ended, the run's figures (final
    aggregate, per GPU that took part, mean power) and what happened; then the active alerts."""
    agg = snap.aggregate
    figures = snap.run_figures
    if figures is not None:
        tokens, per_gpu, power = figures.tokens_per_s, figures.per_gpu_tokens_per_s, figures.power_mean_w
    else:
        tokens, per_gpu, power = agg.tokens_per_s, agg.per_gpu_tokens_per_s, agg.power_w
    idle = snap.nodes.state.count("idle")  # their sources answer, their engines have nothing to do
    parts = [
        format_clock(snap.t),
        f"{pct(snap.progress_pct):>6}",
        f"{group(tokens):>10} tok/s",
        f"{group(per_gpu):>7} tok/s/GPU",
        f"nodes {part_of(agg.nodes_up, agg.nodes)}"
        + (f" ({idle} idle)" if (idle := snap.nodes.state.count("idle")) else ""),
        f"{kilowatts(power):>9}",
        f"spread {pct(snap.node_spread.spread_pct)}",
    ]
    if snap.verdict is not None:
        parts.append(verdict_part(snap))
    if snap.baseline is not None:  # --baseline: the run against its reference at this run time
        view = snap.baseline
        compared = f"vs base {view.delta_text()} {view.finish_text()}"
        if view.covers_brief:  # a node down or stale in either run: what the compared figures cover
            compared += f" ({view.covers_brief})"
        parts.append(view.headline() if view.refused else compared)
    line = "  ".join(parts)
    if figures is not None:
        line = f"{line}  run figures; {printable(snap.banner)}"
        if figures.note:
            line = f"{line}; {printable(figures.note)}"
    alerts = [printable(a.message) for a in snap.active_alerts[:MAX_ALERTS_IN_LINE]]
    more = len(snap.active_alerts) - len(alerts)
    if more > 0:
        alerts.append(f"+{more} more")
    return f"{line}  alerts: {'; '.join(alerts)}" if alerts else line


def verdict_part(snap: RackSnapshot) -> str:
    """``proj 1,094k ±0.4 % VALID``: the projected LoadGen figure, its band and the projected verdict; once
    the run has ended ``FINAL INVALID`` (the line's figure is the final one); once a state makes VALID
    impossible ``proj ... DECIDED INVALID (cannot be VALID: ...)``."""
    assert snap.verdict is not None
    if snap.ended and snap.summary is not None and snap.summary.verdict is not None:
        return f"FINAL {verdict_word(snap.summary.verdict.valid)}"
    band = snap.verdict.forecast.tokens_per_s
    decided = snap.verdict.forecast.decided
    if snap.verdict.forecast.stale:  # the data stopped: nothing projected from its last figures
        return f"proj stale ({printable(snap.verdict.forecast.stale)}) {verdict_word(snap.verdict.valid)}"
    if snap.verdict.forecast.warming_up:  # no number before the steady state can be told
        shown = WARMING_UP
    else:
        shown = projection(band.value, band.low, band.high, why=True) if band is not None else "—"
    if band is not None and decided and band.low == band.high == band.value:  # LoadGen's own: exact
        shown = group(band.value)
    if decided:  # VALID is out of reach: say so, why, and what stopping now saves
        return f"proj {shown} DECIDED {verdict_word(snap.verdict.valid)} ({printable(decided)})"
    return f"proj {shown} {verdict_word(snap.verdict.valid)}"


class HeadlessLogger:
    """Writes at each interval boundary; the session calls :meth:`at` with the boundary's run time."""

    def __init__(
        self,
        core: RackCore,
        out: IO[str] | None,
        jsonl: IO[bytes] | None,
        start_s: float = 0.0,
        warn: Callable[[str], None] | None = None,
        rack: str | None = None,
    ) -> None:
        """``start_s``: boundaries before it are not written (a replay that starts at 30m). ``warn``
        hears, once, that the JSONL file could not be written (the lines go on without it). ``rack``:
        write that rack of a fleet alone (its drill-down); :attr:`missing_rack` then says, once the run
        has started, that the run has no such rack (and nothing is written)."""
        self.core = core
        self.rack = rack
        self.missing_rack: str | None = None
        self.start_s = start_s
        self.out = out
        self.jsonl = jsonl
        self.warn = warn
        self.last_t: float | None = None

    def at(self, t: float) -> None:
        if not self.core.started or t < self.start_s or self.missing_rack is not None:
            return
        snap = self.core.snapshot(t) if self.rack is None else self.core.rack_snapshot(self.rack, t)
        if snap is None:
            racks = self.core.racks
            shown = ", ".join(racks[:8]) + (f" and {len(racks) - 8} more" if len(racks) > 8 else "")
            self.missing_rack = f"--rack {printable(self.rack or '')}: the run has no such rack " + (
                f"(its racks: {printable(shown)})" if racks else "(it is a run of one rack)"
            )
            return
        self.last_t = t
        if self.out is not None:
            self.out.write("".join(line + "\n" for line in (human_line(snap), *group_lines(snap))))
            self.out.flush()
        if self.jsonl is not None:
            try:
                self.jsonl.write(orjson.dumps(snapshot_json(snap)) + b"\n")
                self.jsonl.flush()
            except BrokenPipeError:
                raise  # stdout's reader left: the CLI ends quietly
            except OSError as exc:  # a full disk: the snapshots stop, the watch goes on
                self.jsonl = None
                if self.warn is not None:
                    self.warn(f"tokenwatch: --jsonl stopped at {format_clock(t)}: {exc.strerror or exc}")

    def finish(self) -> None:
        """The last line at the run's end time (when it fell between boundaries)."""
        if self.core.started and (self.last_t is None or self.core.now > self.last_t):
            self.at(self.core.now)
