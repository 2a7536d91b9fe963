"""A finished recording keeps its summary in a trailer, and ``summarize`` prints it instead of reading the
whole file: byte for byte what the full pass prints (Offline, Server, a node failure, an interrupted run).
A trailer that is damaged, cut off, made by another tokenwatch (another version, or other code under the
same version) or no longer standing for the file's bytes
is one warning line and the full pass. Every other reader passes over the trailer as if it were not there.

The trailer's layout is rebuilt here from its description (a zstd skippable frame: magic 0x184D2A5E and
size, a JSON payload, its length, ``TWTRAILR``), not from the module that writes it.
"""

from __future__ import annotations

import hashlib
import shutil
import signal
import struct
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO_ROOT, RunCli, recorded_until, start_tokenwatch, unzstd, wait_until
from tokenwatch import __version__
from tokenwatch.base.build_stamp import code_digest
from tokenwatch.base.events import Event
from tokenwatch.cli.summary_trailer import write_summary_trailer
from tokenwatch.recording import read_events
from tokenwatch.recording.codec import dumps

SKIPPABLE = struct.pack("<I", 0x184D2A5E)
SAMPLES = ["gb300-nvl72-offline", "gb300-nvl72-server", "gb300-nvl72-node-failure"]


def trailer_frame(payload: bytes) -> bytes:
    return (
        SKIPPABLE
        + struct.pack("<I", len(payload) + 12)
        + payload
        + struct.pack("<I", len(payload))
        + b"TWTRAILR"
    )


def split_trailer(data: bytes) -> tuple[bytes, dict[str, object]]:
    """The body and the trailer's payload, found by the layout's own marks."""
    assert data.endswith(b"TWTRAILR")
    (length,) = struct.unpack("<I", data[-12:-8])
    start = len(data) - 12 - length - 8
    assert data[start : start + 4] == SKIPPABLE
    return data[:start], orjson.loads(data[start + 8 : start + 8 + length])


def lines_of(events: list[Event]) -> list[bytes]:
    """Events as recording lines: comparable (their numpy arrays are not, with ==)."""
    return [dumps(event) for event in events]


def summarize_both(run_cli: RunCli, path: Path) -> tuple[str, str, str]:
    """stdout of ``summarize`` and ``summarize --json``, and both stderrs joined."""
    text = run_cli("summarize", str(path))
    as_json = run_cli("summarize", "--json", str(path))
    assert text.returncode == 0, text.stderr
    assert as_json.returncode == 0, as_json.stderr
    return text.stdout, as_json.stdout, text.stderr + as_json.stderr


def check_trailer_gives_the_full_pass(run_cli: RunCli, with_trailer: Path, tmp_path: Path) -> None:
    body, payload = split_trailer(with_trailer.read_bytes())
    assert payload["body_bytes"] == len(body)
    assert payload["body_sha256"] == hashlib.sha256(body).hexdigest()
    # The same recording without its trailer, under another name: the full pass.
    bare = tmp_path / "elsewhere" / "bare.jsonl.zst"
    bare.parent.mkdir()
    bare.write_bytes(body)
    expected = summarize_both(run_cli, bare)
    assert summarize_both(run_cli, with_trailer) == expected
    assert expected[2] == ""  # neither said a word on stderr
    # And the trailer is invisible to every reader: the same events, no warning, the same decoded bytes.
    events, warnings = read_events(with_trailer)
    assert warnings == []
    assert lines_of(events) == lines_of(read_events(bare)[0])
    assert unzstd(with_trailer.read_bytes()) == unzstd(body)


@pytest.mark.parametrize("sample", SAMPLES)
def test_a_sample_runs_trailer_prints_what_the_full_pass_prints(
    sample: str, run_cli: RunCli, tmp_path: Path
) -> None:
    original = REPO_ROOT / "sample_runs" / f"{sample}.jsonl.zst"
    rec = tmp_path / "run.jsonl.zst"
    shutil.copyfile(original, rec)
    write_summary_trailer(rec)  # what a recording's end does
    assert rec.read_bytes()[: original.stat().st_size] == original.read_bytes()
    check_trailer_gives_the_full_pass(run_cli, rec, tmp_path)


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_sim_record_ends_its_recording_with_the_trailer(
    scenario: str, run_cli: RunCli, tmp_path: Path
) -> None:
    rec = tmp_path / "run.jsonl.zst"
    faults = ("--faults", "node07:down@2m") if scenario == "Server" else ()
    sim = run_cli(
        "sim", "--speed", "0", "--duration", "4m", "--seed", "3", "--scenario", scenario, *faults,
        "--headless", "--interval", "1h", "--record", str(rec),
    )  # fmt: skip
    assert sim.returncode == 0, sim.stderr
    check_trailer_gives_the_full_pass(run_cli, rec, tmp_path)


def test_an_interrupted_run_keeps_its_summary_too(run_cli: RunCli, tmp_path: Path) -> None:
    rec = tmp_path / "run.jsonl.zst"
    proc = start_tokenwatch("sim", "--speed", "120", "--headless", "--interval", "30s", "--record", str(rec))
    try:
        wait_until(lambda: (recorded_until(rec) or 0.0) >= 30, "30 s recorded")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    check_trailer_gives_the_full_pass(run_cli, rec, tmp_path)
    assert orjson.loads(run_cli("summarize", "--json", str(rec)).stdout)["end_reason"] == "interrupted"


