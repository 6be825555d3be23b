"""Durable runs: a resumed run's root span links to the trace of the run it continues.

flowra can pause a run (``SessionStorage``) and ``resume()`` it in another process. The plugin
keeps the root ``invoke_agent`` span context as a W3C ``traceparent`` (and the conversation
id) in flowra's own session state under one node key, and on ``resume()`` starts the new root
span with a link to it, ``flowra.resumed = true`` and the same ``gen_ai.conversation.id``.
"""

from __future__ import annotations

import re
from typing import Any, Final

from flowra.runtime.storage import ChangeSet
from opentelemetry.trace import Span, SpanContext, TraceFlags

STATE_KEY: Final = "__flowra_otel"
"""The node-state key in the session storage. flowra's node keys are node ids and storage keys;
the only ``__`` key it uses itself is ``__meta`` (its run counter)."""
LINK_TYPE: Final = "flowra.link.type"
LINK_RESUMED_FROM: Final = "resumed_from"
RESUMED: Final = "flowra.resumed"

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def traceparent(span: Span) -> str:
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def parse_traceparent(value: object) -> SpanContext | None:
    if not isinstance(value, str):
        return None
    m = _TRACEPARENT.match(value)
    if m is None or int(m.group(1), 16) == 0 or int(m.group(2), 16) == 0:
        return None
    return SpanContext(
        trace_id=int(m.group(1), 16),
        span_id=int(m.group(2), 16),
        is_remote=True,
        trace_flags=TraceFlags(int(m.group(3), 16)),
    )


async def save(storage: Any, root_span: Span, conversation_id: str | None) -> None:
    state: dict[str, Any] = {"traceparent": traceparent(root_span)}
    if conversation_id is not None:
        state["conversation_id"] = conversation_id
    async with storage.begin_transaction():
        await storage.save_node_state(STATE_KEY, ChangeSet(scalars=state, appends={}))


async def load(storage: Any) -> dict[str, Any] | None:
    state = await storage.load_node_state(STATE_KEY)
    return dict(state) if isinstance(state, dict) else None
