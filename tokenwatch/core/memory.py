"""How much memory a piece of the core's state holds (what a replay keyframe costs)."""

from __future__ import annotations

import numpy as np


def approx_nbytes(obj: object, _seen: set[int] | None = None, _depth: int = 0) -> int:
    """The bytes held by numpy arrays inside ``obj``, following containers and attributes a few levels."""
    seen = _seen if _seen is not None else set()
    if id(obj) in seen or _depth > 4:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, dict):
        return sum(approx_nbytes(v, seen, _depth + 1) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(approx_nbytes(v, seen, _depth + 1) for v in obj)
    fields: list[object] = list(vars(obj).values()) if hasattr(obj, "__dict__") else []
    for name in getattr(type(obj), "__slots__", ()):
        fields.append(getattr(obj, name, None))
    return sum(approx_nbytes(v, seen, _depth + 1) for v in fields)
