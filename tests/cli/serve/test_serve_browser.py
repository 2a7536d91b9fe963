"""``tokenwatch serve`` in headless Chromium: the page (opened with the printed address and its token) shows
the run's figures and node table, keys reach the app, a second page joins the same run and watches, a failing
run command shows its error in the page and on the terminal, Ctrl-C ends it all."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any

import orjson
import psutil

from tests.cli.serve.cdp import Browser, Page
from tests.cli.serve.conftest import Served, ServeFactory
from tests.conftest import PATIENCE_S, SAMPLE_RUNS, run_tokenwatch

# A short simulated rack run played as fast as possible: by the time the page draws, it has ended, so the
# page shows the run's final figures, which the same run's headless output states independently.
SIM_RUN = ("sim", "--speed", "0", "--duration", "2m", "--seed", "7")


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _headless_figures(tmp_path: Path) -> tuple[float, float, list[dict[str, Any]]]:
    """The same run headless: its summary's total aggregate tokens/s, and its last JSONL snapshot."""
    jsonl = tmp_path / "run.jsonl"
    done = run_tokenwatch(*SIM_RUN, "--headless", "--jsonl", str(jsonl))
    assert done.returncode == 0, done.stderr
    total = re.search(r"^Total aggregate\s+([\d,.]+)$", done.stdout, re.MULTILINE)
    per_gpu = re.search(r"^Per GPU\s+([\d,.]+)$", done.stdout, re.MULTILINE)
    assert total is not None, done.stdout
    assert per_gpu is not None, done.stdout
    last = orjson.loads(jsonl.read_bytes().splitlines()[-1])
    return _number(total.group(1)), _number(per_gpu.group(1)), last["nodes"]


async def test_page_shows_the_run_and_keys_reach_the_app(serve: ServeFactory, page: Page, tmp_path: Path):
    served = serve(*SIM_RUN)
    await page.open(served.url)
    screen = await page.settled_text("ended: 18 of 18 nodes finished", "Nodes (18)")
    assert await page.terminal_shown()

    total, summary_per_gpu, nodes = _headless_figures(tmp_path)
    # The rack aggregate once the run has ended: the run's figures, as the headless summary states them.
    shown_total = re.search(r"Total aggregate\s+([\d,.]+)", screen)
    per_gpu = re.search(r"per GPU\s+([\d,]+) tok/s", screen)
    assert shown_total is not None, screen
    assert per_gpu is not None, screen
    assert abs(_number(shown_total.group(1)) - total) <= 0.051  # the result panel: one decimal
    assert abs(_number(per_gpu.group(1)) - summary_per_gpu) <= 0.51  # the header: a whole token/s
    # The node table: every node's row, with its tokens/s over the last window.
    rows = dict(re.findall(r"│(node\d\d)\s+✓ done\s+([\d,]+)\s", screen))
    assert len(nodes) == 18
    assert set(rows) == {n["name"] for n in nodes}
    for node in nodes:
        assert abs(_number(rows[node["name"]]) - float(node["tokens_per_s"])) <= 0.51, node

    # Keys typed in the page reach the app: the heatmap's metric, the table's sort, the help screen.
    metric = re.search(r"GPU heatmap · ([^·]+?) ·", screen)
    assert metric is not None, screen
    await page.press("m")
    after_m = await page.wait_without(f"GPU heatmap · {metric.group(1)} ·")
    assert re.search(r"GPU heatmap · ([^·]+?) ·", after_m), after_m  # another metric, not a blank panel

    assert "sorted by Node ▲" in screen
    await page.press("s")
    after_s = await page.wait_without("sorted by Node ▲")
    assert re.search(r"sorted by \S+ [▲▼]", after_s), after_s

    assert "tokenwatch keys" not in screen
    await page.press("?")
    await page.wait_for_text("tokenwatch keys", "heatmap: next metric")

    # Ctrl-C: the server ends, and with it the run's process.
    run = _run_processes(served)
    assert len(run) == 1
    status, out, err = served.stop()
    assert status == 0, err
    assert "stopped (1 run, 1 viewer)" in out
    assert "Traceback" not in err
    _, alive = psutil.wait_procs(run, timeout=PATIENCE_S)
    assert not alive, f"left running: {alive}"


async def test_a_second_page_joins_the_run_and_watches(serve: ServeFactory, browser: Browser):
    served = serve(*SIM_RUN)
    first = browser.page
    assert first is not None
    await first.open(served.url)
    screen = await first.settled_text("ended: 18 of 18 nodes finished", "Nodes (18)", timeout_s=60)
    run = _run_processes(served)

    # Another tab of the same browser, without the token in its address: the cookie the first page set
    # lets it in. It joins the run already drawn (no second run) and is shown the whole screen.
    second = await browser.new_page()
    await second.open(f"{served.base}/")
    await second.wait_for_text("ended: 18 of 18 nodes finished", "Nodes (18)", "GPU heatmap", timeout_s=60)
    assert await second.terminal_shown()
    assert [p.pid for p in _run_processes(served)] == [p.pid for p in run]

    # The first page keeps the keys; what it changes, the second page sees.
    metric = re.search(r"GPU heatmap · ([^·]+?) ·", screen)
    assert metric is not None, screen
    await first.press("m")
    await second.wait_without(f"GPU heatmap · {metric.group(1)} ·", timeout_s=60)

    # The first page goes: the second one takes the keys once serve has seen it go (pressed until then).
    await first.open("about:blank")
    await second.wait_for_text("sorted by Node ▲", timeout_s=60)
    deadline = time.monotonic() + 60
    while True:
        await second.press("s")
        try:
            await second.wait_without("sorted by Node ▲", timeout_s=5)
            break
        except AssertionError:
            assert time.monotonic() < deadline, "the second page never got the keys"

    # The last page goes: the run ends, with nothing of its process group left.
    await second.open("about:blank")
    _, alive = psutil.wait_procs(run, timeout=PATIENCE_S)
    assert not alive, f"the run outlived its last page: {alive}"
    status, out, err = served.stop()
    assert status == 0, err
    assert "stopped (1 run, 2 viewers)" in out


def _run_processes(served: Served) -> list[psutil.Process]:
    processes: list[psutil.Process] = psutil.Process(served.process.pid).children(recursive=True)
    assert processes, "no run command process for the page"
    return processes


async def test_a_failing_run_command_shows_its_error(serve: ServeFactory, page: Page, tmp_path: Path):
    recording = tmp_path / "server.jsonl.zst"
    shutil.copy(SAMPLE_RUNS / "gb300-nvl72-server.jsonl.zst", recording)
    served = serve("replay", str(recording), "--speed", "0")  # checked when serve starts: it exists
    recording.unlink()  # gone before the browser comes: the session's run command fails

    await page.open(served.url)
    screen = await page.wait_for_text("no such file", "exit status 2", "reload the page")
    assert str(recording) in screen
    assert await page.terminal_shown()  # not hidden behind textual-serve's "Session ended" dialog

    status, _, err = served.stop()
    assert status == 0
    assert f"run 1: tokenwatch replay: {recording}: no such file" in err  # on the terminal too
    assert "run 1: the run command ended with exit status 2" in err
