"""The policy's promises over any sequence of conditions starting and clearing (hypothesis): each node's
messages alternate firing / resolved from a firing; a condition back within the hold never pages again;
with no hold every edge goes out; at the end nothing is left held."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.frontends.notify.notify_support import stale_edge
from tokenwatch.frontends.notify.notification import Notification
from tokenwatch.frontends.notify.policy import NotifyPolicy
from tokenwatch.inputs.notify_config import NotifyConfig

NODES = ("node01", "node02", "node03")


def edge(node: str, t: float, firing: bool) -> Notification:
    return stale_edge(node, t, firing)


# Per step: which node flips (start if it is clear, clear if it holds) and how much run time passes first.
steps = st.lists(st.tuples(st.sampled_from(NODES), st.floats(0.0, 50.0)), max_size=60)


def edges(plan: list[tuple[str, float]]) -> list[Notification]:
    holding: set[str] = set()
    out, t = [], 0.0
    for node, gap in plan:
        t += gap
        firing = node not in holding
        (holding.add if firing else holding.discard)(node)
        out.append(edge(node, t, firing))
    return out


def sent(hold_s: float, notes: list[Notification]) -> list[Notification]:
    policy = NotifyPolicy(NotifyConfig(hold_s=hold_s))
    out: list[Notification] = []
    for note in notes:
        out += policy.due(note.t)  # as the notifier does, at each event's run time
        out += policy.admit(note)
    return out + policy.release_all()


@given(steps, st.sampled_from([0.0, 10.0, 120.0]))
def test_messages_alternate_and_a_return_within_the_hold_never_pages_again(
    plan: list[tuple[str, float]], hold_s: float
) -> None:
    notes = edges(plan)
    out = sent(hold_s, notes)
    for node in NODES:
        mine = [n for n in out if n.node == node]
        assert [n.firing for n in mine] == [i % 2 == 0 for i in range(len(mine))]
        # Every clearing that went out was not followed by the condition's return within the hold.
        for cleared in (n for n in mine if not n.firing):
            at = next(i for i, n in enumerate(notes) if n is cleared)
            back = [n.t for n in notes[at + 1 :] if n.node == node and n.firing]
            assert not back or back[0] - cleared.t >= hold_s
        # The last word on each node is its last state (nothing left held at the end).
        last = [n for n in notes if n.node == node]
        if last:
            assert mine[-1].firing == last[-1].firing


@given(steps)
def test_with_no_hold_every_edge_goes_out_as_it_came(plan: list[tuple[str, float]]) -> None:
    notes = edges(plan)
    assert sent(0.0, notes) == notes
