"""``sim --sites/--rows``: places that cannot be made are one line and exit 2; the places made reach the
run's start (what the board groups by and the exporter labels)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, cli_env
from tokenwatch.cli.parser import build_parser
from tokenwatch.cli.sim_settings import sim_settings


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--racks", "3", "--rows", "5"],
            "tokenwatch sim: --rows 5 is more rows than racks in the fleet (3)",
        ),
        (
            ["--sites", "2"],
            "tokenwatch sim: --sites and --rows place the racks of a fleet: give --racks 2 or more",
        ),
        (
            ["--racks", "4", "--sites", "-1"],
            "tokenwatch sim: --sites and --rows count sites and rows: 1 or more (0: none)",
        ),
    ],
)
def test_places_that_cannot_be_made_are_one_line(args: list[str], said: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tokenwatch", "sim", *args, "--headless", "--speed", "0"],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == said
    assert not done.stdout


def test_the_places_reach_the_runs_start() -> None:
    args = build_parser().parse_args(["sim", "--racks", "5", "--sites", "2", "--rows", "2"])
    meta = sim_settings(args).extra_meta
    assert meta["nodes_per_rack"] == 18
    assert meta["rack_places"] == {
        "rack01": ["site01", "row01"],
        "rack02": ["site01", "row02"],
        "rack03": ["site02", "row01"],
        "rack04": ["site02", "row01"],
        "rack05": ["site02", "row02"],
    }
