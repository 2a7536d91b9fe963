"""Lines as a terminal keeps them: ``\\n`` ends a line, ``\\r\\n`` too, a bare ``\\r`` ends a rewrite."""

from __future__ import annotations

import pytest

from tokenwatch.sources.terminal_lines import Piece, PieceKind, TerminalLineSplitter


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"a\nb\r\nc", [(1, b"a", "line"), (2, b"b", "line"), (3, b"c", "line")]),
        (b"10%\r50%\r100%\n", [(1, b"10%", "rewrite"), (1, b"50%", "rewrite"), (1, b"100%", "line")]),
        (b"10%\r100%\r\n", [(1, b"10%", "rewrite"), (1, b"100%", "line")]),
        (
            b"10%\r100%\r\r\nnext\n",
            [(1, b"10%", "rewrite"), (1, b"100%", "rewrite"), (1, b"100%", "shown"), (2, b"next", "line")],
        ),
        (b"x" * 9 + b"\r" + b"ok\n", [(1, b"", "cut"), (1, b"ok", "line")]),
        (b"x" * 9 + b"\nok", [(1, b"", "cut"), (2, b"ok", "line")]),
    ],
)
def test_pieces(data: bytes, expected: list[tuple[int, bytes, PieceKind]]) -> None:
    splitter = TerminalLineSplitter(8)
    pieces = splitter.feed(data) + splitter.flush()
    assert pieces == [Piece(*item) for item in expected]


def test_a_rewrite_is_read_when_the_next_byte_arrives() -> None:
    splitter = TerminalLineSplitter(64)
    assert splitter.feed(b"10%\r") == []  # \r\n or a rewrite? the next byte says
    assert splitter.feed(b"2") == [Piece(1, b"10%", "rewrite")]
    assert splitter.feed(b"0%\r\n") == [Piece(1, b"20%", "line")]
