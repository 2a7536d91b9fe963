"""The Prometheus metric names tokenwatch reads: one table per preset, for both ways of reading them.

A scrape of a ``/metrics`` page (:mod:`tokenwatch.sources.prometheus_metrics`) matches these sample
names; a query of a Prometheus server (:mod:`tokenwatch.inputs.prometheus.presets`) builds its
PromQL from the same names with :meth:`GpuRead.promql`, so a figure reads the same whichever way it
arrives.

Presets: the inference servers vLLM, SGLang and TensorRT-LLM (``trtllm-serve``), NVIDIA Dynamo's
frontend, Hugging Face TGI, the AIPerf client benchmark's live ``/metrics``, NVIDIA's dcgm-exporter,
and tokenwatch's own ``/metrics`` (so one tokenwatch can read another's fleet).
Where a role lists several families, the first one present is used (per node, or per GPU): servers
rename metrics between releases, and newer ones export both names for the same data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from tokenwatch.base.events import LatencyMetric


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


@dataclass(frozen=True, slots=True)
class GpuRead:
    """One way to read a :data:`GPU_METRICS` column from one GPU's series.

    The value is the sum of ``families`` (each must be present; most reads have one), plus each of
    ``optional`` where present, times ``times``, divided by ``per``. Both paths do this arithmetic in
    the same order, so a scrape and a query give the same float.
    """

    families: tuple[str, ...]
    optional: tuple[str, ...] = ()
    times: float = 1.0
    per: float = 1.0

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.families, *self.optional)

    def read(self, fields: Mapping[str, float]) -> float | None:
        """This read of one GPU's field values (family -> value), or None if a family is missing."""
        if any(f not in fields for f in self.families):
            return None
        total = sum(fields[f] for f in self.families) + sum(fields.get(f, 0.0) for f in self.optional)
        return total * self.times / self.per

    def promql(self, selector: str = "") -> str:
        """The same read in PromQL (``x or y * 0`` adds an optional family where it exists, else 0);
        ``selector`` (``{GPU_I_ID=""}``) follows every family name."""
        first = self.families[0] + selector
        terms = [
            *(f + selector for f in self.families),
            *(f"({o}{selector} or {first} * 0)" for o in self.optional),
        ]
        expr = " + ".join(terms)
        if len(terms) > 1:
            expr = f"({expr})"
        if self.times != 1:
            expr += f" * {_number(self.times)}"
        if self.per != 1:
            expr += f" / {_number(self.per)}"
        return expr


@dataclass(frozen=True, slots=True)
class ServerNames:
    """An inference server's families per role. Counters by sample name (``..._total``), histograms by
    base name (``_bucket`` is appended), gauges by name."""

    tokens: tuple[str, ...] = ()
    prompt_tokens: tuple[str, ...] = ()
    samples: tuple[str, ...] = ()
    latency: Mapping[LatencyMetric, tuple[str, ...]] = field(default_factory=dict)
    gauges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MetricPreset:
    """What one kind of exporter serves: server counters and histograms, GPU columns, or both.

    ``gpu`` maps a :data:`GPU_METRICS` column to its reads, the first that a GPU has wins.
    ``node_local``: the exposition describes the one node it is served on (scraped there); False for
    a fleet-wide exposition whose nodes are told apart by a label (read through Prometheus).
    ``since_run_start``: its counts start with the benchmark run (a client benchmark's own totals), so a
    scrape's first reading counts in full; a server's count since it started, and their first reading is
    the baseline.
    """

    server: ServerNames | None = None
    gpu: Mapping[str, tuple[GpuRead, ...]] = field(default_factory=dict)
    throttle_reasons: tuple[str, ...] = ()
    node_local: bool = True
    since_run_start: bool = False

    @property
    def sample_names(self) -> frozenset[str]:
        """Every sample name this preset reads (histograms by their ``_bucket`` samples)."""
        names = set(self.gpu_families)
        if self.server is not None:
            server = self.server
            names |= {*server.tokens, *server.prompt_tokens, *server.samples}
            names |= {f + "_bucket" for families in server.latency.values() for f in families}
            names |= {f for families in server.gauges.values() for f in families}
        return frozenset(names)

    @property
    def gpu_families(self) -> frozenset[str]:
        """Every family the GPU part reads (what a scrape keeps of a dcgm-exporter page)."""
        names = {n for reads in self.gpu.values() for read in reads for n in read.names}
        return frozenset(names | set(self.throttle_reasons))


