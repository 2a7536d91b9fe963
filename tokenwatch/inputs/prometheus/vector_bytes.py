"""An instant vector's values read from its bytes, its labels parsed again only when they change.

A 1,000-rack fleet's round asks the rack figures in 13 queries of 1,000 samples each (1.9 MB of JSON).
Read by orjson, each sample is a dict of labels, a list and two strings before its number is one:
~19 ms of CPU a round where the server's own answer takes ~117 ms, most of what kept the round from
being within 20 % of the server's time. A rack-figure answer's labels are the same round after round
(the same racks in the same order: both Prometheus and VictoriaMetrics sort a vector's series), so its
values are cut out of the bytes and read by one numpy conversion, and the labels are parsed only when
the rest of the answer (its "skeleton", the values taken out) differs from the last one read.

Anything unexpected (spaces, a value numpy reads otherwise than Python's ``float``, counts that do not
add up) goes the exact way (:func:`parse_response`), which says what is wrong with it.
"""

from __future__ import annotations

from itertools import repeat
from operator import itemgetter

import numpy as np

from tokenwatch.inputs.prometheus.answers import Sample, answer_data, parse_response, vector_labels

# Where one sample's value pair begins: `"value":[1712345678.5,"12.5"]`.
_VALUE = b'"value":['
_PAIR, _REST = itemgetter(0), itemgetter(2)  # of a partition at the pair's closing bracket
# What the pairs hold once their quotes are taken out: numbers (decimal, exponent, NaN, +Inf, -Inf), commas.
_NUMBER_BYTES = b"0123456789.,eE+-NaInf"


class VectorReader:
    """Reads the answers of one query, round after round (a callable for ``query_as`` / ``read_all``)."""

    def __init__(self) -> None:
        self._skeleton: bytes | None = None
        self._labels: list[dict[str, str]] = []

    def __call__(self, body: bytes) -> list[Sample]:
        # Cut at each sample's `"value":[`: what follows up to its `]` is the pair, the rest is skeleton
        # (bytes methods in C, mapped: a regular expression's split took half as long again).
        head, *tails = body.split(_VALUE)
        cut = list(map(bytes.partition, tails, repeat(b"]")))
        count = len(cut)
        joined = b",".join(map(_PAIR, cut))
        # Each pair is exactly `time,"number"`: one comma and two quotes of its own.
        if not count or joined.count(b",") != 2 * count - 1 or joined.count(b'"') != 2 * count:
            return parse_response(body)
        text = joined.translate(None, b'"')
        if text.translate(None, _NUMBER_BYTES):
            return parse_response(body)
        try:
            numbers = np.fromstring(text, dtype=np.float64, sep=",")
        except ValueError:  # a token that is not a number
            return parse_response(body)
        if numbers.size != 2 * count:
            return parse_response(body)
        skeleton = head + b"\0".join(map(_REST, cut))
        if skeleton != self._skeleton:
            labels = vector_labels(answer_data(body))
            if labels is None or len(labels) != count:
                return parse_response(body)
            self._skeleton, self._labels = skeleton, labels
        values = numbers[1::2]
        keep = ~np.isnan(values)
        if keep.all():
            return list(zip(self._labels, values.tolist(), strict=True))
        return [(m, v) for m, v, ok in zip(self._labels, values.tolist(), keep.tolist(), strict=True) if ok]
