"""Running a session for sim, replay and watch: headless or the dashboard, recording, JSONL, and the stop
signals (Ctrl-C, SIGTERM, SIGHUP: the run ends as interrupted, its partial summary is printed, exit 130)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import math
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from tokenwatch.base.events import (
    Collector,
    Event,
    GpuBatch,
    GpuSample,
    LatencyBatch,
    LoadGenDetail,
    Notice,
    Progress,
    ProgressBatch,
    RackFiguresBatch,
)
from tokenwatch.base.formatting import printable
from tokenwatch.base.loop_share import LoopShare
from tokenwatch.base.wakeup_batching import new_event_loop
from tokenwatch.cli.loading_note import say_loads
from tokenwatch.cli.options import RunOptions
from tokenwatch.cli.output_paths import Output, check_outputs
from tokenwatch.cli.summary_trailer import keep_summary_in_recording
from tokenwatch.cli.usage import UsageError, stderr_line
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.frontends.headless.headless import HeadlessLogger
from tokenwatch.frontends.headless.summary_table import render_summary
from tokenwatch.recording import RecordingWriter
from tokenwatch.session import Session

if TYPE_CHECKING:
    from textual.app import App

    from tokenwatch.frontends.metrics.server import MetricsServer
    from tokenwatch.frontends.notify import Notifier
    from tokenwatch.inputs.prometheus.fleet import FleetFocus
    from tokenwatch.inputs.replay.player import ReplayPlayer  # a replay's own: sim and watch never load it


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
    # An unpaced run ends its compressed blocks by size alone (the session flushes no timer either): a
    # flush by the wall clock would put block ends wherever the machine was busy, and a seed would no
    # longer give the same bytes. A paced run flushes every 0.5 s, so kill -9 loses about a second.
    flush_s = 0.5 if options.paced else math.inf
    return RecordingWriter(options.record, meta=meta, flush_interval_s=flush_s)


INTERRUPTED_EXIT = 130  # as a shell reports a command Ctrl-C stopped
USAGE_EXIT = 2  # as argparse and every refused input: --rack naming a rack the run does not have
NO_DATA_EXIT = 1  # a headless watch that never heard from a source: a script must not take it for a run
# What a source says about the data itself (telemetry, progress, rack figures, latencies), as against
# notices, statuses and heartbeats.
_DATA_EVENTS = (GpuBatch, GpuSample, Progress, ProgressBatch, RackFiguresBatch, LatencyBatch, LoadGenDetail)


class SourceSight:
    """A headless watch's eyes on its sources: a Prometheus source's warning (the server unreachable, an
    HTTP error, no series) goes to stderr the moment it is said, once per message, so a watch is never
    blind in silence, and its notes (which queries make the rack figures) as they change; and whether
    any data came at all."""

    def __init__(self) -> None:
        self.saw_data = False
        self._said: list[str] = []

    def see(self, event: Event) -> None:
        if isinstance(event, _DATA_EVENTS):
            # A fleet round that found no rack is an answer, not data.
            self.saw_data = self.saw_data or not isinstance(event, RackFiguresBatch) or bool(event.racks)
        elif (
            isinstance(event, Notice)
            and event.level in ("warning", "error")
            and (event.source or "").startswith("prometheus")
            and event.message not in self._said
        ):
            self._said.append(event.message)
            stderr_line(f"tokenwatch: warning: {printable(event.message)}")
        elif (
            isinstance(event, Notice)
            and event.level == "info"
            and (event.source or "").startswith("prometheus")
        ):
            # What the source chose or got back (the rack figures' queries, answers again): said as it
            # changes, and not a problem that makes a watch without data blind.
            stderr_line(f"tokenwatch: note: {printable(event.message)}")

    def blind(self) -> bool:
        """No data came and a Prometheus source said why (a watch of logs that stay quiet is not blind)."""
        return not self.saw_data and bool(self._said)

    def last_problem(self) -> str:
        return f" (last said: {printable(self._said[-1])})" if self._said else ""


# Signals that end a run as Ctrl-C does: a terminal closing (SIGHUP) or a scheduler stopping the job
# (SIGTERM) leaves a closed recording and the partial summary, never a torn file.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_session(
    options: RunOptions,
    collectors: Sequence[Collector],
    *,
    core_config: CoreConfig | None = None,
    created_epoch: float | None = None,
    after: Callable[[Session], None] | None = None,
    player: ReplayPlayer | None = None,
    fleet_focus: FleetFocus | None = None,
    quit_stops: str | None = None,
) -> int:
    """Run to the end (or Ctrl-C / a stop signal / q) and return the exit status: 0 when the run ended by
    itself, 130 when it was interrupted (its summary is printed marked ``INTERRUPTED at ...``).
    ``quit_stops``: ``replay`` or ``demo``, where quitting the dashboard stops the view, not the run
    (exit 0, the summary marked ``REPLAY STOPPED at ...``); stop signals still interrupt."""
    check_run_outputs(options)
    if options.rack is not None and options.wants_dashboard():
        raise UsageError("--rack needs --headless (on the dashboard, Enter on a rack's row opens it)")
    if options.rack is not None and fleet_focus is not None:
        fleet_focus.show({options.rack})  # its nodes fetched every interval, as an opened rack's are
    config = options.core_config(core_config)
    if not options.reads_rack_forecasts():  # nothing but the dashboard shows them: work nobody reads
        config = dataclasses.replace(config, rack_forecasts=False)
    if not options.wants_dashboard():  # only a report or export reads them, from a core of its own
        config = dataclasses.replace(config, whole_run_gpu_series=False)
    core = RackCore(config)
    holder: list[Session] = []
    # Before the recording is created: a port in use must not leave an empty recording behind. The
    # server reads the session's core when there is one (a replay's seek may swap it).
    exporter = start_exporter(options, lambda: holder[0].core if holder else core)
    try:
        recorder = make_recorder(options, created_epoch)
    except BaseException:
        if exporter is not None:
            exporter.close()
        raise
    # A dashboard shares the loop with the session: a sim or watch behind its input must not starve it of
    # turns (a replay's seek plays through at once, its pauses would only lengthen it).
    share = LoopShare() if options.wants_dashboard() and options.mode != "replay" else None
    session = Session(
        core,
        collectors,
        recorder=recorder,
        flush_interval_s=0.5 if options.paced else None,
        loop_share=share,
    )
    session.fleet_focus = fleet_focus
    session.quit_stops = quit_stops
    holder.append(session)
    notifier = start_notifying(options, session)
    if options.wants_dashboard():
        from tokenwatch.frontends.tui.launch import run_dashboard

        try:
            run_dashboard(
                session,
                mode=options.mode,
                theme=options.theme,
                speed=options.speed,
                player=player,
                on_start=_dashboard_start_hook(session, exporter),
            )
        finally:
            if exporter is not None:
                exporter.close()
        finish_notifying(notifier)
        if after:
            after(session)
        # On quitting, the same table headless prints: the result outlives the screen.
        print_after_screen(session)
        keep_summary_in_recording(options.record, session.recording_stopped)
        return INTERRUPTED_EXIT if session.interrupted else 0
    human = sys.stderr if options.jsonl == "-" else sys.stdout
    session.on_recording_stopped(lambda message: stderr_line(f"tokenwatch: {message}"))
    sight = SourceSight() if options.mode == "live" else None
    if sight is not None:
        session.on_event(sight.see)
    with open_jsonl(options.jsonl) as jsonl:
        logger = HeadlessLogger(
            core, human, jsonl, start_s=options.start_s, warn=stderr_line, rack=options.rack
        )

        def write_lines(t: float) -> None:
            logger.at(t)
            if logger.missing_rack is not None and not session.interrupted:
                session.stop()

        session.every(options.interval_s, write_lines)
        try:
            # a loop whose wake-ups a live watch spaces once its nodes stream (base/wakeup_batching.py)
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                signalled = runner.run(_run_until_signal(session, exporter, notifier))
        finally:
            if exporter is not None:
                exporter.close()
        logger.finish()
    finish_notifying(notifier)
    if logger.missing_rack is not None:
        stderr_line(f"tokenwatch: {logger.missing_rack}")
        return USAGE_EXIT
    if after:
        after(session)
    print_summary(session, human)
    keep_summary_in_recording(options.record, session.recording_stopped)
    # A stop signal after the run's end (a replay still writing its snapshots) cut the output short too.
    if session.interrupted or signalled:
        return INTERRUPTED_EXIT
    if sight is not None and sight.blind():
        stderr_line(f"tokenwatch: the watch ended without data from any source{sight.last_problem()}")
        return NO_DATA_EXIT
    return 0


def start_notifying(options: RunOptions, session: Session) -> Notifier | None:
    """``--notify`` / ``notify:``: alerts pushed as they happen; a receiver's outage is one warning (on
    the dashboard's alert panel, or on stderr headless)."""
    if options.notify is None:
        return None
    from tokenwatch.frontends.notify import start_notifier

    return start_notifier(options.notify, session, _notify_warning, on_screen=options.wants_dashboard())