def _one(name: str, *, times: float = 1.0, per: float = 1.0) -> tuple[GpuRead, ...]:
    return (GpuRead((name,), times=times, per=per),)


def _counter(name: str, *, per: float = 1.0) -> tuple[GpuRead, ...]:
    """A dcgm-exporter counter: its name, or with the ``_total`` that prometheus_client's parser gives a
    counter family whose name lacks it (a ``# TYPE ... counter`` line just before its samples)."""
    return (GpuRead((name,), per=per), GpuRead((f"{name}_total",), per=per))


def _trtllm(name: str) -> tuple[str, ...]:
    """A TensorRT-LLM family as trtllm-serve serves it, and with each prefix Dynamo has added."""
    return (name, f"trtllm_{name}", f"trtllm:{name}")


PRESETS: Mapping[str, MetricPreset] = {
    "vllm": MetricPreset(
        ServerNames(
            tokens=("vllm:generation_tokens_total",),
            prompt_tokens=("vllm:prompt_tokens_total",),
            samples=("vllm:request_success_total",),
            latency={
                "ttft": ("vllm:time_to_first_token_seconds",),
                # vLLM renamed TPOT to inter-token latency; newer servers export both (same data).
                "tpot": ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"),
                "e2e": ("vllm:e2e_request_latency_seconds",),
            },
            gauges={
                "running": ("vllm:num_requests_running",),
                "waiting": ("vllm:num_requests_waiting",),
                "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
            },
        )
    ),
    "sglang": MetricPreset(
        ServerNames(
            tokens=("sglang:generation_tokens_total",),
            prompt_tokens=("sglang:prompt_tokens_total",),
            samples=("sglang:num_requests_total",),
            latency={
                "ttft": ("sglang:time_to_first_token_seconds",),
                "tpot": ("sglang:time_per_output_token_seconds", "sglang:inter_token_latency_seconds"),
                "e2e": ("sglang:e2e_request_latency_seconds",),
            },
            # SGLang's first metrics (Aug-Oct 2024) named its queue gauges as vLLM does; the collector of
            # late 2024 renamed them (sgl-project/sglang docs/references/production_metrics.md, both forms).
            gauges={
                "running": ("sglang:num_running_reqs", "sglang:num_requests_running"),
                "waiting": ("sglang:num_queue_reqs", "sglang:num_requests_waiting"),
                "kv_cache_usage": ("sglang:token_usage",),
            },
        )
    ),
    # TensorRT-LLM's MetricsCollector (tensorrt_llm/metrics/collector.py, NVIDIA/TensorRT-LLM@89fd9b74ab7a)
    # names its families without a prefix, as trtllm-serve's /prometheus/metrics serves them; Dynamo passes
    # them through with a prefix, "trtllm:" in its first releases and "trtllm_" since
    # (ai-dynamo/dynamo docs/backends/trtllm/prometheus.md). No token counters, no gauges: finished requests
    # and three latency histograms.
    "trtllm": MetricPreset(
        ServerNames(
            samples=_trtllm("request_success_total"),
            latency={
                "ttft": _trtllm("time_to_first_token_seconds"),
                "tpot": _trtllm("time_per_output_token_seconds"),
                "e2e": _trtllm("e2e_request_latency_seconds"),
            },
        )
    ),
    # NVIDIA Dynamo's frontend (its OpenAI-compatible HTTP service), names from
    # lib/runtime/src/metrics/prometheus_names.rs (ai-dynamo/dynamo@04070c75b52f, module frontend_service,
    # prefix "dynamo_frontend_"; DYN_METRICS_PREFIX can change it, and then no preset matches). Output
    # tokens: the real-time counter where the release has it, else the output-length histogram's sum,
    # which grows as requests finish. Samples: that histogram's count, one per finished request (the
    # requests counter counts errors too), else the counter of successful requests that a real frontend's
    # page held in place of both output families (tests/data/peers/dynamo: its count equals the
    # input-length histogram's, 170,450). TPOT: its inter-token latency histogram.
    "dynamo": MetricPreset(
        ServerNames(
            tokens=("dynamo_frontend_output_tokens_total", "dynamo_frontend_output_sequence_tokens_sum"),
            prompt_tokens=("dynamo_frontend_input_sequence_tokens_sum",),
            samples=(
                "dynamo_frontend_output_sequence_tokens_count",
                # prometheus_client's parser names a counter sample that lacks "_total" with it
                "dynamo_frontend_request_success_count",
                "dynamo_frontend_request_success_count_total",
            ),
            latency={
                "ttft": ("dynamo_frontend_time_to_first_token_seconds",),
                "tpot": ("dynamo_frontend_inter_token_latency_seconds",),
                "e2e": ("dynamo_frontend_request_duration_seconds",),
            },
            gauges={
                "running": ("dynamo_frontend_inflight_requests",),
                "waiting": ("dynamo_frontend_queued_requests",),
            },
        )
    ),
    # Hugging Face TGI's router, names from docs/source/reference/metrics.md
    # (huggingface/text-generation-inference@db931fcf42da). No token counters: the per-request histograms
    # of generated tokens and input length, whose sums grow as requests finish; a counter of successful
    # requests (served without "_total" by the Rust exporter; prometheus_client's parser may add it).
    # No time-to-first-token metric: TTFT stays unknown. TPOT: the per-request mean time per token.
    "tgi": MetricPreset(
        ServerNames(
            tokens=("tgi_request_generated_tokens_sum",),
            prompt_tokens=("tgi_request_input_length_sum",),
            samples=("tgi_request_success", "tgi_request_success_total"),
            latency={
                "tpot": ("tgi_request_mean_time_per_token_duration",),
                "e2e": ("tgi_request_duration",),
            },
            gauges={
                "running": ("tgi_batch_current_size",),
                "waiting": ("tgi_queue_size",),
            },
        )
    ),
    # AIPerf's live /metrics (``aiperf profile --api-port N``; AIPerf 0.13.0): the run's totals so far as
    # gauges, republished every --stats-interval. Output tokens are the server's own count (usage) where the
    # server reports it, else the sum of AIPerf's per-request output lengths (its tokenizer's count);
    # latencies are summaries (quantiles, no buckets) and are not read.
    "aiperf": MetricPreset(
        ServerNames(
            tokens=(
                "aiperf_total_usage_completion_tokens_avg_tokens",
                "aiperf_output_sequence_length_tokens_sum",
            ),
            prompt_tokens=(
                "aiperf_total_usage_prompt_tokens_avg_tokens",
                "aiperf_input_sequence_length_tokens_sum",
            ),
            samples=("aiperf_completed_request_count_avg_requests", "aiperf_request_count_avg_requests"),
        ),
        since_run_start=True,
    ),
    # dcgm-exporter, in tokenwatch's units (W, MHz, MiB, %, °C).
    "dcgm": MetricPreset(
        gpu={
            "power_w": _one("DCGM_FI_DEV_POWER_USAGE"),
            "power_limit_w": (
                GpuRead(("DCGM_FI_DEV_POWER_MGMT_LIMIT",)),
                GpuRead(("DCGM_FI_DEV_ENFORCED_POWER_LIMIT",)),
            ),
            "sm_clock_mhz": _one("DCGM_FI_DEV_SM_CLOCK"),
            "mem_clock_mhz": _one("DCGM_FI_DEV_MEM_CLOCK"),
            "hbm_used_mib": _one("DCGM_FI_DEV_FB_USED"),
            # FB_TOTAL where exported; else its parts (RESERVED exists since DCGM 3).
            "hbm_total_mib": (
                GpuRead(("DCGM_FI_DEV_FB_TOTAL",)),
                GpuRead(("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"), ("DCGM_FI_DEV_FB_RESERVED",)),
            ),
            # DRAM_ACTIVE (a 0..1 ratio, profiling metrics on) is HBM busy time; MEM_COPY_UTIL is
            # nvidia-smi's utilization.memory, the fallback where profiling is off.
            "hbm_busy_pct": (
                GpuRead(("DCGM_FI_PROF_DRAM_ACTIVE",), times=100.0),
                GpuRead(("DCGM_FI_DEV_MEM_COPY_UTIL",)),
            ),
            "util_pct": _one("DCGM_FI_DEV_GPU_UTIL"),
            "temp_c": _one("DCGM_FI_DEV_GPU_TEMP"),
            # The cumulative energy counter (mJ, "Total energy consumption since boot"), HBM temperature,
            # the last XID error's value and the NVLink error counters: dcgm-exporter's own names
            # (NVIDIA/dcgm-exporter@00d6d344 etc/default-counters.csv; the NVLink error counters are
            # listed there but commented out, so only a site that enables them has them).
            "energy_j": _counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", per=1000.0),
            "hbm_temp_c": _one("DCGM_FI_DEV_MEMORY_TEMP"),
            "xid": _one("DCGM_FI_DEV_XID_ERRORS"),
            "nvlink_errors": tuple(
                GpuRead(
                    (f"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{suffix}",),
                    tuple(
                        f"DCGM_FI_DEV_NVLINK_{kind}_ERROR_COUNT_TOTAL{suffix}"
                        for kind in ("CRC_DATA", "REPLAY", "RECOVERY")
                    ),
                )
                for suffix in ("", "_total")
            ),
        },
        throttle_reasons=("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"),
    ),
    # tokenwatch's own /metrics (tokenwatch/frontends/metrics/families.py), in base units (Hz, bytes, ratios).
    "tokenwatch": MetricPreset(
        ServerNames(
            tokens=("tokenwatch_node_generated_tokens_total",),
            samples=("tokenwatch_node_samples_total",),
            latency={
                "ttft": ("tokenwatch_ttft_seconds",),
                "tpot": ("tokenwatch_tpot_seconds",),
                "e2e": ("tokenwatch_e2e_seconds",),
            },
        ),
        gpu={
            "power_w": _one("tokenwatch_gpu_power_watts"),
            "power_limit_w": _one("tokenwatch_gpu_power_limit_watts"),
            "sm_clock_mhz": _one("tokenwatch_gpu_sm_clock_hertz", per=1e6),
            "mem_clock_mhz": _one("tokenwatch_gpu_memory_clock_hertz", per=1e6),
            "hbm_used_mib": _one("tokenwatch_gpu_hbm_used_bytes", per=1048576.0),
            "hbm_total_mib": _one("tokenwatch_gpu_hbm_total_bytes", per=1048576.0),
            "hbm_busy_pct": _one("tokenwatch_gpu_hbm_busy_ratio", times=100.0),
            "util_pct": _one("tokenwatch_gpu_utilization_ratio", times=100.0),
            "temp_c": _one("tokenwatch_gpu_temperature_celsius"),
        },
        throttle_reasons=("tokenwatch_gpu_throttle_reasons",),
        node_local=False,
    ),
}

