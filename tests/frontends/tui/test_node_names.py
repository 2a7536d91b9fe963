"""Node names are never cut to ambiguity: a rack's drill-down showed every node as ``rack01/no``."""

from __future__ import annotations

import pytest

from tokenwatch.frontends.tui.widgets.node_table import MAX_NODE_WIDTH, fitted_name, shown_names


def test_a_racks_nodes_show_without_their_shared_rack() -> None:
    names = [f"rack01/node{i:02d}" for i in range(1, 19)]
    shown, prefix = shown_names(names)
    assert prefix == "rack01/"
    assert shown == tuple(f"node{i:02d}" for i in range(1, 19))


@pytest.mark.parametrize(
    "names",
    [
        ["node01", "node02"],  # no rack in the names
        ["rack01/node01", "rack02/node01"],  # several racks: the rack tells them apart
        ["rack01/node01", "node02"],
    ],
)
def test_names_that_do_not_share_a_rack_are_shown_whole(names: list[str]) -> None:
    assert shown_names(names) == (tuple(names), "")


def test_a_name_longer_than_the_column_keeps_both_ends() -> None:
    names = [f"gb300-nvl72-site-a-row-3-rack-0{i}/compute-node-{i:02d}" for i in range(1, 10)]
    cut = [fitted_name(n, MAX_NODE_WIDTH) for n in names]
    assert all(len(c) == MAX_NODE_WIDTH for c in cut)
    assert len(set(cut)) == len(names)  # still one name per node
    assert fitted_name("node07", 9) == "node07"
