"""When a fleet watch reads every node of every rack through the server (the alerting pass, every
``detail_interval``), and what it does when that pass fails.

Counted as done when asked, a pass whose answers timed out on a loaded server left every node unread
until the next one, an hour on with a long interval: the drill-down had no reading to form a rate
from, and the rules judged nothing. A failed pass is asked again a round later, then two, four...
rounds (a server that keeps refusing it is not asked for the whole fleet every round); an answered
one makes the next due a detail interval on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Due this much before its time still counts as due: the grid's instants are sums of floats.
_DUE_SLACK_S = 1e-6


@dataclass
class AlertingPassSchedule:
    interval_s: float  # the rounds' interval
    detail_interval_s: float  # between two answered passes
    counted_from: float = -math.inf  # Unix time the next pass is due a detail interval after
    failed_in_a_row: int = 0

    def due(self, instant: float) -> bool:
        return instant - self.counted_from >= self.detail_interval_s - _DUE_SLACK_S

    def asked(self, instant: float, answered: bool) -> None:
        """The pass asked at ``instant`` was answered (every node query), or not."""
        if answered:
            self.failed_in_a_row = 0
            self.counted_from = instant
            return
        self.failed_in_a_row += 1
        retry_s = min(self.interval_s * 2.0 ** (self.failed_in_a_row - 1), self.detail_interval_s)
        self.counted_from = instant - self.detail_interval_s + retry_s
