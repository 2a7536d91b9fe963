"""The watch config's verdict keys: ``run.benchmark`` and the ``loadgen-detail`` progress source."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenwatch.base.yaml_schema import SchemaError
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.live.node_sources import FileTailSource
from tokenwatch.inputs.live.plan import node_sources
from tokenwatch.inputs.live.targets import resolve_targets
from tokenwatch.inputs.watch import core_config
from tokenwatch.sources.loadgen_detail import DetailLogParser

CONFIG = """\
run:
  name: rack-a
  scenario: Server
  benchmark: {benchmark}
gpu:
  source: none
progress:
  - kind: loadgen-trace
    path: /results/{{name}}/mlperf_log_trace.json
  - kind: loadgen-detail
    path: /results/{{name}}/mlperf_log_detail.txt
"""


def write(tmp_path: Path, benchmark: str) -> Path:
    path = tmp_path / "rack.yaml"
    path.write_text(CONFIG.format(benchmark=benchmark))
    return path


def test_the_benchmark_reaches_the_core_and_the_detail_log_is_tailed(tmp_path: Path) -> None:
    config = load_watch_config(write(tmp_path, "llama2-70b-interactive"))
    assert config.run.benchmark == "llama2-70b-interactive"
    assert core_config(config).benchmark == "llama2-70b-interactive"
    (target,) = resolve_targets(config, None)
    sources = node_sources(config, target, gpu=False)
    detail = next(s for s in sources if s.name.startswith("detail "))
    assert isinstance(detail, FileTailSource)
    assert detail.path == f"/results/{target.name}/mlperf_log_detail.txt"
    parser = detail.parser_factory()
    assert isinstance(parser, DetailLogParser)
    assert parser.node == target.name


def test_an_unknown_benchmark_is_one_line_naming_the_file_line_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "llama9-1t")
    with pytest.raises(SchemaError) as caught:
        load_watch_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:4: run.benchmark: unknown MLPerf benchmark 'llama9-1t'")
    assert "\n" not in message
