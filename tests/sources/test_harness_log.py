"""Harness log lines on files real systems wrote: vLLM V1 server logs, a SGLang server log, NVIDIA's
MLPerf harness progress bar, and YAML rules on a real AMD MLPerf harness log."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import progress_counts
from tokenwatch.base.events import LogLine, Notice, Progress
from tokenwatch.base.yaml_schema import SchemaError
from tokenwatch.sources.errors import SourceFormatError
from tokenwatch.sources.harness_log import LogPatternError, LogProgressParser, preset_names

from .conftest import DATA, feed_in_chunks

LOGS = DATA / "logs"
VLLM_STATS = re.compile(
    r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) .*Avg prompt throughput: ([0-9.]+) tokens/s, "
    r"Avg generation throughput: ([0-9.]+) tokens/s"
)
SGLANG_DECODE = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] Decode batch.*gen throughput \(token/s\): ([0-9.]+)", re.M
)


def _integrate(
    points: Iterable[tuple[datetime, float, float]], cap_after_s: float | None
) -> tuple[int, float, float]:
    """Tokens implied by rate lines of one writer, computed here with datetime (not our timestamp code):
    the first line starts the clock; each later one covers the time since the previous line, or one
    10-second interval when the gap is longer than ``cap_after_s`` (the logger skipped idle intervals)."""
    lines, first, second = 0, 0.0, 0.0
    previous: datetime | None = None
    for stamp, rate_a, rate_b in points:
        lines += 1
        if previous is not None:
            gap = (stamp - previous).total_seconds()
            covered = gap if cap_after_s is None or gap <= cap_after_s else 10.0
            first += rate_a * covered
            second += rate_b * covered
        previous = stamp
    return lines, first, second


def _vllm_points(text: str) -> list[tuple[datetime, float, float]]:
    return [
        (
            datetime.strptime("2000-" + stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC),
            float(gen),
            float(prompt),
        )
        for stamp, prompt, gen in VLLM_STATS.findall(text)
    ]


@pytest.mark.parametrize(
    ("name", "stats_lines"),
    [("vllm.log", 65), ("gemma4-int4.log", 29), ("vllm-v1-0.10.1-a100-3line.log", 3)],
)
def test_vllm_preset_on_real_server_logs(name: str, stats_lines: int) -> None:
    raw = (LOGS / name).read_bytes()
    parser = LogProgressParser.preset("vllm", "node03")
    events = feed_in_chunks(lambda chunk: parser.feed(chunk, 1.0), raw, 4093) + parser.close(2.0)
    # These logs' cadence is 10 s: a gap up to 1.5 x 10 s + 1 s of stamp rounding counts in full.
    lines, generated, prompt = _integrate(_vllm_points(raw.decode("utf-8")), cap_after_s=16.0)
    assert lines == stats_lines == parser.matched_lines
    progress = [e for e in events if isinstance(e, Progress)]
    assert (progress[-1].tokens_done, progress[-1].prompt_tokens_done) == (round(generated), round(prompt))
    assert generated > 1000
    assert progress_counts(progress, tokens=True) == sorted(progress_counts(progress, tokens=True))
    assert not [e for e in events if isinstance(e, Notice)]
    log_lines = [e.text for e in events if isinstance(e, LogLine)]
    assert len(log_lines) == len([line for line in raw.split(b"\n") if line.strip()])
    assert not any("\r" in text or "\x1b" in text for text in log_lines)


def test_vllm_three_real_v1_lines_credit_two_intervals_not_three() -> None:
    """vLLM 0.10.1 on an A100 (three consecutive stats lines, 10 s apart): 732.6 and 698.0 tok/s over the
    20 s the last two lines cover. The first line only starts the clock (it used to be credited 10 s
    too: 21,391 tokens, +49.5 %)."""
    parser = LogProgressParser.preset("vllm", "a100")
    events = parser.feed((LOGS / "vllm-v1-0.10.1-a100-3line.log").read_bytes(), 5.0)
    assert [e.tokens_done for e in events if isinstance(e, Progress)] == [round(732.6 * 10 + 698.0 * 10)]
    assert list(parser.streams) == [("APIServer pid=158", "Engine 000")]


def test_sglang_preset_on_a_real_server_log() -> None:
    """SGLang 2026 form ("Decode batch, ... gen throughput (token/s): X"), 56 lines, gaps of 5-43 s:
    each rate covers the whole time since the scheduler's previous decode line (idle time included)."""
    raw = (LOGS / "sglang-int4.log").read_bytes()
    parser = LogProgressParser.preset("sglang", "spark")
    events = feed_in_chunks(lambda chunk: parser.feed(chunk, 3.0), raw, 1000) + parser.close(4.0)
    points = [
        (datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC), float(rate), 0.0)
        for stamp, rate in SGLANG_DECODE.findall(raw.decode("utf-8"))
    ]
    lines, generated, _ = _integrate(points, cap_after_s=None)
    assert lines == parser.matched_lines == 56
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress[-1].tokens_done == round(generated)
    assert progress[-1].samples_done is None
    assert progress[-1].prompt_tokens_done is None
    assert not [e for e in events if isinstance(e, Notice)]
    assert list(parser.streams) == [("", "")]


