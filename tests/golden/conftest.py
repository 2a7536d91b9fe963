"""Each golden case runs once per session, however many tests read its output; the cases the selected
tests need run side by side (each is a separate ``python -m tokenwatch`` process)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.golden.cases import ALL_CASES, Case, CaseOutput, produce


class Produced:
    """Runs a case on first use and keeps its output for the rest of the session."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._outputs: dict[str, CaseOutput] = {}

    def __call__(self, case: Case) -> CaseOutput:
        if case.name not in self._outputs:
            self._outputs[case.name] = produce(case, self.workdir)
        return self._outputs[case.name]

    def prefetch(self, cases: Iterable[Case]) -> None:
        todo = [c for c in cases if c.name not in self._outputs]
        workers = max(1, min(4, os.cpu_count() or 1, len(todo)))
        with ThreadPoolExecutor(workers) as pool:
            for case, output in zip(todo, pool.map(lambda c: produce(c, self.workdir), todo), strict=True):
                self._outputs[case.name] = output


@pytest.fixture(scope="session")
def produced(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Produced:
    produced = Produced(tmp_path_factory.mktemp("golden"))
    selected = {
        id(item.callspec.params["case"])
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and "case" in getattr(getattr(item, "callspec", None), "params", {})
    }
    produced.prefetch(c for c in ALL_CASES if id(c) in selected)
    return produced


@pytest.fixture(scope="session")
def update_goldens(pytestconfig: pytest.Config) -> bool:
    return bool(pytestconfig.getoption("--update-goldens"))
