"""One clock: the header's run time and ETA, the verdict panel's end and the replay bar agree on one run
length and one projected end, and where the nominal length and the actual or projected one differ, each
is labelled as such.

Drawn at three moments of a seeded fault run like ``sim --faults node07:down@30m`` (the sample's 84
minutes take minutes to replay on a loaded machine, so its 15-minute twin: node07 down for good at 3:00,
lost at 13:00, the run overrunning its nominal 15:00): before the fault, with node07 lost, and at the
end. What is drawn is checked against the recording itself (its nominal length from ``RunStarted``, its
last event) and against the reference core's clock; the projected end against the end the run had.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from tests.frontends.tui.apps import core_until, end_of, replay_app, settle
from tests.frontends.tui.recordings import write_recording
from tokenwatch.base.events import RunStarted
from tokenwatch.base.formatting import format_clock
from tokenwatch.frontends.tui.widgets.progress_line import ProgressLine
from tokenwatch.frontends.tui.widgets.replay_bar import ReplayBar
from tokenwatch.frontends.tui.widgets.verdict_panel import VerdictPanel
from tokenwatch.frontends.tui.widgets.verdict_rules import VerdictRules
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import SIM_EPOCH, RackSimulation, SimSettings
from tokenwatch.recording import RecordingReader

BEFORE_THE_FAULT_S = 120.0  # 2:00, node07 still up
NODE_LOST_S = 14 * 60.0  # node07 down since 3:00: lost, the verdict DECIDED INVALID
SIZE = (200, 60)  # wide enough for every label in full


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    profile = load_profile("gb300-nvl72")
    settings = SimSettings(
        profile, seed=3, duration_s=900.0, faults=parse_faults("node07:down@3m", profile.node_names())
    )
    path = tmp_path_factory.mktemp("one-clock") / "fault-run.jsonl.zst"
    return write_recording(path, RackSimulation(settings, wall_epoch=SIM_EPOCH).events())


def text(widget: Widget) -> str:
    content = widget.render()
    return content.plain if isinstance(content, Text) else str(content)


def seconds(clock: str) -> int:
    minutes, secs = clock.split(":")
    return int(minutes) * 60 + int(secs)


def nominal_of(path: Path) -> float:
    started = next(e for e in RecordingReader(path).events() if isinstance(e, RunStarted))
    assert started.nominal_duration_s is not None
    return started.nominal_duration_s


@pytest.mark.parametrize("at_s", [BEFORE_THE_FAULT_S, NODE_LOST_S], ids=["before_the_fault", "node_lost"])
async def test_while_the_run_goes_every_surface_states_one_projected_end(
    fault_run: Path, at_s: float
) -> None:
    nominal = format_clock(nominal_of(fault_run))
    recorded = format_clock(end_of(fault_run))
    assert seconds(recorded) > seconds(nominal)  # the run overran: the lengths differ
    reference = core_until(fault_run, at_s).snapshot(at_s).clock
    app = replay_app(fault_run, at_s)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        now = format_clock(at_s)
        progress = text(app.screen.query_one(ProgressLine))
        panel = text(app.screen.query_one(VerdictPanel).query_one("#band", Static))
        bar = text(app.screen.query_one(ReplayBar))

        # The header: run time against the nominal length, labelled (the run will not end at 80:00).
        assert progress.startswith(f"{now} / {nominal} nominal ")
        eta = re.search(r"ETA (\d+:\d\d) · end (\d+:\d\d) projected", progress)
        assert eta is not None, progress
        # The verdict panel states the same end, with its band around it.
        shown = re.search(r"^end (\d+:\d\d) \((\d+:\d\d)–(\d+:\d\d)\)$", panel, re.MULTILINE)
        assert shown is not None, panel
        assert shown.group(1) == eta.group(2)
        low, end, high = (seconds(shown.group(i)) for i in (2, 1, 3))
        assert low <= end <= high
        # The ETA counts down to that end (to the second both were rounded to).
        assert abs(seconds(now) + seconds(eta.group(1)) - end) <= 1
        assert eta.group(2) == format_clock(reference.end_s)  # the core's one clock, as drawn
        # The replay bar's length is the recording's, labelled so.
        assert f"{now} / {recorded} recorded" in bar
        # And the projection is of the end the run really had: within a minute of 84:35, inside its band
        # (a lost node's end, were it to resume, was once stated: 136:10 at 82:22 of the sample).
        assert abs(end - seconds(recorded)) <= 60
        assert low <= seconds(recorded) <= high


async def test_at_the_end_the_run_time_is_the_actual_length_beside_the_nominal(fault_run: Path) -> None:
    nominal = format_clock(nominal_of(fault_run))
    last = end_of(fault_run)
    recorded = format_clock(last)
    app = replay_app(fault_run, last)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.session.core.ended
        progress = text(app.screen.query_one(ProgressLine))
        panel = text(app.screen.query_one(VerdictPanel).query_one("#band", Static))
        bar = text(app.screen.query_one(ReplayBar))
        assert progress.startswith(f"{recorded} run / {nominal} nominal ")
        # The share is of samples (node07's were never done), not of the 80:00, and says so.
        assert re.search(r"\d+\.\d% of samples  ended$", progress), progress
        assert f"{recorded} / {recorded} recorded" in bar
        assert not re.search(
            r"^end ", panel, re.MULTILINE
        )  # the end has come: no projection is left to state
        assert "ETA" not in progress


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_a_decided_verdict_shows_its_reason_and_its_band_whole(
    fault_run: Path, size: tuple[int, int]
) -> None:
    """With node07 lost, the panel shows in full what an engineer acts on: why VALID is out of reach and
    what stopping now saves (under the rules), and the figure's band, end and energy (left), every line
    within its widget: none cut off by the panel's height or width."""
    reference = core_until(fault_run, NODE_LOST_S).snapshot(NODE_LOST_S).verdict
    assert reference is not None
    assert reference.forecast.decided
    app = replay_app(fault_run, NODE_LOST_S)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        panel = app.screen.query_one(VerdictPanel)
        band = panel.query_one("#band", Static)
        lines = text(band).splitlines()
        assert [line.split(" ")[0] for line in lines] == ["tok/s", "end", "to"], lines
        assert len(lines) <= band.content_size.height
        assert max(len(line) for line in lines) <= band.content_size.width, (lines, band.content_size)
        rules = panel.query_one(VerdictRules)
        drawn = [strip.text.strip() for strip in rules.render_lines(rules.region.reset_offset)]
        assert any(line.startswith("✗ nodes finished") for line in drawn), drawn
        said = " ".join(
            line.strip()
            for line in drawn
            if line.strip() and not line.lstrip().startswith(("rule", "✓", "✗", "?"))
        )
        assert said == reference.forecast.decided, drawn
        assert "stopping now saves" in said
