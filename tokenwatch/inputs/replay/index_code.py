"""Which code an index's pickles need, and a digest of that code's shape: an index made by other code is
rebuilt, not loaded.

A keyframe is a pickled core: it names each class by module and qualified name and fills in its fields.
A class that moved (a module renamed, a package split) makes the pickle fail to load; a class whose fields
changed loads into a core that later fails or misreads. A hand-bumped format number forgets both. So the
index records every class and function its pickles name (:class:`RecordingPickler`), and a digest of those
names with their shapes as the running code has them (:func:`code_digest`): module path, qualified name,
dataclass fields and their types, slots, and the attributes the class's methods set. Any of those
changing, or a name no longer found, changes the digest and the index is rebuilt.
"""

from __future__ import annotations

import dis
import hashlib
import importlib
import pickle
import types
from collections.abc import Callable, Iterable
from dataclasses import fields, is_dataclass
from typing import IO, Any

Name = tuple[str, str]  # module, qualified name


class RecordingPickler(pickle.Pickler):
    """A pickler that notes the module and qualified name of every class and function it writes (the
    globals a load will import), in :attr:`names`."""

    def __init__(self, file: IO[bytes], names: set[Name], **kwargs: Any) -> None:
        super().__init__(file, **kwargs)
        self.names = names

    def reducer_override(self, obj: Any) -> Any:
        # Called for every object but the atomic builtins; cheap next to the pickling itself.
        named = obj if isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType) else type(obj)
        self.names.add((named.__module__, named.__qualname__))
        return NotImplemented


def _resolve(name: Name) -> Any:
    """The object ``name`` refers to in the running code; raises where it is no longer there."""
    module, qualname = name
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _attributes_set(cls: type) -> list[str]:
    """The attribute names ``cls``'s own methods assign (``self.x = ...``): the fields of a plain class."""
    names: set[str] = set()
    codes = [f.__code__ for f in vars(cls).values() if isinstance(f, types.FunctionType)]
    while codes:
        code = codes.pop()
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        names.update(_stored_attributes(code))
    return sorted(names)


_STORE_ATTR = dis.opmap["STORE_ATTR"]


def _stored_attributes(code: types.CodeType) -> list[str]:
    """The names of ``code``'s STORE_ATTR instructions, read off the bytecode directly (dis builds an
    object per instruction: 0.4 s for a core's 40 classes on a loaded machine, paid at every open)."""
    raw, names, extended = code.co_code, [], 0
    for at in range(0, len(raw), 2):
        op, arg = raw[at], raw[at + 1] | extended
        extended = arg << 8 if op == dis.EXTENDED_ARG else 0
        if op == _STORE_ATTR and arg < len(code.co_names):
            names.append(code.co_names[arg])
    return names


def _shape(name: Name) -> str:
    """What a pickle relies on of ``name``: that it is there and, for our own classes, their fields."""
    try:
        found = _resolve(name)
    except Exception as exc:  # gone or broken: a shape no index made by working code has
        return f"missing {type(exc).__name__}"
    if not isinstance(found, type) or not found.__module__.startswith("tokenwatch"):
        return "present"  # a function or a library's class: its path is what the pickle needs
    parts = []
    for cls in found.__mro__:
        if cls is object:
            continue
        parts.append(f"{cls.__module__}.{cls.__qualname__}")
        parts.append(repr(sorted(getattr(cls, "__slots__", ()))))
        if cls.__module__.startswith("tokenwatch"):
            parts.append(repr(_attributes_set(cls)))
    if is_dataclass(found):
        parts.extend(f"{f.name}: {f.type}" for f in fields(found))
    return "\n".join(parts)


def bytecode_of(*units: type | Callable[..., Any]) -> str:
    """A digest of the compiled code of ``units`` (functions, or classes: all their methods): the index
    format is what its writer and reader do, so a change to them rebuilds older indexes (as does a new
    Python, whose bytecode differs: one rebuild)."""
    digest = hashlib.blake2b(digest_size=16)
    codes: list[types.CodeType] = []
    for unit in units:
        functions: Iterable[object] = vars(unit).values() if isinstance(unit, type) else [unit]
        codes.extend(f.__code__ for f in functions if isinstance(f, types.FunctionType))
    while codes:
        code = codes.pop(0)
        digest.update(code.co_code + repr(code.co_names).encode())
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                codes.append(const)
            else:
                digest.update(repr(const).encode())
    return digest.hexdigest()


def code_digest(names: Iterable[Name], format_facts: Iterable[object]) -> str:
    """A digest of the index format (``format_facts``: its constants) and of the running code's shape of
    every name in ``names``."""
    digest = hashlib.blake2b(digest_size=16)
    for fact in format_facts:
        digest.update(repr(fact).encode() + b"\0")
    for name in sorted(set(names)):
        digest.update(f"{name[0]}:{name[1]}\n{_shape(name)}\0".encode())
    return digest.hexdigest()
