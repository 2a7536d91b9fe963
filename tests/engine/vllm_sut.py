"""A LoadGen system under test that streams completions from a real vLLM server over HTTP.

Run as a script (one LoadGen run per process, as a harness runs it)::

    python tests/engine/vllm_sut.py --scenario Server --outdir OUT --url http://127.0.0.1:8000 \\
        --model tiny-llama --target-qps 4 --min-duration-ms 120000

Each query LoadGen issues is one ``POST /v1/completions`` with ``stream: true``: a prompt of token ids (a
fixed function of the sample index), ``max_tokens`` output tokens with ``ignore_eos`` so every answer has
exactly that length, and ``stream_options.include_usage`` so the last chunk carries vLLM's own token
count. ``--concurrency`` worker threads send the queries side by side (vLLM batches them). The first
streamed chunk is reported to LoadGen with ``FirstTokenComplete`` and the whole answer with
``QuerySamplesComplete`` carrying vLLM's ``completion_tokens``, as the Llama-2 harnesses do, so LoadGen
reports tokens per second and, in Server, TTFT and TPOT. A query that fails is still completed (LoadGen
would wait for it for ever) with no tokens, and counted in ``errors``. At the end the SUT prints what it
served, as JSON, for the tests to check LoadGen and tokenwatch against.
"""

from __future__ import annotations

import argparse
import array
import functools
import http.client
import json
import os
import queue
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import mlperf_loadgen as lg

QSL_SIZE = 1024
PERFORMANCE_SAMPLES = 256
PROMPT_TOKENS = (16, 48)  # a prompt's length range, in tokens of the tiny model's 512-token vocabulary
FIRST_ORDINARY_TOKEN = 3  # ids 0-2 are the special tokens
VOCAB_SIZE = 512


def prompt_for(index: int) -> list[int]:
    """Sample ``index``'s prompt: token ids, a fixed function of the index."""
    low, high = PROMPT_TOKENS
    length = low + (index * 7919) % (high - low + 1)
    span = VOCAB_SIZE - FIRST_ORDINARY_TOKEN
    return [FIRST_ORDINARY_TOKEN + (index * 31 + k * 131) % span for k in range(length)]


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    model: str
    max_tokens: int
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Answer:
    tokens: int  # vLLM's completion_tokens (0 for a failed query)
    error: str | None


