"""The summary of a fleet known rack by rack (watched through Prometheus): its total aggregate, power and
tokens per joule are the board's, over the time the board's figures cover.

The node-level state of such a run holds each node only from when it was first read (an alerting pass,
a rack opened), and the run's clock starts where the server's history does: integrating the nodes' GPU
power over the whole run time read a fleet at 199.6 kW as 113 kW, and the run's tokens over that energy
35 tokens per joule where every line said 11. The fleet's timeline (one point per round of rack figures,
backfill included) is what the lines showed; its mean, each point weighted by the time up to the next
one, is the summary's. A gap in the server's history (rounds with no answer) is left out: a point covers
at most :data:`GAP_FACTOR` times the timeline's usual step, never the whole gap.

A run that began before the server's history does (older than its retention, or than the watch's
``lookback``) is summarised over what is retained, and the summary says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from tokenwatch.base.formatting import format_clock
from tokenwatch.core.fleet._state import FleetState

GAP_FACTOR = 3.0


def covered_means(fleet: FleetState) -> tuple[float, float, float] | None:
    """(mean fleet tokens/s, mean fleet power W, seconds covered) over the fleet's timeline, each point
    weighted by the time to the next (at most ``GAP_FACTOR`` usual steps); None with under two points."""
    if fleet.totals is None:
        return None
    times, values = fleet.totals.view()
    ok = np.isfinite(values).all(axis=1)
    times, values = times[ok], values[ok]
    if len(times) < 2:
        return None
    gaps = np.diff(times)
    usual = float(np.median(gaps))
    weights = np.append(np.minimum(gaps, GAP_FACTOR * usual), usual)
    covered = float(weights.sum())
    if covered <= 0:
        return None
    tokens = float((values[:, 0] * weights).sum() / covered)
    power = float((values[:, 1] * weights).sum() / covered)
    return tokens, power, covered


def history_note(meta: Mapping[str, Any]) -> str | None:
    """What the summary says of a run older than the server's history (``meta["fleet"]``)."""
    fleet = meta.get("fleet")
    if not isinstance(fleet, Mapping) or not fleet.get("run_older_than_history"):
        return None
    return (
        "the run began before the server's history does (its retention, or the watch's lookback): "
        "these figures cover the run from 00:00, where that history begins"
    )


def with_fleet_figures(summary: Any, fleet: FleetState, meta: Mapping[str, Any]) -> Any:
    """``summary`` (a :class:`~tokenwatch.core.summary.RunSummary`) with the fleet's mean power and
    tokens per joule over what its timeline covers, and the history note where there is one."""
    warnings = list(summary.warnings)
    note = history_note(meta)
    if note is not None:
        warnings.insert(0, note)
    means = covered_means(fleet)
    if means is None:
        return dataclasses.replace(summary, warnings=tuple(warnings))
    tokens, power, covered = means
    warnings.append(
        f"the total aggregate, mean power and tokens per joule are the fleet's rack figures over the "
        f"{format_clock(covered)} they cover (the board's and every line's); the single-node figures are "
        "the nodes' own since the watch first read them"
    )
    return dataclasses.replace(
        summary,
        fleet_tokens_per_s=tokens,
        power_mean_w=power if power > 0 else None,
        tokens_per_joule=tokens / power if power > 0 else None,
        warnings=tuple(warnings),
    )
