"""Fixtures for the engine tests: one real vLLM server for the session, one watched LoadGen run per
scenario. Everything that needs the engine is in the xdist group ``vllm-engine`` (one worker starts the
server once); where vLLM is not installed or does not start, the tests skip with the reason."""

from __future__ import annotations

import faulthandler
from collections.abc import Iterator

import pytest

from tests.conftest import free_port
from tests.engine.engine_runs import EngineRun, measure_qps, run_watched
from tests.engine.vllm_server import VllmServer, missing_vllm, start_server
from tests.machine_share import machine_to_itself


def minutes_ahead() -> None:
    """This fixture takes minutes on purpose (vLLM starting, a 2-minute LoadGen run): pytest's
    faulthandler_timeout (150 s) would print every thread's stack as if it hung. The test's own timeout
    mark (pytest-timeout) still stops a real hang."""
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    minutes_ahead()
    reason = missing_vllm()
    if reason:
        pytest.skip(reason)
    # vLLM's start (1-3 minutes of every core: loading, compiling, a profiling pass) has the machine to
    # itself too: beside it (load ~48 on 2 cores), the other worker's fleet test saw its Prometheus
    # answer no alerting pass in full for a minute.
    with machine_to_itself():
        started = start_server(tmp_path_factory.mktemp("vllm"), free_port())
        for _ in range(2):  # a port free when asked that another process took before vLLM bound it
            if not (isinstance(started, str) and "already in use" in started.lower()):
                break
            started = start_server(tmp_path_factory.mktemp("vllm"), free_port())
    if isinstance(started, str):
        pytest.skip(started)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="session")
def capacity_qps(vllm_server: VllmServer) -> float:
    """Queries per second the engine completes with a full batch, measured now (the runs are sized by
    it, so they last about as long on a quiet machine as on a loaded one)."""
    with machine_to_itself():
        return measure_qps(vllm_server)


@pytest.fixture(scope="session")
def offline_run(
    vllm_server: VllmServer, capacity_qps: float, tmp_path_factory: pytest.TempPathFactory
) -> EngineRun:
    minutes_ahead()
    with machine_to_itself():  # its pace is timed: the other workers' tests wait (tests/machine_share)
        return run_watched(tmp_path_factory.mktemp("offline"), "Offline", vllm_server, capacity_qps)


@pytest.fixture(scope="session")
def server_run(
    vllm_server: VllmServer, capacity_qps: float, tmp_path_factory: pytest.TempPathFactory
) -> EngineRun:
    minutes_ahead()
    with machine_to_itself():  # its pace is timed: the other workers' tests wait (tests/machine_share)
        return run_watched(tmp_path_factory.mktemp("server"), "Server", vllm_server, capacity_qps)
