"""The run's one clock: how long it was meant to last, when it will end, and when it did.

Every surface that speaks of the run's length (the header's progress line and ETA, the verdict panel's
end, the replay bar's labels, the JSONL) reads it from here, so they cannot disagree. Three lengths are
told apart, and each is labelled where it is shown:

* **nominal**: the length the run was configured with (``RunStarted``'s, e.g. the simulator's 80:00);
* **projected**: the end the MLPerf forecast projects (the last node's LoadGen end; a node down for good
  is left out, since the run ends without it), with its band;
* **actual**: the run time at which the run ended, once it has.

Before the forecast can project an end (not every node has made progress yet, or the run has no sample
count or schedule to end by) the end is the nominal one where there is one, and unknown otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tokenwatch.mlperf.forecast import Forecast

EndKind = Literal["projected", "actual", "nominal", ""]


@dataclass(frozen=True, slots=True)
class RunClock:
    """Run times in s since the run's start. ``end_s``/``end_low_s``/``end_high_s``: the end and its band
    (equal unless projected; NaN where unknown); ``end_kind`` says which end it is ("" when unknown)."""

    t: float
    nominal_s: float | None
    end_s: float
    end_low_s: float
    end_high_s: float
    end_kind: EndKind

    @property
    def eta_s(self) -> float | None:
        """Run time left until the end (0 once ended; None when the end is unknown)."""
        if self.end_kind == "actual":
            return 0.0
        return max(0.0, self.end_s - self.t) if math.isfinite(self.end_s) else None

    @property
    def differs_from_nominal(self) -> bool:
        """Whether the end shown is not the nominal length (to the second): both are then labelled."""
        nominal = self.nominal_s
        if not nominal or not math.isfinite(self.end_s) or self.end_kind == "nominal":
            return False
        return round(self.end_s) != round(nominal)


def run_clock(t: float, nominal_s: float | None, ended: bool, fc: Forecast | None) -> RunClock:
    """The clock at run time ``t``; ``fc``: the verdict's forecast now (its end is the projected one)."""
    nominal = nominal_s if nominal_s and nominal_s > 0 else None
    if ended:
        return RunClock(t, nominal, t, t, t, "actual")
    end = fc.end_s if fc is not None else None
    if end is not None and math.isfinite(end.value):
        # Never before now: a projection that says "a moment ago" means "any moment".
        value = max(end.value, t)
        low = max(end.low, t) if math.isfinite(end.low) else value
        high = max(end.high, value) if math.isfinite(end.high) else value
        return RunClock(t, nominal, value, min(low, value), high, "projected")
    if nominal is not None:
        return RunClock(t, nominal, nominal, nominal, nominal, "nominal")
    nan = math.nan
    return RunClock(t, nominal, nan, nan, nan, "")


def no_clock(t: float = 0.0) -> RunClock:
    """The clock before a run has started: nothing known."""
    return run_clock(t, None, False, None)
