"""The two context variables the emit patch and the tracing share (flowra 0.0.47+).

Why a module of their own: the emit patch sets them and the tracing reads them, and neither
module may import the other (the patch knows the tracing only as an ``EventSink``).
"""

from __future__ import annotations

from contextvars import ContextVar

from ...core.chat_invocation import ChatInvocation

IN_HOOKS: ContextVar[bool] = ContextVar("flowra_otel_in_hooks", default=False)
"""True while the handlers of any event run (in their task, and tasks they start): an agent run
a hook starts there records no content, since the value it is given may be the one being redacted."""

CURRENT_CHAT: ContextVar[ChatInvocation | None] = ContextVar("flowra_otel_current_chat", default=None)
"""The chat whose provider call runs in this task (set and reset by the LLM call's span handler):
the emit patch notes its first streamed chunk there."""

__all__ = ["CURRENT_CHAT", "IN_HOOKS"]
