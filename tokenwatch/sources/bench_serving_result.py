"""``vllm bench serve`` and SGLang ``bench_serving`` result files -> :class:`ClientResult`.

SGLang's script was adapted from vLLM's, and their results are flat JSON objects with mostly the same
names: ``duration``, ``completed``, ``total_input_tokens``, ``total_output_tokens``,
``request_throughput``, ``output_throughput``, and per latency metric ``mean_/median_/pNN_..._ms``.
vLLM writes one object (``--save-result``; ``--append-result`` adds one per line); SGLang appends one
line per run to its ``--output-file`` (JSONL). They differ in a few names: vLLM's end-to-end latency is
``e2el`` and its total rate ``total_token_throughput``; SGLang's is ``e2e_latency`` and
``total_throughput``, and SGLang adds ``total_output_tokens_retokenized`` (its own tokenizer's count of the
answers' text, beside the server's count in ``total_output_tokens``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tokenwatch.sources.client_result import ClientResult, Figures

_STATS = {"mean": ("mean",), "p50": ("p50", "median"), "p90": ("p90",), "p99": ("p99",), "max": ("max",)}
_VLLM_LATENCY = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}
_SGLANG_LATENCY = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2e_latency"}


def is_bench_serving_result(document: Mapping[str, Any]) -> bool:
    return "output_throughput" in document and "duration" in document


def is_sglang(document: Mapping[str, Any]) -> bool:
    return any(
        key in document
        for key in ("total_output_tokens_retokenized", "mean_e2e_latency_ms", "total_throughput")
    )


def _latency(figures: Figures, names: Mapping[str, str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for metric, name in names.items():
        stats: dict[str, float] = {}
        for stat, prefixes in _STATS.items():
            key = next((f"{p}_{name}_ms" for p in prefixes if f"{p}_{name}_ms" in figures.document), None)
            if key is not None:
                value = figures.number(key, required=False)
                if math.isfinite(value):
                    stats[stat] = value
        if stats:
            out[metric] = stats
    return out


def read_bench_serving(document: Mapping[str, Any], where: str, warnings: list[str]) -> ClientResult:
    """One result object of ``vllm bench serve`` or SGLang's ``bench_serving``, already parsed."""
    figures = Figures(document, where, warnings)
    sglang = is_sglang(document)
    tool = "SGLang bench_serving" if sglang else "vllm bench serve"
    total_rate = figures.number("total_throughput" if sglang else "total_token_throughput", required=False)
    concurrency = figures.number("concurrency", required=False) if sglang else math.nan
    result = ClientResult(
        tool,
        where,
        duration_s=figures.number("duration"),
        requests=figures.number("completed"),
        failed=figures.number("failed", required=False),
        input_tokens=figures.number("total_input_tokens", required=False),
        output_tokens=figures.number("total_output_tokens"),
        requests_per_s=figures.number("request_throughput"),
        output_tokens_per_s=figures.number("output_throughput"),
        total_tokens_per_s=total_rate,
        concurrency=concurrency,
        latency_ms=_latency(figures, _SGLANG_LATENCY if sglang else _VLLM_LATENCY),
    )
    retokenized = figures.number("total_output_tokens_retokenized", required=False)
    counted = result.output_tokens
    if math.isfinite(retokenized) and counted > 0 and abs(retokenized / counted - 1) > 0.01:
        note = (
            f"SGLang's tokenizer counts {retokenized:,.0f} tokens in the answers' text, the server "
            f"{counted:,.0f} ({(retokenized / counted - 1) * 100:+.1f} %): "
            "its output tok/s counts the server's"
        )
        result = replace(result, notes=(*result.notes, note))
    return result
