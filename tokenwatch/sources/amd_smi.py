"""``amd-smi metric --json`` output, one document per sampling round, -> :class:`GpuBatch` events.

amd-smi has no streaming JSON mode that every version honours (``-w`` with ``--json`` printed nothing in
ROCm 7.1.1, amdsmi issue "amd-smi --json broken if used together with -w"), so a watch runs it once per
interval (:func:`loop_argv`) and reads the documents one after another. Each document is one read of
every GPU, stamped with the ``t`` of the chunk that completed it.

amd-smi pretty-prints its JSON with a 4-space indent, so a document begins with ``[`` or ``{`` at the
start of a line and ends with ``]`` or ``}`` alone at the start of a line; a compact document on one line
(``amd-smi ... | jq -c``) reads too. The document is a list of GPU entries (ROCm 6.x) or an object whose
``gpu_data`` holds them (ROCm 6.4 and 7.x); each entry's readings come from
:mod:`tokenwatch.sources.amd_smi_fields`.

Bad input is a warning naming the source and the line, never an exception: text between documents
(amd-smi's own ``WARNING: ... render group`` banner, garbage), a document that is not JSON, one cut short
by the next or by the end of the stream, a shape no amd-smi version printed, an entry without a GPU
index, an unreadable figure (that figure unknown, the rest of the GPU read). What a node's GPUs never
report (power on a partition, an energy counter on a Radeon) is said once per stream, naming the figures
shown as unknown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from tokenwatch.base.events import Event, GpuBatch
from tokenwatch.sources.amd_smi_fields import gpu_readings
from tokenwatch.sources.gpu_unreported import UnreportedFigures
from tokenwatch.sources.lines import LineParser, LineSplitter, NoticeLog, snippet
from tokenwatch.sources.node_gpu_index import NodeGpuIndex

MAX_GPU_INDEX = 4095
_MAX_LINE_BYTES = 64 * 1024
_MAX_DOCUMENT_LINES = 200_000  # 8 GPUs print ~3,000 lines; far more is a runaway stream
# Lines amd-smi prints around its JSON that are no fault of the stream.
_QUIET_LINES = ("'CTRL' + 'C' to stop watching output:",)


def loop_argv(interval_s: float) -> list[str]:
    """The loop a node runs: one JSON document per interval, ending with amd-smi's own status (127 when
    it is not installed) the first time it fails. The pause goes in as an argument, not into the script."""
    pause = f"{max(0.1, interval_s):g}"
    script = 'while :; do amd-smi metric --json || exit $?; sleep "$1"; done'
    return ["sh", "-c", script, "amd-smi-loop", pause]


def gpu_entries(document: Any) -> list[Any] | None:
    """The GPU entries of a document, or None for a shape no amd-smi version printed."""
    if isinstance(document, list):
        return document
    if isinstance(document, Mapping) and isinstance(document.get("gpu_data"), list):
        return list(document["gpu_data"])
    return None


class AmdSmiParser(LineParser):
    """One node's amd-smi stream -> one :class:`GpuBatch` per document (``feed(data, t)``, ``close(t)``).

    ``node_index`` is the node's place in ``RunStarted.nodes``, which batch events carry.
    """

    def __init__(self, node: str, source: str = "amd-smi", node_index: int = 0) -> None:
        self.node = node
        self.source = source
        self.node_index = node_index
        self._lines = LineSplitter(_MAX_LINE_BYTES)
        self.notices = NoticeLog(source, node)
        self.documents = 0
        self._document: list[str] = []
        self._first_line = 0
        self._unreported = UnreportedFigures(source, node)
        self._index = NodeGpuIndex(node_index)

    # -- lines -> documents -------------------------------------------------------------------------

    def parse_line(self, number: int, line: bytes, t: float, out: list[Event]) -> None:
        text = line.decode("utf-8", "replace").rstrip("\r")
        opens = text[:1] in ("[", "{")
        if self._document:
            if opens:  # a new document while one is open: the open one was cut short
                self._warn_cut(out, t, number - 1)
            else:
                self._document.append(text)
                if text.rstrip() in ("]", "}"):
                    self._finish(out, t, number)
                elif len(self._document) > _MAX_DOCUMENT_LINES:
                    self.notices.warn(
                        out, t, f"lines {self._first_line}-{number}: no end of the JSON document, dropped"
                    )
                    self._document = []
                return
        stripped = text.strip()
        if not opens:
            if stripped and stripped not in _QUIET_LINES:
                self.notices.warn(out, t, f"line {number}: not amd-smi JSON: {snippet(stripped)}")
            return
        self._document, self._first_line = [text], number
        if stripped[-1:] in ("]", "}") and len(stripped) > 1:  # a compact document on one line
            self._finish(out, t, number, quiet_failure=True)

    def close(self, t: float) -> list[Event]:
        out = super().close(t)
        if self._document:
            self._warn_cut(out, t, self._lines.line_count)
        self._unreported.finish(t, out)
        return out

    def _warn_cut(self, out: list[Event], t: float, last: int) -> None:
        self.notices.warn(out, t, f"lines {self._first_line}-{last}: JSON document cut short, skipped")
        self._document = []

    def _finish(self, out: list[Event], t: float, last: int, *, quiet_failure: bool = False) -> None:
        text = "\n".join(self._document)
        try:
            document = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            if quiet_failure:  # "[" ... on one line that is no whole document: the start of a long one
                return
            message = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            self.notices.warn(out, t, f"lines {self._first_line}-{last}: not valid JSON ({message})")
            self._document = []
            return
        first, self._document = self._first_line, []
        self._read_document(document, first, t, out)

    # -- documents -> batches -----------------------------------------------------------------------

    def _read_document(self, document: Any, line: int, t: float, out: list[Event]) -> None:
        entries = gpu_entries(document)
        if entries is None:
            kind = "an object without gpu_data" if isinstance(document, Mapping) else type(document).__name__
            self.notices.warn(out, t, f"line {line}: not an amd-smi metric document ({kind})")
            return
        gpus: list[int] = []
        rows: list[list[float]] = []
        masks: list[int] = []
        for position, entry in enumerate(entries):
            gpu = entry.get("gpu") if isinstance(entry, Mapping) else None
            if isinstance(gpu, bool) or not isinstance(gpu, int) or not 0 <= gpu <= MAX_GPU_INDEX:
                self.notices.warn(out, t, f"line {line}: GPU entry {position} has no GPU index, skipped")
                continue
            if gpu in gpus:
                self.notices.warn(out, t, f"line {line}: GPU {gpu} twice in one document, the second skipped")
                continue
            values, mask, problems = gpu_readings(entry)
            for problem in problems:
                self.notices.warn(out, t, f"line {line}: GPU {gpu} {problem}: shown as unknown")
            gpus.append(gpu)
            rows.append(values)
            masks.append(mask)
        self.documents += 1
        if not gpus:
            return
        nodes, gpu_column = self._index.columns(gpus)
        values_array = np.array(rows, dtype=np.float64)
        out.append(GpuBatch(t, nodes, gpu_column, values_array, np.array(masks, dtype=np.uint64)))
        self._unreported.seen(values_array, gpus, t, out)


def parse_capture(text: str, node: str = "node", t: float = 0.0) -> list[Event]:
    """A saved capture (one or more documents) read whole: the batches and the warnings."""
    parser = AmdSmiParser(node)
    return parser.feed(text.encode(), t) + parser.close(t)
