"""Independent computations the report tests check against (straight from the recorded events)."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tokenwatch.base.events import ProgressBatch, RunStarted
from tokenwatch.recording import RecordingReader


@dataclass
class NodeTotals:
    nodes: tuple[str, ...] = ()
    tokens: dict[str, int] = field(default_factory=dict)
    first_t: dict[str, float] = field(default_factory=dict)
    last_change_t: dict[str, float] = field(default_factory=dict)

    def tokens_per_s(self, node: str) -> float:
        span = self.last_change_t[node] - self.first_t[node]
        return self.tokens[node] / span if span > 0 else math.nan

    def aggregate(self) -> float:
        return sum(self.tokens_per_s(n) for n in self.nodes)


def node_totals(path: Path) -> NodeTotals:
    """Each node's generated tokens / (last time its counter grew - first time it reported)."""
    out = NodeTotals()
    for event in RecordingReader(path).events():
        if isinstance(event, RunStarted):
            out.nodes = event.nodes
        elif isinstance(event, ProgressBatch):
            for i, tokens in zip(event.node_index.tolist(), event.tokens_done.tolist(), strict=True):
                name = out.nodes[i]
                out.first_t.setdefault(name, event.t)
                if tokens > out.tokens.get(name, 0):
                    out.tokens[name] = tokens
                    out.last_change_t[name] = event.t
    return out


def png_pixels(data: bytes) -> np.ndarray:
    """(h, w, channels) of a PNG (Pillow decodes it; a test-only dependency)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"))
