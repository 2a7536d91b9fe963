"""The manual against the program: every ``tokenwatch COMMAND --flag`` the README and the docs show must be
in that command's ``--help``, every command must be shown somewhere, the README must stand alone in a
clone, and the docs site must build with ``mkdocs build --strict`` (no broken link, page or anchor)."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tokenwatch.cli.parser import build_parser

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
# What ends a command on a shell line: the next command, a pipe, a redirection.
_SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")"}
_FLAG = re.compile(r"^(--?[A-Za-z][\w-]*)")
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
_INLINE = re.compile(r"`([^`]+)`")
_MKDOCS = importlib.util.find_spec("mkdocs") is not None and importlib.util.find_spec("material") is not None
needs_mkdocs = pytest.mark.skipif(
    not _MKDOCS, reason="mkdocs or mkdocs-material not installed (pip install -e '.[docs]')"
)


@dataclass(frozen=True, slots=True)
class Usage:
    """One ``tokenwatch COMMAND`` shown in the manual, with the flags written after it."""

    where: str  # file:line
    command: str
    flags: tuple[str, ...]


def subcommands() -> tuple[str, ...]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return tuple(action.choices)
    raise AssertionError("the CLI has no subcommands")


def shell_lines(markdown: str) -> list[tuple[int, str]]:
    """(line number, text) of every command line the page shows: each fenced block's lines, with
    backslash continuations joined, and each inline code span."""
    lines: list[tuple[int, str]] = []
    for block in _FENCE.finditer(markdown):
        first = markdown.count("\n", 0, block.start(1)) + 1
        pending, start = "", first
        for offset, text in enumerate(block.group(1).splitlines()):
            if not pending:
                start = first + offset
            if text.rstrip().endswith("\\"):
                pending += text.rstrip()[:-1] + " "
                continue
            lines.append((start, pending + text))
            pending = ""
        if pending:
            lines.append((start, pending))
    prose = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), markdown)
    for span in _INLINE.finditer(prose):
        lines.append((prose.count("\n", 0, span.start()) + 1, span.group(1).replace("\n", " ")))
    return lines


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote in prose: read it word by word
        return line.split()


def usages_in(markdown: str, where: str, commands: tuple[str, ...]) -> list[Usage]:
    """Every ``tokenwatch COMMAND [--flag ...]`` on the page. Placeholders (``RUN``, ``FILE``), values and
    optional brackets (``[--json]``) are read past; ``serve ... -- RUN_COMMAND`` checks the run command's
    flags against that command."""
    found: list[Usage] = []
    for number, line in shell_lines(markdown):
        tokens = [t.strip("[]") for t in _tokens(line)]
        for i, token in enumerate(tokens):
            if token == "tokenwatch" and i + 1 < len(tokens) and tokens[i + 1] in commands:
                found.extend(_usage(tokens[i + 1 :], f"{where}:{number}", commands))
    return found


def _usage(tokens: list[str], where: str, commands: tuple[str, ...]) -> list[Usage]:
    command = tokens[0]
    flags: list[str] = []
    for i, token in enumerate(tokens[1:], start=1):
        if token in _SEPARATORS or token.startswith(">"):
            break
        if token == "--":
            rest = tokens[i + 1 :]
            inner = _usage(rest, where, commands) if rest and rest[0] in commands else []
            return [Usage(where, command, tuple(flags)), *inner]
        match = _FLAG.match(token)
        if match:
            flags.append(match.group(1))
    return [Usage(where, command, tuple(flags))]


def manual_pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


@functools.cache
def help_text(command: str) -> str:
    """``tokenwatch COMMAND --help`` as the program prints it (wide, so no flag is wrapped)."""
    env = {**os.environ, "COLUMNS": "1000"}
    done = subprocess.run(
        [sys.executable, "-m", "tokenwatch", command, "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def in_help(flag: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


def all_usages() -> list[Usage]:
    commands = subcommands()
    usages: list[Usage] = []
    for page in manual_pages():
        usages.extend(usages_in(page.read_text(encoding="utf-8"), str(page.relative_to(REPO_ROOT)), commands))
    return usages


def test_the_reader_joins_continuations_and_reads_past_placeholders_brackets_and_serve() -> None:
    commands = ("sim", "replay", "serve", "summarize")
    page = (
        "Try `tokenwatch summarize RUN [--json]` or\n\n"
        "```bash\n"
        "tokenwatch sim --racks 3 \\\n"
        '    --faults "node07:down@30m" --record run.jsonl.zst   # --not-a-flag in a comment\n'
        "tokenwatch serve --port 8000 -- replay FILE --start=2m | tee out.txt --ignored\n"
        "echo tokenwatch_up --ignored; tokenwatch\n"
        "```\n"
    )
    found = usages_in(page, "page.md", commands)
    assert found == [
        Usage("page.md:4", "sim", ("--racks", "--faults", "--record")),
        Usage("page.md:6", "serve", ("--port",)),
        Usage("page.md:6", "replay", ("--start",)),
        Usage("page.md:1", "summarize", ("--json",)),
    ]


def test_a_flag_the_program_lacks_is_caught() -> None:
    """The check can fail: a made-up flag is not in ``sim --help``, a real one is."""
    text = help_text("sim")
    assert in_help("--racks", text)
    assert in_help("--prometheus-host", text)
    assert not in_help("--prometheus", text)  # only a prefix of real flags
    assert not in_help("--no-such-flag", text)


def test_every_command_and_flag_the_manual_shows_is_in_its_help() -> None:
    usages = all_usages()
    assert len(usages) >= 40, f"the reader found only {len(usages)} commands in the manual"
    missing = [
        f"{u.where}: tokenwatch {u.command} {flag}"
        for u in usages
        for flag in u.flags
        if not in_help(flag, help_text(u.command))
    ]
    assert missing == [], "flags the manual shows that --help does not have:\n" + "\n".join(missing)


def test_every_command_is_shown_in_the_manual() -> None:
    shown = {u.command for u in all_usages()}
    assert set(subcommands()) - shown == set()


def test_the_readme_stands_alone_in_a_clone() -> None:
    """Short, and every file it links or shows as an image is in the repository (nothing outside it)."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "../shared" not in text
    targets = re.findall(r"\]\(([^)#\s]+)", text)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert any(t.startswith("docs/images/") for t in local), "the README shows no screenshot"
    absent = [
        t
        for t in local
        if not (REPO_ROOT / t).resolve().is_relative_to(REPO_ROOT) or not (REPO_ROOT / t).exists()
    ]
    assert absent == []


