"""A baseline comparison says what a node down in either run did: ``summarize --baseline`` (table and
``--json``), a headless run's JSONL, and the report (its warnings, covers lines, flagged headline card).

The runs are the seeded fault run against its clean twin: ``sim --seed 0 --faults node07:down@3m`` and
``sim --seed 0``, ten minutes each (made in-process, ~0.6 s). Every other node did the same work in both, so
the aggregate's -0.3 % is node07's lost work alone, which is what the words beside it must say. When node07
went down and the share of its samples it did are read from the raw events, not from the core.

Cost: about eight CLI runs of one to three seconds each.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from tests.conftest import RunCli
from tests.core.baseline.baseline_runs import down_and_share, record
from tokenwatch.base.durations import format_clock
from tokenwatch.base.events import RunEnded
from tokenwatch.recording import RecordingWriter, read_events

FAULT = "node07:down@3m"
CUT_S = 240.0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fault run, its clean twin), as ``sim --seed 0 [--faults node07:down@3m]`` record them."""
    folder = tmp_path_factory.mktemp("baseline-outcomes")
    return record(folder / "faults.jsonl", 0, 600.0, FAULT), record(folder / "seed0.jsonl", 0, 600.0)


def node07_words(fault_run: Path) -> str:
    """``down from 03:00, 29 % of its samples``, from the fault run's raw events."""
    down_at, share = down_and_share(read_events(fault_run)[0], "node07")
    return f"down from {format_clock(down_at)}, {share * 100:.0f} % of its samples"


def section_of(stdout: str) -> list[str]:
    return stdout.split("Against the baseline", 1)[1].splitlines()


def test_summarize_marks_the_node_that_was_down_and_says_what_the_aggregate_covers(
    run_cli: RunCli, runs: tuple[Path, Path]
) -> None:
    faults, clean = runs
    words = node07_words(faults)
    result = run_cli("summarize", str(faults), "--baseline", str(clean))
    assert result.returncode == 0, result.stderr
    section = section_of(result.stdout)
    total = next(i for i, line in enumerate(section) if line.startswith("Total aggregate"))
    assert section[total + 1] == (
        f"  covers 17 of 18 nodes finished in this run (node07 {words}); all 18 finished in the baseline"
    )
    rows = {line.split()[0]: line for line in section if re.match(r"node\d\d ", line)}
    assert rows["node07"].endswith(f"%  this run: {words}")
    assert all(line.endswith("%") for name, line in rows.items() if name != "node07")  # no other mark

    # The other way round the mark is the baseline's, and so is the shortfall.
    result = run_cli("summarize", str(clean), "--baseline", str(faults))
    section = section_of(result.stdout)
    total = next(i for i, line in enumerate(section) if line.startswith("Total aggregate"))
    assert section[total + 1] == (
        f"  covers all 18 finished in this run; 17 of 18 nodes finished in the baseline (node07 {words})"
    )
    assert next(line for line in section if line.startswith("node07")).endswith(f"%  baseline: {words}")


def test_summarize_json_carries_each_nodes_outcome_in_both_runs(
    run_cli: RunCli, runs: tuple[Path, Path]
) -> None:
    faults, clean = runs
    down_at, share = down_and_share(read_events(faults)[0], "node07")
    result = run_cli("summarize", str(faults), "--baseline", str(clean), "--json")
    assert result.returncode == 0, result.stderr
    baseline = json.loads(result.stdout)["baseline"]
    assert baseline["covers"].startswith("17 of 18 nodes finished in this run (node07 down from 03:00")
    nodes = {node["name"]: node for node in baseline["nodes"]}
    assert nodes["node07"]["this_run"]["finished"] is False
    assert nodes["node07"]["this_run"]["stopped"] == "down"
    assert nodes["node07"]["this_run"]["since_s"] == pytest.approx(down_at)
    assert nodes["node07"]["this_run"]["sample_share"] == pytest.approx(share, abs=1e-4)
    assert nodes["node07"]["in_baseline"] == {
        "finished": True, "stopped": None, "since_s": None, "sample_share": None, "text": None,
    }  # fmt: skip
    assert all(node["this_run"]["finished"] for name, node in nodes.items() if name != "node07")


