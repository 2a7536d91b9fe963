"""LoadGen's early-stopping test: how many queries may exceed a latency limit, and its inverse.

LoadGen (mlcommons/inference ``loadgen/early_stopping.cc`` and ``results.cc`` ``EarlyStopping``, commit
b66003e10e2d, LoadGen 6.0.17) asks, for ``t`` queries over the limit: what is the fewest queries under it,
``h``, such that a system whose true over-limit rate were ``1 - p`` would show ``t`` or fewer of them with
probability below ``1 - c``? With ``p = 0.99`` (the target percentile) and confidence ``c = 0.99``, a Server
run of ``n`` queries passes when ``n >= h(t) + t``. That probability is the binomial CDF, computed by LoadGen
as the regularized incomplete beta ``I_p(h, t + 1)`` through a terminating hypergeometric series, searched
for ``h`` between two bounds it derives from ``h(0)``. Within those bounds this module does the same
floating-point operations in the same order (the series with numpy's sequential ``accumulate``, so each
term and partial sum is LoadGen's), which is what makes its answers LoadGen's own: at 10,000 queries at
most 77 may exceed the limit, at 210,624 at most 2,000.

**Bounded by construction.** Within LoadGen's bounds (``h > t p / (1 - p)``) every term of the series is
smaller than the one before, so it neither overflows nor needs more than ``t + 1`` terms. Outside them the
same series grows past any float (a run with 23 % of its queries over the limit: ``inf``, then ``NaN``,
and a loop waiting for a NaN term to get small never ends), so it is never summed there: a run below
LoadGen's lower bound fails, one above its upper bound passes (the answers LoadGen's search gives), and
:func:`odds` itself, asked about such a point, sums the complementary series ``1 - I_{1-p}(t + 1, h)``,
whose terms shrink exactly where LoadGen's grow. Every loop has a bound fixed before it starts: a series
at most ``t + 1`` terms where LoadGen sums it (``h`` where the complement is), a search at
most ``log2`` of its range in probes
(:class:`SeriesSum.terms`, :func:`budget_search`'s probe count).

Speed: :func:`passes` sums one series of about ``7 sqrt(t)`` terms (they fall below LoadGen's tolerance long
before the series ends), and :func:`overlatency_budget` starts from the normal approximation and brackets
the exact boundary, a few of those (well under a millisecond at a million queries), cached per ``n``;
:func:`overlatency_budgets` answers many totals at once, searching only those the budgets already found
do not bracket (the budget never falls as ``n`` grows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

# results.cc EarlyStopping(): ``double confidence = 0.99; double tolerance = 0.0;`` (lines 157-158).
CONFIDENCE = 0.99
TOLERANCE = 0.0
SERVER_PERCENTILE = 0.99  # mlperf.conf line 83: *.Server.target_latency_percentile = 99
# early_stopping.cc line 27: the hypergeometric series stops at the first term at or below this.
_SERIES_TOLERANCE = 1.0 / (1 << 33)
_Z_99 = 2.3263478740408408  # one-sided 99 % normal quantile: the starting guess of the budget search


@dataclass(frozen=True, slots=True)
class SeriesSum:
    """A probability and how many series terms it took (the work: ``t + 1`` terms at most, ``h`` on the
    complement's side)."""

    value: float
    terms: int


def _hypergeometric_2f1_a1(b: int, c: int, x: float) -> SeriesSum:
    """2F1(1, b; c; x) for ``b <= 0``, summed term by term as early_stopping.cc ``hypergeometric_2F1_A1``.

    The loop there: ``term *= (b + i) * x / (c + i); result += term`` until ``|term| <= 2**-33``. Products
    and sums are taken with ``accumulate`` (strictly left to right), chunk by chunk, carrying the last
    term and sum, so every intermediate value is bit-for-bit the loop's. Term ``-b`` is exactly zero (its
    factor ``b + i`` is), so the sum ends there at the latest: at most ``1 - b`` terms. Callers use it only
    where every term ratio is below 1 (the terms then stay finite); a NaN term would end it too.
    """
    if b > 0:
        raise ValueError(f"the series terminates only for b <= 0, not b={b}")
    last = -b
    term, result = 1.0, 1.0
    start, used_terms = 0, 0
    chunk = int(6.0 * math.sqrt(max(last, 1))) + 32
    while start <= last:  # ``start`` grows by at least one each pass: at most 1 - b terms in all
        stop = min(start + chunk, last + 1)
        i = np.arange(start, stop, dtype=np.int64)
        ratios = (b + i).astype(np.float64) * x / (c + i).astype(np.float64)
        terms = np.multiply.accumulate(np.concatenate(((term,), ratios)))[1:]
        small = np.flatnonzero(~(np.abs(terms) > _SERIES_TOLERANCE))  # LoadGen's loop test, NaN included
        used = terms[: small[0] + 1] if small.size else terms
        result = float(np.add.accumulate(np.concatenate(((result,), used)))[-1])
        used_terms += used.size
        if small.size:
            break
        term = float(terms[-1])
        start = stop
        chunk = min(chunk * 2, 1 << 16)
    return SeriesSum(result, used_terms)


def _lbeta(x: int, y: int) -> float:
    return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)


