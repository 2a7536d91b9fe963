"""What a LoadGen summary is within a published MLPerf submission: which kind of run, and on what system.

A submission tree (``closed/<submitter>/results/<system>/<benchmark>/<scenario>/...``) holds more than
performance runs: ``accuracy/`` (whose ``mlperf_log_summary.txt`` is a 74-byte stub with no Scenario line),
``performance/ranging`` (a run that found the load, INVALID on purpose), and under
``compliance/<system>/...`` the audit tests ``TEST01``, ``TEST04``, ``TEST06``... Only performance runs
are summed; the others are listed apart. The system a run ran on is described in
``<submitter>/systems/<system>.json``: ``accelerators_per_node`` x ``number_of_nodes`` GPUs.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenwatch.sources.loadgen_summary import LoadgenSummary

MAX_SYSTEM_JSON_BYTES = 1 << 20  # real ones are ~2 KB
_TEST = re.compile(r"TEST\d+")
_TREE_DIRS = ("results", "compliance", "measurements")  # <submitter>/<these>/<system>/...


def run_kind(folder: Path, summary: LoadgenSummary) -> str:
    """``performance``, ``accuracy``, ``ranging`` or ``compliance TEST06`` (from the folder's place in a
    submission, and the summary's mode)."""
    if summary.mode and "accuracy" in summary.mode.lower():
        return "accuracy"
    tail = folder.resolve().parts[-4:]  # .../<scenario>/TEST06/performance/run_1, .../performance/ranging
    test = next((part for part in tail if _TEST.fullmatch(part)), None)
    if test is not None:
        return f"compliance {test}"
    if "ranging" in tail:
        return "ranging"
    return "performance"


@dataclass(frozen=True, slots=True)
class SystemInfo:
    """A submission's system description: ``gpus`` is None where it does not say how many."""

    path: Path
    name: str
    nodes: int | None
    accelerators_per_node: int | None

    @property
    def gpus(self) -> int | None:
        if self.nodes is None or self.accelerators_per_node is None:
            return None
        return self.nodes * self.accelerators_per_node


def system_file(folder: Path) -> Path | None:
    """``<submitter>/systems/<system>.json`` of a result folder inside a submission tree, if there is one
    (named as the folder was: a relative folder gives a relative path; then the real path is searched)."""
    for parts in (folder.parts, folder.resolve().parts):
        for i in range(len(parts) - 2, 0, -1):
            if parts[i] in _TREE_DIRS:
                candidate = Path(*parts[:i]) / "systems" / f"{parts[i + 1]}.json"
                if candidate.is_file():
                    return candidate
    return None


def read_system(path: Path) -> tuple[SystemInfo | None, str | None]:
    """The system description at ``path``, or None and why it cannot be used."""
    try:
        data = path.read_bytes()[: MAX_SYSTEM_JSON_BYTES + 1]
        if len(data) > MAX_SYSTEM_JSON_BYTES:
            return None, f"{path}: larger than a system description, not used"
        doc = json.loads(data)
    except (OSError, ValueError) as exc:
        return None, f"{path}: not a readable system description ({exc}), not used"
    if not isinstance(doc, dict):
        return None, f"{path}: not a JSON object, not used"
    return (
        SystemInfo(
            path,
            str(doc.get("system_name", path.stem)),
            _count(doc.get("number_of_nodes")),
            _count(doc.get("accelerators_per_node")),
        ),
        None,
    )


def _count(value: Any) -> int | None:
    """A count as submissions write it: a number or a numeric string ("8"); anything else is unknown."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value.isdigit():
            return None
        value = int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and 0 < value < 1_000_000 else None
