"""The MLPerf verdict of LoadGen result folders: LoadGen's own, node by node.

A folder's detail log gives LoadGen's own "Result is" and the figures each rule is judged by
(:func:`tokenwatch.core.verdict.final.node_from_detail`); a folder with only its summary gives LoadGen's
flags from the summary. The benchmark is read from the results tree's path
(``.../results/<system>/<benchmark>/<Scenario>/performance/run_1``) where it names one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenwatch.core.verdict.final import NodeVerdict, RunVerdict, combine, node_from_detail
from tokenwatch.mlperf.rules import BenchmarkRef, normalize_benchmark
from tokenwatch.mlperf.verdict import result_lines
from tokenwatch.sources.loadgen_results import ResultFolder

_FLAGS = (
    "Performance constraints satisfied",
    "Min duration satisfied",
    "Min queries satisfied",
    "Early stopping satisfied",
)


def benchmark_in_path(folder: Path) -> BenchmarkRef | None:
    """The benchmark a results tree names in ``folder``'s path (the nearest part that is one)."""
    for part in reversed(folder.resolve().parts):
        ref = normalize_benchmark(part)
        if ref is not None:
            return ref
    return None


def _from_summary(result: ResultFolder) -> NodeVerdict:
    summary = result.summary
    flags = [summary.constraints.get(name) for name in _FLAGS]
    lines = result_lines(summary.scenario, summary.valid, *flags)
    return NodeVerdict(result.name, None, summary.valid, tuple(lines), "no detail log: LoadGen's flags only")


def result_verdict(folders: Sequence[ResultFolder]) -> RunVerdict:
    nodes = []
    refs = set()
    for result in folders:
        judged = node_from_detail(result.name, result.detail.values) if result.detail is not None else None
        nodes.append(judged if judged is not None else _from_summary(result))
        ref = benchmark_in_path(result.folder)
        if ref is not None:
            refs.add((ref.benchmark.name, ref.interactive))
    scenario = folders[0].summary.scenario if folders else ""
    benchmark = None
    if len(refs) == 1:
        name, interactive = refs.pop()
        benchmark = name
        scenario = "Interactive" if interactive else scenario
    return combine(benchmark, scenario, nodes)
