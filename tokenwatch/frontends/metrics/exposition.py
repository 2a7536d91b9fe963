"""Renders :class:`Family` lists in the Prometheus text format (0.0.4), fast.

prometheus_client's ``generate_latest`` builds a Python object per sample and formats its labels
each time: about 0.5 s for a 4,608-GPU fleet. Here the label sets are built once per run and each
scrape only formats the numbers, with prometheus_client's own ``floatToGoString``; a test checks that
the output is byte-for-byte what ``generate_latest`` writes for the same families.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from prometheus_client.utils import floatToGoString

from tokenwatch.frontends.metrics.families import (
    Family,
    MetricsView,
    escape,
    gpu_families,
    latency_families,
    node_families,
    rack_families,
)
from tokenwatch.frontends.metrics.rack_labels import (
    PLACE_LABELS,
    node_places,
    node_racks,
    rack_label_name,
    run_rack_name,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _label_set(pairs: dict[str, str]) -> str:
    """``a="x",b="y"``: sorted by name, as the text format writes them."""
    return ",".join(f'{k}="{escape(v)}"' for k, v in sorted(pairs.items()))


@functools.lru_cache(maxsize=4)
def label_sets(
    nodes: tuple[str, ...],
    gpus_per_node: int,
    racks: tuple[str, ...] | str = "",
    rack_label: str = "rack",
    places: tuple[tuple[str, str], ...] | None = None,
) -> tuple[list[str], list[str]]:
    """(per-node label sets, per-GPU label sets, node-major), built once per run. ``racks``: each
    node's rack, or the one rack of them all ("" for none); ``places``: each node's rack's site and
    row (labels ``site`` and ``row``, left out where "")."""
    of = (lambda i: racks[i]) if isinstance(racks, tuple) else (lambda _i: racks)
    node_labels = []
    gpu_labels = []
    for i, n in enumerate(nodes):
        pairs = {"node": n, rack_label: of(i)} if of(i) else {"node": n}
        if places is not None:
            pairs.update({k: v for k, v in zip(PLACE_LABELS, places[i], strict=True) if v})
        node_labels.append(_label_set(pairs))
        gpu_labels += [_label_set({**pairs, "gpu": str(g)}) for g in range(gpus_per_node)]
    return node_labels, gpu_labels


def families(view: MetricsView) -> list[Family]:
    snap = view.snapshot
    label = rack_label_name(snap)
    per_node = node_racks(snap)
    rack = run_rack_name(snap) if per_node is None else ""
    node_labels, gpu_labels = label_sets(
        snap.run.nodes,
        snap.run.gpus_per_node,
        rack if per_node is None else per_node,
        label,
        node_places(snap),
    )
    return [
        *rack_families(snap, _label_set({label: rack}) if rack else ""),
        *node_families(snap, node_labels),
        *gpu_families(snap, gpu_labels),
        *latency_families(view, node_labels),
    ]


# Values of 1e6 and above (clocks in Hz, HBM in bytes, token totals) need Go's exponent spelling: a
# Python call each. They repeat across GPUs and scrapes (quantised clocks, fixed HBM sizes), so cache.
_go_float = functools.lru_cache(maxsize=1 << 16)(floatToGoString)


def go_floats(values: np.ndarray) -> list[str]:
    """``floatToGoString`` of every value, fast: Python's ``repr`` is already Go's spelling except for
    infinities, NaN and positive numbers of 7 or more integer digits, which go through the original."""
    floats = values.tolist()
    out = list(map(repr, floats))
    with np.errstate(invalid="ignore"):
        odd = np.flatnonzero(~np.isfinite(values) | (values >= 1e6))
    for k in odd.tolist():
        out[k] = _go_float(floats[k])
    return out


def _samples(name: str, labels: Sequence[str], values: np.ndarray) -> list[str]:
    keep = np.flatnonzero(np.isfinite(values))
    texts = go_floats(values[keep])
    if len(labels) == 1 and not labels[0]:
        return [f"{name} {t}\n" for t in texts]
    prefix = name + "{"
    return [f"{prefix}{labels[i]}}} {t}\n" for i, t in zip(keep.tolist(), texts, strict=True)]


# family name -> (labels, the numbers each node's text was made from, each node's text). A node's
# histogram only changes when its latencies arrive, so a scrape re-renders just the nodes that moved:
# a 1,152-node Server fleet has ~114,000 histogram lines, too many to format afresh every scrape.
_HISTOGRAM_TEXT: dict[str, tuple[Sequence[str], np.ndarray, list[str]]] = {}


def _histogram(family: Family) -> list[str]:
    b = family.histogram
    assert b is not None
    numbers = np.concatenate(
        [b.cumulative, b.count[:, None], np.asarray(b.sum_s, dtype=np.float64)[:, None]], axis=1
    ).astype(np.float64)
    cached = _HISTOGRAM_TEXT.get(family.name)
    if cached is not None and cached[0] is family.labels and cached[1].shape == numbers.shape:
        texts = list(cached[2])
        changed = np.flatnonzero((cached[1] != numbers).any(axis=1)).tolist()
    else:
        texts = [""] * len(family.labels)
        changed = list(range(len(family.labels)))
    if changed:
        les = [f'le="{_go_float(bound)}",' for bound in b.bounds_s] + ['le="+Inf",']
        width = len(les)
        formatted = go_floats(numbers[changed].reshape(-1))
        step = width + 1  # a row: cumulative counts at each bound, the count (= the +Inf bucket), the sum
        for k, i in enumerate(changed):
            row = formatted[k * step : (k + 1) * step]
            lab = family.labels[i]
            lines = [
                f"{family.name}_bucket{{{le}{lab}}} {v}\n" for le, v in zip(les, row[:width], strict=True)
            ]
            lines.append(f"{family.name}_count{{{lab}}} {row[width - 1]}\n")
            lines.append(f"{family.name}_sum{{{lab}}} {row[width]}\n")
            texts[i] = "".join(lines)
    _HISTOGRAM_TEXT[family.name] = (family.labels, numbers, texts)
    return texts


def render_families(fams: Sequence[Family]) -> bytes:
    out: list[str] = []
    for fam in fams:
        name = f"{fam.name}_total" if fam.kind == "counter" else fam.name
        out.append(
            f"# HELP {name} {fam.help.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}\n"
        )
        out.append(f"# TYPE {name} {fam.kind}\n")
        out += _histogram(fam) if fam.kind == "histogram" else _samples(name, fam.labels, fam.values)
    return "".join(out).encode("utf-8")


def render(view: MetricsView | None) -> bytes:
    """The /metrics body; before the run has started only ``tokenwatch_up``."""
    head = (
        b"# HELP tokenwatch_up 1 while tokenwatch is serving.\n"
        b"# TYPE tokenwatch_up gauge\ntokenwatch_up 1.0\n"
    )
    return head if view is None else head + render_families(families(view))
