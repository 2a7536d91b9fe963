"""A 64-rack fleet's header and board write their counts and power as every other figure is written,
with thousands separators: the header said ``1152/1152 up`` and ``6387.1 kW``, the board's title
``1152/1152 nodes up``. A replay of 64 simulated racks of 18 nodes, paused at 0:30."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.text import Text

from tests.core.fleet.fleet_runs import fleet_events
from tests.frontends.tui.apps import replay_app, settle
from tests.frontends.tui.recordings import write_recording
from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen
from tokenwatch.frontends.tui.widgets.fleet_board import FleetBoard
from tokenwatch.frontends.tui.widgets.run_header import RunHeader
from tokenwatch.frontends.tui.widgets.stat_columns import StatColumns

RACKS, PER_RACK, GPUS = 64, 18, 4
NODES = RACKS * PER_RACK  # 1,152


@pytest.fixture(scope="module")
def big_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    events = fleet_events(RACKS, PER_RACK, duration_s=60.0, faults="node0040:down@10")
    return write_recording(tmp_path_factory.mktemp("fleet64") / "fleet.jsonl.zst", iter(events))


def plain(value: str | Text) -> str:
    return value.plain if isinstance(value, Text) else value


async def test_the_64_rack_header_and_board_title_separate_thousands(big_fleet: Path) -> None:
    app = replay_app(big_fleet, 30.0)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot, app)
        assert isinstance(app.screen, FleetScreen)
        snap = app.latest
        agg = snap.aggregate
        assert (agg.nodes, agg.nodes_up) == (NODES, NODES - 1)  # node0040 down
        pairs = {
            label: plain(value)
            for label, value in app.screen.query_one(RunHeader).query_one(StatColumns).pairs
        }
        assert pairs["nodes"] == "1,151/1,152 up"
        assert pairs["GPUs"].endswith(f"/{NODES * GPUS:,} reporting")
        assert agg.power_w >= 1e6  # over a thousand kW: the separator shows
        power = pairs["power"]
        assert re.fullmatch(r"\d{1,3}(,\d{3})+\.\d kW", power), power
        assert float(power.removesuffix(" kW").replace(",", "")) == pytest.approx(
            agg.power_w / 1000, abs=0.05
        )
        board = app.screen.query_one(FleetBoard)
        assert board.border_title == "Fleet · 64 racks · 1,151/1,152 nodes up"
