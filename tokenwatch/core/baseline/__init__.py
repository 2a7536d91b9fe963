"""The core's baseline wing: a finished run to hold a run against (``--baseline``).

:mod:`.reference` is the frozen reference run and whether two runs compare; :mod:`.freeze` makes one,
:mod:`.compare` holds a run against it (live, and between two summaries), :mod:`.view` is what a snapshot
says about it and :mod:`.display` lays its latency histogram out for drawing.
"""

from tokenwatch.core.baseline.reference import Baseline, BaselineFit, RunIdentity, judge_fit

__all__ = ["Baseline", "BaselineFit", "RunIdentity", "judge_fit"]
