"""Exponential backoff with jitter: 1 s, 2 s, 4 s ... capped (30 s), each drawn from [d/2, d].

The jitter keeps 64 nodes that dropped together (a switch reboot) from all knocking at once;
the floor of d/2 keeps a flapping node from being hammered.
"""

from __future__ import annotations

import random

# A connection or stream that worked this long before it failed starts its backoff afresh: this is a
# new failure, not the same one again.
STABLE_S = 10.0


class Backoff:
    def __init__(
        self,
        base_s: float = 1.0,
        cap_s: float = 30.0,
        *,
        factor: float = 2.0,
        rng: random.Random | None = None,
    ) -> None:
        if base_s <= 0 or cap_s < base_s or factor < 1:
            raise ValueError("need 0 < base_s <= cap_s and factor >= 1")
        self.base_s = base_s
        self.cap_s = cap_s
        self.factor = factor
        self.rng = rng or random.Random()
        self.attempt = 0

    def next_delay(self) -> float:
        """Seconds to wait before the next attempt (and count this one)."""
        ceiling = min(self.cap_s, self.base_s * self.factor ** min(self.attempt, 64))
        self.attempt += 1
        return self.rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempt = 0
