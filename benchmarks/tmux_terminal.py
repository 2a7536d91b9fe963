"""A real terminal for the benchmarks: a command in a detached tmux pane of a given size, whose screen is
read with ``capture-pane`` (what a user would see), and keys sent with ``send-keys``.

Standard library only (the memory benchmarks import their helpers before they measure).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.005  # how often the screen is read while waiting for it to change


class TmuxTerminal:
    """``command`` (a shell line) running in a ``width`` x ``height`` tmux pane of a private server."""

    def __init__(self, command: str, width: int = 200, height: int = 60, cwd: Path | None = None) -> None:
        if shutil.which("tmux") is None:
            raise RuntimeError("tmux is not installed (apt-get install tmux)")
        self._dir = tempfile.TemporaryDirectory(prefix="tokenwatch-tmux-")
        self._tmux = ["tmux", "-S", str(Path(self._dir.name) / "sock"), "-f", os.devnull]
        self._env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        self.started = time.perf_counter()
        subprocess.run(
            [*self._tmux, "new-session", "-d", "-s", "bench", "-x", str(width), "-y", str(height)]
            + (["-c", str(cwd)] if cwd else [])
            + [f"exec {command}"],
            env=self._env,
            check=True,
        )

    def screen(self) -> str:
        out = subprocess.run(
            [*self._tmux, "capture-pane", "-p", "-t", "bench"], env=self._env, capture_output=True, text=True
        )
        return out.stdout

    def wait_for(self, shown: Callable[[str], bool], timeout_s: float) -> float | None:
        """Seconds (wall) until ``shown(screen)`` holds, from now; None if not within ``timeout_s``."""
        began = time.perf_counter()
        while not shown(self.screen()):
            if time.perf_counter() - began > timeout_s:
                return None
            time.sleep(POLL_S)
        return time.perf_counter() - began

    def press(self, key: str) -> None:
        subprocess.run([*self._tmux, "send-keys", "-t", "bench", key], env=self._env, check=True)

    def close(self) -> None:
        subprocess.run([*self._tmux, "kill-server"], env=self._env, capture_output=True)
        self._dir.cleanup()
