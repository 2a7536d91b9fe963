"""Host lists in ClusterShell/Slurm syntax, and the hosts of a Slurm job.

``node[01-18]`` -> node01 ... node18 (the lower bound's width sets the zero padding);
``node[1-3,7],gpu05`` -> node1 node2 node3 node7 gpu05; ``rack[1-2]-n[1-2]`` -> the cartesian
product in order; ``node[0-10/5]`` steps by 5. Commas inside brackets do not split hosts.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess

MAX_HOSTS = 100_000
_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?:/(\d+))?)?$")


class HostListError(ValueError):
    """A host list that cannot be read (one line)."""


def expand_hostlist(text: str) -> list[str]:
    """Every host named by ``text``, in order, without duplicates."""
    hosts: list[str] = []
    seen: set[str] = set()
    for part in _split_top_level(text.strip()):
        for host in _expand_one(part):
            if host not in seen:
                seen.add(host)
                hosts.append(host)
            if len(hosts) > MAX_HOSTS:
                raise HostListError(f"host list {text!r} names more than {MAX_HOSTS:,} hosts")
    if not hosts:
        raise HostListError(f"host list {text!r} names no host")
    return hosts


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostListError(f"bad host list {text!r}: nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostListError(f"bad host list {text!r}: ']' without '['")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostListError(f"bad host list {text!r}: '[' without ']'")
    parts.append(text[start:])
    for part in parts:
        if not part.strip():
            raise HostListError(f"bad host list {text!r}: empty host between commas")
    return [p.strip() for p in parts]


def _expand_one(pattern: str) -> list[str]:
    pieces = re.split(r"(\[[^\]]*\])", pattern)
    choices: list[list[str]] = []
    for piece in pieces:
        if piece.startswith("["):
            choices.append(_expand_brackets(piece[1:-1], pattern))
        elif piece:
            if any(c.isspace() for c in piece):
                raise HostListError(f"bad host name {pattern!r}: contains white space")
            choices.append([piece])
    total = 1
    for options in choices:
        total *= len(options)
        if total > MAX_HOSTS:
            raise HostListError(f"host list {pattern!r} names more than {MAX_HOSTS:,} hosts")
    return ["".join(combo) for combo in itertools.product(*choices)]


def _expand_brackets(body: str, pattern: str) -> list[str]:
    values: list[str] = []
    for item in body.split(","):
        match = _RANGE.match(item.strip())
        if not match:
            raise HostListError(f"bad range {item!r} in {pattern!r}: use e.g. [01-18] or [1-3,7]")
        low_text, high_text, step_text = match.groups()
        low = int(low_text)
        high = int(high_text) if high_text is not None else low
        step = int(step_text) if step_text else 1
        if high < low:
            raise HostListError(f"bad range {item!r} in {pattern!r}: {high} is below {low}")
        if step < 1:
            raise HostListError(f"bad range {item!r} in {pattern!r}: step must be at least 1")
        if (high - low) // step + 1 > MAX_HOSTS:
            raise HostListError(f"host list {pattern!r} names more than {MAX_HOSTS:,} hosts")
        width = len(low_text) if low_text.startswith("0") and len(low_text) > 1 else 0
        values.extend(str(v).zfill(width) for v in range(low, high + 1, step))
    return values


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
