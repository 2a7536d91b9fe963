"""A watch pushes to the receivers its config's notify section names and to those --notify adds, with the
section's filters for both."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_tokenwatch
from tests.frontends.notify.notify_support import receiving


def test_a_watch_notifies_its_configs_receivers_and_those_notify_adds(tmp_path: Path) -> None:
    with receiving() as hook:
        config = tmp_path / "watch.yaml"
        config.write_text(
            "run:\n  name: bench-a\nnodes:\n  gpus_per_node: 1\ngpu:\n  source: none\n"
            f"progress:\n  - kind: log\n    path: {tmp_path / 'harness.log'}\n    preset: vllm\n"
            f"notify:\n  kinds: [run-end]\n  group_wait: 0s\n  webhook: {hook.url}/from-config\n"
        )
        result = run_tokenwatch(
            "watch", str(config), "--headless", "--stop-after", "2s", "--notify", f"{hook.url}/from-option"
        )
        assert result.returncode == 0, result.stderr
        sent = [(r.path, r.body["alertname"], r.body["run"]) for r in hook.requests]
    assert sorted(sent) == [
        ("/from-config", "TokenwatchRunEnded", "bench-a"),
        ("/from-option", "TokenwatchRunEnded", "bench-a"),
    ]