def test_nvidia_preset_on_a_real_harness_progress_bar() -> None:
    """NVIDIA's MLPerf harness (v5.1 llmlib, gpt-oss-120b on 8 x B200): its tqdm bar, with a traceback
    written into the middle of it. Tokens = mean tokens/s x the run's duration (samples / mean samples/s);
    the bar renders each update twice (new count with the previous stats, then fresh stats), so a
    reading a little below the last is held, never a count that goes back."""
    raw = (LOGS / "nvidia-llmlib-gptoss-b200-stdout.excerpt.txt").read_bytes()
    parser = LogProgressParser.preset("nvidia-mlperf", "b200")
    events = feed_in_chunks(lambda chunk: parser.feed(chunk, 7.0), raw, 97) + parser.close(8.0)
    bars = re.findall(
        r"\| (\d+)/198000 \[[^\]]*\] Stats=\[ ([0-9.]+) samples/s, ([0-9.]+) tokens/s", raw.decode("utf-8")
    )
    assert len(bars) == parser.matched_lines == 15
    estimates = [float(tok) * int(n) / float(samp) for n, samp, tok in bars]
    assert estimates != sorted(estimates)  # the real bar does dip: the hold matters
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress[-1].samples_done == int(bars[-1][0]) == 11241
    assert progress[-1].tokens_done == round(max(estimates))
    assert parser.total_samples == 198000
    tokens = progress_counts(progress, tokens=True)
    assert tokens == sorted(tokens)
    assert not [e for e in events if isinstance(e, Notice)]
    assert any(
        e.text.startswith("ValueError: setting an array element") for e in events if isinstance(e, LogLine)
    )


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
    with pytest.raises(SchemaError, match=r"bad.yaml:2: patterns.x: log pattern 'x': bad regular expression"):
        LogProgressParser.from_yaml(preset, "n")


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        ({"x": "("}, "bad regular expression"),
        ({"x": "no groups"}, "no named group"),
        ({"x": "(?P<speed>\\d+)"}, "unknown group"),
        ({"x": "(?P<engine>\\d+)"}, "no group with a value"),
        ({"x": "(?P<mean_tokens_per_s>\\d+)"}, "needs elapsed"),
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
    assert {"vllm", "sglang", "nvidia-mlperf"} <= set(preset_names())
    with pytest.raises(LogPatternError, match="unknown log preset 'sglang-x'"):
        LogProgressParser.preset("sglang-x", "n")


def test_huge_line_is_skipped_with_a_warning() -> None:
    parser = LogProgressParser.preset("vllm", "n")
    events = parser.feed(b"x" * 100_000 + b"\nnext line\n", 1.0)
    assert isinstance(events[0], Notice)
    assert "longer than" in events[0].message
    assert [e.text for e in events if isinstance(e, LogLine)] == ["next line"]
