"""The argument parser: the commands' parsers by family (:mod:`.run_parsers`, :mod:`.results_parsers`,
:mod:`.service_parsers`), in the order ``--help`` lists them; one-line errors (exit 2), durations parsed
at the edge (:mod:`.arg_types`)."""

from __future__ import annotations

import argparse

from tokenwatch import __version__
from tokenwatch.cli.results_parsers import add_report_parsers, add_summarize_parser
from tokenwatch.cli.run_parsers import add_sim_replay_parsers, add_watch_parsers
from tokenwatch.cli.service_parsers import add_rules_parser, add_serve_parser
from tokenwatch.cli.usage import OneLineParser, UsageError


def build_parser() -> OneLineParser:

    parser = OneLineParser(
        prog="tokenwatch",
        description="Watch rack-scale LLM inference benchmarks live, replay them, log them headless. "
        "With no command: the dashboard on the gb300-nvl72 simulator at x10 (the demo: quitting it "
        "stops the demo, exit status 0, where quitting `tokenwatch sim` interrupts the run).",
    )
    parser.add_argument("--version", action="version", version=f"tokenwatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)

    add_sim_replay_parsers(sub)
    add_summarize_parser(sub)

    sub.add_parser("profiles", help="list the simulator profiles")

    add_report_parsers(sub)
    add_watch_parsers(sub)
    add_serve_parser(sub)
    add_rules_parser(sub)
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        # `tokenwatch` alone: the dashboard on the default simulator, accelerated so it visibly moves.
        argv = ["sim", "--speed", "10", *argv]
        demo = True
    else:
        demo = False
    args, extra = build_parser().parse_known_args(argv)
    args.demo = demo
    if extra:  # named by the command they were given to, as its other errors are
        prog = f"tokenwatch {args.command}" if args.command else "tokenwatch"
        raise UsageError(f"{prog}: unrecognized arguments: {' '.join(extra)} (see {prog} --help)")
    return args
