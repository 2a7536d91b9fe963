"""The Prometheus HTTP API: instant queries (``GET /api/v1/query``) and, to fill in a run's history when
the watch attaches late, range queries (``GET /api/v1/query_range``), and their JSON answers (read by
:mod:`.answers`).

One pooled ``aiohttp.ClientSession`` per :class:`PrometheusApi`, kept for the life of a collector's run:
a poll's queries go out side by side over HTTP/1.1 keep-alive connections that the next poll reuses,
instead of a new connection (and a thread) per query. aiohttp rather than httpx: a 64-rack round sends
~28 small queries at once, and httpx's per-request Python cost (a profile put ~40 % of a round there) was most
of what a round added to the server's own time. Every failure becomes :class:`PromApiError` with one
line saying what went wrong, never another exception.

What a server beyond a URL wants (a bearer token, basic auth, a tenant header, its own CA or a client
certificate) is a :class:`ServerAccess`, its secrets read when the pool is made. Answers are bounded in
size and time: one answer at most :data:`MAX_RESPONSE_BYTES`, the answers a client holds at once at most
:data:`MAX_INFLIGHT_BYTES`, each query within ``timeout_s`` however slowly the bytes come: a broken or
hostile server costs a warning, never the watch's memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlencode

import aiohttp
from yarl import URL

from tokenwatch.base.formatting import one_line
from tokenwatch.base.gc_pause import gc_paused
from tokenwatch.base.server_access import AccessError, ServerAccess
from tokenwatch.inputs.prometheus.answers import PromApiError as PromApiError  # where callers find it
from tokenwatch.inputs.prometheus.answers import Sample as Sample  # where callers find it
from tokenwatch.inputs.prometheus.answers import (
    answer_data,
    parse_range_response,
    parse_response,
    status_error,
    within_range,
)
from tokenwatch.inputs.prometheus.matrix_bytes import RangeSeries as RangeSeries  # where callers find it

# A 64-rack fleet's answer is a few MB, the largest of a 1,000-rack fleet (a GPU metric of 72,000 GPUs, a
# field's 80-minute backfill) ~10 MB: an answer this big is wrong. JSON read into Python objects takes up to
# ~15x its bytes (measured: 32 MiB of minimal samples, 495 MiB), so the bound is what one parse may cost. A
# round's ~28 answers being read at once are bounded together, so 28 hostile answers cannot add up.
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
MAX_INFLIGHT_BYTES = 128 * 1024 * 1024
MAX_ERROR_BYTES = 64 * 1024  # of an HTTP error's body: enough for Prometheus' JSON error
# Prometheus keeps idle connections for minutes; outlive a few poll intervals so each poll reuses them.
KEEPALIVE_S = 60.0
MAX_CONNECTIONS = 32  # a 64-rack round asks 28 queries at once: none waits for a connection
# Answers uncompressed: gzip cost Prometheus its own time and us the inflating (a 64-rack 5-s round took
# 60 ms instead of 33 on the same server), to save bandwidth a cluster's network does not lack.
ACCEPT_ENCODING = "identity"
MAX_ENCODED_QUERIES = 1_000  # more distinct queries than a fleet asks: the memory starts afresh
MAX_RANGE_POINTS = 10_000  # per series; Prometheus refuses a range query of more than 11,000

T = TypeVar("T")  # what an answer is read into


class PrometheusApi:
    """Instant and range queries against one Prometheus server; ``async with`` closes the pool.

    ``timeout_s`` bounds each query as a whole; an answer over :data:`MAX_RESPONSE_BYTES`
    (decompressed), or one that would take the answers being read past :data:`MAX_INFLIGHT_BYTES`, is
    refused. ``access``: headers, credentials and TLS settings. The session is made on first use,
    inside the running loop.
    """

    def __init__(self, base_url: str, timeout_s: float = 5.0, access: ServerAccess | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.access = access or ServerAccess()
        self._session: aiohttp.ClientSession | None = None
        self._inflight_bytes = 0  # of the answers being read now
        # Each query's ``query=`` parameter, URL-encoded the first time it is asked: a round asks the
        # same queries, and encoding a 1,000-rack round's PromQL every round cost more than reading it.
        self._encoded: dict[str, str] = {}

    async def __aenter__(self) -> PrometheusApi:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            headers = {**self.access.request_headers(), "Accept-Encoding": ACCEPT_ENCODING}
            tls = self.access.ssl_context()
            connector = aiohttp.TCPConnector(
                limit=MAX_CONNECTIONS,
                keepalive_timeout=KEEPALIVE_S,
                ttl_dns_cache=int(KEEPALIVE_S),
                ssl=tls if tls is not None else True,
            )
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=self.timeout_s), headers=headers
            )
        return self._session

    async def query(self, promql: str, at: float | None = None) -> list[Sample]:
        """The instant vector (or scalar) ``promql`` evaluates to now (or at Unix time ``at``), as
        (labels, value) pairs."""
        return await self.query_as(promql, at, parse_response)

    async def query_as(self, promql: str, at: float | None, read: Callable[[bytes], T]) -> T:
        """:meth:`query`, its answer (a 200's bytes) read by ``read``, which raises
        :class:`PromApiError` for an answer it cannot read; an HTTP error is one as always."""
        encoded = self._encoded.get(promql)
        if encoded is None:
            if len(self._encoded) >= MAX_ENCODED_QUERIES:
                self._encoded.clear()
            encoded = self._encoded[promql] = urlencode({"query": promql})
        status, body = await self._ask("/api/v1/query", encoded if at is None else f"{encoded}&time={at:.3f}")
        with gc_paused():
            if status != 200:
                raise status_error(status, body)
            return read(body)

    async def query_range(self, promql: str, start: float, end: float, step_s: float) -> list[RangeSeries]:
        """``promql`` evaluated every ``step_s`` from ``start`` to ``end`` (Unix times): per series, its
        labels and its points' times and values."""
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        status, body = await self._ask("/api/v1/query_range", params)
        if status != 200:
            raise status_error(status, body)
        with gc_paused():
            return within_range(parse_range_response(body), start, end, step_s)

    async def status(self, what: str) -> dict[str, Any]:
        """``/api/v1/status/<what>`` (``config``, ``flags``): the server's own settings, as its JSON says."""
        status, body = await self._ask(f"/api/v1/status/{what}", {})
        try:
            return answer_data(body)
        except PromApiError as inner:
            raise PromApiError(f"HTTP {status}: {inner}" if status != 200 else str(inner)) from None

    async def query_all(
        self, queries: Mapping[str, str], at: float | None = None
    ) -> tuple[dict[str, list[Sample]], dict[str, BaseException]]:
        """Every query at once (field -> PromQL): the answers by field, and what failed, by field."""
        return await self.read_all(queries, at, parse_response)

    async def read_all(
        self, queries: Mapping[str, str], at: float | None, read: Callable[[bytes], T]
    ) -> tuple[dict[str, T], dict[str, BaseException]]:
        """:meth:`query_all`, each answer read by ``read`` as it arrives (:meth:`query_as`)."""
        fields = list(queries)
        answers = await asyncio.gather(
            *(self.query_as(queries[f], at, read) for f in fields), return_exceptions=True
        )
        return _split(fields, answers)

    async def query_range_all(
        self, queries: Mapping[str, str], start: float, end: float, step_s: float
    ) -> tuple[dict[str, list[RangeSeries]], dict[str, BaseException]]:
        """:meth:`query_range` of every query at once: the answers by field, and what failed, by field."""
        fields = list(queries)
        answers = await asyncio.gather(
            *(self.query_range(queries[f], start, end, step_s) for f in fields), return_exceptions=True
        )
        return _split(fields, answers)

    async def _ask(self, path: str, params: dict[str, str] | str) -> tuple[int, bytes]:
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._get(path, params)
        except TimeoutError:
            raise PromApiError(f"no answer from {self.base_url} within {self.timeout_s:g} s") from None
        except AccessError as exc:
            raise PromApiError(f"cannot authenticate to {self.base_url}: {exc}") from None
        except aiohttp.ClientConnectorCertificateError as exc:
            raise PromApiError(
                f"{self.base_url}'s TLS certificate is not trusted ({one_line(exc.certificate_error)}): "
                "give its CA as auth.ca_file"
            ) from None
        except aiohttp.ClientConnectionError as exc:
            raise PromApiError(f"cannot reach {self.base_url}: {one_line(exc)}") from None
        except (aiohttp.ClientError, ValueError) as exc:  # ValueError: a URL aiohttp cannot use
            raise PromApiError(f"query to {self.base_url} failed: {one_line(exc)}") from None

    async def _get(self, path: str, params: dict[str, str] | str) -> tuple[int, bytes]:
        """GET ``path`` with ``params`` (a query string already encoded, or a dict to encode)."""
        if isinstance(params, str):
            url, params = URL(str(URL(self.base_url + path)) + "?" + params, encoded=True), {}
        else:
            url = URL(self.base_url + path)
        # Redirects are not followed: an answer from another host would be read as this server's (and
        # a query's credentials sent there); the user points the config at the final address instead.
        async with self._client().get(url, params=params, allow_redirects=False) as response:
            if 300 <= response.status < 400:
                where = one_line(response.headers.get("Location", "elsewhere"))[:200]
                raise PromApiError(
                    f"{self.base_url} answered HTTP {response.status}, a redirect to {where}: "
                    "not followed (set the server's final address)"
                )
            ok = response.status == 200
            limit = MAX_RESPONSE_BYTES if ok else MAX_ERROR_BYTES
            if ok and (response.content_length or 0) > limit:
                raise PromApiError(f"answer larger than {limit // 2**20} MiB: refusing it")
            chunks: list[bytes] = []
            size = 0
            try:
                async for chunk in response.content.iter_any():
                    size += len(chunk)
                    self._inflight_bytes += len(chunk)
                    if size > limit:
                        if ok:
                            raise PromApiError(f"answer larger than {limit // 2**20} MiB: refusing it")
                        break  # the start of an error page says enough
                    if self._inflight_bytes > MAX_INFLIGHT_BYTES:
                        raise PromApiError(
                            f"answers being read at once exceed {MAX_INFLIGHT_BYTES // 2**20} MiB: "
                            "refusing this one"
                        )
                    chunks.append(chunk)
            finally:
                self._inflight_bytes -= size
            return response.status, b"".join(chunks)


def _split(fields: list[str], answers: list[Any]) -> tuple[dict[str, Any], dict[str, BaseException]]:
    """Answers gathered with ``return_exceptions``: (field -> answer, field -> exception), in order."""
    answered = {f: a for f, a in zip(fields, answers, strict=True) if not isinstance(a, BaseException)}
    failed = {f: a for f, a in zip(fields, answers, strict=True) if isinstance(a, BaseException)}
    return answered, failed


def first_growth(series: list[RangeSeries]) -> float | None:
    """The earliest time at which any series' value rose from its previous point (None: none rose)."""
    grew = [times[1:][values[1:] > values[:-1]] for _, times, values in series if len(values) > 1]
    found = [float(g.min()) for g in grew if len(g)]
    return min(found) if found else None


async def counters_start(
    url: str,
    timeout_s: float,
    counters: str,
    watch_wall: float,
    lookback_s: float,
    interval_s: float,
    access: ServerAccess | None = None,
) -> float | None:
    """When a run began (Unix time) as Prometheus can tell: the start of the first step in the last
    ``lookback_s`` at which a counter that the query ``counters`` answers grew; None with no lookback or
    no growth. A server that cannot answer raises :class:`PromApiError`."""
    if lookback_s <= 0:
        return None
    start = watch_wall - lookback_s
    step = max(interval_s, lookback_s / MAX_RANGE_POINTS)
    async with PrometheusApi(url, timeout_s, access) as api:
        series = await api.query_range(counters, start, watch_wall, step)
    grew = first_growth(series)
    return None if grew is None else max(start, grew - step)


async def counted_before(
    url: str,
    timeout_s: float,
    counters: str,
    start: float,
    interval_s: float,
    access: ServerAccess | None = None,
) -> bool:
    """Whether counters that count from a run's start had counted already at ``start`` (the first point
    the history holds): then the run began before it."""
    async with PrometheusApi(url, timeout_s, access) as api:
        answer = await api.query_range(counters, start, start + interval_s, interval_s)
    return any(len(values) and values[0] > 0 for _, _, values in answer)
