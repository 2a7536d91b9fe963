"""A tiny PNG encoder for heatmaps: a (rows, columns) grid of values becomes an inline image.

A heatmap of 72 GPUs x 600 points as SVG rectangles would be tens of thousands of elements; as a PNG
it is a few kilobytes, stays one file (a data: URI) and scales to fleets of thousands of GPUs.
"""

from __future__ import annotations

import base64
import struct
import zlib

import numpy as np

from tokenwatch.base.events import FloatArray

# Viridis anchor colours (perceptually uniform, readable on light and dark backgrounds, colour-blind safe).
_VIRIDIS = np.array(
    [
        (68, 1, 84),
        (72, 40, 120),
        (62, 74, 137),
        (49, 104, 142),
        (38, 130, 142),
        (31, 158, 137),
        (53, 183, 121),
        (109, 205, 89),
        (180, 222, 44),
        (253, 231, 37),
    ],
    dtype=np.float64,
)
MISSING_RGB = (128, 128, 128)


def colormap(fraction: FloatArray) -> np.ndarray:
    """(..., 3) uint8 viridis colours for values in [0, 1]; NaN becomes grey."""
    f = np.clip(np.nan_to_num(fraction, nan=0.0), 0.0, 1.0)
    pos = f * (len(_VIRIDIS) - 1)
    low = np.floor(pos).astype(int)
    high = np.minimum(low + 1, len(_VIRIDIS) - 1)
    w = (pos - low)[..., None]
    rgb = _VIRIDIS[low] * (1 - w) + _VIRIDIS[high] * w
    rgb[np.isnan(fraction)] = MISSING_RGB
    return np.asarray(np.rint(rgb), dtype=np.uint8)


def viridis_stops(count: int = 10) -> list[tuple[float, str]]:
    """(offset 0..1, '#rrggbb') stops for an SVG gradient legend matching :func:`colormap`."""
    fractions = np.linspace(0.0, 1.0, count)
    return [
        (float(f), "#{:02x}{:02x}{:02x}".format(*c))
        for f, c in zip(fractions, colormap(fractions), strict=False)
    ]


def encode_png(rgb: np.ndarray) -> bytes:
    """(height, width, 3) uint8 -> PNG bytes (8-bit RGB, no filter, zlib level 6)."""
    height, width, _ = rgb.shape
    rows = np.concatenate([np.zeros((height, 1), np.uint8), rgb.reshape(height, width * 3)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


def heatmap_data_uri(values: FloatArray, vmin: float, vmax: float) -> str:
    """values (rows, columns) scaled to [vmin, vmax] -> ``data:image/png;base64,...``."""
    span = vmax - vmin if vmax > vmin else 1.0
    with np.errstate(invalid="ignore"):
        rgb = colormap((np.asarray(values, np.float64) - vmin) / span)
    return "data:image/png;base64," + base64.b64encode(encode_png(rgb)).decode("ascii")
