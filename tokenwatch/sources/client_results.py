"""A client-side benchmark's result file -> its runs, whichever tool wrote it.

:func:`read_client_results` recognises the file by its content, not its name: AIPerf's and GenAI-Perf's
exports (:mod:`tokenwatch.sources.aiperf_export`), AIPerf's per-interval export, and the result files of
``vllm bench serve`` and SGLang's ``bench_serving`` (:mod:`tokenwatch.sources.bench_serving_result`), one
JSON object or one object per line. :func:`looks_like_client_result` tells such a file from a recording
without parsing all of it.

Bad input: a line of a JSONL file that is not a result (garbage, a cut-off last line) is skipped with a
warning naming the file and line; a figure that is missing, NaN or infinite is unknown, with a warning
naming the file and key; a file that holds no result at all is one :class:`SourceFormatError` line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tokenwatch.sources.aiperf_export import is_aiperf_export, read_aiperf_export, read_aiperf_timeslices
from tokenwatch.sources.bench_serving_result import is_bench_serving_result, read_bench_serving
from tokenwatch.sources.client_result import ClientResult
from tokenwatch.sources.errors import SourceFormatError, read_bounded
from tokenwatch.sources.lines import snippet

MAX_RESULT_BYTES = 64 << 20
SNIFF_BYTES = 64 << 10
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Keys that only these tools' results carry near their start (a recording's lines never do).
_MARKERS = (b'"output_token_throughput"', b'"output_throughput"', b'"timeslices"', b'"aiperf_version"')
# AIPerf's CSV exports (the summary's and the per-interval one) start with these headers; they hold the
# JSON exports' figures rounded to 0.01, so the JSON beside them is what is read.
_AIPERF_CSV = (b"Metric,avg,", b"Timeslice,Start_NS,")
Reader = Callable[[Mapping[str, Any], str, list[str]], ClientResult]


def looks_like_client_result(path: Path) -> bool:
    """Whether ``path`` is a file that starts as a JSON object and names a client benchmark's figures."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return False
    if head.startswith(_AIPERF_CSV):
        return True  # recognised, to be refused with the file to give instead
    if head.startswith(_ZSTD_MAGIC) or not head.lstrip().startswith(b"{"):
        return False
    return any(marker in head for marker in _MARKERS)


# The summary exports AIPerf and GenAI-Perf write into their artifact folders, by their default names (the
# per-interval export is left out: it is the same run again).
EXPORT_NAMES = ("profile_export_aiperf.json", "*_genai_perf.json")


def exports_in(folder: Path) -> list[Path]:
    """AIPerf's and GenAI-Perf's summary exports anywhere under an artifact folder, sorted."""
    found = {path for pattern in EXPORT_NAMES for path in folder.rglob(pattern) if path.is_file()}
    return sorted(found)


def _reader_for(document: Mapping[str, Any]) -> Reader | None:
    if "timeslices" in document:
        return read_aiperf_timeslices
    if is_aiperf_export(document):
        return read_aiperf_export
    if is_bench_serving_result(document):
        return read_bench_serving
    return None


def _loads(text: str) -> object:
    """JSON as Python's writers write it: NaN and Infinity read as floats (SGLang writes ``Infinity``)."""
    return json.loads(text)


def read_client_results(path: Path) -> tuple[list[ClientResult], list[str]]:
    """Every run a client benchmark's result file holds, with the warnings about what was unusable."""
    data = read_bounded(path, MAX_RESULT_BYTES, "client benchmark result")
    if data.startswith(_AIPERF_CSV):
        raise SourceFormatError(
            f"{path}: AIPerf's CSV export (figures rounded to 0.01): give the JSON export beside it "
            "(profile_export_aiperf.json, or _timeslices.json for the per-interval one)"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceFormatError(
            f"{path}: not UTF-8 text (byte {exc.start}): not a benchmark result"
        ) from None
    warnings: list[str] = []
    try:
        whole = _loads(text)
    except (ValueError, RecursionError) as exc:
        return _read_lines(path, text, exc, warnings)
    if not isinstance(whole, dict):
        raise SourceFormatError(f"{path}: a JSON {type(whole).__name__}, not a benchmark result object")
    reader = _reader_for(whole)
    if reader is None:
        raise SourceFormatError(
            f"{path}: not a result of AIPerf, GenAI-Perf, vllm bench serve or SGLang "
            f"bench_serving (keys: {_keys(whole)})"
        )
    return [reader(whole, str(path), warnings)], warnings


def _read_lines(
    path: Path, text: str, whole_error: Exception, warnings: list[str]
) -> tuple[list[ClientResult], list[str]]:
    """One result per line (SGLang's JSONL, vLLM's ``--append-result``); a bad line is one warning."""
    results: list[ClientResult] = []
    bad: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            document = _loads(line)
        except (ValueError, RecursionError):
            bad.append(f"{where}: not a JSON object (garbage or cut off), skipped: {snippet(line)}")
            continue
        reader = _reader_for(document) if isinstance(document, dict) else None
        if reader is None or not isinstance(document, dict):
            bad.append(f"{where}: not a benchmark result, skipped: {snippet(line)}")
            continue
        results.append(reader(document, where, warnings))
    if not results:
        where = _error_place(whole_error)
        raise SourceFormatError(f"{path}{where}: not a benchmark result: {whole_error}")
    return results, bad + warnings


def _error_place(error: Exception) -> str:
    line = getattr(error, "lineno", None)
    return f":{line}" if isinstance(line, int) else ""


def _keys(document: Mapping[str, Any]) -> str:
    keys = sorted(str(k) for k in document)
    return ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
