"""The checks of the sources a watch reads its nodes from: the GPU source, and each progress source's
keys (which its kind needs and takes), its parser's settings and its URL."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from tokenwatch.base.yaml_schema import KeyPath, Reader, SchemaError
from tokenwatch.inputs.config._schema import ProgressSourceConfig, WatchConfig

# Which keys each progress kind needs (all) and accepts (beyond ``kind``).
_PROGRESS_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "loadgen-trace": (("path",), ("path", "tokens_per_sample")),
    "loadgen-detail": (("path",), ("path",)),
    "endpoints-events": (("path",), ("path", "tokens_per_sample")),
    "log": (("path",), ("path", "preset", "rules", "patterns", "interval", "timestamp", "marker")),
    "prometheus": (("url", "preset"), ("url", "preset", "interval")),
    "prometheus-query": (("url",), ("url", "node_label", "interval", "preset", "lookback")),
}


def check_gpu(reader: Reader, config: WatchConfig) -> None:
    gpu = config.gpu
    if gpu.interval_s < 0.1:
        raise reader.error(("gpu", "interval"), "must be at least 100ms")
    if gpu.source == "nvml" and not config.local:
        raise reader.error(
            ("gpu", "source"),
            "nvml reads the GPUs of the machine tokenwatch runs on; "
            "with nodes use nvidia-smi or dcgm-exporter",
        )
    if gpu.source in ("xpu-smi", "nvidia-smi-dmon") and gpu.interval_s < 1:
        raise reader.error(("gpu", "interval"), f"{gpu.source} samples at most once a second: use 1s or more")
    if gpu.source == "prometheus" and gpu.url is None:
        raise reader.error(("gpu",), "source prometheus needs 'url' (the Prometheus server)")
    if gpu.url is not None:
        if gpu.source not in ("dcgm-exporter", "prometheus"):
            raise reader.error(("gpu", "url"), "only for source dcgm-exporter or prometheus")
        _check_url(reader, ("gpu", "url"), gpu.url)
    if gpu.source == "prometheus" and (config.nodes is None or config.nodes.gpus_per_node is None):
        raise reader.error(("nodes",), "gpu.source prometheus needs nodes.gpus_per_node")
    if gpu.node_label is not None and gpu.source != "prometheus":
        raise reader.error(("gpu", "node_label"), "only for source prometheus")


def check_progress(reader: Reader, source: ProgressSourceConfig, path: KeyPath, raw: Any) -> None:
    needed, allowed = _PROGRESS_KEYS[source.kind]
    present = {str(k) for k in raw} - {"kind"}
    for key in sorted(present - set(allowed)):
        raise reader.error((*path, key), f"not a key of kind {source.kind} (it takes {', '.join(allowed)})")
    for key in needed:
        if key not in present:
            raise reader.error(path, f"kind {source.kind} needs {key!r}")
    if source.kind == "log":
        _check_log_keys(reader, source, path, present)
    _check_parser_settings(reader, source, path, present)
    if source.path is not None and not source.path.strip():
        raise reader.error((*path, "path"), "must not be empty")
    if source.url is not None:
        _check_url(reader, (*path, "url"), source.url)
    if source.interval_s is not None and source.interval_s < 0.1:
        raise reader.error((*path, "interval"), "must be at least 100ms")
    if source.lookback_s is not None and not 0 <= source.lookback_s <= 24 * 3600:
        raise reader.error((*path, "lookback"), "must be between 0s (no history) and 24h")


def _check_log_keys(reader: Reader, source: ProgressSourceConfig, path: KeyPath, present: set[str]) -> None:
    """One of preset, rules and patterns; a rules file or preset carries its own interval, timestamp and
    marker, inline patterns may give them beside."""
    given = [key for key in ("preset", "rules", "patterns") if key in present]
    if len(given) != 1:
        why = "gives " + " and ".join(repr(k) for k in given) if given else "gives none"
        raise reader.error(
            path, f"kind log needs one of 'preset', 'rules' (a rules file) or 'patterns' ({why})"
        )
    if source.patterns is None:
        for key in ("interval", "timestamp", "marker"):
            if key in present:
                raise reader.error(
                    (*path, key), f"only beside 'patterns' (the {given[0]} gives its own {key})"
                )


def _check_parser_settings(
    reader: Reader, source: ProgressSourceConfig, path: KeyPath, present: set[str]
) -> None:
    """Presets, rules files and patterns are checked by the parsers' own rules, reported at the config
    line (a rules file's own problems at its line: ``rules.yaml:4: patterns.done: ...``)."""
    from tokenwatch.sources.harness_log import LogPatternError, compile_rule, preset_names
    from tokenwatch.sources.log_rules import check_inline_settings, load_rules_file
    from tokenwatch.sources.metric_catalogue import QUERY_PROGRESS_PRESET_NAMES, SCRAPE_PROGRESS_PRESET_NAMES

    if source.patterns is not None:
        if not source.patterns:
            raise reader.error((*path, "patterns"), "no patterns given")
        for name, pattern in source.patterns.items():
            try:
                compile_rule(name, pattern)
            except LogPatternError as exc:
                raise reader.error((*path, "patterns", name), str(exc)) from None
        problem = check_inline_settings(source.timestamp, source.marker)
        if problem is not None:
            raise reader.error((*path, problem[0]), problem[1])
    if source.rules is not None:
        try:
            load_rules_file(source.rules)
        except (LogPatternError, SchemaError) as exc:
            named = reader.error((*path, "rules" if "rules" in present else "preset"), "").args[0]
            raise SchemaError(f"{exc} (the rules file named at {named.rstrip(': ')})") from None
        return
    if source.preset is not None:
        known = {
            "log": preset_names(),
            "prometheus": sorted(SCRAPE_PROGRESS_PRESET_NAMES),
            "prometheus-query": sorted(QUERY_PROGRESS_PRESET_NAMES),
        }.get(source.kind, [])
        if source.preset not in known:
            raise reader.error(
                (*path, "preset"), f"unknown preset {source.preset!r} (known: {', '.join(known)})"
            )
    if source.tokens_per_sample is not None and not 0 <= source.tokens_per_sample < 1e7:
        raise reader.error((*path, "tokens_per_sample"), "must be a number of tokens, 0 or more")


def _check_url(reader: Reader, path: KeyPath, url: str) -> None:
    probe = url.replace("{name}", "node").replace("{host}", "host")
    try:
        parts = urlsplit(probe)
        _ = parts.port  # raises on a port that is not a number or out of range
    except ValueError as exc:
        raise reader.error(path, f"bad URL {url!r}: {exc}") from None
    if parts.scheme != "http":
        raise reader.error(path, f"bad URL {url!r}: only http:// is supported")
    if not parts.hostname:
        raise reader.error(path, f"bad URL {url!r}: no host")
    if parts.password is not None:
        raise reader.error(path, "passwords are not accepted in the config (remove user:password@)")
