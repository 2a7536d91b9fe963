"""Summarizing what the core has ingested: a :class:`~tokenwatch.core._state.RackState` as the run's
:class:`~tokenwatch.core.summary.RunSummary`, and the words for a run that did not reach its end
(interrupted, stopped by the engineer, or a stream with no run end).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tokenwatch.base.durations import format_clock
from tokenwatch.base.events import LATENCY_METRICS
from tokenwatch.core._loadgen_latency import loadgen_latency
from tokenwatch.core._state import RackState
from tokenwatch.core._stopped_partway import node_outcomes
from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.energy import run_energy_window
from tokenwatch.core.final_figure import left_out, left_out_note
from tokenwatch.core.fleet._summary import with_fleet_figures
from tokenwatch.core.histogram import quantiles_of
from tokenwatch.core.summary import PERCENTILES, NodeResult, RunSummary, summarize_nodes
from tokenwatch.core.verdict.final import final_verdict

_DOWN = STATE_CODE["down"]
_STALE = STATE_CODE["stale"]


def share_done(state: RackState) -> str:
    """How much of the run there is, for a run cut short: ``8.8 % of samples`` (or of the nominal
    duration when the sample count is unknown); empty when neither is known."""
    run = state.run
    if run.total_samples:
        return f"{state.samples.sum() / run.total_samples * 100:.1f} % of samples"
    if run.nominal_duration_s:
        nominal = run.nominal_duration_s
        return f"{state.now / nominal * 100:.1f} % of the nominal {format_clock(nominal)}"
    return ""


def interrupted_status(state: RackState) -> str:
    """``INTERRUPTED at 07:44 (8.8 % of samples)``: what an interrupted run reads as, everywhere."""
    share = share_done(state)
    return f"INTERRUPTED at {format_clock(state.now)}" + (f" ({share})" if share else "")


def _completeness(state: RackState, stopped: str | None = None) -> tuple[bool, str, list[str]]:
    """(complete, status line, warnings): an interrupted run and a stream with no run end say so.
    ``stopped``: what the engineer stopped before the run's end without interrupting the run (``replay``,
    ``demo``): the figures cover the run up to there, and the words say who stopped where."""
    if stopped is not None and not state.ended:
        share = share_done(state)
        at = format_clock(state.now)
        status = f"{stopped.upper()} STOPPED at {at}" + (f" ({share})" if share else "")
        return False, status, [f"the {stopped} was stopped at {at}: the figures cover the run up to there"]
    if state.ended and state.end_reason == "interrupted":
        status = interrupted_status(state)
        return (
            False,
            status,
            [f"the run was interrupted at {format_clock(state.now)}: the figures cover it up to there"],
        )
    if not state.ended:
        share = share_done(state)
        status = f"INCOMPLETE: no run end; covers the run up to {format_clock(state.now)}" + (
            f" ({share})" if share else ""
        )
        warning = (
            f"no run end: the stream stops at {format_clock(state.now)} (the writer was killed, or the "
            "recording is cut off); the figures cover the run up to there"
        )
        return False, status, [warning]
    return True, "", []


def summarize_state(state: RackState, stopped: str | None = None) -> RunSummary:
    """The summary of everything the core has ingested (a recording, or a run so far); ``stopped``: see
    :func:`_completeness`."""
    run = state.run
    tokens_per_s, samples_per_s = state.measured_means()
    # A node down or stale when the run ended (or when the stream stops) did not complete its work:
    # like an INVALID LoadGen result its figure is flagged, never silently summed as if it were whole,
    # and it stays out of the single-node figures (a partial figure is not a node result), as the
    # snapshots' node spread leaves it out.
    codes = state.effective_state(state.now)
    unfinished = (codes == _DOWN) | (codes == _STALE)
    complete, status, warnings = _completeness(state, stopped)
    for i in np.flatnonzero(unfinished).tolist():
        span = state.t_last_change[i] - state.t_first[i]
        how = "down" if codes[i] == _DOWN else "stale"
        since, why = state.why_stopped(i, int(codes[i]))
        if np.isfinite(since):
            how += f" since {format_clock(since)}"
        if np.isfinite(span) and span > 0:
            what = (
                f"its figure covers its {format_clock(span)} of work: in the aggregate (the rack figure sums "
                "nodes), not in the single-node figures"
            )
        else:
            what = "it did no work and is in no figure"
        warnings.append(f"{run.nodes[i]} did not finish ({how}: {why}); {what}")
    outcomes = node_outcomes(state, state.now, cut_short=not complete)
    nodes = [
        NodeResult(
            name,
            run.gpus_per_node,
            float(tokens_per_s[i]),
            float(samples_per_s[i]),
            valid=False if unfinished[i] else None,
            finished=not unfinished[i],
            outcome=outcomes[i],
        )
        for i, name in enumerate(run.nodes)
    ]
    latency: dict[str, dict[str, float]] = {}
    estimated = False
    for metric in LATENCY_METRICS:
        hist = state.rack_latency[metric]
        if hist.total:
            exact = loadgen_latency(state, metric)  # the figures LoadGen wrote, where it did
            values = list(exact[:3]) if exact else quantiles_of(hist.counts, list(PERCENTILES.values()))
            estimated |= exact is None
            latency[metric] = {k: v * 1000.0 for k, v in zip(PERCENTILES, values, strict=True)}
    duration = state.now
    # Energy: the GPUs' counters where they have them, else power integrated tick by tick up to the last
    # sampled tick (the run's end, once it has ended; the last whole second before the stream stops,
    # when it has none).
    # Each node's energy over its own window (from the attach, where GPU readings have no history), and
    # the tokens and time of that same window (core/energy.py).
    covered = state.last_sample_t
    window = run_energy_window(
        state.energy, np.isfinite(state.gpu_last_seen), state.tokens, covered, state.config.tick_s
    )
    source = window.source
    has_energy = (state.has_power() or source == "counter") and window.energy_j > 0
    power_mean = window.mean_power_w if has_energy and covered > 0 else None
    tokens_per_joule = window.tokens_per_joule if has_energy else None
    summary = summarize_nodes(
        run.name,
        run.scenario,
        duration,
        nodes,
        latency,
        power_mean,
        tokens_per_joule,
        warnings,
        complete=complete,
        end_reason=state.end_reason if state.ended else None,
        status=status,
        verdict=final_verdict(state),
    )
    summary = dataclasses.replace(
        summary,
        energy_source=source if has_energy else None,
        energy_since_s=window.since_s if has_energy else None,
        left_out_note=left_out_note(left_out(state)),
        latency_estimated=estimated,
    )
    if state.fleet_figures is not None:  # a fleet known rack by rack: the board's power, over its time
        summary = with_fleet_figures(summary, state.fleet_figures, run.meta)
    return summary
