"""One node's LoadGen output folder: its summary (required) and detail log (optional), cross-checked.

Finding the folders and making the rack summary of them is :mod:`tokenwatch.runs.result_folders`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from tokenwatch.sources.errors import SourceFormatError
from tokenwatch.sources.loadgen_detail import DETAIL_NAME, DetailLog, read_detail
from tokenwatch.sources.loadgen_summary import SUMMARY_NAME, LoadgenSummary, read_summary

_CROSS_CHECK_TOLERANCE = 1e-3  # the summary rounds to ~6 significant digits


@dataclass(frozen=True, slots=True)
class ResultFolder:
    """One node's LoadGen output: its name, folder, summary and (optional) detail log."""

    name: str
    folder: Path
    summary: LoadgenSummary
    detail: DetailLog | None

    def duration_s(self) -> float:
        """The run's duration in s: the detail log's when it has one, else the summary's."""
        if self.detail is not None:
            seconds = self.detail.duration_s()
            if math.isfinite(seconds):
                return seconds
        return self.summary.duration_s()


def load_result_folder(name: str, folder: Path) -> tuple[ResultFolder, list[str]]:
    """Read one folder's summary (required) and detail log (optional, problems become warnings)."""
    warnings: list[str] = []
    summary = read_summary(folder / SUMMARY_NAME)
    warnings += summary.skipped
    detail: DetailLog | None = None
    if (folder / DETAIL_NAME).is_file():
        try:
            detail = read_detail(folder / DETAIL_NAME)
        except SourceFormatError as exc:
            warnings.append(f"{name}: detail log not used: {exc}")
        else:
            warnings += detail.skipped[:5]
            warnings += _cross_check(name, summary, detail)
    return ResultFolder(name, folder, summary, detail), warnings


def _cross_check(name: str, summary: LoadgenSummary, detail: DetailLog) -> list[str]:
    out: list[str] = []
    for label, ours, theirs in (
        ("tokens/s", summary.tokens_per_s, detail.tokens_per_s),
        ("samples/s", summary.samples_per_s, detail.samples_per_s),
    ):
        if (
            math.isfinite(ours)
            and math.isfinite(theirs)
            and abs(ours - theirs) > _CROSS_CHECK_TOLERANCE * max(abs(ours), abs(theirs))
        ):
            out.append(f"{name}: summary says {ours:g} {label}, detail log says {theirs:g} (summary used)")
    if detail.valid is not None and detail.valid != summary.valid:
        out.append(
            f"{name}: summary says {summary.result}, detail log says {detail.values['result_validity']}"
        )
    if detail.scenario and detail.scenario != summary.scenario:
        out.append(f"{name}: summary scenario {summary.scenario}, detail log {detail.scenario}")
    return out
