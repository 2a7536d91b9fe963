"""The watch config: the issue's example loads as written; every mistake is one line with file, line, key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokenwatch.base.yaml_schema import SchemaError
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.live.targets import NodeTarget, resolve_targets

ISSUE_EXAMPLE = """\
run:
  name: rack-a-llama2-offline
  scenario: Offline                  # Offline | Server
  duration: 80m                      # nominal, for progress/ETA when sample counts are unknown
  total_samples: 1056000             # optional
nodes:
  hosts: node[01-18]                 # host range (ClusterShell/Slurm syntax), or a list of names,
  gpus_per_node: 4
ssh:
  user: azureuser                    # optional; ~/.ssh/config is honored
  known_hosts: ~/.ssh/known_hosts    # host keys are verified by default
  client_keys: [~/.ssh/id_ed25519]   # optional; the SSH agent otherwise
  connect_timeout: 10s
  max_concurrent: 128                # handshakes in flight at once
gpu:
  source: nvidia-smi                 # nvidia-smi (over SSH) | nvml | dcgm-exporter | none
  interval: 1s
progress:                            # one or more; {name} and {host} expand per node
  - kind: loadgen-trace
    path: /results/{name}/mlperf_log_trace.json
  - kind: log
    path: /work/logs/{name}/harness.log
    preset: vllm                     # or: patterns: {...named-group regexes...}
  - kind: prometheus
    url: http://localhost:8000/metrics   # fetched on the node through the SSH connection
    preset: vllm
alerts:
  straggler_pct: 5
  stale_after: 5s
  ttft_sla: 2s
  tpot_sla: 200ms
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rack.yaml"
    path.write_text(text)
    return path


def test_the_issue_example_loads(tmp_path: Path) -> None:
    config = load_watch_config(write(tmp_path, ISSUE_EXAMPLE))
    assert config.run.name == "rack-a-llama2-offline"
    assert config.run.duration_s == 80 * 60
    assert config.run.total_samples == 1_056_000
    assert config.ssh.connect_timeout_s == 10.0
    assert config.alerts.tpot_sla_s == pytest.approx(0.2)
    assert [p.kind for p in config.progress] == ["loadgen-trace", "log", "prometheus"]
    assert not config.local
    targets = resolve_targets(config)
    assert [t.name for t in targets] == [f"node{i:02d}" for i in range(1, 19)]
    assert targets[0] == NodeTarget("node01", "node01", None, "azureuser")
    assert targets[4].expand(config.progress[0].path or "") == "/results/node05/mlperf_log_trace.json"


