"""The Prometheus API answer parser and the collector's failure paths: no traceback, no hang."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import math
import threading
import time
from collections.abc import Iterator

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import PATIENCE_S, refusing_port
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import Event, Notice, ProgressBatch
from tokenwatch.core.capacity import WorkloadError, parse_workload
from tokenwatch.inputs.prometheus import api as prometheus_api
from tokenwatch.inputs.prometheus.answers import parse_response
from tokenwatch.inputs.prometheus.api import PromApiError, PrometheusApi
from tokenwatch.inputs.prometheus.presets import PresetError
from tokenwatch.inputs.prometheus.query import PrometheusQueryCollector


@given(st.binary(max_size=2000))
@settings(max_examples=300, deadline=None)
def test_random_bytes_are_an_error_or_samples(body: bytes) -> None:
    try:
        samples: list[object] | str = list(parse_response(body))
    except PromApiError as exc:
        samples = str(exc)
    assert isinstance(samples, list) or "\n" not in samples  # a list, or a one-line error


_json = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
    max_leaves=10,
)


@given(st.dictionaries(st.sampled_from(["status", "data", "errorType", "error", "x"]), _json))
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_random_json_shapes(doc: dict[str, object]) -> None:
    with contextlib.suppress(PromApiError):
        parse_response(orjson.dumps(doc))


@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=12), max_size=3),
            st.floats(allow_nan=True, allow_infinity=True),
        ),
        max_size=20,
    )
)
def test_vectors_round_trip(samples: list[tuple[dict[str, str], float]]) -> None:
    def go_string(v: float) -> str:
        return (
            "NaN" if math.isnan(v) else ("+Inf" if v == math.inf else ("-Inf" if v == -math.inf else repr(v)))
        )

    doc = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": m, "value": [1.5, go_string(v)]} for m, v in samples],
        },
    }
    got = parse_response(orjson.dumps(doc))
    assert got == [(m, v) for m, v in samples if not math.isnan(v)]  # NaN samples are gaps


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"status":"error","errorType":"bad_data","error":"parse error"}', "bad_data: parse error"),
        (b'{"status":"success","data":{"resultType":"matrix","result":[]}}', "instant vector"),
        (
            b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}',
            "not a number",
        ),
        (b"[]", "not a JSON object"),
        (b"<html>", "not JSON"),
    ],
)
def test_errors_say_what_went_wrong(body: bytes, message: str) -> None:
    with pytest.raises(PromApiError, match=message):
        parse_response(body)


def test_scalar_answer() -> None:
    assert parse_response(b'{"status":"success","data":{"resultType":"scalar","result":[1,"2.5"]}}') == [
        ({}, 2.5)
    ]


def test_unreachable_prometheus_is_a_notice_not_a_crash() -> None:
    url = f"http://127.0.0.1:{refusing_port()}"  # nothing listens there
    collector = PrometheusQueryCollector(
        url=url,
        nodes=("a",),
        gpus_per_node=1,
        interval_s=1.0,
        gpu=True,
        progress=False,
        now=lambda: 0.0,
        clock=ManualClock(),
        polls=3,
        timeout_s=1.0,
        queries=dict.fromkeys(
            (
                "power_limit_w",
                "sm_clock_mhz",
                "mem_clock_mhz",
                "hbm_used_mib",
                "hbm_total_mib",
                "hbm_busy_pct",
                "util_pct",
                "temp_c",
                "energy_j",
                "hbm_temp_c",
                "xid",
                "nvlink_errors",
                "throttle_reasons",
            ),
            "",
        ),
    )
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    asyncio.run(collector.run(emit))
    assert len(events) == 1
    assert isinstance(events[0], Notice)
    assert "cannot reach" in events[0].message


def test_node_label_values_map_to_nodes() -> None:
    collector = PrometheusQueryCollector(
        url="http://127.0.0.1:1",
        nodes=("node01", "gpu-a.example"),
        gpus_per_node=4,
        now=lambda: 0.0,
    )
    assert collector.node_of("node01") == 0
    assert collector.node_of("node01:9400") == 0
    assert collector.node_of("node01.cluster.local") == 0
    assert collector.node_of("gpu-a.example") == 1
    assert collector.node_of("elsewhere") is None


def test_unknown_preset_and_field() -> None:
    with pytest.raises(PresetError, match="unknown GPU preset"):
        PrometheusQueryCollector(url="u", nodes=("a",), gpus_per_node=1, now=lambda: 0.0, gpu_preset="nope")
    with pytest.raises(PresetError, match="unknown query field"):
        PrometheusQueryCollector(
            url="u", nodes=("a",), gpus_per_node=1, now=lambda: 0.0, queries={"watts": "x"}
        )


@given(st.text(max_size=200))
def test_workload_parser_never_crashes(text: str) -> None:
    try:
        w = parse_workload(text)
    except WorkloadError as exc:
        error = str(exc)
        assert error.startswith("bad workload")
    else:
        assert 1 <= w.tokens <= 1e9
        assert w.name


@pytest.mark.parametrize(
    ("text", "name", "tokens"),
    [
        ("Simple Q&A=650", "Simple Q&A", 650),
        ("a=b=2,500", "a=b", 2500),
        (" RAG query = 2_500 ", "RAG query", 2500),
    ],
)
def test_workload_parser_reads(text: str, name: str, tokens: float) -> None:
    w = parse_workload(text)
    assert (w.name, w.tokens) == (name, tokens)


class _FakePrometheus(http.server.BaseHTTPRequestHandler):
    """A real HTTP/1.1 server on loopback answering every query with one sample (or a slow / huge
    answer), counting the TCP connections it accepts."""

    protocol_version = "HTTP/1.1"
    connections = 0
    delay_s = 0.0
    body = orjson.dumps(
        {
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": {"node": "a"}, "value": [1, "2"]}]},
        }
    )

    def setup(self) -> None:
        type(self).connections += 1
        super().setup()

    def do_GET(self) -> None:
        time.sleep(self.delay_s)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_prometheus() -> Iterator[tuple[str, type[_FakePrometheus]]]:
    handler = type("Handler", (_FakePrometheus,), {"connections": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_one_pooled_client_keeps_its_connections(fake_prometheus: tuple[str, type[_FakePrometheus]]) -> None:
    url, handler = fake_prometheus
    collector = PrometheusQueryCollector(
        url=url,
        nodes=("a",),
        gpus_per_node=1,
        gpu=False,
        progress=True,
        now=lambda: 0.0,
        clock=ManualClock(),
        polls=5,
        queries={"ttft": "", "tpot": "", "e2e": ""},  # tokens, samples, prompt_tokens: 3 queries a poll
    )
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    asyncio.run(collector.run(emit))
    batches = [e for e in events if isinstance(e, ProgressBatch)]
    assert [e.tokens_done.tolist() for e in batches] == [[0]] * 5  # a counter that stands still: 0 made
    assert not any(e.tokens_done.flags.writeable or e.node_index.flags.writeable for e in batches)
    # 15 queries over 5 polls; at most one connection per query in flight, kept open between polls.
    assert 1 <= handler.connections <= 3


def test_slow_and_huge_answers_are_one_line_errors(
    fake_prometheus: tuple[str, type[_FakePrometheus]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler = fake_prometheus

    async def ask(timeout_s: float) -> str:
        async with PrometheusApi(url, timeout_s) as api:
            try:
                await api.query("up")
            except PromApiError as exc:
                return str(exc)
        return "answered"

    assert asyncio.run(ask(PATIENCE_S)) == "answered"
    monkeypatch.setattr(prometheus_api, "MAX_RESPONSE_BYTES", 64)
    message = asyncio.run(ask(PATIENCE_S))
    assert message.startswith("answer larger than")
    assert message.endswith("refusing it")
    monkeypatch.undo()
    handler.delay_s = (
        2.0  # the slow server of the scenario: ten times the client's patience, even when loaded
    )
    assert asyncio.run(ask(0.2)) == f"no answer from {url} within 0.2 s"


def test_query_counters_start_from_a_baseline_and_survive_restarts() -> None:
    """Lifetime counters read through Prometheus: the first reading is the baseline, a fall is a restart
    (what was counted is kept), so the run is credited exactly the growth it saw."""
    collector = PrometheusQueryCollector(
        url="u", nodes=("a", "b"), gpus_per_node=1, gpu=False, now=lambda: 0.0
    )
    readings = [(1000, 50), (1500, 90), (200, 130), (300, 170)]  # node a restarts after 1500
    credited = []
    for k, (a, b) in enumerate(readings):
        results = {"tokens": [({"node": "a"}, float(a)), ({"node": "b"}, float(b))]}
        (batch,) = collector.progress_events(float(k), results)
        assert isinstance(batch, ProgressBatch)
        credited.append(batch.tokens_done.tolist())
    assert credited == [[0, 0], [500, 40], [500 + 200, 80], [500 + 300, 120]]


def test_a_vector_read_by_columns_equals_the_one_read_by_elements() -> None:
    """The column-at-a-time reading (what Prometheus sends) and the element-by-element one (anything
    else: a label value that is not a string) give the same samples."""
    items = [
        {"metric": {"node": f"n{i}", "gpu": str(i % 4)}, "value": [1.5, f"{i * 1.25}"]} for i in range(50)
    ]
    items[7]["value"] = [1.5, "NaN"]
    well_formed = {"status": "success", "data": {"resultType": "vector", "result": items}}
    odd = orjson.loads(orjson.dumps(well_formed))
    odd["data"]["result"][3]["metric"]["gpu"] = 3  # a number where a string belongs: read as "3"
    want = [({"node": f"n{i}", "gpu": str(i % 4)}, i * 1.25) for i in range(50) if i != 7]
    assert parse_response(orjson.dumps(well_formed)) == want
    assert parse_response(orjson.dumps(odd)) == want
