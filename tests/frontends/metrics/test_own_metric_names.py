"""tokenwatch's own metric names are written in three places: the families /metrics serves
(frontends/metrics/families.py), the catalogue that reads them back (the ``tokenwatch`` preset of
sources/metric_catalogue.py) and the fleet's PromQL over them (sources/fleet_queries.py). Each name the
catalogue and the fleet ask for must be one the exporter serves for a real run, so a rename in one
place cannot pass unnoticed."""

from __future__ import annotations

import dataclasses
import re

from prometheus_client.parser import text_string_to_metric_families

from tokenwatch.core import RackCore
from tokenwatch.frontends.metrics.exposition import render
from tokenwatch.frontends.metrics.families import take_view
from tokenwatch.sources.fleet_queries import FLEET_PRESETS, rack_queries
from tokenwatch.sources.metric_catalogue import PRESETS

OWN_NAME = re.compile(r"\btokenwatch_\w+")


def _served(core: RackCore) -> set[str]:
    """Every series name a scrape of this core returns (samples: ``_total``, ``_bucket``..., and the
    families they belong to), as prometheus_client's parser reads the body."""
    body = render(take_view(core)).decode()
    names = set()
    for family in text_string_to_metric_families(body):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def _fleet_names() -> set[str]:
    preset = FLEET_PRESETS["tokenwatch"]
    texts = [v for v in dataclasses.asdict(preset).values() if isinstance(v, str)]
    texts += rack_queries(preset).values()
    return {name for text in texts for name in OWN_NAME.findall(text)}


def _catalogue_names() -> set[str]:
    entry = PRESETS["tokenwatch"]
    assert entry.server is not None
    server = entry.server
    names = {*server.tokens, *server.prompt_tokens, *server.samples, *entry.throttle_reasons}
    names.update(n for families in server.latency.values() for n in families)
    names.update(n for families in server.gauges.values() for n in families)
    names.update(
        n for reads in entry.gpu.values() for read in reads for n in (*read.families, *read.optional)
    )
    return names


def test_the_fleet_asks_only_for_names_the_exporter_serves(server_core: RackCore) -> None:
    asked = _fleet_names()
    assert len(asked) >= 10  # the board's figures: up, rates, status, power, GPUs, throttling, projection
    assert asked - _served(server_core) == set()


def test_the_catalogue_reads_only_names_the_exporter_serves(server_core: RackCore) -> None:
    read = _catalogue_names()
    assert {"tokenwatch_node_generated_tokens_total", "tokenwatch_ttft_seconds"} <= read
    assert read - _served(server_core) == set()


def test_a_renamed_family_would_be_caught(server_core: RackCore) -> None:
    """The check above can fail: a name the exporter does not serve is reported."""
    served = _served(server_core)
    assert "tokenwatch_node_generated_tokens_total" in served
    assert "tokenwatch_node_generated_token_total" not in served
