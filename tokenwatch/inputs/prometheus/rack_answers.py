"""A round's rack-figure answers read straight from their bytes into one column per figure.

A 1,000-rack round asks ~13 rack figures, each an instant vector of 1,000 samples (one per rack). Read
the exact way each sample is a dict of labels, a list and two strings before the board takes one number
and one or two label values out of it. The figures' answers are compact (``{"metric":{...},"value":[t,
"v"]}`` one after another, as :mod:`.gpu_answers` reads the GPU fields), so their values go through one
numpy conversion, and each sample's labels stay the bytes of their JSON object, looked up in what the
same bytes meant in an earlier round: the same racks answer every round, so a label set is read as JSON
once, not once a figure and round.

Anything else is read the exact way (:func:`.answers.parse_response`), which says what is wrong with an
answer, and gives the same column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.inputs.prometheus.answers import Sample, parse_response
from tokenwatch.inputs.prometheus.gpu_answers import compact_vector, label_sets, without_gaps

# Label sets remembered (a few per rack: its figures' series and its slowest node's): more means labels
# that keep changing, and the memory starts afresh rather than grows.
MAX_LABEL_SETS = 100_000


@dataclass(frozen=True, slots=True)
class RackColumn:
    """One rack figure's answer: sample i is of rack ``racks[i]`` ("" where the series has no rack
    label) and node ``nodes[i]`` ("" where it has no node label), with ``values[i]``; NaN samples left
    out, as the exact reading leaves them out."""

    racks: tuple[str, ...]
    nodes: tuple[str, ...]
    values: FloatArray

    @staticmethod
    def of_samples(samples: Sequence[Sample], rack_label: str, node_label: str) -> RackColumn:
        """The column of samples read the exact way (a sample's value already a float, NaN left out)."""
        racks = tuple(labels.get(rack_label, "") for labels, _ in samples)
        nodes = tuple(labels.get(node_label, "") for labels, _ in samples)
        return RackColumn(racks, nodes, np.array([value for _, value in samples], np.float64))


class RackAnswerReader:
    """Reads a rack figure's answer (a 200's bytes) into a :class:`RackColumn`, remembering what each
    label set's bytes name (its rack and node): ``read`` is a :meth:`.api.PrometheusApi.query_as` reader."""

    def __init__(self, rack_label: str, node_label: str) -> None:
        self.rack_label, self.node_label = rack_label, node_label
        self._known: dict[bytes, tuple[str, str]] = {}

    def read(self, body: bytes) -> RackColumn:
        quick = compact_vector(body)
        column = None if quick is None else self._column(*quick)
        if column is not None:
            return column
        return RackColumn.of_samples(parse_response(body), self.rack_label, self.node_label)

    def _column(self, labels: list[bytes], values: FloatArray) -> RackColumn | None:
        """The column of one compact answer, or None where a label set is not a JSON object of
        strings (the exact reading then reads it, or says what is wrong)."""
        labels, values = without_gaps(labels, values)
        named = list(map(self._known.get, labels))
        missed = [k for k, pair in enumerate(named) if pair is None] if None in named else []
        # every label set read before any is remembered: a declined answer adds none
        docs = label_sets(labels, missed)
        if docs is None:
            return None
        read = [(doc.get(self.rack_label, ""), doc.get(self.node_label, "")) for doc in docs]
        if len(self._known) + len(missed) > MAX_LABEL_SETS:
            self._known.clear()
        for k, pair in zip(missed, read, strict=True):
            named[k] = self._known[labels[k]] = pair
        racks, nodes = zip(*named, strict=True) if named else ((), ())  # each a (rack, node) pair now
        return RackColumn(racks, nodes, values)
