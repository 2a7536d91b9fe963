"""Property tests for the log presets and the terminal line splitter: random bytes, truncation, any
chunking of the stream. Outcome: events or skipped lines with warnings, never an exception, never a
count that goes back, and the same result however the bytes arrive."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenwatch.base.events import Event, LogLine, Notice, Progress
from tokenwatch.sources.harness_log import LogProgressParser
from tokenwatch.sources.terminal_lines import Piece, TerminalLineSplitter

from .conftest import DATA

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LOGS = DATA / "logs"
SAMPLES = {
    "vllm": (LOGS / "vllm-v1-0.10.1-a100-3line.log").read_bytes()
    + (LOGS / "gemma4-int4.log").read_bytes()[:6000],
    "sglang": (LOGS / "sglang-int4.log").read_bytes()[-12_000:],
    "nvidia-mlperf": (LOGS / "nvidia-llmlib-gptoss-b200-stdout.excerpt.txt").read_bytes(),
}
terminal_bytes = st.lists(
    st.sampled_from([b"\r", b"\n", b"\r\n", b"ab", b"x" * 7, "é".encode(), b"\x1b[31m", b"\xff"]), max_size=60
).map(b"".join)
cuts = st.lists(st.integers(min_value=0, max_value=10**6), max_size=25)


def chunked(data: bytes, positions: list[int]) -> list[bytes]:
    points = sorted({p % (len(data) + 1) for p in positions} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def split_all(data_chunks: list[bytes], limit: int) -> list[Piece]:
    splitter = TerminalLineSplitter(limit)
    pieces = [p for chunk in data_chunks for p in splitter.feed(chunk)]
    return pieces + splitter.flush()


@FUZZ
@given(data=terminal_bytes, positions=cuts, limit=st.sampled_from([4, 16, 1 << 16]))
def test_terminal_pieces_do_not_depend_on_chunking(data: bytes, positions: list[int], limit: int) -> None:
    whole = split_all([data], limit)
    assert split_all(chunked(data, positions), limit) == whole
    for piece in whole:
        assert b"\r" not in piece.data
        assert b"\n" not in piece.data
        assert len(piece.data) <= limit
    assert [p.number for p in whole] == sorted(p.number for p in whole)


def _run(preset: str, chunks: list[bytes]) -> list[Event]:
    parser = LogProgressParser.preset(preset, "n")
    return [e for chunk in chunks for e in parser.feed(chunk, 1.0)] + parser.close(1.0)


@FUZZ
@given(
    preset=st.sampled_from(sorted(SAMPLES)),
    junk=st.binary(max_size=3000),
    truncate=st.integers(min_value=0, max_value=20_000),
    positions=cuts,
)
def test_presets_survive_junk_and_truncation(
    preset: str, junk: bytes, truncate: int, positions: list[int]
) -> None:
    sample = SAMPLES[preset]
    stream = junk + sample[:truncate] + junk[::-1] + sample
    events = _run(preset, chunked(stream, positions))
    assert all(isinstance(e, LogLine | Progress | Notice) for e in events)
    tokens = [e.tokens_done for e in events if isinstance(e, Progress) and e.tokens_done is not None]
    if preset != "nvidia-mlperf":  # a bar whose sample count goes back is a new run, passed on as such
        assert tokens == sorted(tokens)
    assert all(0 <= t < 1e12 for t in tokens)
    # The same bytes in one piece give the same final figures.
    final = [e for e in _run(preset, [stream]) if isinstance(e, Progress)]
    chunked_final = [e for e in events if isinstance(e, Progress)]
    assert (final[-1] if final else None) == (chunked_final[-1] if chunked_final else None)


@FUZZ
@given(
    text=st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=300),
    preset=st.sampled_from(sorted(SAMPLES)),
)
def test_random_lines_never_raise(text: str, preset: str) -> None:
    events = _run(preset, [text.encode("utf-8") + b"\n", b"\r" + text.encode("utf-8")[::-1]])
    assert all(isinstance(e, LogLine | Progress | Notice) for e in events)