def finish_notifying(notifier: Notifier | None) -> None:
    """What is still queued goes out (a bounded wait), on a loop of its own: the run's has ended."""
    if notifier is None or notifier.closed:
        return
    notifier.courier.warn = _notify_warning  # the screen is gone: stderr from here on
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(notifier.close())


def _notify_warning(message: str) -> None:
    stderr_line(f"tokenwatch: warning: {message}")


def print_after_screen(session: Session) -> None:
    """The summary on the terminal the dashboard left, if it is still there: after a closed window the
    write fails (EIO), and the standard streams are pointed at /dev/null so that neither this nor the
    interpreter's last flush turns a clean interrupted exit into a traceback (the recording has it all)."""
    try:
        print_summary(session, sys.stdout)
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (sys.stdout.fileno(), sys.stderr.fileno()):
            with contextlib.suppress(OSError):
                os.dup2(devnull, fd)
        os.close(devnull)


def print_summary(session: Session, out: IO[str]) -> None:
    """The run summary table (marked when the run was interrupted or has no end, and when the recording
    is partial), if a run started; with ``--baseline``, the table ``summarize --baseline`` prints after
    it (the final figures compared)."""
    core = session.core
    if core.started:
        summary = session.summary()
        out.write("\n" + render_summary(summary) + "\n")
        if core.config.baseline is not None:
            from tokenwatch.core.baseline.compare import compare_summary
            from tokenwatch.frontends.headless.baseline_table import render_baseline

            out.write("\n" + render_baseline(compare_summary(summary, core.config.baseline)) + "\n")
        out.flush()


