"""The Prometheus HTTP API, instant queries only: ``GET /api/v1/query`` and its JSON answer.

Blocking (urllib); the collector runs it in a thread. Every failure becomes :class:`PromApiError`
with one line saying what went wrong, never another exception.
"""

from __future__ import annotations

import math
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import orjson

MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # a 64-rack fleet's answer is a few MB; anything this big is wrong

Sample = tuple[dict[str, str], float]


class PromApiError(Exception):
    """A query that failed: unreachable server, HTTP error, a PromQL error or an answer we cannot read."""


def query_url(base_url: str, promql: str) -> str:
    return base_url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})


def instant_query(base_url: str, promql: str, timeout_s: float = 5.0) -> list[Sample]:
    """The instant vector (or scalar) ``promql`` evaluates to now, as (labels, value) pairs."""
    url = query_url(base_url, promql)
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            body = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        # Prometheus answers bad PromQL with 400 and a JSON error body: report that, not just "400".
        try:
            body = exc.read(65536)
        except OSError:
            body = b""
        try:
            return parse_response(body)
        except PromApiError as inner:
            raise PromApiError(f"HTTP {exc.code}: {inner}") from None
    except urllib.error.URLError as exc:
        raise PromApiError(f"cannot reach {base_url}: {exc.reason}") from None
    except (OSError, ValueError) as exc:
        raise PromApiError(f"cannot reach {base_url}: {exc}") from None
    if len(body) > MAX_RESPONSE_BYTES:
        raise PromApiError(f"answer larger than {MAX_RESPONSE_BYTES // 2**20} MiB: refusing it")
    return parse_response(body)


def _value(pair: Any) -> float:
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
        raise PromApiError(f'a sample value is not [time, "number"]: {str(pair)[:80]}')
    try:
        return float(pair[1])
    except ValueError:
        raise PromApiError(f"a sample value is not a number: {pair[1][:40]!r}") from None


def parse_response(body: bytes) -> list[Sample]:
    """Parses an /api/v1/query answer; anything unexpected is a :class:`PromApiError`."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise PromApiError(f"the answer is not JSON: {body[:60]!r}") from None
    if not isinstance(doc, dict):
        raise PromApiError("the answer is not a JSON object")
    if doc.get("status") != "success":
        kind, error = doc.get("errorType", "error"), doc.get("error", "no error message")
        raise PromApiError(f"{kind}: {str(error)[:300]}")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise PromApiError("the answer has no data object")
    kind = data.get("resultType")
    result = data.get("result")
    if kind == "scalar":
        return [({}, _value(result))]
    if kind != "vector":
        raise PromApiError(f"expected an instant vector, got {str(kind)[:20]!r} (use an instant query)")
    if not isinstance(result, list):
        raise PromApiError("the vector result is not a list")
    samples: list[Sample] = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            raise PromApiError("a vector element has no metric labels")
        labels = {str(k): str(v) for k, v in item["metric"].items()}
        value = _value(item.get("value"))
        if not math.isnan(value):
            samples.append((labels, value))
    return samples
