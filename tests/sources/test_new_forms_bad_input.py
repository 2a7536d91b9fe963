"""Bad input in this round's forms: SGLang's time-only and timestamp-field lines, dcgm-exporter MIG series,
systems JSON that states its accelerator count, samples-only summaries and rules files. Garbage lines,
truncation, NaN / Inf and missing fields give a warning naming the source and line, or an unknown figure,
never a traceback or a guessed zero."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenwatch.base.events import GPU_METRICS, GpuBatch, LogLine, Notice, Progress
from tokenwatch.base.yaml_schema import SchemaError
from tokenwatch.runs.submission import read_system
from tokenwatch.sources.errors import SourceFormatError
from tokenwatch.sources.harness_log import LogProgressParser
from tokenwatch.sources.loadgen_summary import parse_summary_text, read_summary
from tokenwatch.sources.log_rules import load_rules_file
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

from .conftest import DATA

TIME_ONLY = (DATA / "logs" / "sglang-2024-time-only.excerpt.log").read_bytes()
TIMESTAMP_FIELD = (DATA / "logs" / "sglang-2025-timestamp-field.excerpt.log").read_bytes()
MIG = (DATA / "prometheus" / "dcgm-exporter-a100-mig.excerpt.prom").read_text()
QWEN3_VL = next(
    (DATA / "loadgen" / "submissions" / "nvidia-gb300x4-qwen3-vl").rglob("mlperf_log_summary.txt")
)


@given(cut=st.integers(0, len(TIME_ONLY) + len(TIMESTAMP_FIELD)), junk=st.binary(max_size=200))
def test_sglang_lines_cut_anywhere_with_junk_never_raise(cut: int, junk: bytes) -> None:
    stream = (TIME_ONLY + TIMESTAMP_FIELD)[:cut] + junk + b"\n" + TIME_ONLY
    parser = LogProgressParser.preset("sglang", "n")
    events = parser.feed(stream, 1.0) + parser.close(2.0)
    assert all(isinstance(e, LogLine | Progress | Notice) for e in events)
    tokens = [e.tokens_done for e in events if isinstance(e, Progress) and e.tokens_done is not None]
    assert tokens == sorted(tokens)


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("gen throughput (token/s): 405.38", "gen throughput (token/s): nan", "line 2: a form no pattern"),
        (
            "gen throughput (token/s): 405.38",
            "gen throughput (token/s): 9" + "9" * 20,
            "line 2: rule 'decode'",
        ),
        ("gen throughput (token/s): 405.38, #queue-req: 0", "gen thr", "line 2: a form no pattern"),
    ],
)
def test_a_bad_sglang_line_is_a_warning_naming_it(old: str, new: str, said: str) -> None:
    text = TIME_ONLY.decode()
    assert old in text
    parser = LogProgressParser.preset("sglang", "n")
    events = parser.feed(text.replace(old, new, 1).encode(), 1.0)
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any(said in m for m in notices), notices
    assert [e for e in events if isinstance(e, Progress)][-1].tokens_done is not None


def test_an_impossible_time_of_day_falls_back_to_feed_time() -> None:
    line = TIME_ONLY.decode().splitlines()[0].replace("[04:40:55 ", "[25:61:99 ")
    parser = LogProgressParser.preset("sglang", "n")
    events = parser.feed((line + "\n").encode(), 1.0)
    assert not [e for e in events if isinstance(e, Notice)]
    assert parser.streams[("TP0", "")].clock.from_stamps is False  # its clock runs on feed time


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "9223372036854775794"])
def test_mig_series_with_bad_values_are_left_out(value: str) -> None:
    gpu_busy = next(
        ln for ln in MIG.splitlines() if ln.startswith("DCGM_FI_PROF_DRAM_ACTIVE") and "GPU_I_ID" not in ln
    )
    text = MIG.replace(gpu_busy, gpu_busy.rsplit(" ", 1)[0] + " " + value)
    events = MetricsScrapeParser("dcgm", node="n", node_index=0).parse(text, 1.0)
    (batch,) = [e for e in events if isinstance(e, GpuBatch)]
    busy = float(batch.values[0][GPU_METRICS.index("hbm_busy_pct")])
    assert math.isnan(busy)  # unknown: neither the bad value nor the instance's 80 %
    assert any(isinstance(e, Notice) and "only per MIG instance" in e.message for e in events)


@pytest.mark.parametrize(
    ("name", "gpus"),
    [
        ("AMD Instinct MI355X 288GB HBM3e (x0)", 88),  # a count of none is not stated: the layout
        ("AMD Instinct MI355X (x)", 88),
        ("AMD Instinct MI355X (x99999999)", 88),
        (12345, 88),
        (None, 88),
        ("MI300X (x8) and MI325X (x8) and MI355X (x71)", 87),
    ],
)
def test_a_stated_count_that_is_not_one_is_ignored(tmp_path: Path, name: object, gpus: int) -> None:
    path = tmp_path / "system.json"
    path.write_text(
        json.dumps({"accelerator_model_name": name, "number_of_nodes": "11", "accelerators_per_node": 8})
    )
    system, problem = read_system(path)
    assert problem is None
    assert system is not None
    assert system.gpus == gpus


def test_a_samples_only_summary_with_a_bad_figure_is_one_line(tmp_path: Path) -> None:
    text = QWEN3_VL.read_text()
    summary = parse_summary_text(text.replace("Samples per second: 61.2443", "Samples per second: nan"), "s")
    assert summary.skipped == ["s:7: skipped: 'nan' is not a non-negative number"]
    bad = tmp_path / "mlperf_log_summary.txt"
    bad.write_text(text.replace("Samples per second: 61.2443", "Samples per second: nan"))
    with pytest.raises(SourceFormatError, match="without a samples or tokens per second figure"):
        read_summary(bad)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("patterns: [unclosed\n", r"r.yaml:\d+: invalid YAML"),
        ("patterns:\n  done: 'done (?P<samples_done>\\d+)'\n\x00\x01", r"r.yaml:\d+: invalid YAML"),
        ("", r"r.yaml: \(top level\): expected a mapping"),
        ("patterns: {}\n", r"r.yaml:1: patterns: no patterns given"),
        ("patterns:\n  done: 42\n", r"r.yaml:2: patterns.done: .*no named group"),
    ],
)
def test_a_broken_rules_file_is_one_line(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(SchemaError, match=said) as info:
        load_rules_file(path)
    assert "\n" not in str(info.value)
