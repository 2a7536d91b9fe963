"""A LoadGen system under test that really generates on an NVIDIA GPU (for the device checks).

Not part of the test suite: ``scripts/device/run_checks.sh`` runs it on a machine with a GPU so that
tokenwatch watches a real LoadGen run whose tokens come from a real model on a real GPU (its NVML and
nvidia-smi readings are what the GPU did). The model is a Llama-architecture transformer with random
weights (PyTorch + transformers, nothing downloaded); prompts are random token ids; every sample
generates exactly ``--new-tokens`` tokens (argmax, no end-of-sequence), so the token count LoadGen is
told is exact. One worker takes whatever samples are queued (up to ``--batch``), runs the prefill,
reports each sample's first token with ``FirstTokenComplete``, then decodes with the KV cache and reports
the whole response with ``QuerySamplesComplete``. At the end it prints what it served, as JSON.
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
from collections.abc import Callable

import mlperf_loadgen as lg
import torch
from transformers import LlamaConfig, LlamaForCausalLM

QSL_SIZE = 4096


def build_model(layers: int, hidden: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=hidden,
        intermediate_size=hidden * 11 // 4,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 128,
        num_key_value_heads=max(1, hidden // 512),
        max_position_embeddings=4096,
    )
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config)
    return model.eval()


class GpuSut:
    def __init__(self, model: LlamaForCausalLM, batch: int, prompt: int, new_tokens: int) -> None:
        self.model = model
        self.batch, self.prompt, self.new_tokens = batch, prompt, new_tokens
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
            self.cv.notify_all()

    def flush(self) -> None:
        pass

    def stop(self) -> None:
        with self.cv:
            self.stopping = True
            self.cv.notify_all()
        self.worker.join()

    def generate(self, n: int, report_first: Callable[[torch.Tensor], None] | None = None) -> torch.Tensor:
        with torch.inference_mode():
            return self._generate(n, report_first)

    def _generate(self, n: int, report_first: Callable[[torch.Tensor], None] | None) -> torch.Tensor:
        ids = torch.randint(0, 32000, (n, self.prompt), device="cuda")
        try:
            out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
        except TypeError:  # an older transformers: every position's logits
            out = self.model(input_ids=ids, use_cache=True)
        past = out.past_key_values
        token = out.logits[:, -1, :].argmax(-1, keepdim=True)
        generated = [token]
        torch.cuda.synchronize()
        if report_first is not None:
            report_first(token)
        for _ in range(self.new_tokens - 1):
            out = self.model(input_ids=token, past_key_values=past, use_cache=True)
            past = out.past_key_values
            token = out.logits[:, -1, :].argmax(-1, keepdim=True)
            generated.append(token)
        result = torch.cat(generated, dim=1)
        torch.cuda.synchronize()
        return result

    def _serve(self) -> None:
        while True:
            with self.cv:
                while not self.queue and not self.stopping:
                    self.cv.wait()
                if not self.queue:
                    return
                take = [self.queue.popleft() for _ in range(min(self.batch, len(self.queue)))]

            def first(tokens: torch.Tensor, take: list[lg.QuerySample] = take) -> None:
                _respond(take, tokens, 1, lg.FirstTokenComplete)

            result = self.generate(len(take), first)
            _respond(take, result, self.new_tokens, lg.QuerySamplesComplete)
            with self.cv:
                self.samples += len(take)
                self.tokens += len(take) * self.new_tokens


def _respond(
    samples: list[lg.QuerySample],
    tokens: torch.Tensor,
    n_tokens: int,
    complete: Callable[[list[lg.QuerySampleResponse]], None],
) -> None:
    """Each sample's row of ``tokens`` to LoadGen with its token count (a first token, or the response)."""
    host = tokens.to(torch.int32).cpu().numpy()
    keep = [array.array("B", host[row].tobytes()) for row in range(len(samples))]  # alive through the call
    complete(
        [
            lg.QuerySampleResponse(sample.id, *data.buffer_info(), n_tokens)
            for sample, data in zip(samples, keep, strict=True)
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", choices=("Offline", "Server"), required=True)
    p.add_argument("--outdir", required=True)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--prompt", type=int, default=256)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--min-duration-ms", type=int, default=60000)
    p.add_argument(
        "--server-load", type=float, default=0.6, help="Server: target QPS as a share of Offline's"
    )
    args = p.parse_args(argv)
    os.makedirs(args.outdir, exist_ok=True)
    began = time.perf_counter()
    model = build_model(args.layers, args.hidden)
    sut = GpuSut(model, args.batch, args.prompt, args.new_tokens)
    sut.generate(args.batch)  # warm-up: kernels chosen, memory allocated
    t0 = time.perf_counter()
    sut.generate(args.batch)
    batch_s = time.perf_counter() - t0
    qps = args.batch / batch_s
    print(
        f"model ready in {t0 - began:.1f} s; one batch of {args.batch}: {batch_s:.2f} s"
        f" ({qps:.0f} samples/s)",
        file=sys.stderr,
        flush=True,
    )
    ts = lg.TestSettings()
    ts.mode = lg.TestMode.PerformanceOnly
    ts.use_token_latencies = True
    ts.min_duration_ms = args.min_duration_ms
    ts.min_query_count = 1
    if args.scenario == "Offline":
        ts.scenario = lg.TestScenario.Offline
        ts.offline_expected_qps = qps
    else:
        ts.scenario = lg.TestScenario.Server
        ts.server_target_qps = qps * args.server_load
        ts.ttft_latency = int(2e9)
        ts.tpot_latency = int(200e6)
    sut_handle = lg.ConstructSUT(sut.issue, sut.flush)
    qsl_handle = lg.ConstructQSL(QSL_SIZE, QSL_SIZE, lambda _: None, lambda _: None)
    log = lg.LogSettings()
    log.log_output.outdir = args.outdir
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = True
    lg.StartTestWithLogSettings(sut_handle, qsl_handle, ts, log)
    sut.stop()
    lg.DestroyQSL(qsl_handle)
    lg.DestroySUT(sut_handle)
    json.dump({"samples": sut.samples, "tokens": sut.tokens, "batch_s": batch_s}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
