"""Running a session for sim, replay and watch: headless or the dashboard, recording, JSONL, Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from tokenwatch.cli.parser import UsageError
from tokenwatch.core import CoreConfig, RackCore, summarize_core
from tokenwatch.output.headless import HeadlessLogger
from tokenwatch.output.summary_table import render_summary
from tokenwatch.recording import RecordingWriter
from tokenwatch.session import Collector, Session

if TYPE_CHECKING:
    from tokenwatch.exporter.server import MetricsServer


@contextlib.contextmanager
def open_jsonl(path: str | None) -> Iterator[IO[bytes] | None]:
    if path is None:
        yield None
    elif path == "-":
        yield sys.stdout.buffer
    else:
        try:
            fh = open(path, "wb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise UsageError(f"--jsonl {path}: cannot write: {exc.strerror}") from None
        try:
            yield fh
        finally:
            fh.close()


def make_recorder(args: argparse.Namespace, created_epoch: float | None = None) -> RecordingWriter | None:
    if not args.record:
        return None
    meta: dict[str, Any] = {}
    if created_epoch is not None:  # simulated runs: a fixed date keeps the file reproducible
        meta["created"] = dt.datetime.fromtimestamp(created_epoch, dt.UTC).isoformat(timespec="seconds")
    return RecordingWriter(args.record, meta=meta)


def wants_dashboard(args: argparse.Namespace) -> bool:
    """The dashboard unless --headless or stdout is not a terminal (tests may force it)."""
    return (not args.headless and sys.stdout.isatty()) or bool(getattr(args, "force_tui", False))


def with_sla_options(args: argparse.Namespace, config: CoreConfig | None) -> CoreConfig | None:
    """--ttft-sla / --tpot-sla over the command's core settings."""
    changes = {
        field: value
        for field, value in (
            ("ttft_sla_s", getattr(args, "ttft_sla", None)),
            ("tpot_sla_s", getattr(args, "tpot_sla", None)),
        )
        if value is not None
    }
    return dataclasses.replace(config or CoreConfig(), **changes) if changes else config


def run_session(
    args: argparse.Namespace,
    collectors: Sequence[Collector],
    *,
    core_config: CoreConfig | None = None,
    created_epoch: float | None = None,
    paced: bool = True,
    mode: str = "sim",
    after: Callable[[Session], None] | None = None,
    replay_control: Any = None,
) -> int:
    """Run to the end (or Ctrl-C / q) and return the exit status."""
    core = RackCore(with_sla_options(args, core_config))
    recorder = make_recorder(args, created_epoch)
    session = Session(core, collectors, recorder=recorder, flush_interval_s=0.5 if paced else None)
    if wants_dashboard(args):
        from tokenwatch.tui.launch import run_dashboard

        exporter = start_exporter(args, lambda: session.core)  # a replay's seek may swap the core
        try:
            run_dashboard(session, args, mode=mode, replay_control=replay_control, exporter=exporter)
        finally:
            if exporter is not None:
                exporter.close()
        if after:
            after(session)
        return 0
    human = sys.stderr if args.jsonl == "-" else sys.stdout
    with open_jsonl(args.jsonl) as jsonl:
        logger = HeadlessLogger(core, human, jsonl, start_s=getattr(args, "start", 0.0))
        session.every(args.interval, logger.at)
        exporter = start_exporter(args, core)
        try:
            asyncio.run(_run_until_signal(session, exporter))
        finally:
            if exporter is not None:
                exporter.close()
        logger.finish()
    if after:
        after(session)
    if core.started:
        human.write("\n" + render_summary(summarize_core(core)) + "\n")
        human.flush()
    return 0


def start_exporter(args: argparse.Namespace, core: RackCore | Callable[[], RackCore]) -> MetricsServer | None:
    port = getattr(args, "prometheus_port", None)
    if port is None:
        return None
    from tokenwatch.exporter import serve_metrics

    return serve_metrics(core, port)


async def _run_until_signal(session: Session, exporter: MetricsServer | None = None) -> None:
    loop = asyncio.get_running_loop()
    if exporter is not None:
        exporter.attach_loop(loop)  # scrapes then read the core between events, on this thread
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, session.stop)
    try:
        await session.run()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
