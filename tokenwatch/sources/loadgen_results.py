"""``tokenwatch summarize DIR...``: LoadGen result folders -> the rack summary.

Every folder under DIR (searched recursively) that holds an ``mlperf_log_summary.txt`` is one node,
named by its path relative to DIR. A node's tokens/s is its summary's own figure; the aggregate and
the spread (max, min, average, median single-node) are the core's :func:`summarize_nodes`, as for
recordings, so the JSON contract is the same. A detail log beside the summary adds the LoadGen
version and the run's duration, and is cross-checked against the summary.

An INVALID run is listed with ``valid: false`` and a warning, never passed off as valid; accuracy
runs are left out with a warning; result folders of different scenarios are an error.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from tokenwatch.cli.parser import UsageError
from tokenwatch.core.summary import PERCENTILES, NodeResult, RunSummary, summarize_nodes
from tokenwatch.sources.errors import SourceFormatError
from tokenwatch.sources.loadgen_detail import DETAIL_NAME, DetailLog, read_detail
from tokenwatch.sources.loadgen_summary import SUMMARY_NAME, LoadgenSummary, read_summary

_CROSS_CHECK_TOLERANCE = 1e-3  # the summary rounds to ~6 significant digits


@dataclass(frozen=True, slots=True)
class ResultFolder:
    """One node's LoadGen output: its name, folder, summary and (optional) detail log."""

    name: str
    folder: Path
    summary: LoadgenSummary
    detail: DetailLog | None


def find_summary_folders(root: Path) -> list[Path]:
    """Folders under ``root`` (itself included) holding a LoadGen summary, in sorted order."""
    found: list[Path] = []
    for current, subdirs, files in os.walk(root, onerror=None, followlinks=False):
        subdirs.sort()
        if SUMMARY_NAME in files:
            found.append(Path(current))
    return sorted(found)


def _node_name(root: Path, folder: Path) -> str:
    relative = folder.relative_to(root).as_posix()
    return relative if relative != "." else (root.resolve().name or str(root))


def load_result_folder(name: str, folder: Path) -> tuple[ResultFolder, list[str]]:
    """Read one folder's summary (required) and detail log (optional, problems become warnings)."""
    warnings: list[str] = []
    summary = read_summary(folder / SUMMARY_NAME)
    warnings += summary.skipped
    detail: DetailLog | None = None
    if (folder / DETAIL_NAME).is_file():
        try:
            detail = read_detail(folder / DETAIL_NAME)
        except SourceFormatError as exc:
            warnings.append(f"{name}: detail log not used: {exc}")
        else:
            warnings += detail.skipped[:5]
            warnings += _cross_check(name, summary, detail)
    return ResultFolder(name, folder, summary, detail), warnings


def _cross_check(name: str, summary: LoadgenSummary, detail: DetailLog) -> list[str]:
    out: list[str] = []
    for label, ours, theirs in (
        ("tokens/s", summary.tokens_per_s, detail.tokens_per_s),
        ("samples/s", summary.samples_per_s, detail.samples_per_s),
    ):
        if (
            math.isfinite(ours)
            and math.isfinite(theirs)
            and abs(ours - theirs) > _CROSS_CHECK_TOLERANCE * max(abs(ours), abs(theirs))
        ):
            out.append(f"{name}: summary says {ours:g} {label}, detail log says {theirs:g} (summary used)")
    if detail.valid is not None and detail.valid != summary.valid:
        out.append(
            f"{name}: summary says {summary.result}, detail log says {detail.values['result_validity']}"
        )
    if detail.scenario and detail.scenario != summary.scenario:
        out.append(f"{name}: summary scenario {summary.scenario}, detail log {detail.scenario}")
    return out


def collect_result_folders(dirs: list[Path]) -> tuple[list[ResultFolder], list[str]]:
    """Every result folder under ``dirs``; names stay unique across several DIRs."""
    warnings: list[str] = []
    folders: list[ResultFolder] = []
    names: set[str] = set()
    for root in dirs:
        if not root.is_dir():
            raise UsageError(f"{root}: not a folder")
        for folder in find_summary_folders(root):
            name = _node_name(root, folder)
            if name in names:
                name = (root / folder.relative_to(root)).as_posix()
            names.add(name)
            result, more = load_result_folder(name, folder)
            warnings += more
            folders.append(result)
    if not folders:
        listed = ", ".join(str(d) for d in dirs)
        raise UsageError(f"no {SUMMARY_NAME} found under {listed}")
    return folders, warnings


