"""Rules files in ``watch``: a log entry names a rules file (``preset: FILE.yaml`` or ``rules: FILE.yaml``)
with the keys docs/sources.md documents for "a rules file for your own harness" (``interval``,
``timestamp``, ``marker``, named groups), or carries them inline beside ``patterns``; ``tokenwatch check``
reports every problem in one line naming the file, line and key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokenwatch.base.events import Event, Notice, Progress
from tokenwatch.base.yaml_schema import SchemaError
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.live.plan import log_parser_factory

ROOT = Path(__file__).resolve().parent.parent.parent
REAL_LOG = ROOT / "tests" / "data" / "sources" / "logs" / "asustek-gpu0-output.log"


def docs_rules_file() -> str:
    """The rules file docs/sources.md shows under "Your own harness", as the page has it."""
    page = (ROOT / "docs" / "sources.md").read_text()
    section = page.split("## Your own harness", 1)[1]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def config(tmp_path: Path, entry: str) -> Path:
    path = tmp_path / "rack.yaml"
    path.write_text(f"run: {{name: one-box}}\ngpu: {{source: none}}\nprogress:\n  - {entry}\n")
    return path


def harness_lines() -> bytes:
    """Lines in the form the docs' rules read (``done N/TOTAL, X tok/s``) at stated times, one line the
    marker picks that no pattern reads, and lines of other output."""
    return (
        b"12:00:00 starting\n"
        b"12:00:00 done 10/100, 50.0 tok/s\n"
        b"12:00:10 done 20/100, 60.0 tok/s\n"
        b"12:00:20 done 30/100 (no rate)\n"
        b"12:00:30 done 40/100, 70.0 tok/s\n"
    )


def read_with(path: Path) -> tuple[list[Event], int | None]:
    (entry,) = load_watch_config(path).progress
    parser = log_parser_factory(entry, "n")()
    events = parser.feed(harness_lines(), 1.0)
    return events, getattr(parser, "total_samples", None)


@pytest.mark.parametrize("key", ["preset", "rules"])
def test_a_rules_file_beside_the_config(tmp_path: Path, run_cli, key: str) -> None:
    (tmp_path / "my-harness.yaml").write_text(docs_rules_file())
    path = config(tmp_path, f"{{kind: log, path: /work/harness.log, {key}: my-harness.yaml}}")
    done = run_cli("check", str(path))
    assert done.returncode == 0, done.stderr  # 'unknown preset' before
    assert f"rules {tmp_path / 'my-harness.yaml'}" in done.stdout
    events, total = read_with(path)
    progress = [e for e in events if isinstance(e, Progress)]
    assert total == 100
    assert progress[-1].samples_done == 40
    # 60 tok/s over 12:00:00-12:00:10 (the stamps, not feed time); then 70 tok/s after a 20-s gap, longer
    # than the rules' 10-s interval: skipped idle intervals count one interval
    assert progress[-1].tokens_done == 60 * 10 + 70 * 10
    (notice,) = [e for e in events if isinstance(e, Notice)]  # the marker's line that nothing reads
    assert "line 4: a form no pattern of this preset reads" in notice.message


def test_inline_patterns_carry_interval_timestamp_and_marker(tmp_path: Path) -> None:
    (tmp_path / "my-harness.yaml").write_text(docs_rules_file())
    by_file, _ = read_with(config(tmp_path, "{kind: log, path: /x.log, rules: my-harness.yaml}"))
    inline = (
        "kind: log\n    path: /x.log\n    interval: 10s\n"
        "    timestamp: '(?P<hour>\\d\\d):(?P<minute>\\d\\d):(?P<second>\\d\\d)'\n"
        "    marker: 'done \\d+/'\n"
        "    patterns:\n"
        "      progress: 'done (?P<samples_done>\\d+)/(?P<total_samples>\\d+), "
        "(?P<tokens_per_s>[0-9.]+) tok/s'"
    )
    inline_events, total = read_with(config(tmp_path, inline))
    assert total == 100
    strip = [(type(e).__name__, getattr(e, "tokens_done", None)) for e in by_file]
    assert [(type(e).__name__, getattr(e, "tokens_done", None)) for e in inline_events] == strip


def test_a_rules_file_on_a_real_harness_log(tmp_path: Path) -> None:
    (tmp_path / "amd.yaml").write_text(
        "description: AMD MLPerf vLLM harness\n"
        "marker: 'Issue queries|Processed output'\n"
        "patterns:\n"
        "  issued: 'Issue queries +\\| +number of queries = (?P<total_samples>\\d+)'\n"
        "  done: 'Processed output \\| start, end = \\d+, (?P<samples_done>\\d+)'\n"
    )
    (entry,) = load_watch_config(config(tmp_path, "{kind: log, path: /x.log, preset: amd.yaml}")).progress
    parser = log_parser_factory(entry, "gpu0")()
    events = parser.feed(REAL_LOG.read_bytes(), 190.0)
    assert getattr(parser, "total_samples", None) == 3000
    assert [e for e in events if isinstance(e, Progress)][-1].samples_done == 3000


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (
            "patterns:\n  done: 'done (?P<samples_done>\\d+'\n",
            r"amd.yaml:2: patterns.done: log pattern 'done': bad regular expression",
        ),
        ("patterns:\n  done: 'done (?P<speed>\\d+)'\n", r"amd.yaml:2: patterns.done: .*unknown group"),
        (
            "patterns:\n  done: 'done (?P<samples_done>\\d+)'\ntimestamp: '(?P<minute>\\d\\d)'\n",
            r"amd.yaml:3: timestamp: timestamp pattern: needs groups hour, minute, second",
        ),
        (
            "patterns:\n  done: 'done (?P<samples_done>\\d+)'\nmarker: '(x'\n",
            r"amd.yaml:3: marker: .*bad regular",
        ),
        (
            "patterns:\n  done: 'done (?P<samples_done>\\d+)'\nintervall: 5s\n",
            r"amd.yaml:3: intervall: unknown key",
        ),
        ("patterns:\n  done: 'done (?P<samples_done>\\d+)'\ninterval: soon\n", r"amd.yaml:3: interval: "),
        ("description: nothing\n", r"amd.yaml:1: \(top level\): missing required key 'patterns'"),
    ],
)
def test_check_names_the_rules_file_line_and_key(tmp_path: Path, run_cli, rules: str, expected: str) -> None:
    (tmp_path / "amd.yaml").write_text(rules)
    path = config(tmp_path, "{kind: log, path: /x.log, rules: amd.yaml}")
    done = run_cli("check", str(path))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert re.search(expected, line), line
    assert f"(the rules file named at {path}:4: progress.0.rules)" in line


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("{kind: log, path: /x.log, rules: missing.yaml}", r"missing.yaml: no such file"),
        (
            "{kind: log, path: /x.log, preset: vllm, marker: x}",
            r"rack.yaml:4: progress.0.marker: only beside",
        ),
        (
            "{kind: log, path: /x.log, preset: vllm, rules: a.yaml}",
            r"rack.yaml:4: progress.0: kind log needs one of .*gives 'preset' and 'rules'",
        ),
        (
            "{kind: log, path: /x.log, patterns: {a: 'n (?P<samples_done>\\d+)'}, "
            "timestamp: '(?P<hour>\\d+)'}",
            r"rack.yaml:4: progress.0.timestamp: timestamp pattern: needs groups",
        ),
        ("{kind: log, path: /x.log, preset: nope}", r"rack.yaml:4: progress.0.preset: unknown preset 'nope'"),
    ],
)
def test_config_mistakes_about_rules_are_one_line(tmp_path: Path, entry: str, expected: str) -> None:
    with pytest.raises(SchemaError) as info:
        load_watch_config(config(tmp_path, entry))
    assert "\n" not in str(info.value)
    assert re.search(expected, str(info.value)), str(info.value)
