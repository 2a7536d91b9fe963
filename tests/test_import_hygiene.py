"""The core never imports Textual or Rich: checked in a fresh interpreter, and by import-linter's contract."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, cli_env

CORE_MODULES = [
    "tokenwatch.base.events",
    "tokenwatch.core",
    "tokenwatch.core.summary",
    "tokenwatch.recording",
    "tokenwatch.inputs.sim.rack_sim",
    "tokenwatch.inputs.sim.collector",
    "tokenwatch.session",
    "tokenwatch.inputs.replay.player",
    "tokenwatch.frontends.headless.headless",
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


# ----------------------------------------------------------------------------- import graph
# Packages that sit below the CLI: none of them may import it (a parser raising a CLI error, say).
BELOW_THE_CLI = (
    "tokenwatch.sources",
    "tokenwatch.core",
    "tokenwatch.recording",
    "tokenwatch.runs",
    "tokenwatch.frontends.report",
    "tokenwatch.frontends.tables",
)


def _import_graph() -> dict[str, set[str]]:
    """tokenwatch's modules -> the tokenwatch modules each imports directly (TYPE_CHECKING imports too)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("tokenwatch")
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def strongly_connected_components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm: the groups of modules that all reach each other (a group of 2+ is a cycle)."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = lowlink[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                lowlink[node] = min(lowlink[node], lowlink[target])
            elif target in on_stack:
                lowlink[node] = min(lowlink[node], index[target])
        if lowlink[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_tarjan_finds_cycles_and_only_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}, "g": set()}
    cycles = {frozenset(c) for c in strongly_connected_components(graph) if len(c) > 1}
    assert cycles == {frozenset("abc"), frozenset("de")}


def test_no_import_cycle_anywhere_in_the_package() -> None:
    cycles = {frozenset(c) for c in strongly_connected_components(_import_graph()) if len(c) > 1}
    assert cycles == set()


def test_nothing_below_the_cli_imports_it() -> None:
    graph = _import_graph()
    offenders = {
        module: sorted(t for t in targets if t.startswith("tokenwatch.cli"))
        for module, targets in graph.items()
        if module.startswith(BELOW_THE_CLI)
    }
    assert {m: t for m, t in offenders.items() if t} == {}


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        (
            "tokenwatch.frontends.tables",
            ("tokenwatch.frontends.report",),
        ),  # both lay out what tokenwatch.runs loads
        (
            "tokenwatch.runs",
            (
                "tokenwatch.frontends.report",
                "tokenwatch.frontends.tables",
                "tokenwatch.frontends.tui",
                "tokenwatch.cli",
            ),
        ),
    ],
)
def test_package_does_not_import_a_sibling_front_end(package: str, forbidden: tuple[str, ...]) -> None:
    graph = _import_graph()
    offenders = {
        module: sorted(t for t in targets if t.startswith(forbidden))
        for module, targets in graph.items()
        if module == package or module.startswith(package + ".")
    }
    assert {m: t for m, t in offenders.items() if t} == {}
