"""What a rendered message's leaves were, to tell cheaply and exactly whether it is still the same.

Why: since flowra 0.0.86 every LLM request carries a deep copy of the whole conversation (per
attempt), so a message rendered for one call comes back as a new object on the next one, and a
hook, a request extension or a ``render`` callback may have changed any part of it (on flowra
0.0.3 - 0.0.8 the same objects come back, and a hook may have edited them in place). Comparing
every message field by field (the dataclasses' ``__eq__``) on every call made each chat span's
content cost the whole history again. ``copy.deepcopy`` keeps the immutable leaves (``str``,
``bytes``, numbers, ``None``) as the very same objects: a message whose every leaf *is* the leaf
seen when it was rendered, in the same structure, renders to the same JSON. A spec holds those
leaf objects (so their identities stay valid while it lives) and the structure around them;
``value_same`` walks a value against it by identity.

Exact by construction: a leaf that is equal but not the same object (``True`` for ``1``, ``-0.0``
for ``0.0``, an equal string a hook built anew) counts as changed, and the value is rendered
again, which costs time and never content. A value of any other type (an object a hook left
there) has no spec (``UNKNOWN``): its message is rendered on every call.

``Leaves`` is a flowra line's table of what the renderer reads of each block type; a message
reader (``content.MessageReader``) builds its ``spec`` / ``unchanged`` on it, and may check the
usual shapes of its own messages faster before falling back to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

UNKNOWN: Final = object()
"""The spec of a value that cannot be checked (rendered again on every call)."""

ATOMS: Final = frozenset({str, bytes, int, float, bool, type(None)})
"""Immutable leaves ``copy.deepcopy`` returns as they are (the same objects)."""

BLOCKS: Final = "blocks"
"""The shape of a message spec built by ``Leaves.spec``: ``(BLOCKS, message type, block types,
per block the specs of its leaves)``."""


class DictSpec(tuple):  # type: ignore[type-arg]  # (keys, value specs): two tuples of one length
    """A dict's keys (leaves, in order) and its values' specs."""

    __slots__ = ()


class SeqSpec(tuple):  # type: ignore[type-arg]  # (list or tuple, item specs)
    """A list's or tuple's type and its items' specs."""

    __slots__ = ()


class ObjSpec(tuple):  # type: ignore[type-arg]  # (type, leaf specs in the order of Leaves.blocks[type])
    """A block (of a type ``Leaves`` knows) nested in a value: a tool result's content blocks."""

    __slots__ = ()


_NO_FIELDS: Final[Mapping[type, tuple[str, ...]]] = {}


_DEPTH: Final = 32
"""Containers nested deeper than this get no spec (their message is rendered on every call): a
spec is built and checked by recursion, and a hostile value may nest thousands of levels."""


def value_spec(value: Any, fields: Mapping[type, tuple[str, ...]] = _NO_FIELDS, depth: int = 0) -> Any:
    """The spec of a plain value: a leaf itself, a ``DictSpec`` / ``SeqSpec`` of a container, an
    ``ObjSpec`` of a block whose type ``fields`` names, or ``UNKNOWN`` (it, or something inside
    it, is of another type, or nested too deep)."""
    kind = type(value)
    if kind in ATOMS:
        return value
    if depth >= _DEPTH:
        return UNKNOWN
    depth += 1
    if kind is dict:
        keys = tuple(value)
        specs = tuple(value_spec(v, fields, depth) for v in value.values())
        if UNKNOWN in specs or not all(type(k) in ATOMS for k in keys):
            return UNKNOWN
        return DictSpec((keys, specs))
    if kind is list or kind is tuple:
        specs = tuple(value_spec(v, fields, depth) for v in value)
        return UNKNOWN if UNKNOWN in specs else SeqSpec((kind, specs))
    names = fields.get(kind)
    if names is not None:
        specs = tuple(value_spec(getattr(value, name), fields, depth) for name in names)
        return UNKNOWN if UNKNOWN in specs else ObjSpec((kind, specs))
    return UNKNOWN


