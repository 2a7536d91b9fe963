"""LoadGen's early-stopping test: how many queries may exceed a latency limit, and its inverse.

LoadGen (mlcommons/inference ``loadgen/early_stopping.cc`` and ``results.cc`` ``EarlyStopping``, commit
b66003e10e2d, LoadGen 6.0.17) asks, for ``t`` queries over the limit: what is the fewest queries under it,
``h``, such that a system whose true over-limit rate were ``1 - p`` would show ``t`` or fewer of them with
probability below ``1 - c``? With ``p = 0.99`` (the target percentile) and confidence ``c = 0.99``, a Server
run of ``n`` queries passes when ``n >= h(t) + t``. That probability is the binomial CDF, computed by LoadGen
as the regularized incomplete beta ``I_p(h, t + 1)`` through a terminating hypergeometric series; this
module does the same floating-point operations in the same order (the series with numpy's sequential
``accumulate``, so each term and partial sum is LoadGen's), which is what makes its answers LoadGen's own:
at 10,000 queries at most 77 may exceed the limit, at 210,624 at most 2,000.

Speed: :func:`passes` needs one series of about ``sqrt(23 t)`` terms (the terms fall below LoadGen's
tolerance long before the series ends), and :func:`overlatency_budget` starts from the normal
approximation and steps to the exact boundary, so a budget costs a few of those (well under a
millisecond at a million queries) and is cached per ``n``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

# results.cc EarlyStopping(): ``double confidence = 0.99; double tolerance = 0.0;`` (lines 157-158).
CONFIDENCE = 0.99
TOLERANCE = 0.0
SERVER_PERCENTILE = 0.99  # mlperf.conf line 83: *.Server.target_latency_percentile = 99
# early_stopping.cc line 27: the hypergeometric series stops at the first term at or below this.
_SERIES_TOLERANCE = 1.0 / (1 << 33)
_Z_99 = 2.3263478740408408  # one-sided 99 % normal quantile: the starting guess of the budget search


def _hypergeometric_2f1_a1(b: int, c: int, x: float) -> float:
    """2F1(1, b; c; x) summed term by term as early_stopping.cc ``hypergeometric_2F1_A1`` does.

    The loop there: ``term *= (b + i) * x / (c + i); result += term`` until ``|term| <= 2**-33``. Products
    and sums are taken with ``accumulate`` (strictly left to right), chunk by chunk, carrying the last
    term and sum, so every intermediate value is bit-for-bit the loop's.
    """
    term, result = 1.0, 1.0
    start = 0
    chunk = int(6.0 * math.sqrt(max(-b, 1))) + 32
    while True:
        i = np.arange(start, start + chunk, dtype=np.int64)
        ratios = (b + i).astype(np.float64) * x / (c + i).astype(np.float64)
        terms = np.multiply.accumulate(np.concatenate(((term,), ratios)))[1:]
        small = np.flatnonzero(np.abs(terms) <= _SERIES_TOLERANCE)
        used = terms[: small[0] + 1] if small.size else terms
        result = float(np.add.accumulate(np.concatenate(((result,), used)))[-1])
        if small.size:
            return result
        term = float(terms[-1])
        start += chunk
        chunk = min(chunk * 2, 1 << 16)


def _lbeta(x: int, y: int) -> float:
    return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)


def _beta_regularized(x: float, a: int, b: int) -> float:
    """I_x(a, b) as early_stopping.cc ``beta_regularized`` (DLMF 15.8.E1 form)."""
    exponent = a * math.log(x) + (b - 1) * math.log(1 - x) - _lbeta(a, b)
    return math.exp(exponent) / a * _hypergeometric_2f1_a1(1 - b, 1 + a, x / (x - 1))


def odds(h: int, t: int, percentile: float = SERVER_PERCENTILE, tolerance: float = TOLERANCE) -> float:
    """Probability of ``t`` or fewer over-limit queries among ``h + t`` if each exceeds with ``1 - p``."""
    if h < 1 or t < 0:
        raise ValueError(f"odds needs h >= 1 and t >= 0, not h={h}, t={t}")
    return _beta_regularized(percentile - tolerance, h, 1 + t)


def _threshold(confidence: float) -> float:
    return 1 - confidence  # the same double LoadGen compares against (0.010000000000000009)


@lru_cache(maxsize=4096)
def min_passing_queries(t: int, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE) -> int:
    """``h(t)``: the fewest under-limit queries that let a run with ``t`` over-limit queries pass.

    LoadGen's ``MinPassingQueriesFinder`` as a Server run uses it (a new finder per test, so an empty cache):
    a binary search for the first ``h`` with ``odds(h, t) < 1 - c`` between the bounds it derives from
    ``h(0) = ceil(log(1 - c) / log(p))``. ``h(0) = 459`` at p = c = 0.99.
    """
    if t < 0:
        raise ValueError(f"t must be >= 0, not {t}")
    p, threshold = percentile - TOLERANCE, _threshold(confidence)
    y1 = math.ceil(math.log(threshold) / math.log(p))
    min_slope = p / (1 - p)
    max_slope = float(y1 * 1)  # (y1 - y0) * (x1 - x0) with the empty cache's (x0, y0) = (-1, 0), x1 = 0
    low = int(t * min_slope + y1)
    high = int(t * max_slope + y1 + 1)
    count = high - low
    while count > 0:  # early_stopping.cc find_min_passing, step for step
        step = count // 2
        h = low + step
        if odds(h, t, percentile) < threshold:
            count = step
        else:
            low = h + 1
            count -= step + 1
    return low


def queries_needed(t: int, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE) -> int:
    """Total queries a run with ``t`` over-limit queries must reach to pass: ``h(t) + t``."""
    return min_passing_queries(t, percentile, confidence) + t


def passes(n: int, t: int, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE) -> bool:
    """LoadGen's Server verdict: ``n`` queries with ``t`` over the limit pass early stopping.

    Equivalent to ``n >= queries_needed(t)`` (odds fall as ``h`` grows), with one series instead of a search.
    """
    if t < 0 or n < 0:
        raise ValueError(f"n and t must be >= 0, not n={n}, t={t}")
    h = n - t
    if h < queries_needed(0, percentile, confidence):
        return False
    return odds(h, t, percentile) < _threshold(confidence)


@lru_cache(maxsize=4096)
def overlatency_budget(n: int, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE) -> int:
    """The most queries of ``n`` that may exceed the limit and still pass; -1 when even none would do.

    (A Server run below ``h(0) = 459`` queries fails early stopping whatever its latencies.) This is also
    SingleStream's ``t``: LoadGen discards ``t - 1`` highest latencies for its percentile estimate.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, not {n}")
    if not passes(n, 0, percentile, confidence):
        return -1
    q = 1 - percentile
    guess = int(q * n - _Z_99 * math.sqrt(q * (1 - q) * n))
    t = min(max(guess, 0), n)
    if passes(n, t, percentile, confidence):
        while t + 1 <= n and passes(n, t + 1, percentile, confidence):
            t += 1
        return t
    while t > 0 and not passes(n, t - 1, percentile, confidence):
        t -= 1
    return t - 1


def early_stopping_result(n: int, t: int, percentile: float = SERVER_PERCENTILE) -> str:
    """LoadGen's Server recommendation text for ``n`` queries, ``t`` over the limit (results.cc 236-243)."""
    needed = queries_needed(t, percentile)
    if n >= needed:
        return " * Run successful."
    return (
        " * Run unsuccessful.\n * Processed "
        + str(n)
        + " queries.\n * Would need to run at least "
        + str(needed - n)
        + " more queries,\n with the run being successful if every additional\n query were under latency."
    )
