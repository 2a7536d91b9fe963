"""Simulator profiles: YAML files of a rack's published figures, loaded into frozen dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tokenwatch.base.yaml_schema import SchemaError, duration_field, load_dataclass
from tokenwatch.inputs.sim import DEFAULT_PROFILE
from tokenwatch.mlperf.rules import BENCHMARKS, normalize_benchmark

__all__ = ["DEFAULT_PROFILE", "Profile", "builtin_profiles", "load_profile"]


@dataclass(frozen=True, slots=True)
class NodeThroughput:
    """Per-node measured tokens/s to draw from: ``mean`` with either ``min``/``max`` or ``spread_pct``."""

    mean: float
    min: float | None = None
    max: float | None = None
    spread_pct: float | None = None


@dataclass(frozen=True, slots=True)
class GpuProfile:
    power_limit_w: float
    idle_power_w: float
    load_power_fraction: float
    hbm_total_mib: float
    hbm_used_fraction: float
    hbm_bandwidth_tb_s: float
    sm_clock_max_mhz: float
    mem_clock_mhz: float
    temp_idle_c: float
    temp_load_c: float


@dataclass(frozen=True, slots=True)
class ServerProfile:
    samples_per_s_per_node: float
    output_tokens_per_sample: float
    ttft_median_s: float
    tpot_median_s: float


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    nodes: int
    gpus_per_node: int
    total_samples: int
    node_tokens_per_s: NodeThroughput
    gpu: GpuProfile
    server: ServerProfile
    duration_s: float = duration_field(key="duration")
    warmup_s: float = duration_field(60.0, key="warmup")
    tail_s: float = duration_field(8.0, key="tail")
    description: str = ""
    published: dict[str, Any] = field(default_factory=dict)
    # The MLPerf benchmark the rack runs (its rules judge the simulated run: sample minimum, latency
    # limits); None: no simulated LoadGen settings, the verdict says what it lacks.
    benchmark: str | None = None

    def node_names(self) -> tuple[str, ...]:
        width = max(2, len(str(self.nodes)))
        return tuple(f"node{i:0{width}d}" for i in range(1, self.nodes + 1))

    @property
    def tokens_per_sample(self) -> float:
        """Offline output tokens per sample implied by the profile's rate, duration and sample count."""
        return self.node_tokens_per_s.mean * self.nodes * self.duration_s / self.total_samples


def builtin_profiles() -> dict[str, Path]:
    folder = resources.files("tokenwatch.inputs.sim") / "profiles"
    return {
        Path(str(entry)).stem: Path(str(entry)) for entry in folder.iterdir() if str(entry).endswith(".yaml")
    }


def load_profile(name_or_path: str) -> Profile:
    """A built-in profile by name, or a user's YAML file by path. Raises SchemaError."""
    builtin = builtin_profiles()
    path = builtin.get(name_or_path)
    if path is None:
        path = Path(name_or_path)
        if not path.exists():
            known = ", ".join(sorted(builtin))
            raise SchemaError(f"unknown profile {name_or_path!r}: not a built-in ({known}) nor a file")
    profile = load_dataclass(Profile, path)
    _check(profile, str(path))
    return profile


def _check(p: Profile, where: str) -> None:
    problems = []
    if p.nodes < 1 or p.gpus_per_node < 1:
        problems.append("nodes and gpus_per_node must be at least 1")
    if p.total_samples < p.nodes:
        problems.append("total_samples must be at least one per node")
    if p.duration_s <= 0:
        problems.append("duration must be positive")
    tps = p.node_tokens_per_s
    if tps.mean <= 0:
        problems.append("node_tokens_per_s.mean must be positive")
    if (tps.min is None) != (tps.max is None):
        problems.append("node_tokens_per_s needs both min and max, or neither")
    if tps.min is not None and tps.max is not None and not tps.min <= tps.mean <= tps.max:
        problems.append("node_tokens_per_s must satisfy min <= mean <= max")
    if not 0 < p.gpu.load_power_fraction <= 1.2 or not 0 < p.gpu.hbm_used_fraction <= 1:
        problems.append("gpu fractions must be in (0, 1]")
    if p.warmup_s + p.tail_s >= p.duration_s:
        problems.append("warmup + tail must be shorter than the duration")
    if p.benchmark is not None and normalize_benchmark(p.benchmark) is None:
        known = ", ".join(BENCHMARKS)
        problems.append(f"benchmark: unknown MLPerf benchmark {p.benchmark!r} (known: {known})")
    if problems:
        raise SchemaError(f"{where}: {problems[0]}")
