"""Host lists in ClusterShell/Slurm syntax."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenwatch.inputs.hostlist import HostListError, expand_hostlist


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("node[01-03]", ["node01", "node02", "node03"]),
        ("node[01-04,07]", ["node01", "node02", "node03", "node04", "node07"]),
        ("node[1-3,7]", ["node1", "node2", "node3", "node7"]),
        ("node[8-10]", ["node8", "node9", "node10"]),
        ("node[08-10]", ["node08", "node09", "node10"]),
        ("node[1-3,7],gpu05", ["node1", "node2", "node3", "node7", "gpu05"]),
        ("gpu05,node[1-2]", ["gpu05", "node1", "node2"]),  # items keep the order they are written in
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("a[1-2],b[3-4]", ["a1", "a2", "b3", "b4"]),
        ("gpu-[1-2]-[a-b]", ["gpu-1-a", "gpu-1-b", "gpu-2-a", "gpu-2-b"]),
        ("n[A-C,x]", ["nA", "nB", "nC", "nx"]),
        ("node[0-10/5]", ["node0", "node5", "node10"]),
        ("a,b,a", ["a", "b"]),
        ("n[1-3],n2", ["n1", "n2", "n3"]),
        ("10.0.0.[11-12]", ["10.0.0.11", "10.0.0.12"]),
        ("[1-2]x", ["1x", "2x"]),
        (" node1 , node2 ", ["node1", "node2"]),
    ],
)
def test_expands(text: str, expected: list[str]) -> None:
    assert expand_hostlist(text) == expected


def test_a_rack_of_racks() -> None:
    expected = [f"rack{r}-node{n:02d}" for r in (1, 2) for n in range(1, 19)]
    assert expand_hostlist("rack[1-2]-node[01-18]") == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("node[04-01]", "bad range in 'node[04-01]'"),
        ("node[3-1]", "bad range"),
        ("node[", "bad host list 'node[': missing bracket"),
        ("node[01-18", "missing bracket"),
        ("node01-18]", "illegal closing bracket"),
        ("node[[1-2]]", "bad host list"),
        ("node[1-2][3-4]", "bad host list"),
        ("node[b-a]", "bad range 'b-a'"),
        ("node[a-C]", "one case"),
        ("node[1-2,a]", "bad range"),
        ("node[1-9/0]", "bad range"),
        ("node[01-2]", "padding length mismatch"),
        ("a,,b", "empty host"),
        ("", "empty host list"),
        ("n[1-10000000]", "more than 100,000 hosts"),
        ("node[0-999999]", "more than"),
        ("r[0-999]n[0-999]", "more than"),
        ("n[1-60000],m[1-60000]", "more than"),
        ("no de1", "white space"),
        ("@rack1", "@groups"),
        ("n[1-4]!n2", "operators"),
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
