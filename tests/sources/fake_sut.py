"""A small system under test for the real MLPerf LoadGen: it "generates" tokens at a set rate.

Run as a script (one LoadGen run per process, so several nodes run side by side and a test can tail
a trace while LoadGen writes it)::

    python tests/sources/fake_sut.py --scenario Offline --outdir OUT --tokens-per-s 3000

One worker serves samples one after another: sample ``i`` has ``n_i`` output tokens (between
``--tokens-min`` and ``--tokens-max``, a fixed function of the sample index) and takes ``n_i`` token
times of ``1/tokens-per-s`` seconds. The first token is reported with ``FirstTokenComplete`` and the
whole response with ``QuerySamplesComplete`` carrying ``n_tokens``, as the Llama-2 harnesses do, so
LoadGen's summary reports tokens per second (and TTFT/TPOT in Server). At the end the SUT prints
what it served, as JSON, for the tests to check LoadGen against.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import sys
import threading
import time
from collections import deque

import mlperf_loadgen as lg
import numpy as np

QSL_SIZE = 1024
PERFORMANCE_SAMPLES = 256


def tokens_for(index: int, low: int, high: int) -> int:
    return low + (index * 7919) % (high - low + 1)


class TokenSut:
    def __init__(self, tokens_per_s: float, low: int, high: int) -> None:
        self.token_time = 1.0 / tokens_per_s
        self.low, self.high = low, high
        self.queue: deque[lg.QuerySample] = deque()
        self.cv = threading.Condition()
        self.stopping = False
        self.samples = 0
        self.tokens = 0
        self.worker = threading.Thread(target=self._serve, daemon=True)
        self.worker.start()

    def issue(self, samples: list[lg.QuerySample]) -> None:
        with self.cv:
            self.queue.extend(samples)
            self.cv.notify()

    def flush(self) -> None:
        pass

    def stop(self) -> None:
        with self.cv:
            self.stopping = True
            self.cv.notify()
        self.worker.join()

    def _serve(self) -> None:
        free_at = time.perf_counter()
        while True:
            with self.cv:
                while not self.queue and not self.stopping:
                    self.cv.wait()
                if not self.queue:
                    return
                sample = self.queue.popleft()
            n_tokens = tokens_for(sample.index, self.low, self.high)
            start = max(time.perf_counter(), free_at)
            tokens = np.arange(n_tokens, dtype=np.int32) + 1
            first = array.array("B", tokens[:1].tobytes())
            _sleep_until(start + self.token_time)
            address, length = first.buffer_info()
            lg.FirstTokenComplete([lg.QuerySampleResponse(sample.id, address, length, 1)])
            free_at = start + n_tokens * self.token_time
            _sleep_until(free_at)
            data = array.array("B", tokens.tobytes())
            address, length = data.buffer_info()
            lg.QuerySamplesComplete([lg.QuerySampleResponse(sample.id, address, length * 1, n_tokens)])
            self.samples += 1
            self.tokens += n_tokens


def _sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def settings(args: argparse.Namespace) -> lg.TestSettings:
    ts = lg.TestSettings()
    ts.mode = lg.TestMode.PerformanceOnly
    ts.use_token_latencies = True
    ts.min_duration_ms = args.min_duration_ms
    ts.min_query_count = args.min_queries
    mean_tokens = (args.tokens_min + args.tokens_max) / 2
    if args.scenario == "Offline":
        ts.scenario = lg.TestScenario.Offline
        ts.offline_expected_qps = args.expected_qps or args.tokens_per_s / mean_tokens
    else:
        ts.scenario = lg.TestScenario.Server
        ts.server_target_qps = args.target_qps
        ts.ttft_latency = 2_000_000_000
        ts.tpot_latency = 200_000_000
    return ts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", choices=("Offline", "Server"), required=True)
    p.add_argument("--outdir", required=True)
    p.add_argument("--tokens-per-s", type=float, default=3000.0)
    p.add_argument("--tokens-min", type=int, default=8)
    p.add_argument("--tokens-max", type=int, default=16)
    p.add_argument("--min-duration-ms", type=int, default=1500)
    p.add_argument("--min-queries", type=int, default=1)
    p.add_argument("--expected-qps", type=float, default=None, help="Offline (default: what the SUT can do)")
    p.add_argument("--target-qps", type=float, default=300.0, help="Server")
    p.add_argument("--no-trace", action="store_true")
    args = p.parse_args(argv)
    os.makedirs(args.outdir, exist_ok=True)  # LoadGen does not create it
    sut = TokenSut(args.tokens_per_s, args.tokens_min, args.tokens_max)
    sut_handle = lg.ConstructSUT(sut.issue, sut.flush)
    qsl_handle = lg.ConstructQSL(QSL_SIZE, PERFORMANCE_SAMPLES, lambda _: None, lambda _: None)
    log = lg.LogSettings()
    log.log_output.outdir = args.outdir
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = not args.no_trace
    lg.StartTestWithLogSettings(sut_handle, qsl_handle, settings(args), log)
    sut.stop()
    lg.DestroyQSL(qsl_handle)
    lg.DestroySUT(sut_handle)
    json.dump({"samples": sut.samples, "tokens": sut.tokens}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
