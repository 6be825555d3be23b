"""Finished spans as a nested, comparable tree: the shape tests assert on.

Tests compare whole normalised trees (names, kinds, chosen attributes, status, children in
start order) so that a wrong parent, a missing span or an extra span all fail the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode


@dataclass
class Node:
    name: str
    kind: str
    attrs: dict[str, Any]
    status: str
    children: list[Node] = field(default_factory=list)
    span: ReadableSpan | None = field(default=None, compare=False, repr=False)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def build(spans: Iterable[ReadableSpan], keys: Sequence[str] | None = None) -> list[Node]:
    """Roots (spans whose parent is not among ``spans``) with their descendants.

    ``keys``: the attribute keys to keep (None keeps all). Children sorted by start time,
    then name, so parallel siblings compare deterministically.
    """
    span_list = list(spans)
    nodes: dict[int, Node] = {}
    for s in span_list:
        attrs = {k: _plain(v) for k, v in (s.attributes or {}).items() if keys is None or k in keys}
        kind = SpanKind(s.kind).name
        status = StatusCode(s.status.status_code).name
        assert s.context is not None
        nodes[s.context.span_id] = Node(s.name, kind, attrs, status, span=s)
    roots: list[Node] = []
    for s in span_list:
        assert s.context is not None
        node = nodes[s.context.span_id]
        parent = nodes.get(s.parent.span_id) if s.parent is not None else None
        (parent.children if parent is not None else roots).append(node)

    def order(n: Node) -> tuple[int, str, str]:
        assert n.span is not None
        return (n.span.start_time or 0, n.name, str(n.attrs))

    def sort(ns: list[Node]) -> None:
        ns.sort(key=order)
        for n in ns:
            sort(n.children)

    sort(roots)
    return roots


def shape(nodes: Iterable[Node]) -> list[Any]:
    """Just names and nesting: ``[("invoke_agent a", [("chat m", []), ...])]``."""
    return [(n.name, shape(n.children)) for n in nodes]


def walk(nodes: Iterable[Node]) -> Iterable[Node]:
    for n in nodes:
        yield n
        yield from walk(n.children)
