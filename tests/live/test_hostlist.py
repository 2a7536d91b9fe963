"""Host lists in ClusterShell/Slurm syntax."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenwatch.live.hostlist import HostListError, expand_hostlist


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("node[01-03]", ["node01", "node02", "node03"]),
        ("node[1-3,7]", ["node1", "node2", "node3", "node7"]),
        ("node[8-10]", ["node8", "node9", "node10"]),
        ("node[08-10]", ["node08", "node09", "node10"]),
        ("node[1-3,7],gpu05", ["node1", "node2", "node3", "node7", "gpu05"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("node[0-10/5]", ["node0", "node5", "node10"]),
        ("a,b,a", ["a", "b"]),
        ("10.0.0.[11-12]", ["10.0.0.11", "10.0.0.12"]),
        ("[1-2]x", ["1x", "2x"]),
        (" node1 , node2 ", ["node1", "node2"]),
    ],
)
def test_expands(text: str, expected: list[str]) -> None:
    assert expand_hostlist(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("node[01-18", "without ']'"),
        ("node01-18]", "without '['"),
        ("node[[1-2]]", "nested"),
        ("node[3-1]", "below"),
        ("node[a-b]", "bad range"),
        ("node[1-9/0]", "step"),
        ("a,,b", "empty host"),
        ("", "empty host"),
        ("node[0-999999]", "more than"),
        ("r[0-999]n[0-999]", "more than"),
        ("no de1", "white space"),
    ],
)
def test_errors_are_one_line(text: str, problem: str) -> None:
    with pytest.raises(HostListError, match=re.escape(problem)) as info:
        expand_hostlist(text)
    assert "\n" not in str(info.value)


@given(st.lists(st.integers(0, 999), min_size=1, max_size=20, unique=True), st.sampled_from([0, 3]))
def test_ranges_match_an_independent_listing(numbers: list[int], width: int) -> None:
    numbers.sort()
    body = ",".join(str(n).zfill(width) for n in numbers)
    assert expand_hostlist(f"n[{body}]") == [f"n{str(n).zfill(width)}" for n in numbers]


@given(st.text(max_size=40))
def test_any_text_expands_or_fails_cleanly(text: str) -> None:
    try:
        hosts = expand_hostlist(text)
    except HostListError:
        return
    assert hosts
    assert all(h and not any(c.isspace() for c in h) for h in hosts)
