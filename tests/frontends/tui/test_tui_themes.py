"""Theme files: the shipped ones load, a user's own is picked up, a broken one is reported, never fatal."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.color import Color

from tests.frontends.tui.apps import replay_app, settle
from tokenwatch.frontends.tui.palette import palette
from tokenwatch.frontends.tui.theme_loader import (
    SHIPPED_ORDER,
    load_catalog,
    load_theme_file,
    shipped_dir,
    user_dir,
)

REPO_THEMES = Path(__file__).resolve().parents[3] / "themes"


def test_shipped_themes_are_the_repository_themes() -> None:
    assert {p.name for p in shipped_dir().glob("*.yaml")} == {p.name for p in REPO_THEMES.glob("*.yaml")}
    catalog = load_catalog([shipped_dir()])
    assert catalog.problems == []
    assert catalog.names() == list(SHIPPED_ORDER)
    for name in SHIPPED_ORDER:
        spec = catalog.themes[name]
        assert len(spec.heatmap) >= 2
        assert spec.description
        for stop in spec.heatmap:
            Color.parse(stop)


def test_light_and_dark_differ_where_it_matters() -> None:
    catalog = load_catalog([shipped_dir()])
    assert catalog.themes["dark"].theme.dark
    assert not catalog.themes["light"].theme.dark
    hc = catalog.themes["high-contrast"].theme
    assert hc.background == "#000000"
    assert hc.foreground == "#ffffff"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("primary: '#zzz'\n", "t.yaml:1: primary: '#zzz' is not a colour"),
        (
            "primary: '#123456'\nheatmap: ['#000000', 'blue', 'nope']\n",
            "t.yaml:2: heatmap.2: 'nope' is not a colour",
        ),
        ("primary: '#123456'\ncolour: red\n", "t.yaml:2: colour: unknown key"),
        ("name: x\n", "t.yaml:1: (top level): missing required key 'primary'"),
        ("primary: [1, 2\n", "t.yaml:2: invalid YAML"),
        ("primary: '#123456'\nheatmap: ['#000000']\n", "t.yaml:2: heatmap: needs at least two colour stops"),
        ("primary: '#123456'\ntext_alpha: 0\n", "t.yaml:2: text_alpha: must be above 0"),
        ("primary: '#123456'\nvariables: {footer-key-foreground: bold}\n", "variables.footer-key-foreground"),
        ("primary: '#123456'\ndark: maybe\n", "t.yaml:2: dark: expected true or false"),
    ],
)
def test_broken_theme_files_are_reported_with_file_line_and_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    (tmp_path / "t.yaml").write_text(text)
    catalog = load_catalog([tmp_path])
    assert len(catalog.problems) == 1
    assert expected in catalog.problems[0]
    assert "t" not in catalog.themes


def test_binary_garbage_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_bytes(b"\xff\xfe\x00garbage\x00")
    catalog = load_catalog([tmp_path])
    assert catalog.problems
    assert "bad.yaml" in catalog.problems[0]


def test_a_user_theme_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENWATCH_THEMES", str(tmp_path))
    assert user_dir() == tmp_path
    monkeypatch.delenv("TOKENWATCH_THEMES")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert user_dir() == tmp_path / "cfg" / "tokenwatch" / "themes"
    user = tmp_path / "cfg" / "tokenwatch" / "themes"
    user.mkdir(parents=True)
    (user / "solar.yaml").write_text("primary: '#b58900'\nbackground: '#002b36'\n")
    catalog = load_catalog()
    assert catalog.names() == [*SHIPPED_ORDER, "solar"]  # named after the file when it has no name
    spec = load_theme_file(user / "solar.yaml")
    assert spec.theme.background == "#002b36"
    assert len(spec.heatmap) >= 3


async def test_the_app_reports_a_broken_theme_and_keeps_going(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("primary: '#nothex'\n")
    (tmp_path / "mine.yaml").write_text("name: mine\nprimary: '#ff00ff'\nheatmap: ['#000000', '#ffffff']\n")
    app = replay_app(at_s=60, theme="mine", theme_dirs=[shipped_dir(), tmp_path])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        messages = [n.message for n in app._notifications]
        assert any("broken.yaml:1: primary" in m for m in messages)
        assert app.theme == "mine"
        pal = palette(app)
        assert pal.heat[0].bgcolor is not None
        assert pal.heat[0].bgcolor.triplet == (0, 0, 0)
        assert pal.heat[-1].bgcolor is not None
        assert pal.heat[-1].bgcolor.triplet == (255, 255, 255)
        assert "mine" in app.available_themes
        assert "textual-dark" not in app.available_themes


async def test_an_unknown_theme_name_falls_back_with_a_message() -> None:
    app = replay_app(at_s=60, theme="no-such-theme")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        assert app.theme == "dark"
        assert any("unknown theme 'no-such-theme'" in n.message for n in app._notifications)


async def test_every_theme_draws_the_dashboard() -> None:
    app = replay_app(at_s=300)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        for name in app.theme_catalog.names():
            app.theme = name
            await pilot.pause()
            svg = app.export_screenshot()
            assert palette(app).background.hex.lower() in svg.lower()
