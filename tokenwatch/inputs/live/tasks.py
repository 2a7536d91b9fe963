"""Cancellation done carefully: each task cancelled once, waited for, and no cancel ever lost.

A second ``cancel()`` lands in the middle of a task's clean-up (closing a channel, reaping a
process) and leaves it half done; a cancel that a child swallowed would leave its parent running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel the tasks not already on their way out, then wait until all of them are done."""
    tasks = list(tasks)
    for task in tasks:
        if not task.done() and not task.cancelling():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def raise_if_cancelling() -> None:
    """Re-raise a cancellation of this task that a child swallowed (Task.cancel passes it to the awaited
    task; if that one ignores it, this task would go on as if never cancelled)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