def _beta_regularized(x: float, a: int, b: int) -> SeriesSum:
    """I_x(a, b) as early_stopping.cc ``beta_regularized`` (DLMF 15.8.E1 form)."""
    exponent = a * math.log(x) + (b - 1) * math.log(1 - x) - _lbeta(a, b)
    series = _hypergeometric_2f1_a1(1 - b, 1 + a, x / (x - 1))
    return SeriesSum(math.exp(exponent) / a * series.value, series.terms)


def odds_series(
    h: int, t: int, percentile: float = SERVER_PERCENTILE, tolerance: float = TOLERANCE
) -> SeriesSum:
    """:func:`odds` and the number of series terms it summed.

    Where LoadGen's series shrinks term by term (``t p / (1 - p) < h + 1``, which holds everywhere LoadGen
    itself evaluates it) it is LoadGen's arithmetic; elsewhere the complement ``1 - I_{1-p}(1 + t, h)``
    (DLMF 8.17.4), whose series shrinks there instead.
    """
    if h < 1 or t < 0:
        raise ValueError(f"odds needs h >= 1 and t >= 0, not h={h}, t={t}")
    p = percentile - tolerance
    if t * (p / (1 - p)) < h + 1:
        return _beta_regularized(p, h, 1 + t)
    complement = _beta_regularized(1 - p, 1 + t, h)
    return SeriesSum(1.0 - complement.value, complement.terms)


def odds(h: int, t: int, percentile: float = SERVER_PERCENTILE, tolerance: float = TOLERANCE) -> float:
    """Probability of ``t`` or fewer over-limit queries among ``h + t`` if each exceeds with ``1 - p``."""
    return odds_series(h, t, percentile, tolerance).value


def _threshold(confidence: float) -> float:
    return 1 - confidence  # the same double LoadGen compares against (0.010000000000000009)


def search_window(
    t: int, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE
) -> tuple[int, int]:
    """LoadGen's bounds on ``h(t)`` for a fresh ``MinPassingQueriesFinder`` (a new one per test, so an
    empty cache): ``h(0) = ceil(log(1 - c) / log(p))``, then ``[t p / (1 - p) + h(0), t h(0) + h(0) + 1]``
    (``h(0) = 459`` at p = c = 0.99). ``h(t)`` is never outside them."""
    p, threshold = percentile - TOLERANCE, _threshold(confidence)
    y1 = math.ceil(math.log(threshold) / math.log(p))
    min_slope = p / (1 - p)
    max_slope = float(y1 * 1)  # (y1 - y0) * (x1 - x0) with the empty cache's (x0, y0) = (-1, 0), x1 = 0
    return int(t * min_slope + y1), int(t * max_slope + y1 + 1)


def _find_min_passing(t: int, percentile: float, confidence: float) -> tuple[int, int]:
    """(h(t), probes): early_stopping.cc ``find_min_passing`` step for step over :func:`search_window`."""
    low, high = search_window(t, percentile, confidence)
    threshold = _threshold(confidence)
    count = high - low
    probes = 0
    while count > 0:  # halves ``count`` each pass: at most log2(high - low) + 1 probes
        probes += 1
        step = count // 2
        h = low + step
        if odds(h, t, percentile) < threshold:
            count = step
        else:
            low = h + 1
            count -= step + 1
    return low, probes


