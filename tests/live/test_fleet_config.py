"""Watch configs for fleets (``fleet:``, ``nodes.rack_label``) and for racks that feed one (``nodes.rack``,
or the rack a host range names): what loads, what is refused in one line, and what the run's meta says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenwatch.base.yaml_schema import SchemaError
from tokenwatch.inputs.config import WatchConfig, load_watch_config, rack_label
from tokenwatch.inputs.live.targets import rack_name
from tokenwatch.inputs.prometheus.fleet import PrometheusFleetCollector
from tokenwatch.inputs.watch import build_collector, plan_watch

FLEET = """\
run: {name: fleet-llama2, scenario: Offline, duration: 80m}
nodes:
  rack_label: cluster_rack
  gpus_per_node: 4
fleet:
  url: http://prometheus:9090
  preset: tokenwatch
  interval: 5s
  detail_interval: 60s
  lookback: 2h
"""


def load(tmp_path: Path, text: str) -> WatchConfig:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return load_watch_config(path)


def test_a_fleet_config_loads_and_plans_no_ssh(tmp_path: Path) -> None:
    config = load(tmp_path, FLEET)
    fleet = config.fleet
    assert fleet is not None
    assert (fleet.interval_s, fleet.detail_interval_s, fleet.lookback_s) == (5.0, 60.0, 7200.0)
    assert (fleet.node_label, fleet.rate_window_s) == ("node", 60.0)
    assert rack_label(config) == "cluster_rack"
    plan = plan_watch(config)
    assert plan.targets == []
    assert plan.rack_wide
    assert not plan.gpu_here
    collector = build_collector(config)
    assert collector.connector is None
    assert [type(c).__name__ for c in collector.rack_collectors] == ["PrometheusFleetCollector"]


def test_the_engines_latency_offset_reaches_the_fleet_watch(tmp_path: Path) -> None:
    """VictoriaMetrics hides the newest 30 s by default: said in the config, the watch asks each round
    once it is no longer hidden (unsaid, it is what the server's flags say, else 0)."""
    config = load(tmp_path, FLEET.replace("lookback: 2h", "lookback: 2h\n  latency_offset: 30s"))
    assert config.fleet is not None
    assert config.fleet.latency_offset_s == 30.0
    collector = build_collector(config).rack_collectors[0]
    assert isinstance(collector, PrometheusFleetCollector)
    assert collector.settings.latency_offset_s == 30.0
    assert collector.timing.latency_offset_s == 30.0
    assert load(tmp_path, FLEET).fleet.latency_offset_s is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            ("  gpus_per_node: 4\n", "  gpus_per_node: 4\n  hosts: node[01-04]\n"),
            "nodes.hosts: a fleet's nodes",
        ),
        (
            ("fleet:\n", "progress: [{kind: log, path: /x, preset: vllm}]\nfleet:\n"),
            "progress: not used with fleet",
        ),
        (("fleet:\n", "gpu: {source: none}\nfleet:\n"), "gpu: not used with fleet"),
        (("preset: tokenwatch", "preset: trtllm"), "fleet.preset: unknown preset 'trtllm'"),
        (("interval: 5s", "interval: 500ms"), "fleet.interval: must be at least 1s"),
        (
            ("detail_interval: 60s", "detail_interval: 2s"),
            "fleet.detail_interval: must be at least the interval",
        ),
        (("lookback: 2h", "lookback: 2d"), "fleet.lookback: must be between"),
        (("rack_label: cluster_rack", "rack_label: 'rack-name'"), "nodes.rack_label: not a Prometheus label"),
        (
            ("url: http://prometheus:9090", "url: ftp://prometheus:9090"),
            "only http:// and https:// are supported",
        ),
        (("  preset: tokenwatch\n", "  preset: tokenwatch\n  node_label: '1node'\n"), "fleet.node_label"),
        (("lookback: 2h", "lookback: 2h\n  latency_offset: 2h"), "fleet.latency_offset: must be at most 1h"),
        (("lookback: 2h", "lookback: 2h\n  latency_offset: soon"), "fleet.latency_offset"),
    ],
)
def test_mistakes_are_one_line_naming_the_key(tmp_path: Path, change: tuple[str, str], problem: str) -> None:
    text = FLEET.replace(*change)
    assert text != FLEET
    with pytest.raises(SchemaError) as caught:
        load(tmp_path, text)
    message = str(caught.value)
    assert "\n" not in message
    assert problem in message
    assert message.startswith(f"{tmp_path / 'fleet.yaml'}:")


@pytest.mark.parametrize(
    ("nodes", "rack"),
    [
        ("{hosts: 'rack07-node[01-18]', gpus_per_node: 4}", "rack07"),
        ("{hosts: 'gb300-r3_n[01-18]', gpus_per_node: 4}", "gb300-r3"),
        ("{hosts: 'node[01-18]', gpus_per_node: 4}", None),  # nothing names a rack: the run's name
        ("{hosts: 'rack[1-2]-node[01-18]', gpus_per_node: 4}", None),  # two racks: no one name
        ("{hosts: 'a-n[1-2],b-n[1-2]', gpus_per_node: 4}", None),
        ("{hosts: 'rack07-node[01-18]', gpus_per_node: 4, rack: r7}", "r7"),
    ],
)
def test_the_rack_a_watch_names_on_metrics(tmp_path: Path, nodes: str, rack: str | None) -> None:
    config = load(tmp_path, f"run: {{name: r}}\nnodes: {nodes}\n")
    assert rack_name(config) == rack
    started = build_collector(config).run_started()
    assert started.meta.get("rack") == rack


def test_a_rack_label_reaches_the_runs_meta(tmp_path: Path) -> None:
    config = load(tmp_path, "run: {name: r}\nnodes: {hosts: 'n[1-2]', gpus_per_node: 4, rack_label: zone}\n")
    assert build_collector(config).run_started().meta["rack_label"] == "zone"
