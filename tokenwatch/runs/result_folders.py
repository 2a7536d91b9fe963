"""MLPerf LoadGen result folders -> the rack summary: the one discovery of result folders.

Every folder under a DIR (searched recursively, DIR itself included) that holds an
``mlperf_log_summary.txt`` is one result, named by its path relative to DIR. A result's tokens/s is its
summary's own figure; the aggregate and the spread (max, min, average, median single-node) are the
core's :func:`summarize_nodes`, as for recordings, so the JSON contract is the same. A detail log beside
the summary adds the LoadGen version and the run's duration, and is cross-checked against the summary.

Published submissions hold more than performance runs (:mod:`tokenwatch.runs.submission`): a summary
that is no summary (an accuracy run's stub, an aborted run's empty file) is skipped with a warning;
accuracy runs are left out with a warning; ranging and compliance runs (TEST01, TEST04, TEST06...) are
listed apart (``not_in_aggregate``) and never summed. One performance result is a **system** result
(one LoadGen run for the whole system, e.g. an NVL72 rack); several are **per-node** results, summed
(``layout``). The GPUs behind a result come from the submission's ``systems/<system>.json``
(``accelerators_per_node`` x ``number_of_nodes``), else ``--gpus-per-node``, else they are unknown
(``null``), never assumed. An INVALID run is listed with ``valid: false`` and a warning, never passed
off as valid; performance runs of different scenarios are an error.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path

from tokenwatch.core.summary import PERCENTILES, NodeResult, RunSummary, summarize_nodes
from tokenwatch.runs.errors import RunLoadError
from tokenwatch.runs.result_verdict import result_verdict
from tokenwatch.runs.submission import SystemInfo, read_system, run_kind, system_file
from tokenwatch.sources.loadgen_results import ResultFolder, load_result_folder
from tokenwatch.sources.loadgen_summary import SUMMARY_NAME, LoadgenSummary, SummaryStubError


@dataclass(frozen=True, slots=True)
class ResultSet:
    """What was read: every result folder found (accuracy runs included) and the summary of the rest."""

    folders: tuple[ResultFolder, ...]
    summary: RunSummary


def find_summary_folders(root: Path) -> list[Path]:
    """Folders under ``root`` (itself included) holding a LoadGen summary, sorted.

    Links to folders are followed (result sets are often gathered with links), but each real folder is
    read once: a link loop ends, and a node reached twice is still one node.
    """
    found: list[Path] = []
    seen: set[tuple[int, int]] = set()
    for current, subdirs, files in os.walk(root, followlinks=True):
        try:
            info = os.stat(current)
        except OSError:
            subdirs.clear()
            continue
        if (info.st_dev, info.st_ino) in seen:
            subdirs.clear()
            continue
        seen.add((info.st_dev, info.st_ino))
        subdirs.sort()
        if SUMMARY_NAME in files:
            found.append(Path(current))
    return sorted(found)


def _node_name(root: Path, folder: Path, common: Path | None) -> str:
    """A result's name: its path relative to DIR (one DIR), or to the folder the DIRs have in common
    (several), never this machine's absolute path; DIR's own name where it is the result folder."""
    if common is None:
        relative = folder.relative_to(root).as_posix()
        return relative if relative != "." else (root.resolve().name or str(root))
    relative = (root.resolve() / folder.relative_to(root)).relative_to(common).as_posix()
    return relative if relative != "." else (common.name or str(common))


def _common_folder(dirs: list[Path]) -> Path | None:
    """The folder several DIRs have in common (None for one DIR: names are relative to it)."""
    if len(dirs) < 2:
        return None
    return Path(os.path.commonpath([d.resolve() for d in dirs]))


def collect_result_folders(dirs: list[Path]) -> tuple[list[ResultFolder], list[str]]:
    """Every result folder under ``dirs``, each real folder once (DIRs that overlap find some twice);
    names are relative to the DIRs' common folder and stay unique. A summary file that holds no summary
    (a stub) is skipped with a warning."""
    warnings: list[str] = []
    folders: list[ResultFolder] = []
    names: set[str] = set()
    seen: set[Path] = set()
    stubs = 0
    for root in dirs:
        if not root.is_dir():
            raise RunLoadError(f"{root}: not a folder")
    common = _common_folder(dirs)
    for root in dirs:
        for folder in find_summary_folders(root):
            real = folder.resolve()
            if real in seen:
                continue
            seen.add(real)
            base = name = _node_name(root, folder, common)
            n = 2
            while name in names:  # two paths (through links) to the same place in the tree
                name, n = f"{base} #{n}", n + 1
            names.add(name)
            try:
                result, more = load_result_folder(name, folder)
            except SummaryStubError:
                stubs += 1
                warnings.append(
                    f"{name}: skipped: its {SUMMARY_NAME} holds no summary (an accuracy run's stub, "
                    "or an aborted run)"
                )
                continue
            warnings += more
            folders.append(result)
    if not folders:
        listed = ", ".join(str(d) for d in dirs)
        found = f" ({stubs} summary file(s) without a summary in them)" if stubs else ""
        raise RunLoadError(f"no LoadGen result summary found under {listed}{found}")
    return folders, warnings


def _latency_ms(summary: LoadgenSummary) -> dict[str, dict[str, float]]:
    return {metric: stats for metric, stats in summary.latency_ms().items() if stats}


def node_result(
    result: ResultFolder, gpus: int | None, kind: str = "performance"
) -> tuple[NodeResult, list[str]]:
    summary, detail = result.summary, result.detail
    warnings: list[str] = []
    extra: dict[str, object] = {"path": str(result.folder), "result": summary.result}
    if kind != "performance":
        extra["kind"] = kind
    system, problem = _system_of(result.folder)
    if problem is not None:
        warnings.append(f"{result.name}: {problem}")
    if system is not None:
        extra["system"] = {
            "name": system.name,
            "nodes": system.nodes,
            "accelerators_per_node": system.accelerators_per_node,
            **({"accelerators_stated": system.stated} if system.stated is not None else {}),
            "file": str(system.path),
        }
        if system.mismatch:
            warnings.append(f"{result.name}: {system.mismatch}")
        gpus = system.gpus if system.gpus is not None else gpus
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
        if kind == "performance":
            warnings.append(
                f"{result.name}: LoadGen result {summary.result or 'missing'}{why}; "
                f"flagged valid=false, its {summary.tokens_per_s:,.1f} tokens/s are in the total"
            )
    if math.isnan(summary.tokens_per_s) and kind == "performance":
        if math.isfinite(summary.samples_per_s):
            warnings.append(
                f"{result.name}: its summary states {summary.samples_per_s:,.4g} samples per second and no "
                "tokens per second: tokens are not stated (unknown, not 0)"
            )
        else:
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


def read_result_dirs(dirs: list[Path], gpus_per_node: int | None) -> ResultSet:
    """The result folders under ``dirs`` and their rack summary (warnings in ``summary.warnings``)."""
    if gpus_per_node is not None and gpus_per_node < 1:
        raise RunLoadError(f"--gpus-per-node must be at least 1, not {gpus_per_node}")
    folders, warnings = collect_result_folders(dirs)
    performance = []
    apart: list[NodeResult] = []
    for result in folders:
        kind = run_kind(result.folder, result.summary)
        if kind == "accuracy":
            warnings.append(f"{result.name}: {result.summary.mode} run left out (not a performance result)")
        elif kind != "performance":
            node, more = node_result(result, gpus_per_node, kind)
            apart.append(node)
            warnings += more
        else:
            performance.append(result)
    if not performance:
        raise RunLoadError(
            "no performance runs among the LoadGen summaries (only accuracy, ranging or compliance runs)"
        )
    scenarios: dict[str, list[str]] = {}
    for result in performance:
        scenarios.setdefault(result.summary.scenario, []).append(result.name)
    if len(scenarios) > 1:
        parts = ", ".join(
            f"{len(names)} {scenario} (e.g. {names[0]})" for scenario, names in sorted(scenarios.items())
        )
        raise RunLoadError(
            f"mixed scenarios in the result folders: {parts}; summarize one scenario at a time"
        )
    nodes: list[NodeResult] = []
    for result in performance:
        node, more = node_result(result, gpus_per_node)
        nodes.append(node)
        warnings += more
    if any(node.gpus is None for node in nodes):
        warnings.append(
            "the GPUs behind the results are unknown (no systems/<system>.json beside them): "
            "give --gpus-per-node for the per-GPU figures"
        )
    durations = [d for d in (r.duration_s() for r in performance) if math.isfinite(d)]
    rack_latency: dict[str, dict[str, float]] = {}
    if len(nodes) == 1:  # percentiles of different nodes cannot be combined into the rack's
        rack_latency = {
            metric: {k: stats[k] for k in PERCENTILES if k in stats}
            for metric, stats in nodes[0].latency_ms.items()
        }
    name = " + ".join(d.resolve().name or str(d) for d in dirs)
    # Results that state samples/s and no tokens (a multimodal benchmark's summary) are summarised in
    # samples/s: their tokens are unknown, and a sum of unknowns is not 0 tokens/s.
    samples_only = all(
        math.isnan(n.tokens_per_s) and math.isfinite(n.samples_per_s) and n.samples_per_s > 0 for n in nodes
    )
    summary = summarize_nodes(
        name,
        next(iter(scenarios)),
        max(durations) if durations else math.nan,
        nodes,
        rack_latency,
        warnings=warnings,
        layout="system" if len(nodes) == 1 else "per-node",
        apart=apart,
        figure="samples" if samples_only else "tokens",
    )
    summary = dataclasses.replace(summary, verdict=result_verdict(performance))  # LoadGen's own
    return ResultSet(tuple(folders), summary)


def _system_of(folder: Path) -> tuple[SystemInfo | None, str | None]:
    path = system_file(folder)
    return (None, None) if path is None else read_system(path)


def summarize_result_dirs(dirs: list[Path], gpus_per_node: int | None) -> tuple[RunSummary, list[str]]:
    """The rack summary of LoadGen result folders; its warnings are in ``summary.warnings`` (the list
    returned beside it is for the CLI to print first, and is empty here)."""
    return read_result_dirs(dirs, gpus_per_node).summary, []