@lru_cache(maxsize=4096)
def min_passing_queries(t: int, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE) -> int:
    """``h(t)``: the fewest under-limit queries that let a run with ``t`` over-limit queries pass.

    LoadGen's ``MinPassingQueriesFinder`` as a Server run uses it: a binary search for the first ``h`` with
    ``odds(h, t) < 1 - c`` within :func:`search_window`.
    """
    if t < 0:
        raise ValueError(f"t must be >= 0, not {t}")
    return _find_min_passing(t, percentile, confidence)[0]


def queries_needed(t: int, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE) -> int:
    """Total queries a run with ``t`` over-limit queries must reach to pass: ``h(t) + t``."""
    return min_passing_queries(t, percentile, confidence) + t


def passes(n: int, t: int, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE) -> bool:
    """LoadGen's Server verdict: ``n`` queries with ``t`` over the limit pass early stopping.

    Equivalent to ``n >= queries_needed(t)`` (odds fall as ``h`` grows), with one series instead of a
    search, and none at all outside LoadGen's window: below it ``h(t)`` cannot be reached, above it it is.
    """
    if t < 0 or n < 0:
        raise ValueError(f"n and t must be >= 0, not n={n}, t={t}")
    h = n - t
    low, high = search_window(t, percentile, confidence)
    if h < low:
        return False
    if h >= high:
        return True
    return odds(h, t, percentile) < _threshold(confidence)


