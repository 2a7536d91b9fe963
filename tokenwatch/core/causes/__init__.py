"""The core's causes wing: why a straggler is slow, a ranked one-line hint from the sources' evidence.

All of it is the core's own: the hint a snapshot carries (``_cause``), the wing's part of the state that
GPU readings feed (``_gpu_evidence``: power-limit changes, XID / NVLink errors), the evidence read off the
state over the straggler test's window (``_evidence``) and the judging (``_judge``). Re-exported here:
what the tests and the benchmarks outside the core name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenwatch.base.lazy_names import lazy_names
from tokenwatch.core.causes._cause import CAUSE_KINDS, Cause

if TYPE_CHECKING:
    from tokenwatch.core.causes._judge import update_causes

# The judging reads the core's state, whose module holds the causes' memory (``_cause``):
# loaded on first use, so importing the wing's types never starts the state's import over again.
_LAZY = {
    "update_causes": "tokenwatch.core.causes._judge",
}

__all__ = ["CAUSE_KINDS", "Cause", "update_causes"]

__getattr__ = lazy_names(__name__, _LAZY)
