"""Durable runs: a resumed run's root span links to the trace of the run it continues.

flowra can pause a run in its session storage and ``resume()`` it in another process. The
plugin keeps the root ``invoke_agent`` span context as a W3C ``traceparent`` (and the
conversation id and ``user.id``) beside flowra's own state, and on ``resume()`` starts the new root
span with a link to it, ``flowra.resumed = true`` and the same ``gen_ai.conversation.id`` and
``user.id`` (a resumed run does not accept its user message again, so the spec's metadata, where
both usually come from, is not seen a second time).

Where the link is kept differs between flowra's API lines (their storage APIs differ), so each
adapter brings a ``LinkStore``; what is kept, and how it is read back, is decided here.
"""

from __future__ import annotations

import re
from typing import Any, Final, Protocol

from opentelemetry.trace import Span, SpanContext, TraceFlags

LINK_TYPE: Final = "flowra.link.type"
LINK_RESUMED_FROM: Final = "resumed_from"
RESUMED: Final = "flowra.resumed"

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


class LinkStore(Protocol):
    """Where one run's trace link lives in flowra's session storage."""

    async def save(self, state: dict[str, Any]) -> None:
        """Keep ``state`` (replacing what was kept for this run before)."""
        ...

    async def load(self) -> dict[str, Any] | None:
        """What ``save`` kept for the run being resumed, or None."""
        ...


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


def link_state(root_span: Span, conversation_id: str | None, user_id: str | None = None) -> dict[str, Any]:
    """What a run keeps: its root span context, its conversation id and its user id (each
    explicitly None when it has none, so a store that merges saved values never keeps an earlier
    run's)."""
    return {"traceparent": traceparent(root_span), "conversation_id": conversation_id, "user_id": user_id}
