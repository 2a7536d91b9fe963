"""Host lists in ClusterShell/Slurm syntax, expanded by ClusterShell's ``NodeSet``, and the hosts of
a Slurm job.

``node[01-18]`` -> node01 ... node18 (zero padding kept); ``node[1-3,7],gpu05`` -> node1 node2 node3
node7 gpu05; ``rack[1-2]-node[01-18]`` -> every rack1 node, then every rack2 node; ``node[0-10/5]``
steps by 5. Comma-separated items keep the order they are written in (within one item, NodeSet's
sorted order); a host named twice counts once.

One extension: single-letter ranges, ``gpu-[1-2]-[a-b]`` or ``[a-c,x]`` (one case per range), which
neither ClusterShell nor Slurm reads. Refused: @groups and the set operators ``! & ^`` (a host list
here only names hosts), and lists of more than :data:`MAX_HOSTS` hosts, counted from the ranges
before anything is built, so ``n[1-10000000]`` fails at once instead of making ten million names.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException, NodeSetParseRangeError

from tokenwatch.base.formatting import one_line

MAX_HOSTS = 100_000  # a rack is 18 nodes and a large fleet a few thousand: beyond this it is a typo
_ITEM_COMMA = re.compile(r",(?![^\[]*\])")  # a comma outside brackets
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_NUMBERS = re.compile(r"^\s*(\d+)(?:-(\d+)(?:/(\d+))?)?\s*$")
_LETTER_RANGE = re.compile(r"^\s*([a-zA-Z])(?:-([a-zA-Z]))?\s*$")
# A letter range goes through NodeSet as the letters' code points between two marks (a private-use
# character, never in a host name), which are turned back into letters afterwards.
_MARK = "\ue000"
_MARKED = re.compile(f"{_MARK}(\\d+){_MARK}")


class HostListError(ValueError):
    """A host list that cannot be read (one line)."""


def expand_hostlist(text: str) -> list[str]:
    """Every host named by ``text``, in order, without duplicates."""
    if _MARK in text:
        raise HostListError(f"bad host list {text!r}: character U+E000 is not allowed")
    if any(c in text for c in "@!&^"):
        raise HostListError(f"bad host list {text!r}: @groups and the operators ! & ^ are not supported")
    if not text.strip():
        raise HostListError("bad host list '': empty host list")
    items = [item.strip() for item in _ITEM_COMMA.split(text.strip())]
    if not all(items):
        raise HostListError(f"bad host list {text!r}: empty host between commas")
    if sum(_count(item) for item in items) > MAX_HOSTS:
        raise HostListError(f"host list {text!r} names more than {MAX_HOSTS:,} hosts")
    hosts: dict[str, None] = {}
    for item in items:
        for host in _expand(item, text):
            if any(c.isspace() for c in host):
                raise HostListError(f"bad host name {host!r} in {text!r}: contains white space")
            hosts[host] = None
    return list(hosts)


def _count(item: str) -> int:
    """How many hosts ``item`` names at most, from its ranges alone (a form NodeSet will refuse
    counts as one: it fails later with NodeSet's own message)."""
    total = 1
    for body in _BRACKET.findall(item):
        size = 0
        for part in body.split(","):
            numbers = _NUMBERS.match(part)
            letters = _LETTER_RANGE.match(part)
            if numbers:
                low, high, step = numbers.groups()
                stride = max(int(step or 1), 1)
                size += max((int(high or low) - int(low)) // stride + 1, 1)
            elif letters:
                size += max(ord(letters[2] or letters[1]) - ord(letters[1]) + 1, 1)
            else:
                size += 1
        total *= size
    return total


def _letters_as_numbers(item: str, text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        parts = [_LETTER_RANGE.match(p) for p in match[1].split(",")]
        if not all(parts):
            return match[0]  # a numeric range: NodeSet's
        codes = []
        for part in parts:
            assert part is not None
            low, high = part[1], part[2] or part[1]
            if low.islower() != high.islower() or high < low:
                raise HostListError(f"bad range {part[0].strip()!r} in {text!r}: use e.g. [a-d], one case")
            codes.append(f"{ord(low)}-{ord(high)}")
        return f"{_MARK}[{','.join(codes)}]{_MARK}"

    return _BRACKET.sub(replace, item)


def _expand(item: str, text: str) -> list[str]:
    marked = _letters_as_numbers(item, text)
    try:
        names = list(NodeSet(marked, resolver=RESOLVER_NOGROUP))
    except NodeSetParseRangeError as exc:  # NodeSet quotes the input, line breaks and all
        raise HostListError(f"bad range in {text!r}: {one_line(exc.part)}") from None
    except (NodeSetException, ValueError) as exc:
        raise HostListError(f"bad host list {text!r}: {one_line(exc)}") from None
    if marked == item:
        return names
    return [_MARKED.sub(lambda m: chr(int(m[1])), name) for name in names]


def slurm_job_hosts(job: str, *, timeout_s: float = 20.0) -> list[str]:
    """The hosts of Slurm job ``job``: its NodeList (``scontrol show job``) through ``scontrol show
    hostnames``, exactly as ``srun`` would see them."""
    if shutil.which("scontrol") is None:
        raise HostListError(f"slurm job {job}: scontrol not found on this machine")
    job_info = _scontrol(["show", "job", "--oneliner", job], timeout_s)
    match = re.search(r"(?:^|\s)NodeList=(\S+)", job_info)
    if not match or match.group(1) in ("(null)", ""):
        raise HostListError(f"slurm job {job}: no nodes allocated (is it running?)")
    names = _scontrol(["show", "hostnames", match.group(1)], timeout_s).split()
    if not names:
        raise HostListError(f"slurm job {job}: scontrol listed no host names")
    return names


def _scontrol(args: list[str], timeout_s: float) -> str:
    try:
        done = subprocess.run(
            ["scontrol", *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HostListError(f"scontrol {' '.join(args)}: {exc}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise HostListError(f"scontrol {' '.join(args)}: {why}")
    return done.stdout
