"""``tokenwatch rules --alerting``: rules promtool accepts, over series the exporter really serves, that
fire in a real Prometheus scraping ``tokenwatch sim --prometheus-port`` with a simulated fault."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.conftest import (
    PATIENCE_S,
    prometheus_query,
    run_tokenwatch,
    start_listening,
    start_prometheus,
    start_tokenwatch,
    stop_process,
    wait_until,
)
from tests.live.fleet_support import PROMETHEUS

PROMTOOL = shutil.which("promtool")


def rules_file(tmp_path: Path, *args: str) -> Path:
    result = run_tokenwatch("rules", "--alerting", *args)
    assert result.returncode == 0, result.stderr
    path = tmp_path / "tokenwatch-rules.yml"
    path.write_text(result.stdout)
    return path


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)")
def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    path = rules_file(tmp_path, "--for", "2m", "--straggler-pct", "7.5")
    assert PROMTOOL is not None
    checked = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 4 rules found" in checked.stdout
    rules = yaml.safe_load(path.read_text())["groups"][0]["rules"]
    names = [r["alert"] for r in rules]
    assert names == [
        "TokenwatchProjectedInvalid",
        "TokenwatchNodeDown",
        "TokenwatchStraggler",
        "TokenwatchRackStale",
    ]
    assert {r["for"] for r in rules[:3]} == {"120s"}
    assert rules[2]["expr"].endswith("< -7.5")


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)")
def test_each_rule_fires_on_series_that_mean_it_and_not_otherwise(tmp_path: Path) -> None:
    """promtool's own rule tests: synthetic series in the exporter's names, one case per rule."""
    rules = rules_file(tmp_path, "--for", "1m", "--stale-after", "1m")
    series = [
        ('tokenwatch_rack_projected_valid{rack="r1"}', "1x5 0x10"),
        ('tokenwatch_rack_projected_valid{rack="r2"}', "1x15"),
        ('tokenwatch_node_up{rack="r1",node="n1"}', "1x15"),
        ('tokenwatch_node_up{rack="r1",node="n2"}', "1x5 0x10"),
        ('tokenwatch_node_delta_vs_median_percent{rack="r1",node="n1"}', "-2x15"),
        ('tokenwatch_node_delta_vs_median_percent{rack="r1",node="n3"}', "-12x15"),
        ('tokenwatch_run_ended{rack="r1"}', "0x15"),
        ('tokenwatch_run_ended{rack="r2"}', "0x5 stale"),  # its exporter stops answering at 5m
        ('tokenwatch_run_ended{rack="r3"}', "0x5 1 stale"),  # ended, then gone: not stale
    ]
    crit = {"severity": "critical", "source": "prometheus"}
    gone = "r2 has stopped reporting (its tokenwatch exporter does not answer)"
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "alert_rule_test": [
                    {
                        "eval_time": "10m",
                        "alertname": "TokenwatchProjectedInvalid",
                        "exp_alerts": [
                            {
                                "exp_labels": {"rack": "r1", "rule": "verdict_invalid", **crit},
                                "exp_annotations": {"summary": "r1: the MLPerf verdict is projected INVALID"},
                            }
                        ],
                    },
                    {
                        "eval_time": "10m",
                        "alertname": "TokenwatchNodeDown",
                        "exp_alerts": [
                            {
                                "exp_labels": {"rack": "r1", "node": "n2", "rule": "down", **crit},
                                "exp_annotations": {"summary": "n2 of r1 is down or stale"},
                            }
                        ],
                    },
                    {
                        "eval_time": "10m",
                        "alertname": "TokenwatchStraggler",
                        "exp_alerts": [
                            {
                                "exp_annotations": {
                                    "summary": "n3 of r1: tokens/s -12.0 % against the median node's"
                                },
                                "exp_labels": {
                                    "rack": "r1",
                                    "node": "n3",
                                    "rule": "straggler",
                                    "severity": "warning",
                                    "source": "prometheus",
                                },
                            }
                        ],
                    },
                    {
                        "eval_time": "10m",
                        "alertname": "TokenwatchRackStale",
                        "exp_alerts": [
                            {
                                "exp_labels": {"rack": "r2", "rule": "rack_stale", **crit},
                                "exp_annotations": {"summary": gone},
                            }
                        ],
                    },
                ],
            }
        ],
    }
    tests = tmp_path / "tests.yml"
    tests.write_text(yaml.safe_dump(test))
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "test", "rules", str(tests)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (apt-get install prometheus)")
def test_a_node_down_in_the_simulator_fires_in_a_real_prometheus_and_a_stopped_rack_goes_stale(
    tmp_path: Path,
) -> None:
    rules = rules_file(tmp_path, "--for", "0s", "--stale-after", "1s")
    sim, exporter_port = start_listening(
        lambda port: start_tokenwatch(
            "sim",
            "--speed",
            "10",
            "--headless",
            "--duration",
            "30m",
            "--faults",
            "node07:down@20s",
            "--prometheus-port",
            str(port),
        ),
        "the simulator's exporter",
    )
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n"
        f"rule_files: ['{rules}']\n"
        "scrape_configs:\n  - job_name: rack\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter_port}']\n"
    )
    assert PROMETHEUS is not None
    try:
        prom, url = start_prometheus(PROMETHEUS, tmp_path / "prometheus.yml", tmp_path / "data")
    except BaseException:
        stop_process(sim)
        raise
    try:
        wait_until(
            lambda: bool(_firing(url, "TokenwatchNodeDown")), "TokenwatchNodeDown firing in Prometheus"
        )
        (down,) = _firing(url, "TokenwatchNodeDown")
        assert down["labels"]["node"] == "node07"
        assert down["labels"]["rack"] == "gb300-nvl72 offline (simulated)"
        assert down["annotations"]["summary"] == "node07 of gb300-nvl72 offline (simulated) is down or stale"
        assert not _firing(url, "TokenwatchRackStale")
        # Every series a rule reads is one the exporter serves (a renamed family would silence a rule).
        named = set(re.findall(r"tokenwatch_\w+", rules.read_text()))
        assert named >= {"tokenwatch_node_up", "tokenwatch_rack_projected_valid", "tokenwatch_run_ended"}
        for name in sorted(named):
            wait_until(_has_series(url, name), f"{name} scraped")
        sim.kill()  # the rack's tokenwatch is gone mid-run
        sim.communicate(timeout=PATIENCE_S)
        wait_until(lambda: bool(_firing(url, "TokenwatchRackStale")), "TokenwatchRackStale firing")
        (stale,) = _firing(url, "TokenwatchRackStale")
        assert stale["labels"]["rack"] == "gb300-nvl72 offline (simulated)"
    finally:
        for proc in (sim, prom):
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=PATIENCE_S)


def _has_series(url: str, name: str) -> Callable[[], bool]:
    return lambda: bool(prometheus_query(url, f"count({name})"))


def _firing(url: str, name: str) -> list[dict[str, Any]]:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/api/v1/alerts", timeout=10) as answer:
            alerts = orjson.loads(answer.read())["data"]["alerts"]
    except OSError:
        return []
    return [a for a in alerts if a["labels"].get("alertname") == name and a["state"] == "firing"]
