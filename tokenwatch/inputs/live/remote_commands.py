"""Remote command lines, built only with ``shlex.quote``: a config value is always one inert word.

Every long-lived command runs under a small POSIX ``sh`` wrapper. The program runs in the
background; a watcher reads the channel's stdin and kills it at EOF. Without a pty sshd sends no
SIGHUP when a channel closes, and a ``tail -F`` of a quiet file would outlive us on the node.
Values reach the script as positional parameters (``"$1"``), never pasted into the script text.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from tokenwatch.inputs.live.tail_fingerprint import TailFingerprint


def _watched_script(program: str, *, merge_stderr: bool) -> str:
    """``program`` (sh words) in the background with stdin /dev/null; a watcher reads the channel's
    stdin and kills it at EOF; ``wait`` hands the program's exit status back to sshd."""
    redirect = "2>&1 " if merge_stderr else ""
    return (
        f"exec 3<&0; LC_ALL=C {program} {redirect}& c=$!; "
        '{ cat >/dev/null; kill "$c"; } <&3 >/dev/null 2>&1 & '
        'exec 3<&-; wait "$c"'
    )


# $1 path, $2 inode we read before ('' = none), $3 byte offset already read, $4 and $5 how many bytes
# of the file's start and of the bytes before the offset we remember, $6 their MD5 ('' = none). Resume
# at the offset when the file is the same one (same inode), no shorter, and those bytes are still the
# ones read (a node without md5sum skips that check); otherwise it was rotated, or truncated (and may
# have grown again) while we were away: start from its beginning. The first output line says which.
_TAIL_SCRIPT = (
    'p=$1; want=$2; off=$3; st=$(stat -L -c "%i %s" -- "$p" 2>/dev/null) || st="- 0"; '
    "ino=${st% *}; size=${st#* }; start=0; "
    'if [ -n "$want" ] && [ "$ino" = "$want" ] && [ "$size" -ge "$off" ]; then start=$off; '
    'if [ -n "$6" ]; then sum=$( { head -c "$4" -- "$p"; tail -c +"$((off - $5 + 1))" -- "$p" | '
    'head -c "$5"; } 2>/dev/null | md5sum 2>/dev/null ); sum=${sum%% *}; '
    'if [ -n "$sum" ] && [ "$sum" != "$6" ]; then start=0; fi; fi; fi; '
    'printf "TW-START %s %s\\n" "$ino" "$start"; '
) + _watched_script('tail -c +"$((start + 1))" -F -- "$p"', merge_stderr=True)

TAIL_HEADER = b"TW-START "


def watched(argv: Sequence[str], *, merge_stderr: bool = False) -> str:
    """``argv`` as a remote command that dies with its channel."""
    script = _watched_script('"$@"', merge_stderr=merge_stderr)
    return shlex.join(["sh", "-c", script, "tokenwatch", *argv])


def tail_command(
    path: str, inode: str | None, offset: int, fingerprint: TailFingerprint | None = None
) -> str:
    """Follow ``path`` by name from ``offset`` if it is still the file with ``inode`` (and, given a
    ``fingerprint`` of what was read, still holds those bytes).

    ``tail -F`` announces rotation and truncation on stderr; stderr is merged into stdout so the
    announcements arrive in order with the data (see :mod:`tokenwatch.inputs.live.tail_stream`).
    Output: one ``TW-START <inode|-> <start>`` line, then the file's bytes from ``start``."""
    if offset < 0:
        raise ValueError("offset must be >= 0")
    fp = fingerprint if fingerprint is not None and (fingerprint.head or fingerprint.tail) else None
    check = [str(len(fp.head)), str(len(fp.tail)), fp.digest()] if fp is not None else ["0", "0", ""]
    return shlex.join(["sh", "-c", _TAIL_SCRIPT, "tokenwatch", path, inode or "", str(offset), *check])


def stat_command(path: str) -> str:
    """``<inode> <size>`` of ``path`` (GNU stat, following symlinks)."""
    return shlex.join(["stat", "-L", "-c", "%i %s", "--", path])


# $1 path, $2 most bytes to send. One header line, then the file's last bytes up to its size now:
# TW-BACKLOG <inode|-> <size> <mtime> <node's clock now> <first byte sent>. mtime and "now" come from the
# node's own clock, read together, so the reader can correct for the node's offset from its own clock.
_BACKLOG_SCRIPT = (
    'p=$1; max=$2; st=$(stat -L -c "%i %s" -- "$p" 2>/dev/null) || '
    '{ printf "TW-BACKLOG - 0 0 0 0\\n"; exit 0; }; '
    "ino=${st% *}; size=${st#* }; "
    'mt=$(date -r "$p" +%s.%N 2>/dev/null) || mt=0; now=$(date +%s.%N); start=0; '
    'if [ "$size" -gt "$max" ]; then start=$((size - max)); fi; '
    'printf "TW-BACKLOG %s %s %s %s %s\\n" "$ino" "$size" "$mt" "$now" "$start"; '
    'tail -c +"$((start + 1))" -- "$p" | head -c "$((size - start))"'
)

BACKLOG_HEADER = b"TW-BACKLOG "


def backlog_command(path: str, max_bytes: int) -> str:
    """``path``'s content up to its size now (its last ``max_bytes``), after one header line."""
    return shlex.join(["sh", "-c", _BACKLOG_SCRIPT, "tokenwatch", path, str(max_bytes)])
