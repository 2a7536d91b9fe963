"""The MLPerf Inference rules tokenwatch judges a run by, kept as data with where each figure comes from.

Sources (read with the search tools; figures copied, no code):

* ``LOADGEN``: mlcommons/inference @ b66003e10e2db4b8c36a448b0545ec90fcc6e9e9 (LoadGen 6.0.17), files
  ``loadgen/mlperf.conf``, ``loadgen/test_settings_internal.cc``, ``loadgen/loadgen.cc``,
  ``loadgen/results.cc``.
* ``CHECKER``: the same commit, ``tools/submission/submission_checker/constants.py`` and
  ``checks/performance_check.py``.

LoadGen runs an "Interactive" benchmark as its Server scenario under a model name with ``-interactive``
(mlperf.conf lines 120-164); the submission checker calls it the Interactive scenario of the base model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Scenario = Literal["Offline", "Server", "Interactive", "SingleStream", "MultiStream"]
SCENARIO_NAMES: tuple[Scenario, ...] = ("Offline", "Server", "Interactive", "SingleStream", "MultiStream")

LOADGEN_COMMIT = "b66003e10e2db4b8c36a448b0545ec90fcc6e9e9"

# mlperf.conf lines 52, 56, 85, 169 (``*.<scenario>.min_duration = 600000``); the checker's
# TEST_DURATION_MS = 600000 (constants.py line 1495) refuses less (performance_check.py min_duration_check).
MIN_DURATION_S = 600.0
# test_settings_internal.cc line 151: Offline issues ``kSlack * min_duration * target_qps`` samples at least.
OFFLINE_SLACK = 1.1
# mlperf.conf line 83 (``*.Server.target_latency_percentile = 99``): the TTFT/TPOT percentile judged.
SERVER_PERCENTILE = 0.99
# test_settings.h line 199: ``min_query_count = 100`` when no config sets it (mlperf.conf sets none for
# Server, so a Server run's floor is LoadGen's padding to the dataset, below).
DEFAULT_MIN_QUERY_COUNT = 100


@dataclass(frozen=True, slots=True)
class LatencyLimits:
    """p99 limits of one scenario, in seconds (mlperf.conf gives milliseconds)."""

    ttft_s: float
    tpot_s: float


@dataclass(frozen=True, slots=True)
class Benchmark:
    """One LLM benchmark. ``name`` is the submission checker's; ``conf_model`` mlperf.conf's."""

    name: str
    conf_model: str
    # mlperf.conf ``<model>.*.performance_sample_count_override``: the loaded set; LLM runs use equal issue
    # (``sample_concatenate_permutation = 1``, lines 68-81), which pads sample counts to multiples of it.
    performance_sample_count: int
    # mlperf.conf ``<model>.Offline.min_query_count`` (lines 176-193), the checker's OFFLINE_MIN_SPQ_SINCE_V4.
    offline_min_samples: int | None
    server: LatencyLimits | None
    interactive: LatencyLimits | None
    edge: bool = False  # an edge benchmark: Offline and SingleStream, no Server

    def limits(self, scenario: str) -> LatencyLimits | None:
        return (
            self.interactive if scenario == "Interactive" else self.server if scenario == "Server" else None
        )

    @property
    def scenarios(self) -> tuple[Scenario, ...]:
        found: list[Scenario] = ["Offline"]
        if self.server:
            found.append("Server")
        if self.interactive:
            found.append("Interactive")
        if self.edge:
            found.append("SingleStream")
        return tuple(found)


def _ms(ttft_ms: float, tpot_ms: float) -> LatencyLimits:
    return LatencyLimits(ttft_ms / 1000.0, tpot_ms / 1000.0)


# Server limits: mlperf.conf lines 116-164 (``<model>.Server.ttft_latency`` / ``tpot_latency``, ms), equal to
# the checker's LLM_LATENCY_LIMITS (constants.py lines 1736-1800). Interactive limits: mlperf.conf's
# ``<model>-interactive`` entries, again equal to the checker's. Every figure in the issue checks out. At the
# v5.1 tag (75f297d44c5e) mlperf.conf had the same Server limits but Interactive ones only for llama2-70b; the
# llama3.1-405b/8b and deepseek-r1 Interactive lines came later (the checker had them). mixtral-8x7b has no
# Interactive; gpt-oss-120b (not in the list) is kept since mlperf.conf and the checker define it.
_BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("llama2-70b-99", "llama2-70b", 24576, 24576, _ms(2000, 200), _ms(450, 40)),
    Benchmark("llama2-70b-99.9", "llama2-70b", 24576, 24576, _ms(2000, 200), _ms(450, 40)),
    Benchmark("llama3.1-405b", "llama3_1-405b", 8313, 8313, _ms(6000, 175), _ms(4500, 80)),
    Benchmark("llama3.1-8b", "llama3_1-8b", 13368, 13368, _ms(2000, 100), _ms(500, 30)),
    Benchmark("llama3.1-8b-edge", "llama3_1-8b-edge", 5000, 5000, None, None, edge=True),
    Benchmark("deepseek-r1", "deepseek-r1", 4388, 4388, _ms(2000, 80), _ms(1500, 15)),
    Benchmark("mixtral-8x7b", "mixtral-8x7b", 15000, 15000, _ms(2000, 200), None),
    # gpt-oss-120b: no mlperf.conf Offline min_query_count; the checker's OFFLINE_MIN_SPQ_SINCE_V4 says 6396.
    Benchmark("gpt-oss-120b", "gpt-oss-120b", 6396, 6396, _ms(3000, 80), _ms(2000, 15)),
)
BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in _BENCHMARKS}


@dataclass(frozen=True, slots=True)
class Seeds:
    qsl_rng_seed: int
    sample_index_rng_seed: int
    schedule_rng_seed: int


# The checker's MODEL_CONFIG[round]["seeds"] (constants.py lines 974, 1303, 619, 240). The v6.1 seeds are
# mlperf.conf's at this commit (lines 41-43); the v5.1 ones are mlperf.conf's at the v5.1 tag.
SEEDS_BY_ROUND: dict[str, Seeds] = {
    "v5.0": Seeds(6023615788873153749, 15036839855038426416, 9933818062894767841),
    "v5.1": Seeds(1780908523862526354, 14771362308971278857, 18209322760996052031),
    "v6.0": Seeds(2465351861681999779, 14276810075590677512, 3936089224930324775),
    "v6.1": Seeds(2085463073848966840, 2747215439041700203, 16159082839903944936),
}


def seeds_round(seeds: Seeds) -> str | None:
    """The submission round whose official seeds these are, or None (a run that cannot be submitted)."""
    for name, official in SEEDS_BY_ROUND.items():
        if official == seeds:
            return name
    return None


@dataclass(frozen=True, slots=True)
class BenchmarkRef:
    """A benchmark as named somewhere (detail log, folder, flag), resolved to the rules."""

    benchmark: Benchmark
    interactive: bool  # named as its -interactive model (LoadGen's Server scenario with Interactive limits)


_ALIASES = {
    # mlperf.conf model names without the accuracy target: the rules are the 99 and 99.9 variants' alike.
    "llama2-70b": "llama2-70b-99",
    "llama3.1-405b-99": "llama3.1-405b",
    "llama3.1-8b-99": "llama3.1-8b",
}
_INTERACTIVE = re.compile(r"-interactive(?=$|-)")


def normalize_benchmark(text: str) -> BenchmarkRef | None:
    """``llama3_1-405b``, ``Llama3.1-405B``, ``llama2-70b-interactive-99.9``... -> the benchmark, or None.

    None means "not an MLPerf LLM benchmark tokenwatch knows" (e.g. an open-division ``llama3_1-70b-fp8``);
    the caller says so rather than guessing rules.
    """
    name = text.strip().lower().replace(" ", "")
    name = re.sub(r"(?<=\d)_(?=\d)", ".", name)  # llama3_1 -> llama3.1 (mlperf.conf / folder spelling)
    interactive = bool(_INTERACTIVE.search(name))
    name = _INTERACTIVE.sub("", name)
    name = _ALIASES.get(name, name)
    benchmark = BENCHMARKS.get(name)
    if benchmark is None or (interactive and benchmark.interactive is None):
        return None
    return BenchmarkRef(benchmark, interactive)


def normalize_scenario(text: str) -> Scenario | None:
    key = text.strip().lower().replace(" ", "").replace("_", "").replace("-", "")
    for name in SCENARIO_NAMES:
        if name.lower() == key:
            return name
    return None


def latency_limits(ref: BenchmarkRef, scenario: str) -> LatencyLimits | None:
    """The TTFT/TPOT limits a Server-type run of ``ref`` is judged by (Interactive when either says so)."""
    if scenario not in ("Server", "Interactive"):
        return None
    return ref.benchmark.limits("Interactive" if ref.interactive or scenario == "Interactive" else "Server")


def offline_samples_issued(
    min_query_count: int,
    min_duration_s: float,
    target_qps: float,
    loaded_samples: int | None = None,
) -> int:
    """Samples LoadGen puts in its one Offline query.

    test_settings_internal.cc 151-157: ``max(min_query_count, uint64(1.1 * min_duration * target_qps))``;
    loadgen.cc lines 318-326: with equal issue (every LLM benchmark), padded up to a multiple of the loaded
    sample set (``loaded_samples``; None = no padding). A system faster than its declared QPS runs out of
    samples before the minimum duration and is INVALID.
    """
    target = int(OFFLINE_SLACK * min_duration_s * target_qps)
    samples = max(min_query_count, target)
    if loaded_samples and samples % loaded_samples:
        samples += loaded_samples - samples % loaded_samples
    return samples


def server_queries_expected(
    target_qps: float, min_duration_s: float, min_query_count: int, loaded_samples: int | None = None
) -> int:
    """About how many queries a Server run generates (the exact count is in ``generated_query_count``).

    loadgen.cc lines 336-394: queries are scheduled (Poisson at ``target_qps``) until the schedule reaches the
    minimum duration and ``min_query_count``; with equal issue the count is a multiple of the loaded set.
    """
    queries = max(min_query_count, round(target_qps * min_duration_s))
    if loaded_samples and queries % loaded_samples:
        queries += loaded_samples - queries % loaded_samples
    return queries
