"""The points a backlog's history fills in are kept as such in a recording: a replay learns each node's
cadence from its records, as the live watch did, and a recording without history reads as before."""

from __future__ import annotations

import numpy as np
import orjson

from tokenwatch.base.events import Event, Progress, ProgressBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.recording.codec import dumps, loads


def test_filled_points_round_trip_and_plain_ones_carry_no_key() -> None:
    point = Progress(3.0, "n0", None, 300, 0, filled=True)
    batch = ProgressBatch(4.0, np.array([0, 1]), np.zeros(2, np.int64), np.array([400, 410]), filled=True)
    assert loads(dumps(point)) == point
    back = loads(dumps(batch))
    assert isinstance(back, ProgressBatch)
    assert back.filled
    assert back.tokens_done.tolist() == [400, 410]
    plain = Progress(5.0, "n0", None, 500)
    assert "filled" not in orjson.loads(dumps(plain))
    assert loads(dumps(plain)) == plain
    assert "filled" not in orjson.loads(
        dumps(ProgressBatch(6.0, np.array([0]), np.zeros(1, np.int64), np.ones(1, np.int64)))
    )


def test_a_replay_of_a_history_learns_the_records_cadence() -> None:
    """Records every 10 s, filled in a point a second between them: the node's limit is 3 x 10 s, from
    the recording's lines as from the live events."""
    events: list[Event] = [
        RunStarted(0.0, "r", "Offline", ("n0",), 1, None, None, "live", 0.0, {"attached_at_s": 60.0})
    ]
    for k in range(61):
        events.append(Progress(float(k), "n0", None, 100 * k, filled=k % 10 != 0))
    core = RackCore()
    for event in events:
        core.ingest(loads(dumps(event)))
    assert float(core.state.stale_limit_s[0]) == 30.0
