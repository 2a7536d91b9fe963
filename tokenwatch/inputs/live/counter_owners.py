"""Which of a node's sources counts each of its work counters.

A node may have several sources that count the same work: a vLLM server's log (its throughput lines,
integrated) and its ``/metrics`` (``vllm:generation_tokens_total``) both count generated tokens; a LoadGen
trace and ``/metrics`` both count finished samples. Each is cumulative on its own scale (the log from its
first line, ``/metrics`` from its first scrape), so were both to write the node's counter, every switch
between them would look like a restart to the core, which keeps what a restarted counter had counted: the
two totals would be added, again at each switch, and the node's tokens would grow while the engine idles.

So each counter (samples, tokens, prompt tokens) has one owner: the first source in the config's order
that has reported it. A source earlier in that order that reports later takes the counter over,
continuing from the count so far (what it says it counted before is already counted), so nothing is
counted twice and the count never goes back at the handover.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tokenwatch.base.events import Event, Progress

COUNTERS = ("samples_done", "tokens_done", "prompt_tokens_done")


class CounterOwners:
    """One node's counter owners. ``priority``: its sources' names in config order (first wins)."""

    def __init__(self, priority: Sequence[str]) -> None:
        self.rank = {name: i for i, name in enumerate(priority)}
        self.owner: list[str | None] = [None] * len(COUNTERS)
        self.base = [0] * len(COUNTERS)  # added to the owner's own count: the count before it took over
        self.last: list[int | None] = [None] * len(COUNTERS)  # the count last passed on
        self.raw = [0] * len(COUNTERS)  # the owner's own count, as it last said it

    def _rank(self, source: str) -> int:
        return self.rank.get(source, len(self.rank))

    def take(self, source: str, events: Sequence[Event]) -> list[Event]:
        """``events`` from ``source`` with the counters it does not own left unknown (``None``); a
        ``Progress`` left with no counter is dropped. Other events pass unchanged."""
        out: list[Event] = []
        for event in events:
            if not isinstance(event, Progress):
                out.append(event)
                continue
            samples = self._count(0, source, event.samples_done)
            tokens = self._count(1, source, event.tokens_done)
            prompt = self._count(2, source, event.prompt_tokens_done)
            if samples is None and tokens is None and prompt is None:
                continue
            out.append(
                dataclasses.replace(
                    event, samples_done=samples, tokens_done=tokens, prompt_tokens_done=prompt
                )
            )
        return out

    def _count(self, k: int, source: str, value: int | None) -> int | None:
        if value is None:
            return None
        owner = self.owner[k]
        if owner != source and (owner is None or self._rank(source) < self._rank(owner)):
            self.owner[k] = source
            last = self.last[k]
            self.base[k] = 0 if last is None else last - value
        elif self.owner[k] == source and value < self.raw[k]:
            # The owner restarted (a new log file, a server restart): the core keeps what the count
            # had reached and adds the new count on top, so the handover's base must not be added again.
            self.base[k] = 0
        if self.owner[k] != source:
            return None
        self.raw[k] = value
        count = self.base[k] + value
        self.last[k] = count
        return count
