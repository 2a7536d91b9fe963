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

from tokenwatch.base.durations import DurationError, parse_duration

T = TypeVar("T")
KeyPath = tuple[str | int, ...]


class SchemaError(ValueError):
    """One line: ``file:line: key.path: problem``."""


def duration_field(default: Any = dataclasses.MISSING, key: str | None = None) -> Any:
    """A dataclass field read as a duration (seconds), from YAML key ``key`` (default: the field name)."""
    return dataclasses.field(default=default, metadata={"duration": True, "key": key})


def internal_field(default: Any) -> Any:
    """A dataclass field the loader sets, never read from YAML (a key of its name is unknown)."""
    return dataclasses.field(default=default, metadata={"internal": True})


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


# How many values a document may hold once its aliases are expanded. Real configs hold hundreds; an
# alias "bomb" (9 levels of 9 aliases: 435 bytes) expands to hundreds of millions, which the readers
# below would walk and copy one by one. Aliases within the bound stay allowed (anchors, ``<<:`` merges).
MAX_EXPANDED_VALUES = 100_000


def parse_yaml(text: str, name: str) -> tuple[Any, dict[KeyPath, int]]:
    try:  # a control character is refused as the loader is made, before anything is read
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:
        position = getattr(exc, "position", None)
        where = f"{name}:{text.count(chr(10), 0, position) + 1}" if isinstance(position, int) else name
        raise SchemaError(f"{where}: invalid YAML: {str(exc).splitlines()[0]}") from None
    try:  # PyYAML composes recursively: absurd nesting is a RecursionError, reported like bad YAML
        node = loader.get_single_node()
        lines: dict[KeyPath, int] = {}
        if node is not None:
            _check_node(node, name)
            _collect_lines(node, (), lines, name)  # before construction, which rewrites merged mappings
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SchemaError(f"{where}: invalid YAML: {problem}") from None
    except RecursionError:
        raise SchemaError(f"{name}: invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    return data, lines


def _check_node(root: yaml.Node, name: str) -> None:
    """Refuse what the composer lets through but nothing here can walk: an alias that contains itself,
    and aliases that expand beyond :data:`MAX_EXPANDED_VALUES` values."""
    sizes: dict[int, int] = {}  # id(node) -> values it expands to; each node is counted once
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise SchemaError(f"{name}:{node.start_mark.line + 1}: a YAML alias refers to itself")
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                total += size(k) + size(v)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                total += size(item)
        open_nodes.discard(key)
        if total > MAX_EXPANDED_VALUES:
            raise SchemaError(
                f"{name}:{node.start_mark.line + 1}: YAML aliases expand to more than "
                f"{MAX_EXPANDED_VALUES:,} values (an alias bomb?)"
            )
        sizes[key] = total
        return total

    size(root)


def _collect_lines(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], name: str) -> None:
    """The line of every key path; a key given twice in one mapping is an error naming both lines
    (PyYAML would silently keep the last)."""
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            text = str(key.value)
            sub = (*path, text)
            line = key.start_mark.line + 1
            if key.tag != "tag:yaml.org,2002:merge":
                if text in first:
                    where = ".".join(str(p) for p in sub)
                    raise SchemaError(f"{name}:{line}: {where}: duplicate key (first on line {first[text]})")
                first[text] = line
            lines[sub] = line
            _collect_lines(value, sub, lines, name)
            lines[sub] = line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _collect_lines(item, (*path, i), lines, name)


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
        # A field marked ``internal`` (set by the loader, e.g. where the file was) is no YAML key at all.
        fields = {
            f.metadata.get("key") or f.name: f
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if not f.metadata.get("internal")
        }
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
