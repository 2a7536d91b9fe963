"""What the fleet's server says about its freshness, read from the text its API gives
(``/api/v1/status/config``'s YAML), and the silence after which a node read through it is stale."""

from __future__ import annotations

import pytest

from tokenwatch.inputs.prometheus.server_timing import ServerTiming, scrape_intervals

CONFIG = """
global:
  scrape_interval: 15s
scrape_configs:
  - job_name: racks
    scrape_interval: 1s
  - job_name: node-exporter
"""


def test_each_job_has_its_own_scrape_interval_or_the_global_one() -> None:
    assert scrape_intervals(CONFIG) == {"racks": 1.0, "node-exporter": 15.0}
    assert scrape_intervals("scrape_configs: [{job_name: x}]") == {"x": 60.0}  # Prometheus' default


@pytest.mark.parametrize(
    "text", ["", "[1, 2]", "global: {scrape_interval: soon}\nscrape_configs: 7", ": : :"]
)
def test_a_text_that_is_no_configuration_says_nothing(text: str) -> None:
    assert scrape_intervals(text) == {}


def test_a_node_read_through_the_server_is_stale_after_its_reading_cadence_not_5_s() -> None:
    timing = ServerTiming(scrape_interval_s=5.0, lookback_delta_s=300.0, latency_offset_s=30.0)
    # One alerting pass (30 s), a round one interval late (5 s), two scrapes (10 s), what the engine hides.
    assert timing.node_stale_after_s(interval_s=5.0, detail_interval_s=30.0) == 75.0
    assert ServerTiming(None, None, 0.0).node_stale_after_s(2.0, 10.0) == 16.0
    assert timing.meta() == {"latency_offset_s": 30.0, "scrape_interval_s": 5.0, "lookback_delta_s": 300.0}
