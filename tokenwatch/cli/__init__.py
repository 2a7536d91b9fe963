"""The ``tokenwatch`` command. Every user error is one line and exit status 2; never a traceback."""

from __future__ import annotations

import os
import sys

# tokenwatch does no linear algebra worth threads: OpenBLAS's thread pool would cost ~0.1 s of CPU at
# every start (and idle threads on every core while watching). Set before numpy is first imported;
# a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from tokenwatch.cli.parser import parse
from tokenwatch.cli.usage import UsageError, stderr_line


def _user_errors() -> tuple[type[BaseException], ...]:
    from tokenwatch.base.durations import DurationError
    from tokenwatch.base.yaml_schema import SchemaError
    from tokenwatch.inputs.sim.faults import FaultError
    from tokenwatch.inputs.watch import WatchSetupError
    from tokenwatch.recording import RecordingError, RecordingFormatError
    from tokenwatch.runs.errors import RunLoadError
    from tokenwatch.sources.errors import SourceFormatError

    return (
        UsageError,
        DurationError,
        FaultError,
        SchemaError,
        RecordingError,
        RecordingFormatError,
        RunLoadError,
        SourceFormatError,
        WatchSetupError,
    )


def error_line(command: str | None, message: str) -> str:
    """``tokenwatch sim: <message>``: the command named once, whoever raised the message (the parser's
    own errors already start with it)."""
    if message.startswith("tokenwatch"):
        return message
    return f"tokenwatch {command}: {message}" if command else f"tokenwatch: {message}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command: str | None = None
    try:
        args = parse(argv)
        command = args.command
        from tokenwatch.cli.commands import COMMANDS

        return COMMANDS[args.command](args)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader of our stdout went away (e.g. `| head`): not an error worth a message.
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if isinstance(exc, _user_errors()):
            stderr_line(error_line(command, str(exc)))
            return 2
        if os.environ.get("TOKENWATCH_DEBUG"):
            raise
        stderr_line(
            f"tokenwatch: internal error: {type(exc).__name__}: {exc} (TOKENWATCH_DEBUG=1 shows where)"
        )
        return 1
