"""The parsers of the commands around a run: ``rules`` (Prometheus rules over its /metrics) and ``serve``
(its dashboard in a browser)."""

from __future__ import annotations

import argparse

from tokenwatch.cli.arg_types import duration_arg, port_arg, positive_duration_arg, viewers_arg
from tokenwatch.cli.usage import OneLineParser


def add_rules_parser(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """``rules``: Prometheus alerting and recording rules for the series tokenwatch's /metrics serves."""
    rules = sub.add_parser(
        "rules",
        help="print Prometheus alerting and recording rules for tokenwatch's /metrics",
        description="Print a Prometheus rule file (load it with rule_files: in prometheus.yml) over the "
        "series `--prometheus-port` serves. Alerting rules (group tokenwatch): TokenwatchProjectedInvalid (a "
        "rack's projected MLPerf verdict is INVALID), TokenwatchNodeDown (a node down or stale), "
        "TokenwatchStraggler (a node's tokens/s below the median node's by more than --straggler-pct) and "
        "TokenwatchRackStale (a rack that was reporting has stopped); the alert names are those tokenwatch's "
        "own --notify uses. Recording rules (group tokenwatch-rack-figures): each rack figure the fleet "
        "watch asks every interval (nodes up and running, GPUs, tokens/s, power, the spread, the worst and "
        "median node, the projection), recorded as tokenwatch_rack:FIELD with the watch's own PromQL; a "
        "fleet watch reads them where the server holds them for every rack, so its rounds do not grow "
        "with the fleet's nodes and GPUs. Neither --alerting nor --recording: both groups.",
    )
    rules.add_argument(
        "--alerting", action="store_true", help="the alerting rules (alone, unless --recording)"
    )
    rules.add_argument(
        "--recording",
        action="store_true",
        help="the recording rules of the fleet's rack figures (alone, unless --alerting)",
    )
    rules.add_argument(
        "--for",
        dest="for_s",
        type=duration_arg,
        default=60.0,
        metavar="DURATION",
        help="how long a condition holds before its alert fires (default 1m; 0s: at once)",
    )
    rules.add_argument(
        "--straggler-pct",
        type=float,
        default=5.0,
        metavar="PCT",
        help="TokenwatchStraggler: how far below the median node, in %% (default 5, the core's)",
    )
    rules.add_argument(
        "--stale-after",
        type=positive_duration_arg,
        default=60.0,
        metavar="DURATION",
        help="TokenwatchRackStale: how long a rack may be silent (default 1m)",
    )
    rules.add_argument(
        "--rack-label",
        default="rack",
        metavar="NAME",
        help="the label that names a series' rack (default rack; the fleet config's nodes.rack_label)",
    )
    rules.add_argument(
        "--node-label",
        default="node",
        metavar="NAME",
        help="recording rules: the label that names a series' node (default node; fleet.node_label)",
    )
    rules.add_argument(
        "--preset",
        default="tokenwatch",
        metavar="NAME",
        help="recording rules: the fleet preset whose queries are recorded: tokenwatch (default), vllm, "
        "sglang (fleet.preset)",
    )
    rules.add_argument(
        "--rate-window",
        type=positive_duration_arg,
        default=60.0,
        metavar="DURATION",
        help="recording rules: the rate() window of the vllm / sglang presets (default 60s; "
        "fleet.rate_window)",
    )
    rules.add_argument(
        "--interval",
        type=positive_duration_arg,
        default=5.0,
        metavar="DURATION",
        help="recording rules: how often the server evaluates them (default 5s; the fleet's interval, so a "
        "recorded figure is at most that much older than the raw query's)",
    )


def add_serve_parser(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """``serve``: the dashboard of a run command in a browser (textual-serve)."""
    serve = sub.add_parser(
        "serve",
        usage="tokenwatch serve [-h] [--host H] [--port N] [--max-viewers N] [-- RUN_COMMAND [OPTION ...]]",
        help="serve the dashboard of a run command to a browser",
        description="Serve the dashboard of RUN_COMMAND (sim, replay or watch with their own options; "
        "default: sim --speed 10) to a browser. Open the address it prints: it holds a token made at each "
        "start (http://127.0.0.1:8000/?token=...), which the page and its websocket require; the page keeps "
        "it in a cookie, so a reload works. Only the page's own origin may open the websocket, and only this "
        "server's names (the --host address, localhost, with the port) are answered, so no other web site "
        "can read or drive the dashboard. The first page starts one `python -m tokenwatch RUN_COMMAND`; "
        "later pages join that run read-only (the page connected longest has the keys; when it leaves, "
        "the next one does), and when the last page leaves the run ends (the next page starts it again).",
        epilog="example: tokenwatch serve --port 8000 -- sim --speed 10",
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="H",
        help="address to listen on (default 127.0.0.1, this machine only; another address sends the page "
        "and its token over the network unencrypted: prefer an SSH tunnel to 127.0.0.1)",
    )
    serve.add_argument("--port", type=port_arg, default=8000, metavar="N", help="port (default 8000)")
    serve.add_argument(
        "--max-viewers",
        type=viewers_arg,
        default=8,
        metavar="N",
        help="pages open at once (default 8); one more is refused with the reason in its close frame",
    )
    serve.add_argument(
        "run_command",
        nargs=argparse.REMAINDER,
        metavar="-- RUN_COMMAND",
        help="sim, replay or watch and their options (not --headless, --jsonl, --interval, --record, "
        "--prometheus-port: the run lives only while a page is open)",
    )
