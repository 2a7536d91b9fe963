"""A recording cannot be destroyed by a typo.

An output that is one of the inputs (by any path: another spelling, a symlink, a hard link) is always
refused; two outputs on one file are refused; an output onto an existing file needs --force.
Every refusal is one line and exit status 2, and leaves the file as it was.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_RUNS, RunCli, unzstd

SERVER = SAMPLE_RUNS / "gb300-nvl72-server.jsonl.zst"
SIM = ("sim", "--speed", "0", "--duration", "2m", "--headless", "--interval", "1m")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl.zst"
    shutil.copyfile(SERVER, path)
    return path


def refused(done: object, says: str) -> None:
    assert done.returncode == 2, done.stderr  # type: ignore[attr-defined]
    assert done.stderr.count("\n") == 1, done.stderr  # type: ignore[attr-defined]
    assert says in done.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in done.stderr  # type: ignore[attr-defined]


def aliases(path: Path, tmp_path: Path) -> list[Path]:
    """The same file by other names: a longer spelling, a symlink, a hard link."""
    (tmp_path / "sub").mkdir(exist_ok=True)
    link = tmp_path / "link.jsonl.zst"
    link.symlink_to(path)
    hard = tmp_path / "hard.jsonl.zst"
    os.link(path, hard)
    return [path, tmp_path / "sub" / ".." / path.name, link, hard]


def test_report_onto_its_own_input_is_always_refused(
    run_cli: RunCli, recording: Path, tmp_path: Path
) -> None:
    before = digest(recording)
    for alias in aliases(recording, tmp_path):
        for force in ([], ["--force"]):
            done = run_cli("report", str(recording), "-o", str(alias), *force)
            refused(done, "is the input")
    assert digest(recording) == before


def test_report_onto_the_second_of_two_inputs_is_refused(
    run_cli: RunCli, recording: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.jsonl.zst"
    shutil.copyfile(SERVER, other)
    before = digest(other)
    refused(run_cli("report", str(recording), str(other), "-o", str(other), "--force"), "is the input")
    assert digest(other) == before


def test_replay_outputs_onto_the_recording_are_always_refused(
    run_cli: RunCli, recording: Path, tmp_path: Path
) -> None:
    before = digest(recording)
    for alias in aliases(recording, tmp_path):
        refused(
            run_cli("replay", str(recording), "--speed", "0", "--jsonl", str(alias), "--force"),
            "is the input",
        )
        refused(run_cli("replay", str(recording), "--speed", "0", "--record", str(alias)), "is the input")
    assert digest(recording) == before


def test_jsonl_and_record_on_one_file_are_refused(run_cli: RunCli, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    refused(run_cli(*SIM, "--jsonl", str(out), "--record", str(out)), "the same file")
    refused(run_cli(*SIM, "--jsonl", str(out), "--record", str(out), "--force"), "the same file")
    assert not out.exists()


def test_jsonl_onto_an_existing_file_needs_force(run_cli: RunCli, tmp_path: Path) -> None:
    out = tmp_path / "snaps.jsonl"
    out.write_bytes(b"precious\n")
    refused(run_cli(*SIM, "--jsonl", str(out)), "already exists")
    assert out.read_bytes() == b"precious\n"
    done = run_cli(*SIM, "--jsonl", str(out), "--force")
    assert done.returncode == 0, done.stderr
    assert out.read_bytes().startswith(b'{"t":60.0')  # overwritten on purpose


def test_report_onto_an_existing_file_needs_force(run_cli: RunCli, recording: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    out.write_text("an older report")
    refused(run_cli("report", str(recording), "-o", str(out)), "already exists")
    assert out.read_text() == "an older report"
    done = run_cli("report", str(recording), "-o", str(out), "--force")
    assert done.returncode == 0, done.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_a_profile_or_config_is_an_input_too(run_cli: RunCli, tmp_path: Path) -> None:
    config = tmp_path / "rack.yaml"
    config.write_text("run: {name: x, scenario: Offline}\nnodes: {gpus_per_node: 1}\n")
    before = config.read_text()
    refused(run_cli("watch", str(config), "--headless", "--jsonl", str(config), "--force"), "is the input")
    refused(run_cli("watch", str(config), "--headless", "--record", str(config)), "is the input")
    assert config.read_text() == before


def test_export_never_writes_over_its_input(run_cli: RunCli, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    victim = folder / "nodes.csv"  # a recording that happens to carry the name of an exported table
    victim.write_bytes(unzstd(SERVER.read_bytes()))
    before = digest(victim)
    refused(run_cli("export", str(victim), "--csv", str(folder)), "is the input")
    assert digest(victim) == before
