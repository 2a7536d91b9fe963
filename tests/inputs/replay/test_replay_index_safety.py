"""Files a replay keeps cannot be turned against their user.

A recording may sit in a shared, group-writable runs folder. What anyone could plant there (a symlink
under a name the index writer used, a FIFO named ``FILE.twidx``, a FIFO in place of the recording) must not
overwrite the user's files or freeze a replay; the key that signs indexes must be private or refused;
and an index made by other code (a class moved or changed) is rebuilt, never a traceback at a seek.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import run_tokenwatch
from tests.frontends.tui.apps import SERVER, core_until
from tests.frontends.tui.test_tui_replay_player import until_settled
from tests.inputs.replay.test_replay_index import first_pass, opened
from tokenwatch.inputs.replay import index as replay_index
from tokenwatch.inputs.replay.index import (
    IndexReader,
    IndexWriter,
    UnusableIndexError,
    recording_identity,
)
from tokenwatch.inputs.replay.index_code import bytecode_of, code_digest
from tokenwatch.inputs.replay.index_place import cache_folder, create_private, index_path_for, user_key

# What a seek needs at most from a subprocess on a loaded 2-core machine; a hang goes far beyond it.
CEILING_S = 120


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return Path(shutil.copy(SERVER, folder / SERVER.name))


def open_in_a_dashboard_player(recording: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """What the dashboard does first with a large recording: a player bound to a session opens the index.
    In a subprocess, so a replay that blocks fails the test at the ceiling instead of hanging it."""
    script = (
        "import asyncio, sys\n"
        "from tokenwatch.inputs.replay.player import ReplayPlayer\n"
        "from tokenwatch.core import RackCore\n"
        "from tokenwatch.session import Session\n"
        "async def main():\n"
        "    player = ReplayPlayer(sys.argv[1], index=True, paused=True)\n"
        "    player.bind(Session(RackCore(), [player], flush_interval_s=None))\n"
        "    print('indexed' if player.indexed else 'in memory')\n"
        "    for warning in player.warnings:\n"
        "        print('warning:', warning)\n"
        "asyncio.run(main())\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, str(recording)],
        capture_output=True,
        text=True,
        timeout=CEILING_S,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        stdin=subprocess.DEVNULL,
    )


def test_a_fifo_named_file_twidx_beside_the_recording_does_not_freeze_the_replay(
    recording: Path, own_cache: Path
) -> None:
    os.mkfifo(recording.with_name(recording.name + ".twidx"))
    done = open_in_a_dashboard_player(recording, own_cache)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["indexed"]  # the FIFO is not the index: never opened


def test_a_fifo_where_the_index_goes_is_refused_with_one_warning(recording: Path, own_cache: Path) -> None:
    os.mkfifo(index_path_for(recording))
    done = open_in_a_dashboard_player(recording, own_cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "in memory"
    assert len(lines) == 2, lines
    assert "FIFO" in lines[1]
    assert "Traceback" not in done.stderr


def test_a_fifo_in_place_of_the_recording_is_one_line_and_exit_2(tmp_path: Path) -> None:
    fifo = tmp_path / "run.jsonl.zst"
    os.mkfifo(fifo)
    for command in ("replay", "summarize"):
        args = [command, str(fifo), *(["--headless", "--speed", "0"] if command == "replay" else [])]
        done = run_tokenwatch(*args, timeout=CEILING_S)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == f"tokenwatch {command}: {fifo}: is a FIFO, not a recording"


async def test_symlinks_planted_at_every_name_the_writer_used_overwrite_nothing(
    recording: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "precious.txt"
    victim.write_text("the user's own work\n")
    index = index_path_for(recording)
    planted = [
        recording.with_name(recording.name + ".twidx"),  # where the index used to be written
        # the temporary names the writer used to make (its pid), beside the recording and beside the index
        *(
            folder / f".{recording.name}.twidx.{os.getpid()}.tmp"
            for folder in (recording.parent, index.parent)
        ),
        index.parent / f".{index.name}.{os.getpid()}.tmp",
    ]
    for name in planted:
        name.symlink_to(victim)
    assert await first_pass(recording) == []
    assert victim.read_text() == "the user's own work\n"
    assert index.is_file()
    assert not index.is_symlink()
    assert index.stat().st_mode & 0o777 == 0o600


def test_the_temporary_file_is_new_private_and_randomly_named(recording: Path) -> None:
    target = index_path_for(recording)
    made = [create_private(target) for _ in range(3)]
    try:
        names = {path.name for _, path in made}
        assert len(names) == 3  # random, not derived from anything an attacker knows
        assert all(str(os.getpid()) not in name for name in names)
        for fd, path in made:
            assert os.fstat(fd).st_mode & 0o777 == 0o600
            assert path.parent == target.parent
    finally:
        for fd, path in made:
            os.close(fd)
            path.unlink()


def test_the_cache_folder_is_made_private(own_cache: Path) -> None:
    folder = cache_folder()
    assert folder == own_cache / "tokenwatch"
    assert folder.stat().st_mode & 0o777 == 0o700
    user_key()
    assert (folder / "index.key").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("what", "mode", "fix"),
    [("key file", 0o644, "chmod 600"), ("key folder", 0o755, "chmod 700")],
)
async def test_a_key_open_to_others_is_refused_in_one_line_and_the_replay_goes_on(
    recording: Path, what: str, mode: int, fix: str
) -> None:
    user_key()
    path = cache_folder() / "index.key" if what == "key file" else cache_folder()
    path.chmod(mode)
    player, session, task = await opened(recording, speed=0, paused=True, start_s=300)
    await until_settled(player)
    assert not player.indexed  # keyframes in memory: nothing signed with a key others may know
    refused = [w for w in player.warnings if "open to other users" in w]
    assert len(refused) == 1, player.warnings
    assert f"{fix} {path}" in refused[0]
    assert "\n" not in refused[0]
    session.stop()
    await task


async def test_two_users_of_one_shared_recording_keep_an_index_each(
    recording: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await first_pass(recording) == []
    mine = index_path_for(recording)
    built = mine.read_bytes()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "colleague"))
    assert await first_pass(recording) == []  # theirs: built without a word about mine
    assert index_path_for(recording) != mine
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    player, session, task = await opened(recording, speed=0, paused=True)
    await until_settled(player)
    assert player.index_complete  # mine, used at once
    assert player.warnings == []
    assert mine.read_bytes() == built
    session.stop()
    await task


async def test_an_index_made_by_other_code_is_rebuilt(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as other_version:
        other_version.setattr(replay_index, "_format_facts", lambda: ("another layout",))
        assert await first_pass(recording) == []
    player, session, task = await opened(recording, speed=0, paused=True)
    await until_settled(player)
    assert not player.index_complete  # being rebuilt on this pass
    rebuilt = [w for w in player.warnings if "another version of tokenwatch" in w]
    assert len(rebuilt) == 1, player.warnings
    assert "rebuilt" in rebuilt[0]
    session.stop()
    await task


@pytest.fixture
def movable_module() -> Iterator[types.ModuleType]:
    """A module of its own holding a class a core can carry: removing it is a class that moved away."""
    module = types.ModuleType("tokenwatch_moved_away_for_a_test")
    marker: type = dataclass(frozen=True, slots=True)(
        type("Marker", (), {"__annotations__": {"value": "int"}})
    )
    marker.__module__ = module.__name__
    module.Marker = marker  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module
    sys.modules.pop(module.__name__, None)


def _index_with_a_class_that_then_moves(recording: Path, module: types.ModuleType) -> tuple[Path, object]:
    core = core_until(recording, 200.0)
    core.moved = module.Marker(7)  # type: ignore[attr-defined]
    target = index_path_for(recording)
    writer = IndexWriter(target, recording_identity(recording, None), user_key(), 30.0)
    writer.add(200.0, None, core)
    writer.commit()
    writer.close()
    del sys.modules[module.__name__]  # moved: no longer importable under that name
    return target, writer.keyframes[0]


def test_an_index_whose_class_moved_is_found_stale_at_open(
    recording: Path, movable_module: types.ModuleType
) -> None:
    target, _ = _index_with_a_class_that_then_moves(recording, movable_module)
    with pytest.raises(UnusableIndexError, match="another version of tokenwatch"):
        IndexReader(target, recording, None, user_key())


def test_a_pickle_that_fails_to_load_is_one_line_not_a_traceback(
    recording: Path, movable_module: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay_index, "code_digest", lambda *_: "the same")  # as if the digest missed it
    target, keyframe = _index_with_a_class_that_then_moves(recording, movable_module)
    reader = IndexReader(target, recording, None, user_key())
    try:
        with pytest.raises(UnusableIndexError, match=r"does not load \(ModuleNotFoundError\)"):
            reader.read_core(keyframe)  # type: ignore[arg-type]
    finally:
        reader.close()


def test_the_digest_follows_the_code_not_a_number() -> None:
    module = types.ModuleType("tokenwatch_digest_probe")
    sys.modules[module.__name__] = module
    try:
        name = (module.__name__, "Probe")

        def define(**fields: str) -> None:
            cls: type = dataclass(frozen=True)(type("Probe", (), {"__annotations__": fields}))
            cls.__module__ = module.__name__
            module.Probe = cls  # type: ignore[attr-defined]

        define(a="int")
        first = code_digest([name], ())
        define(a="int")
        assert code_digest([name], ()) == first  # the same code, the same digest
        define(a="int", b="float")
        assert code_digest([name], ()) != first  # a field more
        define(a="str")
        assert code_digest([name], ()) != first  # a field's type
        del module.Probe
        assert code_digest([name], ()) != first  # moved away
        define(a="int")
        assert code_digest([name], ("format 2",)) != first  # the format's constants
    finally:
        sys.modules.pop(module.__name__, None)


def test_the_format_digest_follows_the_writer_and_reader_code() -> None:
    def write_v1(chunks: list[int]) -> bytes:
        return bytes(chunks)

    def write_v1_again(chunks: list[int]) -> bytes:
        return bytes(chunks)

    def write_v2(chunks: list[int]) -> bytes:
        return bytes(reversed(chunks))

    assert bytecode_of(write_v1) == bytecode_of(write_v1_again)
    assert bytecode_of(write_v1) != bytecode_of(write_v2)
