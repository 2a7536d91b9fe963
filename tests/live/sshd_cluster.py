"""Loopback "nodes": real OpenSSH sshd instances on 127.0.0.1, one per node, each with its own host
key and port, a temporary authorized client key, and the fake nvidia-smi first on the sessions' PATH.

Used by the live tests (module-scoped fixtures in conftest.py) and by benchmarks/bench_live.py.
Nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.conftest import PATIENCE_S, free_port, wait_listening

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
SSH_KEYGEN = shutil.which("ssh-keygen")
FAKE_NVIDIA_SMI = Path(__file__).resolve().parent / "fake_nvidia_smi.sh"


def missing_binaries() -> str | None:
    """Why loopback nodes cannot run here, or None."""
    if SSHD is None:
        return "OpenSSH sshd is not installed (apt-get install openssh-server)"
    if SSH_KEYGEN is None:
        return "ssh-keygen is not installed (apt-get install openssh-client)"
    if shutil.which("bash") is None:
        return "bash is not installed (the fake nvidia-smi needs it)"
    return None


def keygen(path: Path) -> str:
    """A fresh ed25519 key pair at ``path``; the public line."""
    subprocess.run(
        [SSH_KEYGEN or "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return path.with_suffix(".pub").read_text().strip()


@dataclass
class LoopbackNode:
    name: str
    index: int
    root: Path
    port: int
    host_key_line: str = ""
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def control(self) -> Path:
        """Files here steer the node's fake nvidia-smi: ``stall`` pauses it, ``fail`` ends it."""
        return self.root / "control"

    @property
    def known_hosts_line(self) -> str:
        algorithm, blob = self.host_key_line.split()[:2]
        return f"[127.0.0.1]:{self.port} {algorithm} {blob}"

    def write_config(self, authorized_keys: Path, bin_dir: Path) -> Path:
        cfg = self.root / "sshd_config"
        env = {
            "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "FAKE_NVSMI_NODE": str(self.index),
            "FAKE_NVSMI_CONTROL": str(self.control),
            **self.env,
        }
        set_env = " ".join(f'"{k}={v}"' for k, v in env.items())
        cfg.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.root / 'host_ed25519'}",
                    f"PidFile {self.root / 'sshd.pid'}",
                    f"AuthorizedKeysFile {authorized_keys}",
                    "StrictModes no",
                    "UsePAM no",
                    "PermitRootLogin prohibit-password",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "AllowTcpForwarding local",
                    "X11Forwarding no",
                    "PrintMotd no",
                    "PrintLastLog no",
                    "MaxStartups 200:30:400",
                    "MaxSessions 64",
                    "LogLevel ERROR",
                    f"SetEnv {set_env}",
                    "",
                ]
            )
        )
        return cfg

    def start(self) -> None:
        assert SSHD is not None
        log = open(self.root / "sshd.log", "ab")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        # its own sshd, not a connection that succeeds: another server given the same port (another
        # worker's, or a node started before) would answer for it
        wait_listening(self.proc, self.port, f"sshd for {self.name}", self.root / "sshd.log")

    def kill(self) -> None:
        """Kill the listener and every session it started (a node that dies)."""
        if self.proc is None:
            return
        try:
            parent = psutil.Process(self.proc.pid)
            family = [parent, *parent.children(recursive=True)]
        except psutil.NoSuchProcess:
            family = []
        # sessions run in their own sessions (setsid): find them by their sshd parents' children
        for proc in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGKILL)
        psutil.wait_procs(family, timeout=PATIENCE_S)
        self.proc.wait(timeout=PATIENCE_S)
        self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class LoopbackCluster:
    """``n`` loopback nodes named ``{prefix}01`` ... under ``root``."""

    def __init__(self, root: Path, n: int, *, prefix: str = "node", extra_env: dict[str, str] | None = None):
        reason = missing_binaries()
        if reason:
            raise RuntimeError(reason)
        with contextlib.suppress(PermissionError):  # root's sshd needs its privilege-separation dir
            Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        self.root = root
        self.user = getpass.getuser()
        root.mkdir(parents=True, exist_ok=True)
        self.client_key = root / "client_ed25519"
        self.authorized_keys = root / "authorized_keys"
        self.authorized_keys.write_text(keygen(self.client_key) + "\n")
        # Sessions get a clean HOME: this machine's root ~/.bashrc runs `pyenv init` (0.6 s of CPU per
        # session), which would distort every timing and is no part of a GPU node.
        self.home = root / "home"
        self.home.mkdir(exist_ok=True)
        self.bin_dir = root / "bin"
        self.bin_dir.mkdir(exist_ok=True)
        (self.bin_dir / "nvidia-smi").symlink_to(FAKE_NVIDIA_SMI)
        width = max(2, len(str(n)))
        self.nodes: list[LoopbackNode] = []
        for i in range(1, n + 1):
            name = f"{prefix}{i:0{width}d}"
            env = {"HOME": str(self.home), **(extra_env or {})}
            node = LoopbackNode(name, i, root / name, free_port(), env=env)
            node.root.mkdir()
            node.control.mkdir()
            node.host_key_line = keygen(node.root / "host_ed25519")
            node.write_config(self.authorized_keys, self.bin_dir)
            self.nodes.append(node)
        self.known_hosts = root / "known_hosts"
        self.known_hosts.write_text("".join(n.known_hosts_line + "\n" for n in self.nodes))

    def __getitem__(self, name: str) -> LoopbackNode:
        return next(n for n in self.nodes if n.name == name)

    def start(self) -> None:
        for node in self.nodes:
            node.start()

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()

    def hosts_yaml(self) -> str:
        """The ``nodes.hosts`` list of mappings for a watch config."""
        return "".join(
            f"    - {{name: {n.name}, host: 127.0.0.1, port: {n.port}, user: {self.user}}}\n"
            for n in self.nodes
        )

    def ssh_config(self) -> str:
        """OpenSSH client config mapping each node name to its port (as ~/.ssh/config would)."""
        return "".join(
            f"Host {n.name}\n  HostName 127.0.0.1\n  Port {n.port}\n  User {self.user}\n"
            f"  IdentityFile {self.client_key}\n"
            for n in self.nodes
        )
