"""The import contracts bite: one forbidden import added to a copy of the package breaks the contract that
forbids it, and ``lint-imports`` fails there (while the unchanged copy passes, so the failure is the
import's). Also: every ``ignore_imports`` exception names the function that needs it."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, cli_env

CONTRACTS = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
NAMES: list[str] = [str(contract["name"]) for contract in CONTRACTS]
FUNCTION_NAMED = re.compile(r"#.*\b[A-Za-z_][\w.]*\(\)")  # a comment naming a function: `# mod.func()`


def _contract(word: str) -> str:
    """The one contract whose name starts with ``word``."""
    (name,) = [name for name in NAMES if name.startswith(word)]
    return name


def _package_copy(tmp_path: Path) -> Path:
    shutil.copytree(
        REPO_ROOT / "tokenwatch",
        tmp_path / "tokenwatch",
        symlinks=True,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint_imports(root: Path) -> tuple[int, str]:
    """``lint-imports`` over the package in ``root`` (its exit status, its report with white space
    folded: long contract names wrap)."""
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.skip("lint-imports (import-linter) is not installed")
    env = {**cli_env(), "PYTHONPATH": str(root)}  # the copy, not the checkout, is `tokenwatch` there
    result = subprocess.run(
        [lint, "--no-cache"], capture_output=True, text=True, cwd=root, env=env, timeout=600, check=False
    )
    return result.returncode, " ".join((result.stdout + result.stderr).split())


def test_the_unchanged_copy_keeps_every_contract(tmp_path: Path) -> None:
    status, report = _lint_imports(_package_copy(tmp_path))
    assert status == 0, report
    for name in NAMES:
        assert f"{name} KEPT" in report


@pytest.mark.parametrize(
    ("module", "forbidden_import", "contract"),
    [
        # Rich in a front end that is not the dashboard
        ("frontends/tables/__init__.py", "import rich", "Textual and Rich only"),
        # one front end reaching into another
        ("frontends/report/__init__.py", "import tokenwatch.frontends.tui", "Front ends are independent"),
        # a back-arrow inside inputs: one kind of input importing the watch wiring above it
        ("inputs/live/__init__.py", "import tokenwatch.inputs.watch", "Inputs:"),
        # a back-arrow across layers: the core importing the session that drives it
        ("core/__init__.py", "import tokenwatch.session", "Layers:"),
        # inside the core: the verdict wing reaching up into the fleet wing that reads it
        ("core/verdict/__init__.py", "import tokenwatch.core.fleet", "Core: baseline > fleet"),
        # a wing calling back into the engine that routes events to it
        ("core/baseline/display.py", "import tokenwatch.core._ingest", "Core: no wing"),
        # a wing reaching into another wing's private modules instead of its public face
        (
            "core/fleet/table.py",
            "import tokenwatch.core.verdict._tick",
            "Core: no other wing imports the verdict",
        ),
        (
            "core/fleet/table.py",
            "import tokenwatch.core.causes._cause",
            "Core: no other wing imports the causes",
        ),
        (
            "core/baseline/display.py",
            "import tokenwatch.core.fleet._state",
            "Core: no other wing imports the fleet",
        ),
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    tmp_path: Path, module: str, forbidden_import: str, contract: str
) -> None:
    root = _package_copy(tmp_path)
    with (root / "tokenwatch" / module).open("a") as source:
        source.write(f"\n{forbidden_import}  # added by the test\n")
    status, report = _lint_imports(root)
    assert status != 0, report
    broken = _contract(contract)
    assert f"{broken} BROKEN" in report
    assert [name for name in NAMES if f"{name} BROKEN" in report] == [broken]


@pytest.mark.parametrize("wing", ["verdict", "fleet", "baseline", "causes"])
def test_each_wings_private_modules_are_all_kept_from_the_other_wings(wing: str) -> None:
    """The contract lists a wing's private modules by name (import-linter's wildcards stand for whole
    names only): a private module added to the wing must be added to it."""
    private = {
        f"tokenwatch.core.{wing}.{path.stem}"
        for path in (REPO_ROOT / "tokenwatch" / "core" / wing).glob("_*.py")
        if path.stem != "__init__"
    }
    guarded = [
        contract
        for contract in CONTRACTS
        if str(contract["name"]).startswith(f"Core: no other wing imports the {wing} wing's private")
    ]
    if not private:
        assert guarded == []
        return
    (contract,) = guarded
    assert set(contract["forbidden_modules"]) == private
    others = {f"tokenwatch.core.{other}" for other in ("verdict", "fleet", "baseline", "causes")} - {
        f"tokenwatch.core.{wing}"
    }
    assert set(contract["source_modules"]) == others


def test_every_ignored_import_names_the_function_that_needs_it() -> None:
    """harlequin's rule: an exception to a contract says, in a comment on its line, which function makes
    the import (``# pkg.mod.func()``), so it can be checked, and dropped with that function."""
    lines = (REPO_ROOT / "pyproject.toml").read_text().splitlines()
    entries = [entry for contract in CONTRACTS for entry in contract.get("ignore_imports", [])]
    unexplained = [
        entry
        for entry in entries
        if not any(
            FUNCTION_NAMED.search(line.split(f'"{entry}"', 1)[1]) for line in lines if f'"{entry}"' in line
        )
    ]
    assert unexplained == []


def test_the_rule_for_ignored_imports_reads_a_function_in_the_comment() -> None:
    assert FUNCTION_NAMED.search(",  # tokenwatch.cli.running.run_session() builds the app")
    assert not FUNCTION_NAMED.search(",  # the CLI needs it")
    assert not FUNCTION_NAMED.search(",")