_PATH = re.compile(r"`([\w.*-]+(?:/[\w.*-]+)+)")
_REPO_FOLDERS = ("tokenwatch", "tests", "benchmarks", "scripts", "examples", "sample_runs", "docs", "grafana")


def named_paths(markdown: str) -> list[str]:
    """The repository paths a page names in code spans: from the top (``tests/golden/cases.py``), or inside
    the package (``core/rack.py``, ``frontends/tui/app.py``)."""
    paths: list[str] = []
    for match in _PATH.finditer(markdown):
        path = match.group(1)
        top = path.split("/")[0]
        if top in _REPO_FOLDERS or (REPO_ROOT / "tokenwatch" / top).is_dir():
            paths.append(path)
    return paths


def test_every_path_the_manual_names_exists() -> None:
    """A module that moves takes its mentions along: the manual names no file the repository lacks."""
    named = [
        (page, path) for page in manual_pages() for path in named_paths(page.read_text(encoding="utf-8"))
    ]
    assert len(named) >= 40
    absent = [
        f"{page.relative_to(REPO_ROOT)}: {path}"
        for page, path in named
        if not any(root.glob(path) for root in (REPO_ROOT, REPO_ROOT / "tokenwatch"))
    ]
    assert absent == [], "paths the manual names that do not exist:\n" + "\n".join(absent)


def test_named_paths_reads_package_and_repository_paths() -> None:
    page = "See `core/rack.py`, `tests/live/test_x*.py`, `rack/node`, `b/2` and `/api/v1/query_range`."
    assert named_paths(page) == ["core/rack.py", "tests/live/test_x*.py"]


@pytest.mark.parametrize("config", sorted((REPO_ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_watch_config_passes_check(config: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tokenwatch", "check", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{config}: ok")


def _mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=170,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )


@needs_mkdocs
def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    done = _mkdocs_build(REPO_ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "images" / "dashboard.svg").exists()


@needs_mkdocs
def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """The build can fail: a copy of the docs with one link to a missing anchor is refused."""
    shutil.copy(REPO_ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "speed.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [the rules](verdict.md#no-such-section).\n")
    done = _mkdocs_build(tmp_path, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-section" in done.stderr