def value_same(value: Any, spec: Any, fields: Mapping[type, tuple[str, ...]] = _NO_FIELDS) -> bool:
    """Whether ``value`` is what ``spec`` was taken of: every leaf the same object, every
    container and block of the same type and shape. (Plain loops: on CPython they cost less than
    ``all(map(operator.is_, ...))`` for the few items a value usually has.)"""
    if value is spec:  # a leaf (a container is never its own spec)
        return True
    kind = type(spec)
    if kind is DictSpec:
        keys, specs = spec
        if type(value) is not dict or len(value) != len(keys):
            return False
        for key, known, expected in zip(value, keys, specs, strict=True):
            if key is not known:
                return False
            item = value[key]
            if item is not expected and not value_same(item, expected, fields):
                return False
        return True
    if kind is SeqSpec or kind is ObjSpec:
        kind, specs = spec
        if type(value) is not kind:
            return False
        if spec.__class__ is ObjSpec:
            for name, expected in zip(fields[kind], specs, strict=True):
                item = getattr(value, name)
                if item is not expected and not value_same(item, expected, fields):
                    return False
            return True
        if len(value) != len(specs):
            return False
        for item, expected in zip(value, specs, strict=True):
            if item is not expected and not value_same(item, expected, fields):
                return False
        return True
    return False


class Leaves:
    """What the content renderer reads of one flowra line's messages: the message types it
    recognises by type alone (their role comes from the type) and, per block type, the
    attributes it reads, in order. A message or block of any other type has no spec."""

    __slots__ = ("blocks", "messages")

    def __init__(self, messages: tuple[type, ...], blocks: Mapping[type, tuple[str, ...]]) -> None:
        self.messages = messages
        self.blocks = dict(blocks)

    def spec(self, message: Any) -> tuple[Any, ...] | None:
        """``message``'s spec (``BLOCKS`` shape), or None. A message of another type (a system
        message) is known by its ``role`` too, which the renderer then reads."""
        kind = type(message)
        blocks = getattr(message, "blocks", None)
        if type(blocks) is not list:
            return None
        role: tuple[Any, ...] = ()
        if kind not in self.messages:
            role = (getattr(message, "role", None),)
            if type(role[0]) not in ATOMS:
                return None
        fields = self.blocks
        types: list[type] = []
        leaves: list[tuple[Any, ...]] = []
        for block in blocks:
            t = type(block)
            names = fields.get(t)
            if names is None:
                return None
            specs = tuple(value_spec(getattr(block, name), fields) for name in names)
            if UNKNOWN in specs:
                return None
            types.append(t)
            leaves.append(specs)
        return (BLOCKS, kind, tuple(types), tuple(leaves), *role)

    def same(self, message: Any, spec: tuple[Any, ...]) -> bool:
        """Whether ``message`` (of ``spec``'s type: the caller checked) is what a ``BLOCKS`` spec
        was taken of."""
        if not self.blocks_same(message.blocks, spec[2], spec[3]):
            return False
        return len(spec) == 4 or getattr(message, "role", None) is spec[4]

    def blocks_same(self, blocks: Any, types: tuple[type, ...], leaves: tuple[tuple[Any, ...], ...]) -> bool:
        """A ``BLOCKS`` spec's check of a message's blocks (its type is checked by the caller)."""
        if len(blocks) != len(types):
            return False
        fields = self.blocks
        for block, t, specs in zip(blocks, types, leaves, strict=True):
            if type(block) is not t:
                return False
            for name, expected in zip(fields[t], specs, strict=True):
                item = getattr(block, name)
                if item is not expected and not value_same(item, expected, fields):
                    return False
        return True

    def unchanged(self, messages: list[Any], specs: list[Any]) -> int:
        """How many of ``messages``, from the first, still are what ``specs`` (by position, all
        of the ``BLOCKS`` shape or None) were taken of."""
        count = 0
        for message, spec in zip(messages, specs, strict=False):  # the messages may be more
            if spec is None or type(message) is not spec[1] or not self.same(message, spec):
                return count
            count += 1
        return count


__all__ = ["ATOMS", "BLOCKS", "UNKNOWN", "DictSpec", "Leaves", "ObjSpec", "SeqSpec", "value_same", "value_spec"]
