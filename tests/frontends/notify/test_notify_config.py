"""Bad notify settings are one line naming the key, exit status 2: at ``tokenwatch check`` (which also
tries each HTTP receiver's host and port) and on every run command's ``--notify``."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env, run_tokenwatch
from tests.frontends.notify.notify_support import closed_url, receiving

LOCAL = (
    "run:\n  name: t\nnodes:\n  gpus_per_node: 1\ngpu:\n  source: none\n"
    "progress:\n  - kind: log\n    path: /tmp/x.log\n    preset: vllm\n"
)


def config(tmp_path: Path, notify: str) -> Path:
    path = tmp_path / "watch.yaml"
    path.write_text(LOCAL + "notify:\n" + notify)
    return path


def check_line(path: Path, **env: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tokenwatch", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(**env),
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    return line


@pytest.mark.parametrize(
    ("notify", "key", "why"),
    [
        ("  webhook: 'http//example.com/hook'\n", "notify.webhook", "only http:// and https://"),
        ("  alertmanager: 'http://:9093'\n", "notify.alertmanager", "no host"),
        ("  slack: 'http://127.0.0.1:99999/x'\n", "notify.slack", "bad URL"),
        ("  webhook: 'http://u:pw@example.com/'\n", "notify.webhook", "passwords are not accepted"),
        (
            "  webhook: '${TW_UNSET_HOOK}'\n",
            "notify.webhook",
            "environment variable TW_UNSET_HOOK is not set",
        ),
        (
            "  kinds: [verdict, pager]\n  webhook: http://127.0.0.1/\n",
            "notify.kinds.1",
            "unknown kind 'pager'",
        ),
        ("  min_severity: loud\n  webhook: http://127.0.0.1/\n", "notify.min_severity", "must be one of"),
        (
            "  to:\n    - webhook: http://127.0.0.1/\n      slack: http://127.0.0.1/\n",
            "notify.to.0",
            "got webhook",
        ),
        ("  command: [./no-such-pager.sh]\n", "notify.command", "no such program"),
        (
            "  webhook: http://127.0.0.1/\n  base_dir: /tmp\n",
            "notify.base_dir",
            "unknown key (known: alertmanager,",
        ),
        (
            "  webhook: http://127.0.0.1/\n  headers: {Authorization: 'Bearer abc123'}\n",
            "notify.headers.Authorization",
            "credential does not belong in the file",
        ),
    ],
)
def test_a_bad_notify_setting_is_one_line_naming_its_key(
    tmp_path: Path, notify: str, key: str, why: str
) -> None:
    line = check_line(config(tmp_path, notify))
    assert f": {key}: " in line
    assert why in line
    assert "abc123" not in line  # a credential is never quoted back


def test_a_command_that_is_not_executable_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "page-me.sh"
    script.write_text("#!/bin/sh\ncat\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    line = check_line(config(tmp_path, "  command: [./page-me.sh, --team, infra]\n"))
    assert line.endswith("notify.command: ./page-me.sh is not executable (chmod +x it)")
    assert f"{tmp_path / 'watch.yaml'}:" in line


def test_an_unreachable_receiver_is_refused_at_check_naming_host_and_port_only(tmp_path: Path) -> None:
    down = closed_url()
    line = check_line(
        config(tmp_path, f"  to:\n    - webhook: '{down}/hooks/${{TW_HOOK_PATH}}'\n"),
        TW_HOOK_PATH="s3cr3t-path",
    )
    assert ": notify.to.0.webhook: unreachable: 127.0.0.1:" in line
    assert "s3cr3t" not in line


def test_check_passes_a_reachable_receiver_and_says_what_goes_where(tmp_path: Path) -> None:
    with receiving() as hook:
        result = run_tokenwatch(
            "check", str(config(tmp_path, f"  kinds: [node-down, run-end]\n  alertmanager: {hook.url}\n"))
        )
        attempts = hook.attempts
    assert result.returncode == 0, result.stderr
    assert (
        f"  notify    alertmanager {hook.url}; node-down, run-end; warning and up; hold 120 s"
        in result.stdout
    )
    assert attempts == 0  # a check pages nobody


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("ftp://example.com/", "only http:// and https://"),
        ("command=/no/such/pager", "no such program"),
        ("alertmanager=http://", "no host"),
        ("no-such-notify.yaml", "no such file"),
    ],
)
def test_a_bad_notify_option_is_one_line_and_exit_2(value: str, why: str) -> None:
    result = run_tokenwatch("sim", "--speed", "0", "--headless", "--duration", "1m", "--notify", value)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("tokenwatch sim: --notify ")
    assert why in line
