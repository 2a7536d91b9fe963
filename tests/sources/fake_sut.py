"""A small system under test for the real MLPerf LoadGen: it "generates" tokens at a set rate.

Run as a script (one LoadGen run per process, so several nodes run side by side and a test can tail
a trace while LoadGen writes it)::

    python tests/sources/fake_sut.py --scenario Offline --outdir OUT --tokens-per-s 3000

One worker (or ``--workers`` side by side) serves samples one after another: sample ``i`` has ``n_i``
output tokens (between ``--tokens-min`` and ``--tokens-max``, a fixed function of the sample index) and
takes ``n_i`` token times of ``1/tokens-per-s`` seconds. ``--slow-first-token-every K`` delays the first
token of every K-th sample issued by ``--slow-first-token-ms`` (``--slow-tokens-every`` / ``-ms`` add to
each later token), so a test can put a known share of samples over LoadGen's TTFT or TPOT limit
(``--ttft-limit-ms`` / ``--tpot-limit-ms``). The first token is reported with ``FirstTokenComplete`` and the
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
    def __init__(
        self,
        tokens_per_s: float,
        low: int,
        high: int,
        workers: int = 1,
        slow_first: tuple[int, float] = (0, 0.0),
        slow_tokens: tuple[int, float] = (0, 0.0),
    ) -> None:
        self.token_time = 1.0 / tokens_per_s
        self.low, self.high = low, high
        self.slow_first, self.slow_tokens = slow_first, slow_tokens
        self.queue: deque[tuple[lg.QuerySample, int]] = deque()
        self.cv = threading.Condition()
        self.stopping = False
        self.issued = 0
        self.samples = 0
        self.tokens = 0
        self.workers = [threading.Thread(target=self._serve, daemon=True) for _ in range(workers)]
        for worker in self.workers:
            worker.start()

    def issue(self, samples: list[lg.QuerySample]) -> None:
        with self.cv:
            for sample in samples:
                self.issued += 1
                self.queue.append((sample, self.issued))
            self.cv.notify_all()

    def flush(self) -> None:
        pass

    def stop(self) -> None:
        with self.cv:
            self.stopping = True
            self.cv.notify_all()
        for worker in self.workers:
            worker.join()

    def _extra(self, rule: tuple[int, float], ordinal: int) -> float:
        every, seconds = rule
        return seconds if every and ordinal % every == 0 else 0.0

    def _serve(self) -> None:
        free_at = time.perf_counter()
        while True:
            with self.cv:
                while not self.queue and not self.stopping:
                    self.cv.wait()
                if not self.queue:
                    return
                sample, ordinal = self.queue.popleft()
            n_tokens = tokens_for(sample.index, self.low, self.high)
            start = max(time.perf_counter(), free_at)
            first_delay = self.token_time + self._extra(self.slow_first, ordinal)
            token_time = self.token_time + self._extra(self.slow_tokens, ordinal)
            tokens = np.arange(n_tokens, dtype=np.int32) + 1
            first = array.array("B", tokens[:1].tobytes())
            _sleep_until(start + first_delay)
            address, length = first.buffer_info()
            lg.FirstTokenComplete([lg.QuerySampleResponse(sample.id, address, length, 1)])
            free_at = start + first_delay + (n_tokens - 1) * token_time
            _sleep_until(free_at)
            data = array.array("B", tokens.tobytes())
            address, length = data.buffer_info()
            lg.QuerySamplesComplete([lg.QuerySampleResponse(sample.id, address, length * 1, n_tokens)])
            with self.cv:
                self.samples += 1
                self.tokens += n_tokens


def _sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        time.sleep(delay)  # the fake server's service time: the scenario's own pacing, which no test times


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
        ts.ttft_latency = int(args.ttft_limit_ms * 1e6)
        ts.tpot_latency = int(args.tpot_limit_ms * 1e6)
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
    p.add_argument("--ttft-limit-ms", type=float, default=2000.0, help="Server: LoadGen's TTFT limit")
    p.add_argument("--tpot-limit-ms", type=float, default=200.0, help="Server: LoadGen's TPOT limit")
    p.add_argument("--workers", type=int, default=1, help="samples served side by side")
    p.add_argument("--slow-first-token-every", type=int, default=0, metavar="K")
    p.add_argument("--slow-first-token-ms", type=float, default=0.0)
    p.add_argument("--slow-tokens-every", type=int, default=0, metavar="K")
    p.add_argument("--slow-tokens-ms", type=float, default=0.0, help="added to each token after the first")
    p.add_argument("--no-trace", action="store_true")
    args = p.parse_args(argv)
    os.makedirs(args.outdir, exist_ok=True)  # LoadGen does not create it
    sut = TokenSut(
        args.tokens_per_s,
        args.tokens_min,
        args.tokens_max,
        args.workers,
        (args.slow_first_token_every, args.slow_first_token_ms / 1000.0),
        (args.slow_tokens_every, args.slow_tokens_ms / 1000.0),
    )
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