def test_summarize_prints_what_the_trailer_holds(run_cli: RunCli, tmp_path: Path) -> None:
    """The trailer is what is read (not a full pass that happens to agree): a trailer made for these bytes
    with other words in it is printed as it stands."""
    body = (REPO_ROOT / "sample_runs" / "gb300-nvl72-server.jsonl.zst").read_bytes()
    made = tmp_path / "made.jsonl.zst"
    made.write_bytes(body)
    write_summary_trailer(made)
    payload = {
        "tokenwatch_trailer": 1,
        "recording_version": 1,
        "tokenwatch_version": __version__,
        "tokenwatch_build": _payload(made)["tokenwatch_build"],  # this code's, as its own trailer names it
        "body_bytes": len(body),
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "content": {"summary_json": {"name": "from the trailer"}, "summary_text": "the trailer's table"},
    }
    rec = tmp_path / "run.jsonl.zst"
    rec.write_bytes(body + trailer_frame(orjson.dumps(payload)))
    text, as_json, err = summarize_both(run_cli, rec)
    assert (text, orjson.loads(as_json), err) == ("the trailer's table\n", {"name": "from the trailer"}, "")


def _payload(rec: Path) -> dict[str, object]:
    return split_trailer(rec.read_bytes())[1]


BAD_TRAILERS = {
    "bytes changed": lambda body, p: body + trailer_frame(orjson.dumps({**p, "body_sha256": "0" * 64})),
    "bytes added": lambda body, p: body + trailer_frame(orjson.dumps({**p, "body_bytes": len(body) - 1})),
    "another tokenwatch": lambda body, p: (
        body + trailer_frame(orjson.dumps({**p, "tokenwatch_version": "0.0.1"}))
    ),
    "another build of this version": lambda body, p: (
        body + trailer_frame(orjson.dumps({**p, "tokenwatch_build": "0" * 32}))
    ),
    "damaged JSON": lambda body, p: body + trailer_frame(orjson.dumps(p)[:-9] + b"!" * 9),
    "cut off": lambda body, p: (body + trailer_frame(orjson.dumps(p)))[:-10],
    "cut in its payload": lambda body, p: (body + trailer_frame(orjson.dumps(p)))[: len(body) + 200],
}


@pytest.mark.parametrize("damage", list(BAD_TRAILERS))
def test_a_bad_trailer_is_one_warning_and_the_full_pass(damage: str, run_cli: RunCli, tmp_path: Path) -> None:
    original = REPO_ROOT / "sample_runs" / "gb300-nvl72-node-failure.jsonl.zst"
    good = tmp_path / "good.jsonl.zst"
    shutil.copyfile(original, good)
    write_summary_trailer(good)
    body, payload = split_trailer(good.read_bytes())
    bad = tmp_path / "bad.jsonl.zst"
    bad.write_bytes(BAD_TRAILERS[damage](body, payload))
    text = run_cli("summarize", str(bad))
    as_json = run_cli("summarize", "--json", str(bad))
    assert text.returncode == 0, text.stderr
    assert as_json.returncode == 0, as_json.stderr
    full_text, full_json = run_cli("summarize", str(original)), run_cli("summarize", "--json", str(original))
    assert (text.stdout, as_json.stdout) == (full_text.stdout, full_json.stdout)
    for err in (text.stderr, as_json.stderr):
        lines = err.splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith(f"warning: {bad}: its summary trailer is not used (")
        assert lines[0].endswith("reading the whole recording")
    # Nothing in the recording is lost for it: every reader reads the events the original holds.
    events, warnings = read_events(bad)
    assert warnings == []
    assert lines_of(events) == lines_of(read_events(original)[0])


def test_a_plain_recording_gets_no_trailer(run_cli: RunCli, tmp_path: Path) -> None:
    """A plain file's readers (any JSON-lines tool) would meet a foreign last line: it stays lines only."""
    rec = tmp_path / "run.jsonl"
    sim = run_cli(
        "sim", "--speed", "0", "--duration", "2m", "--headless", "--interval", "1h", "--record", str(rec)
    )
    assert sim.returncode == 0, sim.stderr
    lines = rec.read_bytes().splitlines()
    assert all(orjson.loads(line) for line in lines)
    assert orjson.loads(lines[-1])["k"] == "run_ended"


def test_a_recording_past_the_size_limit_gets_no_trailer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long fleet recording would keep the terminal for the summary pass at its end: none is made."""
    import tokenwatch.cli.summary_trailer as trailer_module

    original = REPO_ROOT / "sample_runs" / "gb300-nvl72-server.jsonl.zst"
    rec = tmp_path / "run.jsonl.zst"
    shutil.copyfile(original, rec)
    monkeypatch.setattr(trailer_module, "TRAILER_MAX_BYTES", original.stat().st_size - 1)
    write_summary_trailer(rec)
    assert rec.read_bytes() == original.read_bytes()


def test_the_build_stamp_follows_the_code_not_the_version(tmp_path: Path) -> None:
    """A copy of the package has the package's stamp; one byte changed in one module gives another."""
    copy = tmp_path / "tokenwatch"
    shutil.copytree(REPO_ROOT / "tokenwatch", copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert code_digest(copy) == code_digest()
    module = copy / "__init__.py"
    module.write_bytes(module.read_bytes() + b"\n")
    assert code_digest(copy) != code_digest()
