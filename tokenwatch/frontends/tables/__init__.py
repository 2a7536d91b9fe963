"""Tidy tables of a run (one observation per row, one variable per column) as CSV or Parquet.

Files: ``summary`` (figure, value, unit), ``nodes`` (per-node results), ``node_series`` (t, node),
``gpu_series`` (t, node, gpu), ``alerts`` (one row per alert span or event) and ``latency``
(rack latency histograms). Result folders have no series: only summary and nodes.
"""

from tokenwatch.frontends.tables.tables import TABLE_NAMES, ExportError, run_tables, write_csv, write_parquet

__all__ = ["TABLE_NAMES", "ExportError", "run_tables", "write_csv", "write_parquet"]