def start_exporter(options: RunOptions, core: RackCore | Callable[[], RackCore]) -> MetricsServer | None:
    """The /metrics server, announced on stderr with the address it bound (``--prometheus-port 0`` picks
    a free port; ``--prometheus-host`` another address than 127.0.0.1, with a warning when it is not
    loopback). A port in use or an address that is not this machine's is a usage error: one line, exit
    status 2."""
    from tokenwatch.cli.serve_cmd import is_loopback, listen_error

    host = options.prometheus_host
    if options.prometheus_port is None:
        if host is not None:
            raise UsageError("--prometheus-host needs --prometheus-port (the port /metrics is served on)")
        return None
    from tokenwatch.frontends.metrics import serve_metrics

    address = host or "127.0.0.1"
    try:
        server = serve_metrics(core, options.prometheus_port, host=address)
    except OSError as exc:
        raise UsageError(
            f"--prometheus-port: {listen_error(exc, address, options.prometheus_port)}"
        ) from None
    shown = f"[{address}]" if ":" in address else address
    stderr_line(f"serving /metrics on http://{shown}:{server.port}/metrics")
    if not is_loopback(address):
        stderr_line(
            f"tokenwatch: warning: /metrics listens on {address}: anyone who can reach it can read the run's "
            "figures, node names and rack (there is no authentication)"
        )
    return server


def _dashboard_start_hook(session: Session, exporter: MetricsServer | None) -> Callable[[App[None]], None]:
    """What runs on the dashboard's loop once it starts: the /metrics server attaches, and a stop signal
    (SIGTERM, SIGHUP, a SIGINT sent from outside: Ctrl-C in the dashboard is a key) quits the dashboard
    as Ctrl-C does, the run ended as interrupted."""

    def on_start(app: App[None]) -> None:
        loop = asyncio.get_running_loop()
        if exporter is not None:
            exporter.attach_loop(loop)

        def quit_on_signal() -> None:
            session.stop()
            app.call_later(app.run_action, "quit")

        for sig in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, quit_on_signal)

    return on_start


async def _run_until_signal(
    session: Session, exporter: MetricsServer | None = None, notifier: Notifier | None = None
) -> bool:
    """Run the session, then let the notifier finish (on this loop: what it is sending is not cut off);
    True when a stop signal ended it."""
    loop = asyncio.get_running_loop()
    if exporter is not None:
        exporter.attach_loop(loop)  # scrapes then read the core between events, on this thread
    signalled: list[bool] = []

    def stop_once() -> None:
        # The first signal stops the session cleanly; a second one (the shutdown seems stuck) is the
        # default action again: SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP end the process.
        signalled.append(True)
        session.stop()
        for sig in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)

    for sig in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop_once)
    # A slow start (a watch's backlogs, a replay's --start) says what it loads on the terminal.
    sayer = asyncio.create_task(say_loads(session.loading))
    try:
        await session.run()
        if notifier is not None:
            await notifier.close()
    finally:
        sayer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sayer
        for sig in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
    return bool(signalled)
