"""A steady stream of completions on the real vLLM server, from a process of its own, until stdin closes.

Run from the checkout as ``python -m tests.engine.steady_load URL MODEL THREADS``: THREADS clients each
stream one completion after another (32 tokens, a prompt that varies by client and turn). When stdin
reaches its end (the test closes it) the clients finish the answers in flight, and the errors met are
printed, as JSON.

A process of its own, as a benchmark's load is: in the test's process its 16 client threads took the GIL
from the watches under test, whose loop then went seconds without running (a 35-s look at them made 25
looks, not 350), and a watch that cannot read is stale through no fault of the engine or the watch.
"""

from __future__ import annotations

import json
import sys
import threading

from tests.engine.vllm_sut import Endpoint, stream_completion


def main() -> int:
    url, model, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    endpoint = Endpoint("127.0.0.1", int(url.rsplit(":", 1)[1]), model, 32, 300.0)
    stop = threading.Event()
    errors: list[str] = []

    def work(k: int) -> None:
        n = 0
        while not stop.is_set():
            answer = stream_completion(endpoint, [5 + (k * 31 + n) % 400] * 24, lambda _text: None)
            if answer.error:
                errors.append(answer.error)
            n += 1

    clients = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(threads)]
    for client in clients:
        client.start()
    sys.stdin.read()  # until the test closes it
    stop.set()
    for client in clients:
        client.join()
    print(json.dumps({"errors": errors[:20]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
