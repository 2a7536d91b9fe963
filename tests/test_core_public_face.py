"""The core's public face: code outside ``tokenwatch.core`` names only its public modules and its wings'
faces, never a private ``_name`` module (as Textual's users import ``textual.widgets``, not
``textual.widgets._data_table``). The core's own unit tests (tests/core/) may reach inside."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

# Where code may import a private core module: the core itself, and its unit tests.
INSIDE = ("tokenwatch/core/", "tests/core/")
# Files that name one on purpose: the contracts' bite test adds a wing's forbidden import to a copy.
NAMES_ONE_ON_PURPOSE = {"tests/test_import_contracts_bite.py"}
SEARCHED = ("tokenwatch", "tests", "benchmarks", "scripts")
CORE = "tokenwatch.core"
# A dotted name in a string (a mock path, say) that goes through a private module of the core.
PRIVATE_IN_TEXT = re.compile(r"\btokenwatch\.core(?:\.\w+)*\._[a-z]\w*")


def _is_private(dotted: str) -> bool:
    """Whether a dotted name goes through a private module of the core (``tokenwatch.core._state``,
    ``tokenwatch.core.fleet._board``)."""
    if dotted != CORE and not dotted.startswith(CORE + "."):
        return False
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split(".")[2:])


def private_imports(source: str) -> list[str]:
    """Each private core module the source names: by an import, or in a string (a mock path)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _is_private(node.module):
                found.append(node.module)
            else:  # `from tokenwatch.core import _ticks`
                found += [
                    f"{node.module}.{a.name}" for a in node.names if _is_private(f"{node.module}.{a.name}")
                ]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if _is_private(a.name)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += PRIVATE_IN_TEXT.findall(node.value) if "\n" not in node.value else []
    return sorted(set(found))


def _python_files() -> list[Path]:
    """Every Python file searched, but this one (its examples name private modules on purpose)."""
    here = Path(__file__).resolve()
    files = (p for top in SEARCHED for p in (REPO_ROOT / top).rglob("*.py") if "__pycache__" not in p.parts)
    return sorted(p for p in files if p.resolve() != here)


def test_nothing_outside_the_core_imports_a_private_core_module() -> None:
    offenders = {}
    for path in _python_files():
        relative = path.relative_to(REPO_ROOT).as_posix()
        if relative.startswith(INSIDE) or relative in NAMES_ONE_ON_PURPOSE:
            continue
        if found := private_imports(path.read_text()):
            offenders[relative] = found
    assert offenders == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tokenwatch.core._state import RackState", ["tokenwatch.core._state"]),
        ("from tokenwatch.core.fleet._board import fleet_tick", ["tokenwatch.core.fleet._board"]),
        ("from tokenwatch.core import _ticks", ["tokenwatch.core._ticks"]),
        ("import tokenwatch.core.verdict._state", ["tokenwatch.core.verdict._state"]),
        ('patch("tokenwatch.core.causes._judge.update_causes")', ["tokenwatch.core.causes._judge"]),
        ("from tokenwatch.core.fleet import fleet_tick", []),
        ("from tokenwatch.core.verdict.view import VerdictView", []),
        ("from tokenwatch.core import RackCore, __all__", []),
        ("from tokenwatch.inputs.replay._x import y", []),
    ],
)
def test_the_guard_reads_private_imports_of_every_form(source: str, expected: list[str]) -> None:
    assert private_imports(source) == expected


def test_a_public_core_module_is_one_something_outside_the_core_imports() -> None:
    """The other half of the rule: a module of the core that nothing outside it imports is private
    (``_name.py``), so the public names are the ones the front ends, runs, inputs and CLI use."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("tokenwatch")
    core_modules = {m for m in graph.modules if m.startswith(CORE + ".")}
    faces = {m for m in core_modules if graph.find_children(m)}  # the wings' packages
    public = {m for m in core_modules - faces if not _is_private(m)}
    used_outside = {
        m
        for m in core_modules
        if any(not i.startswith(CORE) for i in graph.find_modules_that_directly_import(m))
    }
    # what a face re-exports is used through it: `from tokenwatch.core.baseline import Baseline`
    reached = used_outside | {
        t for f in faces & used_outside for t in graph.find_modules_directly_imported_by(f)
    }
    assert sorted(public - reached) == []