def stream_completion(endpoint: Endpoint, prompt: list[int], on_first: Callable[[bytes], None]) -> Answer:
    """One streamed completion: ``on_first`` hears the first chunk's text (as bytes) the moment it
    arrives; returns vLLM's own token count for the whole answer."""
    body = json.dumps(
        {
            "model": endpoint.model,
            "prompt": prompt,
            "max_tokens": endpoint.max_tokens,
            "min_tokens": endpoint.max_tokens,
            "ignore_eos": True,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=endpoint.timeout_s)
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            return Answer(0, f"HTTP {response.status}: {response.read(300)!r}")
        chunks, usage = 0, None
        for raw in response:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("usage"):
                usage = chunk["usage"].get("completion_tokens")
            choices = chunk.get("choices") or []
            if choices:
                chunks += 1
                if chunks == 1:
                    on_first(choices[0].get("text", "").encode() or b"\0")
        if usage is None:
            return Answer(0, f"no usage in the stream ({chunks} chunks)")
        return Answer(int(usage), None)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return Answer(0, f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


def _respond(sample_id: int, data: bytes, n_tokens: int, complete: Callable[..., None]) -> None:
    """One response to LoadGen: ``data`` stays alive in ``buffer`` for the call, as LoadGen copies it."""
    buffer = array.array("B", data)
    address, length = buffer.buffer_info()
    complete([lg.QuerySampleResponse(sample_id, address, length, n_tokens)])


class StreamingSut:
    """LoadGen's SUT callbacks: queries go into a queue that ``concurrency`` threads serve."""

    def __init__(self, endpoint: Endpoint, concurrency: int) -> None:
        self.endpoint = endpoint
        self.queue: queue.SimpleQueue[lg.QuerySample | None] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.samples = 0
        self.tokens = 0
        self.errors: list[str] = []
        self.workers = [threading.Thread(target=self._serve, daemon=True) for _ in range(concurrency)]
        for worker in self.workers:
            worker.start()

    def issue(self, samples: list[lg.QuerySample]) -> None:
        for sample in samples:
            self.queue.put(sample)

    def flush(self) -> None:
        pass

    def stop(self) -> None:
        for _ in self.workers:
            self.queue.put(None)
        for worker in self.workers:
            worker.join()

    @staticmethod
    def _first_token(sample_id: int, first: list[bytes], text: bytes) -> None:
        first.append(text)
        _respond(sample_id, text, 1, lg.FirstTokenComplete)

    def _serve(self) -> None:
        while (sample := self.queue.get()) is not None:
            first: list[bytes] = []
            on_first = functools.partial(self._first_token, sample.id, first)
            answer = stream_completion(self.endpoint, prompt_for(sample.index), on_first)
            if not first:  # no token came: LoadGen still needs a first token before the completion
                _respond(sample.id, b"\0", 0, lg.FirstTokenComplete)
            _respond(sample.id, first[0] if first else b"\0", answer.tokens, lg.QuerySamplesComplete)
            with self.lock:
                self.samples += 1
                self.tokens += answer.tokens
                if answer.error is not None:
                    self.errors.append(answer.error)


def settings(args: argparse.Namespace) -> lg.TestSettings:
    ts = lg.TestSettings()
    ts.mode = lg.TestMode.PerformanceOnly
    ts.use_token_latencies = True
    ts.min_duration_ms = args.min_duration_ms
    ts.min_query_count = args.min_queries
    if args.scenario == "Offline":
        ts.scenario = lg.TestScenario.Offline
        ts.offline_expected_qps = args.expected_qps
    else:
        ts.scenario = lg.TestScenario.Server
        ts.server_target_qps = args.target_qps
        ts.ttft_latency = int(args.ttft_limit_ms * 1e6)
        ts.tpot_latency = int(args.tpot_limit_ms * 1e6)
    return ts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--scenario", choices=("Offline", "Server"), required=True)
    p.add_argument("--outdir", required=True)
    p.add_argument("--url", required=True, help="the vLLM server, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", required=True, help="the served model name")
    p.add_argument("--max-tokens", type=int, default=32, help="output tokens of every answer")
    p.add_argument("--concurrency", type=int, default=16, help="queries in flight at once")
    p.add_argument("--min-duration-ms", type=int, default=60000)
    p.add_argument("--min-queries", type=int, default=1)
    p.add_argument("--expected-qps", type=float, default=10.0, help="Offline")
    p.add_argument("--target-qps", type=float, default=2.0, help="Server")
    p.add_argument("--ttft-limit-ms", type=float, default=2000.0, help="Server: LoadGen's TTFT limit")
    p.add_argument("--tpot-limit-ms", type=float, default=200.0, help="Server: LoadGen's TPOT limit")
    p.add_argument("--request-timeout-s", type=float, default=300.0)
    args = p.parse_args(argv)
    url = urlsplit(args.url)
    endpoint = Endpoint(
        url.hostname or "127.0.0.1", url.port or 80, args.model, args.max_tokens, args.request_timeout_s
    )
    os.makedirs(args.outdir, exist_ok=True)  # LoadGen does not create it
    sut = StreamingSut(endpoint, args.concurrency)
    sut_handle = lg.ConstructSUT(sut.issue, sut.flush)
    qsl_handle = lg.ConstructQSL(QSL_SIZE, PERFORMANCE_SAMPLES, lambda _: None, lambda _: None)
    log = lg.LogSettings()
    log.log_output.outdir = args.outdir
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False  # nothing reads it here, and it is 17 MB for a 2-minute Offline run
    lg.StartTestWithLogSettings(sut_handle, qsl_handle, settings(args), log)
    sut.stop()
    lg.DestroyQSL(qsl_handle)
    lg.DestroySUT(sut_handle)
    served = {
        "samples": sut.samples,
        "tokens": sut.tokens,
        "errors": len(sut.errors),
        "first_errors": sut.errors[:3],
    }
    json.dump(served, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
