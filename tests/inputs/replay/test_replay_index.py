"""The replay index of a recording (in this user's cache folder): built on the first pass, used on the
next open, rebuilt when stale or foreign, ignored when damaged, and replaced by keyframes in memory where
it cannot be written. Every seek through it must leave exactly the core a straight replay to that time leaves.

Cost: a 10-minute one-rack recording (the Server sample) played through a few times: ~3 s in all.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import shutil
from pathlib import Path

import orjson
import pytest

from tests.frontends.tui.apps import SERVER, core_until
from tests.frontends.tui.test_tui_replay_player import assert_same, until_at_end, until_settled
from tokenwatch.core import RackCore, RackSnapshot
from tokenwatch.core.snapshot_json import snapshot_json
from tokenwatch.inputs.replay.index import IndexWriter, recording_identity
from tokenwatch.inputs.replay.index_place import index_path_for, user_key
from tokenwatch.inputs.replay.player import ReplayPlayer
from tokenwatch.session import Session

TARGETS = (400.0, 95.0, 560.0, 0.0, 301.5, 300.0)  # 300: a keyframe's multiple exactly


@pytest.fixture(autouse=True)
def own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This user's signing key lives in the test's own cache folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return Path(shutil.copy(SERVER, folder / SERVER.name))


def as_json(snapshot: RackSnapshot) -> bytes:
    return orjson.dumps(snapshot_json(snapshot), option=orjson.OPT_SERIALIZE_NUMPY)


async def opened(path: Path, **kwargs: float | bool) -> tuple[ReplayPlayer, Session, asyncio.Task[None]]:
    player = ReplayPlayer(path, index=True, **kwargs)  # type: ignore[arg-type]
    session = Session(RackCore(), [player], flush_interval_s=None)
    player.bind(session)
    return player, session, asyncio.create_task(session.run())


async def first_pass(path: Path) -> list[str]:
    """Play ``path`` to the end once (which writes the index); the warnings met."""
    player, session, task = await opened(path, speed=0)
    await until_at_end(player)
    warnings = player.warnings
    session.stop()
    await task
    return warnings


async def assert_seeks_exact(player: ReplayPlayer, session: Session, path: Path) -> None:
    for target in TARGETS:
        player.seek(target)
        await until_settled(player)
        expected = core_until(path, target).snapshot()
        assert_same(session.core.snapshot(), expected)
        assert as_json(session.core.snapshot()) == as_json(expected)


async def test_the_first_pass_writes_the_index_and_the_next_open_seeks_with_it(recording: Path) -> None:
    assert await first_pass(recording) == []
    index = index_path_for(recording)
    assert index.is_file()
    assert [p.name for p in index.parent.iterdir()] == [index.name]  # no temporary file left
    assert [p.name for p in recording.parent.iterdir()] == [recording.name]  # nothing beside the recording
    player, session, task = await opened(recording, speed=0, paused=True)
    await until_settled(player)
    assert player.index_complete  # at once: nothing played yet
    # One keyframe every 20 s of the 10-minute run, and the empty start.
    assert player.keyframe_count >= 600 // 20
    await assert_seeks_exact(player, session, recording)
    assert player.warnings == []
    session.stop()
    await task


def pickled(core: RackCore) -> tuple[bytes, list[bytes]]:
    """The core's pickle and its arrays' bytes (out of band), as an index keeps them."""
    buffers: list[pickle.PickleBuffer] = []
    meta = pickle.dumps(core, protocol=5, buffer_callback=buffers.append)
    return meta, [bytes(buffer.raw()) for buffer in buffers]


def test_a_keyframe_restores_every_byte_of_its_core_with_the_zero_chunks_not_stored(recording: Path) -> None:
    core = core_until(recording, 400.0)
    writer = IndexWriter(index_path_for(recording), recording_identity(recording, None), user_key(), 30.0)
    try:
        writer.add(400.0, None, core)
        restored = writer.read_core(writer.keyframes[0])
        stored = writer.nbytes
    finally:
        writer.discard()
    _, arrays = pickled(core)
    assert pickled(restored)[1] == arrays  # every array byte for byte, zeros and unused capacity too
    assert as_json(restored.snapshot()) == as_json(core.snapshot())
    zero_chunks = [raw for _, length, raw in writer.chunks if length == 0]
    assert zero_chunks  # a one-rack core's preallocated series have all-zero stretches...
    assert stored < sum(len(a) for a in arrays) - sum(zero_chunks)  # ...which take no room in the index


async def test_seeks_during_the_first_pass_read_the_unfinished_index(recording: Path) -> None:
    player, session, task = await opened(recording, speed=0, start_s=590, paused=True)
    await until_settled(player)
    assert player.indexed
    assert not player.index_complete
    await assert_seeks_exact(player, session, recording)
    session.stop()
    await task
    assert not index_path_for(recording).exists()  # an unfinished pass leaves no index behind


async def test_a_stale_index_is_rebuilt(recording: Path) -> None:
    await first_pass(recording)
    index = index_path_for(recording)
    built = index.read_bytes()
    os.utime(recording, ns=(0, 10**18))  # the recording changed since (here: only its time)
    warnings = await first_pass(recording)
    assert [w for w in warnings if "stale" in w and "rebuilt" in w] != []
    assert index.read_bytes() != built
    player, session, task = await opened(recording, speed=0, paused=True)
    await until_settled(player)
    assert player.index_complete
    assert player.warnings == []
    session.stop()
    await task


async def test_an_index_signed_by_someone_else_is_not_trusted(
    recording: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await first_pass(recording)
    made_elsewhere = index_path_for(recording).read_bytes()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "another-user"))
    index_path_for(recording).write_bytes(made_elsewhere)  # e.g. a cache folder copied from another machine
    index_path_for(recording).chmod(0o600)
    player, session, task = await opened(recording, speed=0, paused=True, start_s=200)
    await until_settled(player)
    assert not player.index_complete  # rebuilt on this pass, not read
    assert any("another user" in w for w in player.warnings)
    await assert_seeks_exact(player, session, recording)
    session.stop()
    await task


@pytest.mark.parametrize("where", ["footer", "middle"])
async def test_a_damaged_index_is_ignored_with_one_warning(recording: Path, where: str) -> None:
    await first_pass(recording)
    index = index_path_for(recording)
    data = bytearray(index.read_bytes())
    if where == "footer":
        spots = [len(data) - 40]  # in the MAC
    else:
        table_offset = int.from_bytes(data[-72:-64], "little")  # the footer's first field
        spots = list(range(4096, table_offset - 8, 4096))  # in every core's arrays
    for at in spots:
        data[at : at + 8] = bytes(b ^ 0x5A for b in data[at : at + 8])
    index.write_bytes(bytes(data))
    player, session, task = await opened(recording, speed=0, paused=True, start_s=590)
    await until_settled(player)
    await assert_seeks_exact(player, session, recording)
    damaged = [w for w in player.warnings if "replay index" in w]
    assert len(damaged) == 1, player.warnings
    assert "\n" not in damaged[0]
    session.stop()
    await task


@pytest.mark.parametrize("how", ["read-only index folder", "name taken"])
async def test_an_index_that_cannot_be_written_falls_back_to_memory(recording: Path, how: str) -> None:
    folder = index_path_for(recording).parent
    if how == "read-only index folder":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        folder.chmod(0o500)
    else:
        index_path_for(recording).mkdir()  # a folder where the index would go
    try:
        player, session, task = await opened(recording, speed=0, paused=True, start_s=590)
        await until_settled(player)
        assert not player.indexed
        assert len([w for w in player.warnings if "keyframes kept in memory" in w]) == 1
        await assert_seeks_exact(player, session, recording)
        session.stop()
        await task
    finally:
        folder.chmod(0o700)


async def test_a_read_only_runs_folder_gets_an_index_and_nothing_is_written_beside_the_recording(
    recording: Path,
) -> None:
    before = sorted(recording.parent.iterdir())
    if os.geteuid() != 0:
        recording.parent.chmod(0o555)
    try:
        assert await first_pass(recording) == []
    finally:
        recording.parent.chmod(0o755)
    assert sorted(recording.parent.iterdir()) == before
    assert index_path_for(recording).is_file()


def test_only_a_large_recording_gets_an_index(tmp_path: Path) -> None:
    """A rack's recording keeps its keyframes in memory (no file beside it); from 32 MiB, an index."""
    from tokenwatch.inputs.replay.index import INDEX_FROM_BYTES, wants_index

    small, large = tmp_path / "rack.jsonl", tmp_path / "fleet.jsonl"
    small.write_bytes(b"x" * (INDEX_FROM_BYTES - 1))
    with open(large, "wb") as fh:
        fh.truncate(INDEX_FROM_BYTES)
    assert not wants_index(small)
    assert wants_index(large)
    assert not wants_index(tmp_path / "missing.jsonl")