def test_host_mappings_and_names(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace(
        "  hosts: node[01-18]                 # host range (ClusterShell/Slurm syntax), "
        "or a list of names,\n",
        "  hosts:\n    - node07\n    - {name: node01, host: 10.0.0.11, port: 2222, user: root}\n",
    )
    targets = resolve_targets(load_watch_config(write(tmp_path, text)))
    assert targets == [
        NodeTarget("node07", "node07", None, "azureuser"),
        NodeTarget("node01", "10.0.0.11", 2222, "root"),
    ]
    assert targets[1].expand("/r/{name}/{host}/x{y}") == "/r/node01/10.0.0.11/x{y}"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("  max_concurrent: 128", "  max_concurent: 128", "ssh.max_concurent: unknown key"),
        ("  max_concurrent: 128", "  max_concurrent: 0", "ssh.max_concurrent: must be at least 1"),
        ("  scenario: Offline", "  scenario: Offlin", "run.scenario: must be one of Offline, Server"),
        ("  interval: 1s", "  interval: fast", "gpu.interval: bad duration"),
        ("  hosts: node[01-18]", "  hosts: node[18-01]", "nodes.hosts: bad range"),
        ("  hosts: node[01-18]", "  hosts: node[01-18", "nodes.hosts: bad host list"),
        ("  gpus_per_node: 4", "", "nodes: missing required key 'gpus_per_node'"),
        (
            "    preset: vllm                     #",
            "    preset: vlm  #",
            "progress.1.preset: unknown preset 'vlm'",
        ),
        ("  source: nvidia-smi", "  source: nvml", "gpu.source: nvml reads the GPUs"),
        ("  source: nvidia-smi", "  source: smi", "gpu.source: must be one of"),
        ("  stale_after: 5s", "  stale_after: 0s", "alerts.stale_after: must be longer than zero"),
        ("  user: azureuser", "  password: hunter2", "ssh.password: secrets are not accepted"),
        (
            "    url: http://localhost:8000/metrics",
            "    url: http://admin:pw@localhost:8000/metrics",
            "progress.2.url: passwords are not accepted",
        ),
        (
            "    url: http://localhost:8000/metrics",
            "    url: https://x/metrics",
            "progress.2.url: bad URL .* only http",
        ),
        (
            "    path: /results/{name}/mlperf_log_trace.json",
            "    url: http://x/",
            "progress.0.url: not a key of kind",
        ),
        (
            "    preset: vllm                     #",
            "    patterns: {a: '(x'}  #",
            "progress.1.patterns.a: .*bad regular",
        ),
        (
            "    preset: vllm                     #",
            "    patterns: {a: 'x (?P<foo>\\d+)'}  #",
            "progress.1.patterns.a: .*unknown group",
        ),
        ("  - kind: loadgen-trace", "  - kind: trace", "progress.0.kind: must be one of"),
        ("  total_samples: 1056000", "  total_samples: lots", "run.total_samples: expected a whole number"),
    ],
)
def test_errors_name_file_line_and_key(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in ISSUE_EXAMPLE
    text = ISSUE_EXAMPLE.replace(old, new, 1)
    path = write(tmp_path, text)
    # the line to blame, found independently: where the edit is (or, for a removed key, its parent)
    anchor = new.strip().split(":")[0] if new else "nodes:"
    line = next(i for i, t in enumerate(text.splitlines(), 1) if anchor in t and (new or t == "nodes:"))
    with pytest.raises(SchemaError) as info:
        load_watch_config(path)
    message = str(info.value)
    assert "\n" not in message
    assert re.match(rf"{re.escape(str(path))}:{line}: {expected}", message), message


def test_log_needs_preset_or_patterns_not_both(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace(
        "    preset: vllm                     #",
        "    patterns: {a: 'done (?P<samples_done>\\d+)'}\n    preset: vllm  #",
    )
    with pytest.raises(SchemaError, match=r"needs one of 'preset', 'rules' .* or 'patterns'"):
        load_watch_config(write(tmp_path, text))


def test_local_mode_without_nodes(tmp_path: Path) -> None:
    config = load_watch_config(
        write(
            tmp_path,
            "run: {name: one-box}\ngpu: {source: nvml}\n"
            "progress:\n  - {kind: log, path: /x.log, preset: vllm}\n",
        )
    )
    assert config.local
    (target,) = resolve_targets(config)
    assert target.local
    assert target.expand("/logs/{name}.log") == f"/logs/{target.name}.log"


def test_invalid_yaml_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match=r"rack.yaml:\d+: invalid YAML"):
        load_watch_config(write(tmp_path, "run:\n  name: [unclosed\n"))


def test_endpoints_events_kind_and_its_keys(tmp_path: Path) -> None:
    base = "run: {name: one-box}\ngpu: {source: none}\nprogress:\n"
    config = load_watch_config(
        write(
            tmp_path,
            base + "  - {kind: endpoints-events, path: /dev/shm/run/events.jsonl, tokens_per_sample: 300}\n",
        )
    )
    (source,) = config.progress
    assert (source.kind, source.path, source.tokens_per_sample) == (
        "endpoints-events",
        "/dev/shm/run/events.jsonl",
        300,
    )
    with pytest.raises(SchemaError, match=r"rack.yaml:4: progress.0: kind endpoints-events needs 'path'"):
        load_watch_config(write(tmp_path, base + "  - {kind: endpoints-events}\n"))
    with pytest.raises(SchemaError, match=r"progress.0.preset: not a key of kind endpoints-events"):
        load_watch_config(
            write(tmp_path, base + "  - {kind: endpoints-events, path: /e.jsonl, preset: vllm}\n")
        )
