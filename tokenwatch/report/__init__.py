"""HTML reports of runs: one self-contained file (inline CSS, SVG charts, no network fetch)."""

from tokenwatch.report.run_data import RunData, RunLoadError, load_run

__all__ = ["RunData", "RunLoadError", "load_run"]
