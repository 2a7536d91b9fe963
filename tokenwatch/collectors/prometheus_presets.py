"""PromQL for the metrics clusters already collect: dcgm-exporter (GPUs), vLLM (progress, latency), and
tokenwatch's own /metrics (so one tokenwatch can read another's fleet through Prometheus).

Each query is a template: ``{node}`` is the label that names the node, ``{gpu}`` the GPU index label.
GPU queries return one series per (node, gpu) in tokenwatch's units (W, MHz, MiB, %, °C); progress
queries one series per node (cumulative counters); latency queries cumulative ``le`` buckets per node.
"""

from __future__ import annotations

from collections.abc import Mapping

from tokenwatch.events import GPU_METRICS, LatencyMetric

PROGRESS_FIELDS = ("tokens", "samples", "prompt_tokens")
LATENCY_FIELDS: tuple[LatencyMetric, ...] = ("ttft", "tpot", "e2e")
GPU_FIELDS = (*GPU_METRICS, "throttle_reasons")
ALL_FIELDS = (*GPU_FIELDS, *PROGRESS_FIELDS, *LATENCY_FIELDS)


def _gpu(expr: str) -> str:
    return f"max by ({{node}}, {{gpu}}) ({expr})"


def _node_sum(expr: str) -> str:
    return f"sum by ({{node}}) ({expr})"


def _buckets(expr: str) -> str:
    return f"sum by ({{node}}, le) ({expr})"


GPU_PRESETS: Mapping[str, Mapping[str, str]] = {
    "dcgm": {
        "power_w": _gpu("DCGM_FI_DEV_POWER_USAGE"),
        "power_limit_w": _gpu("DCGM_FI_DEV_POWER_MGMT_LIMIT"),
        "sm_clock_mhz": _gpu("DCGM_FI_DEV_SM_CLOCK"),
        "mem_clock_mhz": _gpu("DCGM_FI_DEV_MEM_CLOCK"),
        "hbm_used_mib": _gpu("DCGM_FI_DEV_FB_USED"),
        "hbm_total_mib": _gpu("DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE"),
        "hbm_busy_pct": _gpu("DCGM_FI_DEV_MEM_COPY_UTIL"),
        "util_pct": _gpu("DCGM_FI_DEV_GPU_UTIL"),
        "temp_c": _gpu("DCGM_FI_DEV_GPU_TEMP"),
        "throttle_reasons": _gpu("DCGM_FI_DEV_CLOCKS_EVENT_REASONS or DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"),
    },
    "tokenwatch": {
        "power_w": _gpu("tokenwatch_gpu_power_watts"),
        "power_limit_w": _gpu("tokenwatch_gpu_power_limit_watts"),
        "sm_clock_mhz": _gpu("tokenwatch_gpu_sm_clock_hertz / 1e6"),
        "mem_clock_mhz": _gpu("tokenwatch_gpu_memory_clock_hertz / 1e6"),
        "hbm_used_mib": _gpu("tokenwatch_gpu_hbm_used_bytes / 1048576"),
        "hbm_total_mib": _gpu("tokenwatch_gpu_hbm_total_bytes / 1048576"),
        "hbm_busy_pct": _gpu("tokenwatch_gpu_hbm_busy_ratio * 100"),
        "util_pct": _gpu("tokenwatch_gpu_utilization_ratio * 100"),
        "temp_c": _gpu("tokenwatch_gpu_temperature_celsius"),
        "throttle_reasons": _gpu("tokenwatch_gpu_throttle_reasons"),
    },
}

PROGRESS_PRESETS: Mapping[str, Mapping[str, str]] = {
    "vllm": {
        "tokens": _node_sum("vllm:generation_tokens_total"),
        "samples": _node_sum("vllm:request_success_total"),
        "prompt_tokens": _node_sum("vllm:prompt_tokens_total"),
        "ttft": _buckets("vllm:time_to_first_token_seconds_bucket"),
        "tpot": _buckets("vllm:time_per_output_token_seconds_bucket"),
        "e2e": _buckets("vllm:e2e_request_latency_seconds_bucket"),
    },
    "tokenwatch": {
        "tokens": _node_sum("tokenwatch_node_generated_tokens_total"),
        "samples": _node_sum("tokenwatch_node_samples_total"),
        "ttft": _buckets("tokenwatch_ttft_seconds_bucket"),
        "tpot": _buckets("tokenwatch_tpot_seconds_bucket"),
        "e2e": _buckets("tokenwatch_e2e_seconds_bucket"),
    },
}


class PresetError(ValueError):
    """An unknown preset or query field; the message lists the valid ones."""


def build_queries(
    *,
    gpu: bool,
    progress: bool,
    gpu_preset: str,
    progress_preset: str,
    overrides: Mapping[str, str],
    node_label: str,
    gpu_label: str,
) -> dict[str, str]:
    """Field -> PromQL with the labels filled in. An override of "" drops that field."""
    unknown = set(overrides) - set(ALL_FIELDS)
    if unknown:
        raise PresetError(
            f"unknown query field(s) {', '.join(sorted(unknown))}; fields: {', '.join(ALL_FIELDS)}"
        )
    chosen: dict[str, str] = {}
    if gpu:
        if gpu_preset not in GPU_PRESETS:
            raise PresetError(f"unknown GPU preset {gpu_preset!r}; presets: {', '.join(GPU_PRESETS)}")
        chosen.update(GPU_PRESETS[gpu_preset])
    if progress:
        if progress_preset not in PROGRESS_PRESETS:
            raise PresetError(
                f"unknown progress preset {progress_preset!r}; presets: {', '.join(PROGRESS_PRESETS)}"
            )
        chosen.update(PROGRESS_PRESETS[progress_preset])
    for key, promql in overrides.items():
        if (key in GPU_FIELDS and gpu) or (key not in GPU_FIELDS and progress):
            chosen[key] = promql
    return {k: v.replace("{node}", node_label).replace("{gpu}", gpu_label) for k, v in chosen.items() if v}
