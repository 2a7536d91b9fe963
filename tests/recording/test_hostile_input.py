"""No input can hang or exhaust the machine.

Each case reproduces what a hostile or broken file did before the fix: a ``"t": 1e300`` line hung replay
at 100 % CPU, deaf to Ctrl-C; a 435-byte YAML alias bomb grew to gigabytes; an 8 KB run start declaring
1,000 nodes x 1,024 GPUs allocated 2 GB. The subprocess timeouts below are hang detectors, not timings.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import PATIENCE_S, cli_env, run_tokenwatch
from tokenwatch.base.events import MAX_RUN_GPUS, Heartbeat, RunStarted
from tokenwatch.base.yaml_schema import SchemaError, parse_yaml
from tokenwatch.recording import RecordingWriter, read_events
from tokenwatch.recording.codec import CodecError, loads
from tokenwatch.recording.time_order import MIN_JUMP_S

START = RunStarted(0.0, "r", "Offline", ("a", "b"), 2, 60.0, None, "sim", 1.7e9)
MEMORY_LIMIT = 1 << 30  # 1 GiB of address space: far above what these files need once bounded


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def recording(path: Path, extra_lines: list[bytes], heartbeats: int = 5) -> Path:
    with RecordingWriter(path) as writer:
        writer.write(START)
        for i in range(heartbeats):
            writer.write(Heartbeat(float(i)))
    with open(path, "ab") as fh:
        fh.write(b"".join(line + b"\n" for line in extra_lines))
    return path


def test_a_time_of_1e300_is_a_skipped_line_not_a_hang(tmp_path: Path) -> None:
    path = recording(tmp_path / "far.jsonl", [b'{"k":"heartbeat","t":1e300}', b'{"k":"heartbeat","t":9}'])
    done = run_tokenwatch(
        "replay", str(path), "--speed", "0", "--headless", "--interval", "1s", timeout=PATIENCE_S
    )
    assert done.returncode == 0, done.stderr
    assert f"{path}:8: skipped: bad heartbeat record: run time 1e+300 s is beyond" in done.stderr
    events, _ = read_events(path)
    assert [e.t for e in events][-1] == 9.0  # the lines after it are read


@pytest.mark.parametrize(
    "line",
    [
        b'{"k":"heartbeat","t":4e7}',  # past the one-year limit
        b'{"k":"progress","t":1,"node":"a","tokens":100000000000000000000}',  # beyond int64
        b'{"k":"progress","t":1,"node":"a","samples":-3}',
        b'{"k":"gpu","t":1,"node":"a","gpu":0,"power_w":1.7e308}',
        b'{"k":"gpu_batch","t":1,"node_index":[0],"gpu":[0],"m":{"power_w":[1.7e308]},"throttle_reasons":[0]}',
        b'{"k":"gpu_batch","t":1,"node_index":[0],"gpu":[0],"m":{"power_w":[-1e20]},"throttle_reasons":[0]}',
        b'{"k":"latency","t":1,"node":"a","metric":"ttft","values_s":[1e300]}',
        b'{"k":"latency","t":1,"node":"a","metric":"ttft","values_s":[0.1],"counts":[-1]}',
        b'{"k":"run_started","t":0,"name":"x","scenario":"Offline","nodes":["a"],"gpus_per_node":1,'
        b'"nominal_duration_s":1e300,"source":"sim","wall_epoch":0}',
        b'{"k":"log","t":1,"node":"a","text":"' + b"x" * 70_000 + b'"}',
        b'{"k":"progress_batch","t":1,"node_index":[1e9],"samples":[1],"tokens":[1]}',
        b'{"k":"progress_batch","t":1,"node_index":[1000000000],"samples":[1],"tokens":[1]}',
        b'{"k":"progress_batch","t":1,"node_index":[-1],"samples":[1],"tokens":[1]}',
        b'{"k":"progress_batch","t":1,"node_index":[0.5],"samples":[1],"tokens":[1]}',
        b'{"k":"gpu_batch","t":1,"node_index":[-1],"gpu":[0],"m":{"power_w":[1]},"throttle_reasons":[0]}',
        b'{"k":"gpu_batch","t":1,"node_index":[0],"gpu":[1e9],"m":{"power_w":[1]},"throttle_reasons":[0]}',
    ],
)
def test_values_beyond_their_bounds_are_codec_errors(line: bytes) -> None:
    with pytest.raises(CodecError):
        loads(line)


def test_a_run_of_a_million_gpus_is_refused_before_anything_is_allocated(tmp_path: Path) -> None:
    nodes = [f"n{i:04d}" for i in range(1000)]
    start = {
        "k": "run_started",
        "t": 0,
        "name": "huge",
        "scenario": "Offline",
        "nodes": nodes,
        "gpus_per_node": 1024,
        "source": "sim",
        "wall_epoch": 0,
    }
    path = tmp_path / "huge.jsonl"
    path.write_bytes(b'{"tokenwatch_recording": 1}\n' + orjson.dumps(start) + b"\n")
    assert path.stat().st_size < 10_000
    with pytest.raises(CodecError, match=f"at most {MAX_RUN_GPUS:,} GPUs"):
        loads(orjson.dumps(start))
    done = subprocess.run(
        [sys.executable, "-m", "tokenwatch", "summarize", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(),
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 2, done.stderr
    assert f"{path}:2: skipped" in done.stderr
    assert "1,024,000 GPUs" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_overlong_line_is_skipped_without_holding_it(tmp_path: Path) -> None:
    path = recording(tmp_path / "long.jsonl", [])
    with open(path, "ab") as fh:
        fh.write(b'{"k":"log","t":1,"node":"a","text":"')
        chunk = b"y" * (1 << 20)
        for _ in range(80):  # 80 MiB on one line: above the 64 MiB line limit
            fh.write(chunk)
        fh.write(b'"}\n{"k":"heartbeat","t":7}\n')
    done = subprocess.run(
        [sys.executable, "-m", "tokenwatch", "replay", str(path), "--speed", "0", "--headless"],
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(),
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 0, done.stderr
    assert f"{path}:8: skipped: a line longer than 64 MiB" in done.stderr
    events, warnings = read_events(path)
    assert events[-1].t == 7.0
    assert len(warnings) == 1


# ---------------------------------------------------------------------------- YAML
ALIAS_BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_the_alias_bomb_is_small() -> None:
    assert len(ALIAS_BOMB.encode()) < 500


def test_yaml_aliases_that_expand_too_far_are_refused() -> None:
    with pytest.raises(SchemaError, match=r"bomb.yaml:\d+: YAML aliases expand to more than"):
        parse_yaml(ALIAS_BOMB, "bomb.yaml")


def test_a_self_referencing_alias_is_refused() -> None:
    with pytest.raises(SchemaError, match=r"loop.yaml:1: .*refers to itself"):
        parse_yaml("a: &x [1, *x]\n", "loop.yaml")


def test_modest_aliases_still_work() -> None:
    data, lines = parse_yaml("base: &b {x: 1, y: [1, 2]}\none: *b\ntwo: {<<: *b, y: [3]}\n", "ok.yaml")
    assert data["one"] == {"x": 1, "y": [1, 2]}
    assert data["two"] == {"x": 1, "y": [3]}
    assert lines[("two",)] == 3


@pytest.mark.parametrize(
    "command",
    [
        ["sim", "--profile", "{path}", "--headless", "--duration", "1m", "--speed", "0"],
        ["check", "{path}"],
    ],
)
def test_alias_bombs_in_profiles_and_configs_are_one_line_errors(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    done = subprocess.run(
        [sys.executable, "-m", "tokenwatch", *(c.replace("{path}", str(path)) for c in command)],
        capture_output=True,
        text=True,
        timeout=30,
        env=cli_env(),
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert "YAML aliases expand to more than" in done.stderr


def test_an_alias_bomb_theme_is_reported_and_skipped(tmp_path: Path) -> None:
    from tokenwatch.frontends.tui.theme_loader import load_catalog

    (tmp_path / "bomb.yaml").write_text(ALIAS_BOMB)
    catalog = load_catalog([tmp_path])
    assert any("YAML aliases expand to more than" in p for p in catalog.problems)
    assert "dark" in catalog.themes


def test_duplicate_yaml_keys_name_both_lines() -> None:
    text = "run:\n  name: a\n  scenario: Offline\n  name: b\n"
    with pytest.raises(SchemaError, match=r"dup.yaml:4: run.name: duplicate key \(first on line 2\)"):
        parse_yaml(text, "dup.yaml")


# ---------------------------------------------------------------------------- Ctrl-C
def test_a_long_gap_in_run_time_still_answers_ctrl_c(tmp_path: Path) -> None:
    """A gap of 58 minutes (just short of a leap the reader leaves out, MIN_JUMP_S) is back-filled tick
    by tick (and a headless line a second): seconds of work in one event. Ctrl-C must stop it, and the
    run must end with its summary."""
    path = recording(tmp_path / "gap.jsonl", [b'{"k":"heartbeat","t":3480}'])
    assert MIN_JUMP_S > 3480 - 4
    args = ["replay", str(path), "--speed", "0", "--headless", "--interval", "1s"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenwatch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    assert proc.stdout is not None
    for _ in range(200):  # well into the gap: its lines are being written
        proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=PATIENCE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("Ctrl-C did not stop a replay filling a long gap")
    assert proc.returncode in (0, 130), err
    assert b"Traceback" not in err
    assert b"Total aggregate" in out  # the summary is printed


# ---------------------------------------------------------------------------- versions and extremes
@pytest.mark.parametrize("version", ["0", "-1", "true", '"1"', "1.0", "2", "null"])
def test_a_header_version_this_tokenwatch_does_not_read_is_a_clear_error(
    tmp_path: Path, version: str
) -> None:
    path = tmp_path / "v.jsonl"
    path.write_bytes(b'{"tokenwatch_recording": ' + version.encode() + b'}\n{"k":"heartbeat","t":1}\n')
    done = run_tokenwatch("summarize", str(path), timeout=30)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "recording format version" in done.stderr
    assert "this tokenwatch reads version 1" in done.stderr


def test_a_power_of_1_7e308_watts_does_not_crash_report(tmp_path: Path) -> None:
    path = recording(tmp_path / "hot.jsonl", [])
    row = b'"m":{"power_w":[1.7e308,700.0,1.7e308,1.7e308]}'
    with open(path, "ab") as fh:
        fh.write(b'{"k":"gpu_batch","t":5.5,"node_index":[0,0,1,1],"gpu":[0,1,0,1],' + row)
        fh.write(b',"throttle_reasons":[0,0,0,0]}\n{"k":"heartbeat","t":9}\n')
    out = tmp_path / "hot.html"
    done = run_tokenwatch("report", str(path), "-o", str(out), timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"{path}:8: skipped: bad gpu_batch record" in done.stderr
    assert "Traceback" not in done.stderr
    assert out.stat().st_size > 0


def test_a_run_start_with_no_nodes_is_refused_by_the_reader() -> None:
    start = {"k": "run_started", "t": 0, "name": "empty", "scenario": "Offline", "nodes": []}
    start |= {"gpus_per_node": 4, "source": "sim", "wall_epoch": 0}
    with pytest.raises(CodecError, match="nodes must be a list of 1 to"):
        loads(orjson.dumps(start))


@pytest.mark.parametrize("node_index", ["1e9", "-1"])
def test_a_progress_batch_naming_a_node_no_run_has_is_a_warning_naming_the_line(
    tmp_path: Path, node_index: str
) -> None:
    """A node index of 1e9 or -1 was accepted silently."""
    bad = f'{{"k":"progress_batch","t":3,"node_index":[{node_index}],"samples":[5],"tokens":[500]}}'
    path = recording(tmp_path / "bad-index.jsonl", [bad.encode()])
    events, warnings = read_events(path)
    assert len(events) == 6  # the run start and the heartbeats, nothing of the bad line
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{path}:8: skipped: bad progress_batch record: progress_batch.node_index")
    done = run_tokenwatch("summarize", str(path), timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"{path}:8: skipped" in done.stderr