def budget_search(
    n: int, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE
) -> tuple[int, int]:
    """(:func:`overlatency_budget`, how many :func:`passes` it asked): at most ``2 log2(n + 2) + 4``.

    ``passes(n, t)`` holds for every ``t`` up to the budget and for none above it. From the normal
    approximation's guess the search steps 1, 2, 4, ... away until it has one ``t`` on each side, then
    halves the gap between them.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, not {n}")
    probes = 1
    if not passes(n, 0, percentile, confidence):
        return -1, probes
    # No t above this passes: n - t is below LoadGen's lower bound t p / (1 - p) + h(0) >= t p / (1 - p).
    p = percentile - TOLERANCE
    ceiling = min(n, int(n * (1 - p)) + 1)
    q = 1 - p
    guess = int(q * n - _Z_99 * math.sqrt(q * (1 - q) * n))
    guess = min(max(guess, 0), ceiling)
    probes += 1
    if passes(n, guess, percentile, confidence):
        good, step = guess, 1
        bad = ceiling + 1  # fails: beyond the ceiling
        while good + step <= ceiling:
            probes += 1
            if not passes(n, good + step, percentile, confidence):
                bad = good + step
                break
            good += step
            step *= 2
    else:
        bad, step = guess, 1
        good = 0  # passes: checked first
        while bad - step > 0:
            probes += 1
            if passes(n, bad - step, percentile, confidence):
                good = bad - step
                break
            bad -= step
            step *= 2
    budget, asked = _halved(n, good, bad, percentile, confidence)
    return budget, probes + asked


def _halved(n: int, good: int, bad: int, percentile: float, confidence: float) -> tuple[int, int]:
    """(the budget of ``n``, the questions asked) where ``passes(n, good)`` holds (or ``good`` is -1) and
    ``passes(n, bad)`` does not: the gap between them halved until they meet."""
    probes = 0
    while bad - good > 1:
        probes += 1
        middle = (good + bad) // 2
        if passes(n, middle, percentile, confidence):
            good = middle
        else:
            bad = middle
    return good, probes


def budget_between(
    n: int, low: int, high: int, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE
) -> int:
    """:func:`overlatency_budget` of ``n`` where it is known to lie in ``low..high`` (the budgets of a smaller
    and a larger total: it never falls as the total grows): ``passes(n, t)`` holds for every ``t`` up to
    the budget and for none above it, so halving ``low..high`` finds it (-1: not even ``t = 0`` passes)."""
    return _halved(n, low, high + 1, percentile, confidence)[0]


@lru_cache(maxsize=4096)
def overlatency_budget(n: int, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE) -> int:
    """The most queries of ``n`` that may exceed the limit and still pass; -1 when even none would do.

    (A Server run below ``h(0) = 459`` queries fails early stopping whatever its latencies.) This is also
    SingleStream's ``t``: LoadGen discards ``t - 1`` highest latencies for its percentile estimate.
    """
    return budget_search(n, percentile, confidence)[0]


class KnownBudgets:
    """Budgets found so far, by ``n`` (ascending), for one percentile and confidence.

    A ``t`` that passes at ``n`` passes at every larger ``n`` (:func:`passes` is ``n >= queries_needed(t)``),
    so the budget never falls as ``n`` grows: an ``n`` between two known ones whose budgets are equal has
    that budget too, exactly, with no search; one between two known ones whose budgets differ is searched
    only between them (:func:`budget_between`). A live Server run's planned totals move a few queries a
    tick on every node (a search each: 51,000 of them, ~85 % of a 64-rack verdict tick), while its budgets
    step once every ~100 queries.
    """

    LIMIT = 1 << 16  # known points kept (1 MB); past it they start again from none

    def __init__(self) -> None:
        # One attribute, swapped whole: a replay's index pass runs a core in a thread of its own, and a
        # reader must never pair one version's totals with another's budgets.
        self.known: tuple[np.ndarray, np.ndarray] = (np.empty(0, np.int64), np.empty(0, np.int64))

    def of(self, wanted: np.ndarray, percentile: float, confidence: float) -> np.ndarray:
        ns, budgets = self.known
        out = np.full(len(wanted), -2, np.int64)
        known = np.zeros(len(wanted), bool)
        size = len(ns)
        if size:
            right = np.searchsorted(ns, wanted, side="left")
            above, below = np.minimum(right, size - 1), np.maximum(right - 1, 0)
            exact = (right < size) & (ns[above] == wanted)
            bracketed = (right > 0) & (right < size) & (budgets[below] == budgets[above])
            known = exact | bracketed
            out[known] = budgets[above][known]
        missing = np.unique(wanted[~known])
        if missing.size:
            found = _searched(missing, (ns, budgets), percentile, confidence)
            out[~known] = found[np.searchsorted(missing, wanted[~known])]
            self._add(missing, found)
        return out

    def _add(self, ns: np.ndarray, budgets: np.ndarray) -> None:
        old_ns, old_budgets = self.known
        if len(old_ns) + len(ns) > self.LIMIT:
            old_ns, old_budgets = old_ns[:0], old_budgets[:0]
        # ``ns`` holds no total already known (only those are searched), so the merge has no repeats.
        # Totals another thread added meanwhile may be lost (found again when next asked), never mixed.
        merged = np.concatenate((old_ns, ns))
        order = np.argsort(merged, kind="stable")
        self.known = (merged[order], np.concatenate((old_budgets, budgets))[order])


def _searched(
    missing: np.ndarray, known: tuple[np.ndarray, np.ndarray], percentile: float, confidence: float
) -> np.ndarray:
    """The budgets of ``missing`` (ascending, none of them in ``known``, the totals and budgets found so
    far): where known totals lie on both sides of one, its budget is between theirs (it never falls as
    the total grows), so only that range is searched: a question or two, where a live run's budget steps
    by one between its neighbours, against four to eight for a search from nothing."""
    ns, budgets = known
    right = np.searchsorted(ns, missing, side="left").tolist()
    found = []
    for n, r in zip(missing.tolist(), right, strict=True):
        if 0 < r < len(ns):
            found.append(budget_between(n, int(budgets[r - 1]), int(budgets[r]), percentile, confidence))
        else:
            found.append(budget_search(n, percentile, confidence)[0])
    return np.array(found, np.int64)


_KNOWN: dict[tuple[float, float], KnownBudgets] = {}


def overlatency_budgets(
    ns: np.ndarray, percentile: float = SERVER_PERCENTILE, confidence: float = CONFIDENCE
) -> np.ndarray:
    """:func:`overlatency_budget` of each of ``ns`` (int64), each the same number, searched only where the
    budgets already found do not bracket it (see :class:`KnownBudgets`)."""
    if (np.asarray(ns) < 0).any():
        raise ValueError("n must be >= 0")
    known = _KNOWN.setdefault((percentile, confidence), KnownBudgets())
    return known.of(np.asarray(ns, np.int64), percentile, confidence)


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
