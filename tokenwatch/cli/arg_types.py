"""The arguments' types: each value checked as it is parsed (durations, speeds, ports, ...), a bad one
refused by the parser in one line."""

from __future__ import annotations

import argparse

from tokenwatch.base.durations import DurationError, parse_duration


def duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_duration_arg(text: str) -> float:
    value = duration_arg(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than zero")
    return value


def speed_arg(text: str) -> float:
    try:
        value = float(text.lower().removeprefix("x").removesuffix("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad speed {text!r}: use a number such as 1, 60 or 0") from None
    if not 0 <= value <= 1e6:
        raise argparse.ArgumentTypeError(
            f"bad speed {text!r}: must be between 0 (as fast as possible) and 1e6"
        )
    return value


def _int_within(text: str, what: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad {what} {text!r}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"bad {what} {text!r}: must be {low}..{high}")
    return value


def port_arg(text: str) -> int:
    return _int_within(text, "port", 0, 65535)


def viewers_arg(text: str) -> int:
    return _int_within(text, "number of viewers", 1, 10_000)


def tdp_arg(text: str) -> float:
    try:
        value = float(text.lower().removesuffix("w"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad TDP {text!r}: watts per GPU, e.g. 1400") from None
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"bad TDP {text!r}: must be between 1 and 100000 W")
    return value


def benchmark_arg(text: str) -> str:
    """An MLPerf benchmark name (``llama2-70b``, ``llama3.1-405b``, ``llama2-70b-interactive``...)."""
    from tokenwatch.mlperf.rules import BENCHMARKS, normalize_benchmark

    if normalize_benchmark(text) is None:
        known = ", ".join([*BENCHMARKS, "llama2-70b", "<name>-interactive"])
        raise argparse.ArgumentTypeError(f"unknown MLPerf benchmark {text!r} (known: {known})")
    return text
