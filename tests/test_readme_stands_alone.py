"""The README is read in a clone of the project: everything it points to is in the project."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
# Markdown links and `path`-like code spans that name a file (something/with.ext or ./x, ../x).
LINK = re.compile(r"\]\(([^)#\s]+)\)")
PATH = re.compile(r"`((?:\.\.?/)[^`\s]+)`")


def test_the_readme_names_no_file_outside_the_project() -> None:
    text = README.read_text(encoding="utf-8")
    targets = [t for t in LINK.findall(text) if "://" not in t and not t.startswith("mailto:")]
    targets += PATH.findall(text)
    for target in targets:
        path = (REPO_ROOT / target).resolve()
        assert path.is_relative_to(REPO_ROOT), f"README points outside the project: {target}"
        assert path.exists(), f"README points to a file the project does not have: {target}"


def test_the_readme_does_not_send_readers_to_a_shared_folder() -> None:
    assert "../shared" not in README.read_text(encoding="utf-8")
