"""YAML into typed, frozen dataclasses, with errors that name the file, line and key.

Used for simulator profiles, the ``watch`` config and themes. A field's type annotation drives
the check (str, int, float, bool, nested dataclasses, ``list[...]``, ``dict[str, ...]``, ``X | None``);
``field(metadata={"duration": True})`` accepts ``80m``-style strings and yields seconds.
Unknown keys are errors: a typo must not be silently ignored.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

from tokenwatch.durations import DurationError, parse_duration

T = TypeVar("T")
KeyPath = tuple[str | int, ...]


class SchemaError(ValueError):
    """One line: ``file:line: key.path: problem``."""


def duration_field(default: Any = dataclasses.MISSING, key: str | None = None) -> Any:
    """A dataclass field read as a duration (seconds), from YAML key ``key`` (default: the field name)."""
    return dataclasses.field(default=default, metadata={"duration": True, "key": key})


def load_yaml(path: Path | str) -> tuple[Any, dict[KeyPath, int]]:
    """The document and the 1-based line of every key path in it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SchemaError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{path}: cannot read: {exc}") from None
    return parse_yaml(text, str(path))


def parse_yaml(text: str, name: str) -> tuple[Any, dict[KeyPath, int]]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SchemaError(f"{where}: invalid YAML: {problem}") from None
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _collect_lines(node, (), lines)
    return data, lines


def _collect_lines(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int]) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = (*path, str(key.value))
            lines[sub] = key.start_mark.line + 1
            _collect_lines(value, sub, lines)
            lines[sub] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _collect_lines(item, (*path, i), lines)


class Reader:
    """Builds dataclasses from loaded YAML, reporting problems against the source lines."""

    def __init__(self, name: str, lines: Mapping[KeyPath, int]) -> None:
        self.name = name
        self.lines = lines

    def error(self, path: KeyPath, problem: str) -> SchemaError:
        line = None
        probe = path
        while line is None:
            line = self.lines.get(probe)
            if not probe:
                break
            probe = probe[:-1]
        where = f"{self.name}:{line}" if line is not None else self.name
        key = ".".join(str(p) for p in path) or "(top level)"
        return SchemaError(f"{where}: {key}: {problem}")

    def build(self, cls: type[T], data: Any, path: KeyPath = ()) -> T:
        if not isinstance(data, Mapping):
            raise self.error(path, f"expected a mapping, got {_kind(data)}")
        hints = get_type_hints(cls)
        # YAML key -> field; a field may be spelled differently in YAML (duration -> duration_s).
        fields = {f.metadata.get("key") or f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for key in data:
            if str(key) not in fields:
                known = ", ".join(sorted(fields))
                raise self.error((*path, str(key)), f"unknown key (known: {known})")
        values: dict[str, Any] = {}
        for key, fld in fields.items():
            sub = (*path, key)
            if key not in data:
                if fld.default is dataclasses.MISSING and fld.default_factory is dataclasses.MISSING:
                    raise self.error(path, f"missing required key {key!r}")
                continue
            values[fld.name] = self.value(
                hints[fld.name], data[key], sub, fld.metadata.get("duration", False)
            )
        return cls(**values)

    def value(self, hint: Any, raw: Any, path: KeyPath, duration: bool = False) -> Any:
        origin = get_origin(hint)
        if origin in (Union, types.UnionType):
            options = [a for a in get_args(hint) if a is not type(None)]
            if raw is None and len(options) < len(get_args(hint)):
                return None
            errors = []
            for option in options:
                try:
                    return self.value(option, raw, path, duration)
                except SchemaError as exc:
                    errors.append(exc)
            raise errors[-1]
        if duration:
            try:
                return parse_duration(raw)
            except DurationError as exc:
                raise self.error(path, str(exc)) from None
        if origin is typing.Literal:
            if raw not in get_args(hint):
                raise self.error(path, f"must be one of {', '.join(map(str, get_args(hint)))}, not {raw!r}")
            return raw
        if dataclasses.is_dataclass(hint):
            return self.build(hint, raw, path)  # type: ignore[arg-type]
        if origin in (list, tuple):
            if not isinstance(raw, list):
                raise self.error(path, f"expected a list, got {_kind(raw)}")
            item = get_args(hint)[0] if get_args(hint) else Any
            items = [self.value(item, v, (*path, i)) for i, v in enumerate(raw)]
            return tuple(items) if origin is tuple else items
        if origin in (dict, Mapping) or hint in (dict, Mapping):
            if not isinstance(raw, Mapping):
                raise self.error(path, f"expected a mapping, got {_kind(raw)}")
            args = get_args(hint)
            item = args[1] if len(args) == 2 else Any
            return {str(k): self.value(item, v, (*path, str(k))) for k, v in raw.items()}
        return self._scalar(hint, raw, path)

    def _scalar(self, hint: Any, raw: Any, path: KeyPath) -> Any:
        if hint is Any:
            return raw
        if hint is bool:
            if not isinstance(raw, bool):
                raise self.error(path, f"expected true or false, got {raw!r}")
            return raw
        if hint is int:
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise self.error(path, f"expected a whole number, got {raw!r}")
            return raw
        if hint is float:
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                raise self.error(path, f"expected a number, got {raw!r}")
            return float(raw)
        if hint is str:
            if not isinstance(raw, str | int | float) or isinstance(raw, bool):
                raise self.error(path, f"expected text, got {_kind(raw)}")
            return str(raw)
        raise self.error(path, f"unsupported type {hint!r}")


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "text"}
    return names.get(type(value), type(value).__name__)


def load_dataclass(cls: type[T], path: Path | str) -> T:
    """Load ``path`` as ``cls`` or raise :class:`SchemaError` naming the file, line and key."""
    data, lines = load_yaml(path)
    return Reader(str(path), lines).build(cls, data)