def _latency_ms(summary: LoadgenSummary) -> dict[str, dict[str, float]]:
    return {metric: stats for metric, stats in summary.latency_ms().items() if stats}


def node_result(result: ResultFolder, gpus: int) -> tuple[NodeResult, list[str]]:
    summary, detail = result.summary, result.detail
    warnings: list[str] = []
    extra: dict[str, object] = {"path": str(result.folder), "result": summary.result}
    if detail is not None and detail.loadgen_version:
        extra["loadgen_version"] = detail.loadgen_version
    if summary.warning_count:
        extra["loadgen_warnings"] = summary.warning_count
    if summary.error_count:
        extra["loadgen_errors"] = summary.error_count
        warnings.append(f"{result.name}: LoadGen reported {summary.error_count} error(s), see its detail log")
    if not summary.valid:
        unmet = summary.unmet_constraints
        extra["invalid_reasons"] = unmet
        why = f" ({'; '.join(unmet)} not met)" if unmet else ""
        warnings.append(
            f"{result.name}: LoadGen result {summary.result or 'missing'}{why}; "
            f"flagged valid=false, its {summary.tokens_per_s:,.1f} tokens/s are in the total"
        )
    if math.isnan(summary.tokens_per_s):
        warnings.append(
            f"{result.name}: no tokens per second in its summary (not an LLM run, or no token reporting)"
        )
    node = NodeResult(
        result.name,
        gpus,
        summary.tokens_per_s,
        summary.samples_per_s,
        valid=summary.valid,
        latency_ms=_latency_ms(summary),
        extra=extra,
    )
    return node, warnings


def _duration_s(result: ResultFolder) -> float:
    if result.detail is not None:
        seconds = result.detail.duration_s()
        if math.isfinite(seconds):
            return seconds
    return result.summary.duration_s()


def summarize_result_dirs(dirs: list[Path], gpus_per_node: int | None) -> tuple[RunSummary, list[str]]:
    """The rack summary of LoadGen result folders (one node per summary) and the warnings to print."""
    gpus = 1 if gpus_per_node is None else gpus_per_node
    if gpus < 1:
        raise UsageError(f"--gpus-per-node must be at least 1, not {gpus}")
    folders, warnings = collect_result_folders(dirs)
    performance = []
    for result in folders:
        mode = result.summary.mode
        if mode and "accuracy" in mode.lower():
            warnings.append(f"{result.name}: {mode} run left out (not a performance result)")
        else:
            performance.append(result)
    if not performance:
        raise UsageError("no performance runs among the LoadGen summaries (only accuracy runs)")
    scenarios: dict[str, list[str]] = {}
    for result in performance:
        scenarios.setdefault(result.summary.scenario, []).append(result.name)
    if len(scenarios) > 1:
        parts = ", ".join(
            f"{len(names)} {scenario} (e.g. {names[0]})" for scenario, names in sorted(scenarios.items())
        )
        raise UsageError(f"mixed scenarios in the result folders: {parts}; summarize one scenario at a time")
    nodes: list[NodeResult] = []
    for result in performance:
        node, more = node_result(result, gpus)
        nodes.append(node)
        warnings += more
    durations = [d for d in (_duration_s(r) for r in performance) if math.isfinite(d)]
    rack_latency: dict[str, dict[str, float]] = {}
    if len(nodes) == 1:  # percentiles of different nodes cannot be combined into the rack's
        rack_latency = {
            metric: {k: stats[k] for k in PERCENTILES if k in stats}
            for metric, stats in nodes[0].latency_ms.items()
        }
    name = " + ".join(d.resolve().name or str(d) for d in dirs)
    summary = summarize_nodes(
        name,
        next(iter(scenarios)),
        max(durations) if durations else math.nan,
        nodes,
        rack_latency,
        warnings=warnings,
    )
    return summary, []
