"""The output contracts, byte for byte: headless lines and summary table, --jsonl snapshots, summarize --json.

A mismatch shows a diff. To accept an intended change: ``pytest tests/golden --update-goldens``, then
read ``git diff tests/golden/expected`` before committing.
"""

from __future__ import annotations

import pytest

from tests.golden.cases import ALL_CASES, GOLDEN_DIR, Case, golden_path
from tests.golden.conftest import Produced
from tests.golden.golden_files import check_golden

PAIRS = [(case, artefact) for case in ALL_CASES for artefact in case.artefacts]


@pytest.mark.parametrize(("case", "artefact"), PAIRS, ids=[f"{c.name}.{a}" for c, a in PAIRS])
def test_output_equals_golden_file(
    produced: Produced, update_goldens: bool, case: Case, artefact: str
) -> None:
    check_golden(golden_path(case, artefact), produced(case).artefacts[artefact], update=update_goldens)


def test_every_golden_file_belongs_to_a_case() -> None:
    expected = {golden_path(case, artefact).name for case, artefact in PAIRS}
    present = {p.name for p in GOLDEN_DIR.iterdir() if not p.name.startswith(".")}
    assert present - expected == set(), "golden files no case produces: remove them"
    assert expected - present == set(), "cases without a golden file: pytest tests/golden --update-goldens"
