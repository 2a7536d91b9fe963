"""The core never imports Textual or Rich: checked in a fresh interpreter, and by import-linter's contract."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, cli_env

CORE_MODULES = [
    "tokenwatch.events",
    "tokenwatch.core",
    "tokenwatch.core.summary",
    "tokenwatch.recording",
    "tokenwatch.sim.rack_sim",
    "tokenwatch.sim.collector",
    "tokenwatch.session",
    "tokenwatch.collectors.replay",
    "tokenwatch.output.headless",
]


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_does_not_pull_in_textual_or_rich(module: str) -> None:
    tui_libraries = "{'textual', 'rich'}"
    code = f"import sys, {module}; print(sorted({{m.split('.')[0] for m in sys.modules}} & {tui_libraries}))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=REPO_ROOT, check=True
    )
    assert result.stdout.strip() == "[]"


def test_headless_cli_run_does_not_load_the_tui() -> None:
    code = (
        "import sys; from tokenwatch.cli import main; "
        "main(['sim','--speed','0','--duration','1m','--profile','h100-dgx','--headless']); "
        "print('LOADED', sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'rich'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=REPO_ROOT, check=True
    )
    assert "LOADED []" in result.stdout


def test_import_linter_contract_holds() -> None:
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.skip("lint-imports (import-linter) is not installed")
    result = subprocess.run([lint], capture_output=True, text=True, cwd=REPO_ROOT, env=cli_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "KEPT" in result.stdout
