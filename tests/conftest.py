"""Shared fixtures. The CLI always runs as ``python -m tokenwatch`` from this checkout, so tests
exercise this tree's code whatever else is installed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SAMPLE_RUNS = REPO_ROOT / "sample_runs"

RunCli = Callable[..., subprocess.CompletedProcess[str]]


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TOKENWATCH_DEBUG", None)
    return env


@pytest.fixture
def run_cli() -> RunCli:
    """``run_cli("sim", "--headless", ...)`` -> CompletedProcess (text), never raising on exit status."""

    def run(*args: str, timeout: float = 120, input: str | None = None, cwd: Path | None = None):
        return subprocess.run(
            [sys.executable, "-m", "tokenwatch", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            env=cli_env(),
            cwd=cwd or REPO_ROOT,
        )

    return run
