"""``load_run``: a recording file or a folder of MLPerf results -> one :class:`RunData`."""

from __future__ import annotations

from pathlib import Path

from tokenwatch.core.efficiency import efficiency
from tokenwatch.runs.from_core import load_recording
from tokenwatch.runs.provenance import sha256_tree
from tokenwatch.runs.result_folders import read_result_dirs
from tokenwatch.runs.run_data import Provenance, RunData
from tokenwatch.sources.loadgen_summary import SUMMARY_NAME


def load_run(path: str | Path, *, tdp_w: float | None = None, gpus_per_node: int | None = None) -> RunData:
    """A recording file or a folder of MLPerf results. ``tdp_w`` overrides the GPUs' reported limit;
    ``gpus_per_node`` is the GPUs behind each LoadGen summary (result folders only, default 1)."""
    p = Path(path)
    if p.is_dir():
        return _load_result_folders(p, tdp_w, gpus_per_node)
    return load_recording(p, tdp_w)


def _load_result_folders(folder: Path, tdp_w: float | None, gpus_per_node: int | None) -> RunData:
    results = read_result_dirs([folder], gpus_per_node)
    summary = results.summary
    sha, size = sha256_tree(folder, [result.folder / SUMMARY_NAME for result in results.folders])
    provenance = Provenance(
        path=str(folder),
        kind="result folders",
        sha256=sha,
        size_bytes=size,
        recorded_with="",
        created="",
        start_time="",
        hosts=tuple(n.name for n in summary.nodes),
        config={"result folders": len(results.folders), "scenario": summary.scenario},
    )
    return RunData(
        label=summary.name,
        summary=summary,
        efficiency=efficiency(summary, tdp_w, "--tdp-w"),
        provenance=provenance,
        gpus_per_node=summary.nodes[0].gpus if summary.nodes else None,
    )
