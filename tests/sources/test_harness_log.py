"""Harness log lines: the vLLM preset on real vLLM server logs, YAML rules on a real MLPerf harness log."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

from tokenwatch.events import LogLine, Notice, Progress
from tokenwatch.sources.errors import SourceFormatError
from tokenwatch.sources.harness_log import LogPatternError, LogProgressParser, preset_names
from tokenwatch.yaml_schema import SchemaError

from .conftest import DATA, feed_in_chunks

LOGS = DATA / "logs"
STATS = re.compile(
    r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) .*Avg prompt throughput: ([0-9.]+) tokens/s, "
    r"Avg generation throughput: ([0-9.]+) tokens/s"
)


def _expected_tokens(text: str, interval_s: float = 10.0) -> tuple[int, int, int]:
    """Tokens implied by vLLM's stats lines: each rate times the time it covers, read independently
    (datetime parsing, not our timestamp code): (lines, generation tokens, prompt tokens)."""
    generated = prompt = 0.0
    previous: datetime | None = None
    lines = 0
    for stamp_text, prompt_rate, gen_rate in STATS.findall(text):
        stamp = datetime.strptime("2000-" + stamp_text, "%Y-%m-%d %H:%M:%S")
        covered = interval_s if previous is None else min((stamp - previous).total_seconds(), interval_s)
        previous = stamp
        generated += float(gen_rate) * covered
        prompt += float(prompt_rate) * covered
        lines += 1
    return lines, round(generated), round(prompt)


@pytest.mark.parametrize(("name", "stats_lines"), [("vllm.log", 65), ("gemma4-int4.log", 29)])
def test_vllm_preset_on_real_server_logs(name: str, stats_lines: int) -> None:
    raw = (LOGS / name).read_bytes()
    parser = LogProgressParser.preset("vllm", "node03")
    events = feed_in_chunks(lambda chunk: parser.feed(chunk, 1.0), raw, 4093) + parser.close(2.0)
    lines, generated, prompt = _expected_tokens(raw.decode("utf-8"))
    assert lines == stats_lines == parser.state.matched_lines
    progress = [e for e in events if isinstance(e, Progress)]
    assert (progress[-1].tokens_done, progress[-1].prompt_tokens_done) == (generated, prompt)
    assert generated > 1000
    assert [p.tokens_done for p in progress] == sorted(p.tokens_done for p in progress)
    assert not [e for e in events if isinstance(e, Notice)]
    log_lines = [e.text for e in events if isinstance(e, LogLine)]
    assert len(log_lines) == len([line for line in raw.split(b"\n") if line.strip()])
    assert not any("\r" in text or "\x1b" in text for text in log_lines)
    assert any("█" in text for text in log_lines)  # the UTF-8 banner survives


def test_rate_integrates_over_feed_time_without_timestamps() -> None:
    parser = LogProgressParser.from_patterns({"tps": r"(?P<tokens_per_s>[0-9.]+) tok/s"}, "n")
    parser.feed(b"warming up\n", 0.0)
    first = parser.feed(b"1000 tok/s\n", 5.0)[-1]
    second = parser.feed(b"1500 tok/s\n", 7.0)[-1]
    assert isinstance(first, Progress)
    assert first.tokens_done == 0
    assert isinstance(second, Progress)
    assert second.tokens_done == 1500 * 2


def test_yaml_rules_on_a_real_mlperf_harness_log(tmp_path: Path) -> None:
    preset = tmp_path / "amd-harness.yaml"
    preset.write_text(
        "description: AMD MLPerf vLLM harness\n"
        "patterns:\n"
        "  issued: 'Issue queries +\\| +number of queries = (?P<total_samples>\\d+)'\n"
        "  done: 'Processed output \\| start, end = \\d+, (?P<samples_done>\\d+)'\n"
    )
    parser = LogProgressParser.from_yaml(preset, "gpu0")
    raw = (LOGS / "asustek-gpu0-output.log").read_bytes()
    events = feed_in_chunks(lambda chunk: parser.feed(chunk, 190.0), raw, 1000)
    assert parser.total_samples == 3000
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress[-1].samples_done == 3000
    assert progress[-1].tokens_done is None  # the rules count samples only
    texts = [e.text for e in events if isinstance(e, LogLine)]
    # tqdm's carriage-return lines become what a terminal would show.
    assert "Loading safetensors checkpoint shards: 100% Completed | 15/15 [00:25<00:00,  1.67s/it]" in texts


def test_yaml_errors_name_file_line_and_key(tmp_path: Path) -> None:
    preset = tmp_path / "bad.yaml"
    preset.write_text("patterns:\n  x: 'a(?P<samples_done>\\d+)'\nintervall: 5s\n")
    with pytest.raises(SchemaError, match=r"bad.yaml:3: intervall: unknown key"):
        LogProgressParser.from_yaml(preset, "n")
    preset.write_text("patterns:\n  x: '(?P<samples_done>\\d+'\n")
    with pytest.raises(LogPatternError, match=r"bad.yaml: log pattern 'x': bad regular expression"):
        LogProgressParser.from_yaml(preset, "n")


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        ({"x": "("}, "bad regular expression"),
        ({"x": "no groups"}, "no named group"),
        ({"x": "(?P<speed>\\d+)"}, "unknown group"),
        ({}, "no log patterns"),
    ],
)
def test_bad_patterns_are_clear_errors(patterns: dict[str, str], message: str) -> None:
    with pytest.raises(LogPatternError, match=message) as info:
        LogProgressParser.from_patterns(patterns, "n")
    assert isinstance(info.value, SourceFormatError)


def test_numbers_out_of_range_skip_the_line_with_a_warning() -> None:
    parser = LogProgressParser.from_patterns({"d": r"done (?P<samples_done>\S+)"}, "n")
    events = parser.feed(b"done 5\ndone 1e99\ndone 7\ndone 1.2.3\n", 1.0)
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 2
    assert "line 2: rule 'd': samples_done = 1e99 out of range" in notices[0]
    assert "line 4:" in notices[1]
    assert [e.samples_done for e in events if isinstance(e, Progress)] == [7]


def test_presets_and_unknown_preset() -> None:
    assert "vllm" in preset_names()
    with pytest.raises(LogPatternError, match="unknown log preset 'sglang-x'"):
        LogProgressParser.preset("sglang-x", "n")


def test_huge_line_is_skipped_with_a_warning() -> None:
    parser = LogProgressParser.preset("vllm", "n")
    events = parser.feed(b"x" * 100_000 + b"\nnext line\n", 1.0)
    assert isinstance(events[0], Notice)
    assert "longer than" in events[0].message
    assert [e.text for e in events if isinstance(e, LogLine)] == ["next line"]
