"""Running a session for sim, replay and watch: headless or the dashboard, recording, JSONL, Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from tokenwatch.cli.options import RunOptions
from tokenwatch.cli.output_paths import Output, check_outputs
from tokenwatch.cli.parser import UsageError, stderr_line
from tokenwatch.collectors.replay import ReplayPlayer
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.events import Collector
from tokenwatch.output.headless import HeadlessLogger
from tokenwatch.output.summary_table import render_summary
from tokenwatch.recording import RecordingWriter
from tokenwatch.session import Session

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
            with contextlib.suppress(OSError):  # a full disk already said so (HeadlessLogger)
                fh.close()


def check_run_outputs(options: RunOptions) -> None:
    """--jsonl and --record: never an input, never one file for both; --jsonl over a file needs --force."""
    outputs = [
        Output("--jsonl", options.jsonl or ""),
        Output("--record", options.record or "", overwrites=False),
    ]
    check_outputs(options.inputs, outputs, force=options.force)


def make_recorder(options: RunOptions, created_epoch: float | None = None) -> RecordingWriter | None:
    if not options.record:
        return None
    meta: dict[str, Any] = {}
    if created_epoch is not None:  # simulated runs: a fixed date keeps the file reproducible
        meta["created"] = dt.datetime.fromtimestamp(created_epoch, dt.UTC).isoformat(timespec="seconds")
    return RecordingWriter(options.record, meta=meta)


def run_session(
    options: RunOptions,
    collectors: Sequence[Collector],
    *,
    core_config: CoreConfig | None = None,
    created_epoch: float | None = None,
    after: Callable[[Session], None] | None = None,
    player: ReplayPlayer | None = None,
) -> int:
    """Run to the end (or Ctrl-C / q) and return the exit status."""
    check_run_outputs(options)
    core = RackCore(options.core_config(core_config))
    recorder = make_recorder(options, created_epoch)
    session = Session(core, collectors, recorder=recorder, flush_interval_s=0.5 if options.paced else None)
    if options.wants_dashboard():
        from tokenwatch.tui.launch import run_dashboard

        exporter = start_exporter(options, lambda: session.core)  # a replay's seek may swap the core
        try:
            run_dashboard(
                session,
                mode=options.mode,
                theme=options.theme,
                speed=options.speed,
                player=player,
                on_loop=exporter.attach_loop if exporter is not None else None,
            )
        finally:
            if exporter is not None:
                exporter.close()
        if after:
            after(session)
        return 0
    human = sys.stderr if options.jsonl == "-" else sys.stdout
    session.on_recording_stopped(lambda message: stderr_line(f"tokenwatch: {message}"))
    with open_jsonl(options.jsonl) as jsonl:
        logger = HeadlessLogger(core, human, jsonl, start_s=options.start_s, warn=stderr_line)
        session.every(options.interval_s, logger.at)
        exporter = start_exporter(options, core)
        try:
            asyncio.run(_run_until_signal(session, exporter))
        finally:
            if exporter is not None:
                exporter.close()
        logger.finish()
    if after:
        after(session)
    if core.started:
        human.write("\n" + render_summary(session.summary()) + "\n")
        human.flush()
    return 0


def start_exporter(options: RunOptions, core: RackCore | Callable[[], RackCore]) -> MetricsServer | None:
    if options.prometheus_port is None:
        return None
    from tokenwatch.exporter import serve_metrics

    return serve_metrics(core, options.prometheus_port)


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
