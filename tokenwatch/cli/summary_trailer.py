"""``summarize``'s answer kept in the recording: written when a recording ends, read instead of a full pass.

One truth: the trailer is made by the very pass ``summarize`` runs (:func:`summarize_recording` over the
file just closed, then its ``--json`` object and its table), so ``summarize`` of a recording with a
trailer prints the same bytes as the full pass. It is written only where that pass met nothing to warn
of (a warning names the file's path, which may change), and read only where it still stands for the
file's bytes (:mod:`tokenwatch.recording.trailer`); otherwise ``summarize`` reads the whole recording
as before, with one warning line saying why when a trailer was there but unusable.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenwatch.recording.trailer import TrailerError, append_trailer, read_trailer, supports_trailer

# The trailer costs one summary pass when a recording ends, while the user waits to get their terminal back
# (~1 s per 4 MB here): past this size (a fleet's long recording) none is written, and summarize reads the
# recording whole, as it does one without a trailer.
TRAILER_MAX_BYTES = 32 * 1024 * 1024
_JSON = "summary_json"
_TEXT = "summary_text"


@dataclass(frozen=True, slots=True)
class TrailerSummary:
    """What ``summarize FILE`` prints: the ``--json`` object and the table."""

    json: dict[str, Any]
    text: str


def write_summary_trailer(path: str | Path) -> None:
    """Append the summary trailer to a finished ``.zst`` recording (nothing for other files, or where the
    summary pass warned or refused). A failed write leaves the file as it was and raises OSError."""
    if not supports_trailer(path) or Path(path).stat().st_size > TRAILER_MAX_BYTES:
        return
    # Imported here: the summary pass and its table are the trailer's makers, not its readers'.
    from tokenwatch.frontends.headless.summary_table import render_summary
    from tokenwatch.runs.errors import RunLoadError
    from tokenwatch.runs.from_core import summarize_recording

    try:
        summary, warnings = summarize_recording(path)
    except RunLoadError:  # no run start: summarize refuses it, and so has nothing to keep
        return
    if warnings:
        return
    append_trailer(path, {_JSON: summary.to_json(), _TEXT: render_summary(summary)})


def keep_summary_in_recording(path: str | None, recording_stopped: str | None) -> None:
    """After a session: its finished recording gets its summary trailer. A recording that stopped early
    (a full disk) gets none; a failed write or a second Ctrl-C leaves the file whole, without one."""
    if not path or recording_stopped is not None:
        return
    from tokenwatch.cli.usage import stderr_line

    try:
        write_summary_trailer(path)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        stderr_line(
            f"tokenwatch: {path}: its summary was not kept in it ({exc.strerror}); summarize reads it whole"
        )


def summary_from_trailer(path: str | Path) -> tuple[TrailerSummary | None, str | None]:
    """The summary the recording's trailer holds (None: read the recording) and, when a trailer was there
    but is not used, the one warning line saying why."""
    try:
        trailer = read_trailer(path)
    except TrailerError as exc:
        return None, f"{path}: its summary trailer is not used ({exc}); reading the whole recording"
    except OSError:
        return None, None  # the full pass says what is wrong with the file
    if trailer is None:
        return None, None
    json, text = trailer.content.get(_JSON), trailer.content.get(_TEXT)
    if not isinstance(json, dict) or not isinstance(text, str):
        return (
            None,
            f"{path}: its summary trailer is not used (its fields are damaged); reading the whole recording",
        )
    return TrailerSummary(json, text), None
