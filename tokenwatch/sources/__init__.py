"""Parsers that turn what real benchmark runs write into tokenwatch's event model.

One module per source: MLPerf LoadGen's summary, detail log and trace (``loadgen_*``), one LoadGen result
folder, summary and detail log cross-checked (``loadgen_results``; finding the folders and summing them is
:mod:`tokenwatch.runs.result_folders`), ``nvidia-smi`` CSV rows, inference-server
Prometheus scrapes (vLLM, SGLang, TensorRT-LLM, dcgm-exporter) and harness log lines. Streaming parsers
take bytes as they arrive (``feed``) and keep partial lines for the next call; bad input becomes a
``Notice`` (or a one-line :class:`SourceFormatError` for whole-file readers), never a traceback.
"""

from tokenwatch.sources.errors import SourceFormatError

__all__ = ["SourceFormatError"]
