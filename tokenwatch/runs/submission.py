"""What a LoadGen summary is within a published MLPerf submission: which kind of run, and on what system.

A submission tree (``closed/<submitter>/results/<system>/<benchmark>/<scenario>/...``) holds more than
performance runs: ``accuracy/`` (whose ``mlperf_log_summary.txt`` is a 74-byte stub with no Scenario line),
``performance/ranging`` (a run that found the load, INVALID on purpose), and under
``compliance/<system>/...`` the audit tests ``TEST01``, ``TEST04``, ``TEST06``... Only performance runs
are summed; the others are listed apart. The system a run ran on is described in
``<submitter>/systems/<system>.json``: ``accelerators_per_node`` x ``number_of_nodes`` GPUs, unless its
``accelerator_model_name`` states the count (``AMD Instinct MI355X 288GB HBM3e (x87)`` on a cluster of
11 nodes x 8: 87 took part), which wins; a heterogeneous system states one count per kind
(``MI300X (x8) and MI325X (x8) and MI355X (x8)``), summed.
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
_STATED = re.compile(r"\(\s*x\s*(\d{1,6})\s*\)", re.IGNORECASE)  # "(x87)" in accelerator_model_name
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
    stated: int | None = None  # the count accelerator_model_name states ("(x87)"), if it does

    @property
    def per_layout(self) -> int | None:
        """``number_of_nodes`` x ``accelerators_per_node`` (None where either is not given)."""
        if self.nodes is None or self.accelerators_per_node is None:
            return None
        return self.nodes * self.accelerators_per_node

    @property
    def gpus(self) -> int | None:
        """The accelerators behind the result: the count the submission states, else nodes x per node."""
        return self.stated if self.stated is not None else self.per_layout

    @property
    def mismatch(self) -> str | None:
        """Why the stated count and the node layout differ, in words (None when they agree)."""
        layout = self.per_layout
        if self.stated is None or layout is None or layout == self.stated:
            return None
        return (
            f"{self.path.name} states {self.stated} accelerators (x{self.stated}) on "
            f"{self.nodes} nodes x {self.accelerators_per_node} = {layout}: per-GPU figures use {self.stated}"
        )


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
            _stated(doc.get("accelerator_model_name")),
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


def _stated(name: Any) -> int | None:
    """The accelerator count a model name states: the sum of its ``(xN)`` (None where it states none)."""
    if not isinstance(name, str):
        return None
    counts = [int(n) for n in _STATED.findall(name[:1000])]
    total = sum(counts)
    return total if counts and 0 < total < 1_000_000 else None
