"""Python's cyclic garbage collector held off for one burst of short-lived, acyclic allocations.

Parsing a fleet's answers makes ~500,000 dicts, lists and strings at once (a 64-rack alerting round);
each of them counts toward a collection, and the full collections they trigger walk every object the
process holds (a core's included). Measured: half of an alerting round's CPU. Reference counting frees
these objects anyway (nothing in a parsed answer points back at itself), so the collector has nothing
to find in them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Off for the block (synchronous code only: never across an ``await``); a nested pause, or a
    collector someone else turned off, is left as it was."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