# What each way of reading offers (the config checks a preset name against these).
SCRAPE_PROGRESS_PRESET_NAMES = tuple(n for n, p in PRESETS.items() if p.server is not None and p.node_local)
GPU_PRESET_NAMES = tuple(n for n, p in PRESETS.items() if p.gpu)
# A query's ProgressBatch carries token counts for every node: presets without a token counter
# (trtllm-serve) can only be scraped, and so can a client benchmark's own totals (AIPerf runs beside a
# server, not in a fleet's Prometheus).
QUERY_PROGRESS_PRESET_NAMES = tuple(
    n for n, p in PRESETS.items() if p.server is not None and p.server.tokens and not p.since_run_start
)


def preset(name: str) -> MetricPreset:
    """The preset called ``name``; ValueError (listing the known ones) for any other name."""
    if name not in PRESETS:
        raise ValueError(f"unknown metrics preset {name!r} (known: {', '.join(sorted(PRESETS))})")
    return PRESETS[name]


# DCGM's "no value" sentinels (dcgm_structs.h): DCGM_INT64_BLANK = 0x7ffffffffffffff0 and the codes above
# it (9223372036854775794 is DCGM_INT64_NOT_SUPPORTED: a T4 scrape shows it for every NVLink counter), and
# DCGM_FP64_BLANK = 2**47 (140737488355328.0) and its codes. A float64 holds the int64 ones as 2**63.
_DCGM_INT64_BLANK = float(0x7FFFFFFFFFFFFFF0)
_DCGM_FP64_BLANK = 140737488355328.0


def dcgm_blank(value: float) -> bool:
    """Whether a dcgm-exporter value is one of DCGM's "blank / not supported / not found" sentinels."""
    return value >= _DCGM_INT64_BLANK or _DCGM_FP64_BLANK <= value < _DCGM_FP64_BLANK + 16


def throttle_mask(value: float) -> int:
    """A clocks-event-reasons bitmask served as a float; anything that is not a 64-bit mask reads 0."""
    return int(value) if 0 <= value < 2.0**64 else 0


def throttle_masks(values: np.ndarray) -> np.ndarray:
    """:func:`throttle_mask` of each value (float64 in, uint64 out), a column at a time."""
    values = np.asarray(values, np.float64)
    return np.where((values >= 0) & (values < 2.0**64), values, 0.0).astype(np.uint64)
