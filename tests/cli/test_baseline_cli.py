"""``--baseline`` through the real CLI: sim, replay, summarize and report, checked against measured means
computed from both recordings' raw events; the refusals, each one line and exit status 2.

Cost: two 10-minute seeded simulator recordings made in-process (~0.6 s), then about twenty CLI runs of
one to two seconds each (a 10-minute ``sim --speed 0``, ``summarize``, ``report``, or a refusal before any
work).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, RunCli
from tests.core.baseline.baseline_runs import (
    BASE_SEED,
    RUN_FAULTS,
    RUN_SEED,
    finite_sum,
    measured_means,
    pct,
    record,
)
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.recording import read_events

SIM = ("sim", "--speed", "0", "--duration", "10m", "--headless")
ASUSTEK = REPO_ROOT / "tests/data/sources/loadgen/asustek-8xmi325x-offline"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the run, its baseline) as ``sim --seed 2 --faults ...`` and ``sim --seed 1`` record them."""
    folder = tmp_path_factory.mktemp("baseline-cli")
    return (
        record(folder / "run.jsonl", RUN_SEED, 600.0, RUN_FAULTS),
        record(folder / "base.jsonl", BASE_SEED, 600.0),
    )


def jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_against_recordings(record_: dict[str, object], run: Path, base: Path) -> None:
    """One JSONL record's ``baseline`` against measured means from both recordings at its run time."""
    t = float(record_["t"])  # type: ignore[arg-type]
    ours, theirs = measured_means(read_events(run)[0], t), measured_means(read_events(base)[0], t)
    baseline = record_["baseline"]
    assert isinstance(baseline, dict)
    assert baseline["name"] == base.name
    assert baseline["matched_by"] == "name"
    assert baseline["tokens_per_s"] == pytest.approx(finite_sum(theirs), abs=1e-3)
    assert baseline["delta_pct"] == pytest.approx(pct(finite_sum(ours), finite_sum(theirs)), abs=1e-3)
    for node in baseline["nodes"]:
        expected = pct(ours[node["name"]], theirs[node["name"]])
        if math.isfinite(expected):
            assert node["delta_pct"] == pytest.approx(expected, abs=1e-3), (t, node)
        else:
            assert node["delta_pct"] is None


