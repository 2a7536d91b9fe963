"""The parsers of the commands that read a finished run: ``summarize``, ``report`` and ``export``."""

from __future__ import annotations

import argparse

from tokenwatch.cli.arg_types import positive_duration_arg, tdp_arg
from tokenwatch.cli.shared_flags import add_baseline_option
from tokenwatch.cli.usage import OneLineParser


def add_summarize_parser(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """``summarize``: the summary table of recordings, result folders and client benchmark results."""
    summarize = sub.add_parser(
        "summarize",
        help="the rack summary table of a recording or MLPerf result folders, and client benchmark results",
        description="Summarise a recording, or MLPerf LoadGen result folders (each result named by its "
        "path relative to the folder the DIRs have in common; a result that states samples/s and no tokens "
        "is summarised in samples/s): the published rack table, the latencies and the final MLPerf verdict "
        "rule by rule, each at its worst node. Client-side benchmark results given among the paths (AIPerf's "
        "profile_export_aiperf.json or its per-interval _timeslices.json, GenAI-Perf's "
        "profile_export_genai_perf.json, vllm bench serve's result JSON, SGLang bench_serving's JSONL; "
        "recognised by their content; a folder with no LoadGen summary stands for the AIPerf and GenAI-Perf "
        "exports under it) are shown side by side with the server's own figures, or alone. A .zst "
        "recording that tokenwatch finished holds its summary in a trailer at its end, read instead of "
        "every line (a trailer that does not fit the file: one warning, then the whole recording).",
    )
    summarize.add_argument("paths", nargs="+", metavar="FILE_OR_DIR")
    summarize.add_argument("--json", action="store_true", help="print the JSON contract instead of the table")
    _add_gpus_per_node(summarize)
    add_baseline_option(summarize)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tdp-w", type=tdp_arg, metavar="W", help="GPU TDP in W (default: the power limit the GPUs report)"
    )
    _add_gpus_per_node(p)


def add_report_parsers(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """``report`` (HTML of one run, or two compared) and ``export`` (tidy CSV / Parquet)."""
    report = sub.add_parser(
        "report",
        help="one self-contained HTML report of a run, or two runs side by side",
        description="Write the HTML report of RUN (a recording or a folder of MLPerf results); "
        "with two RUNs, compare them (B / A).",
    )
    report.add_argument("runs", nargs="+", metavar="RUN")
    report.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE.html",
        help="where to write the report (an existing file needs --force; an input is never overwritten)",
    )
    report.add_argument("--force", action="store_true", help="overwrite an existing -o file")
    report.add_argument(
        "--workload",
        action="append",
        metavar="NAME=TOKENS",
        help="capacity table profile (repeatable; replaces the defaults), e.g. 'RAG query=2500'",
    )
    _add_run_options(report)
    add_baseline_option(report)

    export = sub.add_parser(
        "export",
        help="tidy CSV (or Parquet) of a run: node and GPU series, alerts, summary",
        description="Export RUN (a recording or a folder of MLPerf results) as tidy tables.",
    )
    export.add_argument("run", metavar="RUN")
    export.add_argument("--csv", metavar="DIR", help="write CSV files into DIR (created if missing)")
    export.add_argument("--parquet", metavar="DIR", help="write Parquet files into DIR (needs pyarrow)")
    export.add_argument(
        "--every",
        type=positive_duration_arg,
        metavar="DURATION",
        help="gpu_series: one row per GPU per DURATION of run time, each figure the mean of its readings "
        "(default: every reading, at the cadence the recording has)",
    )
    _add_run_options(export)


def _add_gpus_per_node(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpus-per-node",
        type=int,
        default=None,
        metavar="N",
        help="result folders: GPUs behind each LoadGen summary where the submission's systems/*.json "
        "does not say (default: unknown, never assumed)",
    )
