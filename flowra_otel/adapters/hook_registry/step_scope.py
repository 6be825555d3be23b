"""``StepScope`` and ``EmitFrame``: where in flowra's execution tree an event is being emitted.

Why: flowra runs every step of every node in a task of its own, so the patched engine opens one
``StepScope`` per step, in that step's task: the node it runs, the stack of events being emitted
(their handlers may emit more, or forward through ``propagate_to``), and the chat context made
current for the provider call, attached and detached in this task only, never from another.
"""

from __future__ import annotations

import asyncio
import time
from contextvars import ContextVar, Token
from typing import Any, Protocol

from opentelemetry.context import Context

from ...core import current_span
from ...core.field_tracker import FieldTracker
from .owner import Owner

IN_HOOKS: ContextVar[bool] = ContextVar("flowra_otel.in_hooks", default=False)
"""True while the handlers of any event run (in their task, and the tasks they start): a model
call or an agent run a hook makes there records no content, since the value it is given may be
the very one being redacted. Set by the emit patch, whatever the event and whatever registry."""


class EmitFrame:
    """One event object during its outermost ``emit``; ``owner`` is the first OtelHooks to see it."""

    __slots__ = ("data", "hook_context", "owner", "registry", "start_ns", "tracker")

    def __init__(self, data: Any, registry: Any) -> None:
        self.data = data
        self.registry = registry
        self.start_ns = time.time_ns()
        self.owner: Owner | None = None
        self.hook_context: Any = None
        self.tracker: FieldTracker | None = None


class Book(Protocol):
    """What a step and the adapter's handlers need of the run's ``span_book.SpanBook`` (which
    imports this module, so this one names it by what it does)."""

    def claim(self, owner: Owner, step: StepScope, data: Any, hook_context: Any) -> None: ...

    def step_ended(self, step: StepScope, result: Any, exc: BaseException | None) -> None: ...


class StepScope:
    """One step of one engine node, in its own task: the node, the events being emitted, and the
    chat context made current for the provider call (attached and detached in this task only)."""

    __slots__ = ("book", "frames", "node", "task", "token")

    def __init__(self, book: Book, node: Any) -> None:
        self.book = book
        self.node = node
        self.frames: list[EmitFrame] = []
        self.token: Token[Context] | None = None
        self.task: asyncio.Task[Any] | None = None

    def attach(self, context: Context) -> None:
        """Make ``context`` (the chat span's, ``ChatInvocation.provider_context``) current for the
        provider call, so HTTP or SDK instrumentations nest under the span (or fold into it)."""
        if self.token is not None:
            self.detach()
        self.task = asyncio.current_task()
        self.token = current_span.attach(context)

    def detach(self) -> None:
        token, self.token = self.token, None
        if token is not None and asyncio.current_task() is self.task:
            current_span.detach(token)


__all__ = ["IN_HOOKS", "Book", "EmitFrame", "StepScope"]
