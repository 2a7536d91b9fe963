"""A user error is one line: :class:`UsageError` (exit status 2), the parser that raises one for its own
errors, and the lines warnings and errors are written as on stderr."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class UsageError(Exception):
    """A user error: printed as one line, exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def stderr_line(message: str) -> None:
    """One line on stderr; what it quotes from files and nodes cannot drive the terminal."""
    from tokenwatch.base.formatting import printable

    sys.stderr.write(printable(message.rstrip("\n")) + "\n")


def print_warnings(warnings: list[str], limit: int = 20) -> None:
    """Skipped input lines, one per line on stderr, at most ``limit`` of them."""
    for warning in warnings[:limit]:
        stderr_line(f"warning: {warning}")
    if len(warnings) > limit:
        stderr_line(f"warning: ... and {len(warnings) - limit} more skipped lines")
