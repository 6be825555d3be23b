"""``StepScope`` and ``EmitFrame``: where in flowra's execution tree an event is being emitted.

Why: flowra runs every step of every node in a task of its own, so the patched engine opens one
``StepScope`` per step, in that step's task: the node it runs, the stack of events being emitted
(their handlers may emit more, or forward through ``propagate_to``), and the chat context made
current for the provider call, attached and detached in this task only, never from another.
"""

from __future__ import annotations

import asyncio
import time
from contextvars import Token
from typing import TYPE_CHECKING, Any

from opentelemetry.context import Context
from opentelemetry.trace import Span

from ...core import current_span
from ...core.field_tracker import FieldTracker

if TYPE_CHECKING:
    from .hooks import HookRegistryAdapter
    from .span_book import SpanBook


class EmitFrame:
    """One event object during its outermost ``emit``; ``owner`` is the first OtelHooks to see it."""

    __slots__ = ("data", "hook_context", "owner", "registry", "start_ns", "tracker")

    def __init__(self, data: Any, registry: Any) -> None:
        self.data = data
        self.registry = registry
        self.start_ns = time.time_ns()
        self.owner: HookRegistryAdapter | None = None
        self.hook_context: Any = None
        self.tracker: FieldTracker | None = None


class StepScope:
    """One step of one engine node, in its own task: the node, the events being emitted, and the
    chat context made current for the provider call (attached and detached in this task only)."""

    __slots__ = ("book", "frames", "node", "task", "token")

    def __init__(self, book: SpanBook, node: Any) -> None:
        self.book = book
        self.node = node
        self.frames: list[EmitFrame] = []
        self.token: Token[Context] | None = None
        self.task: asyncio.Task[Any] | None = None

    def attach(self, span: Span) -> None:
        """Make ``span`` current for the provider call, so HTTP or SDK instrumentations nest under it."""
        if self.token is not None:
            self.detach()
        self.task = asyncio.current_task()
        self.token = current_span.attach(current_span.context_with(span))

    def detach(self) -> None:
        token, self.token = self.token, None
        if token is not None and asyncio.current_task() is self.task:
            current_span.detach(token)


__all__ = ["EmitFrame", "StepScope"]