def test_a_headless_run_marks_the_node_once_it_is_down(
    run_cli: RunCli, runs: tuple[Path, Path], tmp_path: Path
) -> None:
    _, clean = runs
    live = tmp_path / "live.jsonl"
    args = (
        "--seed",
        "0",
        "--faults",
        FAULT,
        "--interval",
        "1m",
        "--jsonl",
        str(live),
        "--baseline",
        str(clean),
    )
    result = run_cli("sim", "--speed", "0", "--duration", "10m", "--headless", *args)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in live.read_text().splitlines()]
    snapshots = [r for r in records if "baseline" in r]
    assert snapshots
    for record_ in snapshots:
        node07 = next(n for n in record_["baseline"]["nodes"] if n["name"] == "node07")
        if record_["t"] < 180.0:  # before the fault: both runs whole, nothing marked
            assert record_["baseline"]["covers"] is None
            assert node07["mark"] is None
        else:
            assert node07["mark"].startswith("this run: down from 03:00, ")
            assert record_["baseline"]["covers"].startswith("17 of 18 nodes ")
    assert snapshots[-1]["baseline"]["covers"].startswith("17 of 18 nodes finished in this run")
    # The human lines say the counts too, once node07 is down.
    lines = [line for line in result.stdout.splitlines() if re.match(r"\d\d:\d\d ", line)]
    before = [line for line in lines if line < "03:00"]
    after = [line for line in lines if line >= "03:00"]
    assert before
    assert after
    assert not any("nodes up in this run" in line for line in before)
    assert all("(17 of 18 nodes up in this run; all 18 up in the baseline)" in line for line in after[:-1])
    assert any(r["t"] < 180.0 for r in snapshots)
    assert any(r["t"] >= 180.0 for r in snapshots)


def test_the_report_carries_the_warnings_covers_lines_and_flags_the_partial_run(
    run_cli: RunCli, runs: tuple[Path, Path], tmp_path: Path
) -> None:
    faults, clean = runs
    words = node07_words(faults)
    out = tmp_path / "report.html"
    result = run_cli("report", str(faults), "--baseline", str(clean), "-o", str(out))
    assert result.returncode == 0, result.stderr
    page = html.unescape(out.read_text())
    summary = run_cli("summarize", str(faults))
    warnings = [
        line.removeprefix("warning: ") for line in summary.stdout.splitlines() if line.startswith("warning: ")
    ]
    assert any(w.startswith("node07 did not finish (down since 03:00") for w in warnings)
    for warning in warnings:  # every warning summarize gives, in the report's warning boxes
        assert f'<div class="warn">{warning}</div>' in page
    covers = [
        line for line in summary.stdout.splitlines() if line.startswith(("Aggregate and", "Single-node"))
    ]
    assert len(covers) == 2
    for line in covers:
        assert f'<p class="note">{line}</p>' in page
    headline = re.search(
        r'<div class="card flagged"><div class="k">aggregate tokens/s</div>.*?</div></div>', page
    )
    assert headline is not None
    flag = f"17 of 18 nodes finished in this run (node07 {words})"
    assert f'<div class="flag">{flag}</div>' in headline.group(0)
    row = re.search(r"<tr><td>node07</td><td>node07</td>.*?</tr>", page)
    assert row is not None
    assert f"this run: {words}" in row.group(0)
    vs = re.search(r'<div class="card flagged"><div class="k">vs baseline</div>.*?</div></div>', page)
    assert vs is not None
    assert "covers 17 of 18 nodes finished in this run" in vs.group(0)


def test_a_whole_run_against_a_whole_baseline_has_no_mark_and_no_flag(
    run_cli: RunCli, runs: tuple[Path, Path], tmp_path: Path
) -> None:
    _, clean = runs
    result = run_cli("summarize", str(clean), "--baseline", str(clean))
    section = section_of(result.stdout)
    assert not any("covers" in line or "down" in line for line in section)
    out = tmp_path / "report.html"
    assert run_cli("report", str(clean), "--baseline", str(clean), "-o", str(out)).returncode == 0
    page = out.read_text()
    assert 'class="card"' in page
    assert 'class="card flagged"' not in page
    assert 'class="flag"' not in page


def test_a_baseline_cut_short_marks_every_node_unfinished_where_it_was_cut(
    run_cli: RunCli, runs: tuple[Path, Path], tmp_path: Path
) -> None:
    """The clean twin interrupted at 04:00 (its events up to then, and the run end Ctrl-C writes) as the
    baseline: each node's figure there covers its first four minutes, which each row says."""
    _, clean = runs
    events = [e for e in read_events(clean)[0] if e.t <= CUT_S and not isinstance(e, RunEnded)]
    cut = tmp_path / "cut.jsonl"
    with RecordingWriter(cut) as writer:
        for event in [*events, RunEnded(events[-1].t, "interrupted")]:
            writer.write(event)
    result = run_cli("summarize", str(clean), "--baseline", str(cut))
    assert result.returncode == 0, result.stderr
    section = section_of(result.stdout)
    total = next(i for i, line in enumerate(section) if line.startswith("Total aggregate"))
    assert section[total + 1] == (
        "  covers all 18 finished in this run; "
        "0 of 18 nodes finished in the baseline (all 18 unfinished at 04:00)"
    )
    rows = {line.split()[0]: line for line in section if re.match(r"node\d\d ", line)}
    assert len(rows) == 18
    for name, row in rows.items():
        _, share = down_and_share(events, name)
        assert row.endswith(f"%  baseline: unfinished at 04:00, {share * 100:.0f} % of its samples"), row
