"""A fleet's joined token series and starts, kept for its racks' forecasts at one verdict tick.

A rack's are a pure selection of the fleet's columns (its forecast from them is bit for bit the one from
a join of its own rows: held at every verdict tick in tests/core/fleet/test_rack_pace_shared.py). Held
here: the memo answers only for its own state version and run time, a rack's view of it copies nothing,
and a copy of the state (a replay's keyframe, a clone) never carries it (~7 MB at 64 racks).
"""

from __future__ import annotations

import copy
import pickle

import numpy as np

from tokenwatch.core.verdict._joined_memo import JoinedMemo


def test_the_memo_answers_for_its_tick_alone_and_no_copy_carries_it() -> None:
    memo = JoinedMemo()
    memo.keep(3, 10.0, np.arange(4.0), np.ones((4, 6)), np.zeros(6))
    assert memo.found(3, 10.0) is not None
    assert memo.found(4, 10.0) is None  # another state...
    assert memo.found(3, 11.0) is None  # ...another time
    for twin in (copy.deepcopy(memo), pickle.loads(pickle.dumps(memo))):
        assert twin.tokens is None
        assert twin.found(3, 10.0) is None
    rack = memo.columns(slice(2, 4))
    assert rack.tokens is not None
    assert rack.tokens.shape == (4, 2)
    assert np.shares_memory(rack.tokens, memo.tokens)
    memo.forget()
    assert memo.found(3, 10.0) is None