def test_sim_and_replay_with_a_baseline_give_the_deltas_computed_from_both_recordings(
    run_cli: RunCli, runs: tuple[Path, Path], tmp_path: Path
) -> None:
    run, base = runs
    live = tmp_path / "live.jsonl"
    args = ("--seed", str(RUN_SEED), "--faults", RUN_FAULTS, "--interval", "1m", "--jsonl", str(live))
    result = run_cli(*SIM, *args, "--baseline", str(base))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # same shape, same names: nothing to warn about
    lines = [line for line in result.stdout.splitlines() if re.match(r"\d\d:\d\d ", line)]
    assert all(" vs base " in line and " finish " in line for line in lines)
    # The summary at the end is followed by the final figures compared, as summarize --baseline gives them.
    section = result.stdout.split("Against the baseline", 1)[1].splitlines()
    final_ours = measured_means(read_events(run)[0], math.inf)
    final_theirs = measured_means(read_events(base)[0], math.inf)
    total = next(line for line in section if line.startswith("Total aggregate"))
    expected_total = pct(finite_sum(final_ours), finite_sum(final_theirs))
    assert total.split()[-2:] == [f"{round(expected_total, 1) or 0.0:+.1f}", "%"]
    node03_line = next(line for line in section if line.startswith("node03"))
    assert float(node03_line.split()[-2]) == pytest.approx(
        pct(final_ours["node03"], final_theirs["node03"]), abs=0.051
    )
    records = jsonl(live)
    assert len(records) >= 10
    for rec in records:
        check_against_recordings(rec, run, base)
    node03 = [n["delta_pct"] for r in records for n in r["baseline"]["nodes"] if n["name"] == "node03"]  # type: ignore[index]
    assert min(d for d in node03 if d is not None) < -5.0  # 80 % for four minutes reads behind
    replayed = tmp_path / "replay.jsonl"
    result = run_cli(
        "replay", str(run), "--speed", "0", "--headless", "--interval", "1m", "--jsonl", str(replayed),
        "--baseline", str(base),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert [r["baseline"] for r in jsonl(replayed)] == [r["baseline"] for r in records]


def test_summarize_with_a_baseline_compares_the_final_figures(
    run_cli: RunCli, runs: tuple[Path, Path]
) -> None:
    run, base = runs
    result = run_cli("summarize", str(run), "--baseline", str(base), "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    ours, theirs = (
        measured_means(read_events(run)[0], math.inf),
        measured_means(read_events(base)[0], math.inf),
    )
    baseline = out["baseline"]
    assert set(baseline) >= {"name", "tokens_per_s", "delta_pct", "nodes"}
    assert baseline["name"] == base.name
    assert baseline["source"] == "recording"
    assert baseline["tokens_per_s"] == pytest.approx(finite_sum(theirs), abs=0.1)
    assert out["aggregate"]["tokens_per_s"] == pytest.approx(finite_sum(ours), abs=0.1)
    assert baseline["delta_pct"] == pytest.approx(pct(finite_sum(ours), finite_sum(theirs)), abs=1e-3)
    assert [n["name"] for n in baseline["nodes"]] == [n["name"] for n in out["nodes"]]
    for node in baseline["nodes"]:
        assert node["delta_pct"] == pytest.approx(pct(ours[node["name"]], theirs[node["name"]]), abs=1e-3)
        assert node["baseline_node"] == node["name"]
    table = run_cli("summarize", str(run), "--baseline", str(base))
    assert table.returncode == 0, table.stderr
    section = table.stdout.split("Against the baseline", 1)[1].splitlines()
    total = next(line for line in section if line.startswith("Total aggregate"))
    assert total.split()[-2:] == [f"{baseline['delta_pct']:+.1f}", "%"]
    assert sum(line.startswith("node") for line in section) == 18


def test_report_with_a_baseline_has_its_section_and_its_line_on_the_throughput_chart(
    run_cli: RunCli, runs: tuple[Path, Path], tmp_path: Path
) -> None:
    run, base = runs
    out = tmp_path / "report.html"
    result = run_cli("report", str(run), "--baseline", str(base), "-o", str(out))
    assert result.returncode == 0, result.stderr
    html = out.read_text()
    section = html.split('<section id="baseline">', 1)[1].split("</section>", 1)[0]
    assert section.count("<tr") == 1 + 18  # the head and one row per node
    summary = json.loads(run_cli("summarize", str(run), "--baseline", str(base), "--json").stdout)
    assert f"{summary['baseline']['delta_pct']:+.1f} %" in section
    chart = html.split('id="throughput-aggregate"', 1)[1].split("</figure>", 1)[0]
    assert re.search(r'<path class="s3" d="M[^"]+"[^>]*><title>baseline: base\.jsonl</title>', chart)


def test_the_simulator_is_a_baseline_at_the_profiles_published_figures(
    run_cli: RunCli, runs: tuple[Path, Path]
) -> None:
    run, _ = runs
    result = run_cli("summarize", str(run), "--baseline", "sim:gb300-nvl72", "--json")
    assert result.returncode == 0, result.stderr
    baseline = json.loads(result.stdout)["baseline"]
    profile = load_profile("gb300-nvl72")
    assert baseline["name"] == "sim:gb300-nvl72"
    assert baseline["source"] == "simulator"
    assert baseline["matched_by"] == "expected"
    assert baseline["tokens_per_s"] == pytest.approx(profile.published["aggregate_tokens_per_s"], rel=0.005)
    run_total = json.loads(run_cli("summarize", str(run), "--json").stdout)["aggregate"]["tokens_per_s"]
    assert baseline["delta_pct"] == pytest.approx(pct(run_total, baseline["tokens_per_s"]), abs=2e-3)
    live = run_cli(*SIM, "--racks", "2", "--interval", "5m", "--baseline", "sim:gb300-nvl72")
    assert live.returncode == 0, live.stderr
    assert live.stderr == ""  # 36 nodes, each against the profile's expected node: nothing to warn
    assert " vs base " in live.stdout


def test_another_node_count_and_names_is_a_warning_and_matched_by_rank(
    run_cli: RunCli, runs: tuple[Path, Path]
) -> None:
    run, _ = runs
    result = run_cli("summarize", str(run), "--baseline", str(ASUSTEK), "--json")
    assert result.returncode == 0, result.stderr
    assert "warning: --baseline: 18 nodes against the baseline's 8: nodes matched by rank" in result.stderr
    baseline = json.loads(result.stdout)["baseline"]
    assert baseline["matched_by"] == "rank"
    assert [n["baseline_node"] is not None for n in baseline["nodes"]] == [True] * 8 + [False] * 10


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "--baseline {tmp}/nope.jsonl: no such recording or result folder"),
        ("not-a-recording", "--baseline {tmp}/notes.txt: not a tokenwatch recording"),
        ("empty-folder", "--baseline {tmp}/empty: no LoadGen result summary found"),
        ("unknown-profile", "--baseline sim:nope: unknown profile 'nope'"),
        ("record", "--baseline {tmp}/out.jsonl.zst: is the output of --record"),
        ("jsonl", "--baseline {tmp}/out.jsonl.zst: is the output of --jsonl"),
        ("scenario", "--baseline: the baseline base.jsonl ran Offline and this run Server"),
        ("benchmark", "--baseline: the baseline base.jsonl ran llama2-70b and this run llama3_1-405b"),
        (
            "report-output",
            "-o {tmp}/out.jsonl.zst: is the input {tmp}/out.jsonl.zst; refusing to overwrite it",
        ),
        ("report-two-runs", "--baseline goes with one RUN"),
    ],
)
def test_a_bad_baseline_is_one_line_and_exit_status_2(
    run_cli: RunCli, runs: tuple[Path, Path], tmp_path: Path, case: str, expected: str
) -> None:
    run, base = runs
    (tmp_path / "notes.txt").write_text("not a recording\n")
    (tmp_path / "empty").mkdir()
    out = tmp_path / "out.jsonl.zst"
    out.write_bytes(base.read_bytes())  # an existing file named as both the baseline and an output
    before = out.read_bytes()
    sim = (*SIM, "--duration", "1m")
    args = {
        "missing": (*sim, "--baseline", str(tmp_path / "nope.jsonl")),
        "not-a-recording": (*sim, "--baseline", str(tmp_path / "notes.txt")),
        "empty-folder": (*sim, "--baseline", str(tmp_path / "empty")),
        "unknown-profile": (*sim, "--baseline", "sim:nope"),
        "record": (*sim, "--record", str(out), "--baseline", str(out)),
        "jsonl": (*sim, "--jsonl", str(out), "--baseline", str(out)),
        "scenario": (*sim, "--scenario", "Server", "--baseline", str(base)),
        "benchmark": (*sim, "--benchmark", "llama3.1-405b", "--baseline", str(base)),
        "report-output": ("report", str(run), "-o", str(out), "--baseline", str(out)),
        "report-two-runs": (
            "report",
            str(run),
            str(base),
            "-o",
            str(tmp_path / "r.html"),
            "--baseline",
            str(base),
        ),
    }[case]
    result = run_cli(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"tokenwatch {args[0]}: ")
    assert expected.format(tmp=tmp_path) in lines[0]
    assert out.read_bytes() == before  # nothing written over it


@pytest.mark.parametrize("command", ["sim", "replay", "watch", "summarize", "report"])
def test_every_command_that_takes_a_baseline_says_so_in_its_help(run_cli: RunCli, command: str) -> None:
    result = run_cli(command, "--help")
    assert result.returncode == 0
    assert "--baseline RUN" in result.stdout
    assert "sim:PROFILE" in " ".join(result.stdout.split())
