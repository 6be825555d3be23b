"""The facts about flowra 0.0.56 - 0.0.93 this adapter relies on, in one place.

The handler storage (``HooksImpl._root._events`` with ``global_subscriptions`` /
``scoped_subscriptions``) and ``agent/flow/context.py`` have today's shape across the range
(0.0.47 - 0.0.55 store handlers differently: refused by ``flowra_otel.adapters`` before this module
is imported). The differences inside the range are named here by what they mean, read once from
flowra itself, never as version comparisons elsewhere:

* ``TOOL_SPAN_IN_TOOL_STEP`` (0.0.56 - 0.0.67): the ``ToolCallSpan`` opens inside the tool-call
  agent's step, not around its ``AgentSpan``; the tool's frame is then opened from that
  ``AgentSpan`` (``tool_use_of``);
* ``CUT_OFF_CALLS_ANSWERED`` (0.0.77+): a response cut off mid tool call has that call answered
  with an error; before, the turn ends there and no call of that response runs or is answered;
* ``CALLS_EVENT``: ``BeforeToolCallsEvent`` (0.0.92+; none before: no prefilled calls);
* ``ToolResultBlock.content`` is a string before 0.0.86 (a list of blocks from then on), and 0.0.57
  alone gives ``AfterToolCallEvent.result`` as a list of blocks (``tool_result_of``);
* what tests and docs name per release (typed ``LLMError`` 0.0.83+, ``LLMCaller`` and fallback
  0.0.84+, ``headers`` / ``meta`` on ``BeforeToolCallEvent`` 0.0.79+) needs nothing here: the
  adapter reads them only where they are.

This is the only module of the adapter that reads flowra's private names: ``HooksImpl``'s handler
resolution (to run an event's handler loop as flowra does, with the redaction ledger watching each
handler) and the runtime's storage and current root node (where a durable run's trace link is
kept). One exception, for speed: ``emit_patch`` reads the handler storage (``hooks._root._events``,
a subscription's ``handler``, ``hooks._context``) inline on every emit, to see whether an event has
a handler at all; ``emit_shape_missing()`` verifies that before it patches, and ``check()``
verifies everything when tracing is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from flowra.agent import AgentRuntime, AgentSpan, FlowingVar
from flowra.agent import InterruptedError as FlowraInterruptedError
from flowra.agent.flow import TimeoutAgent
from flowra.agent.flow.hooks import Event, HooksImpl, HookSubscription
from flowra.lib.chat import ChatAgent
from flowra.lib.observability import LLMCallSpan, TextDeltaEvent, ThinkingDeltaEvent, ToolCallSpan
from flowra.lib.turn import TurnAgent
from flowra.lib.turn import hook_events as events
from flowra.lib.turn.tool_call import ToolCallAgent
from flowra.llm import StopReason, ToolResultBlock, UserMessage

__all__ = [
    "CALLS_EVENT",
    "CONTENT_EVENTS",
    "CUT_OFF_CALLS_ANSWERED",
    "CUT_OFF_STOP_REASONS",
    "DELTA_EVENTS",
    "LEDGER_FIELDS",
    "PLUMBING_AGENTS",
    "TOOL_SPAN_IN_TOOL_STEP",
    "UNCHANGED_ALONE",
    "AgentRuntime",
    "AgentSpan",
    "ChatAgent",
    "Event",
    "FlowingVar",
    "FlowraInterruptedError",
    "HooksImpl",
    "LLMCallSpan",
    "StopReason",
    "ToolCallSpan",
    "ToolResultBlock",
    "UserMessage",
    "check",
    "context_of",
    "emit_shape_missing",
    "events",
    "handlers_of",
    "is_tool_loop",
    "may_stream",
    "remove_global",
    "root_node_id",
    "run_node_id",
    "runtime_storage",
    "subscribe",
    "subscribe_span",
    "tool_result_of",
    "tool_use_of",
]

PLUMBING_AGENTS: Final[tuple[type[Any], ...]] = (ToolCallAgent, TimeoutAgent)
"""flowra's own machinery, never an ``invoke_agent`` span: the tool-call agent (its tool call is
the ``execute_tool`` span) and the timeout guard. A ``ChatAgent`` is represented by its
``TurnAgent`` child (which takes its name)."""

TOOL_SPAN_IN_TOOL_STEP: Final[bool] = not hasattr(ToolCallAgent, "_ToolCallAgent__on_self_agent_span")
"""0.0.56 - 0.0.67: ``ToolCallAgent.execute`` opens the ``ToolCallSpan`` inside its step (and
``collect_agent_result`` closes it, for an agent used as a tool, in another step), so a flowing
value set by its handler would be entered and left in the wrong contexts. The tool's frame is
opened from the tool-call agent's own ``AgentSpan`` instead (its spec carries the ``tool_use``),
as flowra does itself from 0.0.68 (``on_self_span``), and the ``ToolCallSpan`` is not subscribed."""


def tool_use_of(span: Any) -> Any:
    """The ``tool_use`` of a tool-call agent's ``AgentSpan`` (its ``ToolCallSpec``), else None."""
    if span.agent_info.source_type is not ToolCallAgent:
        return None
    return getattr(span.spec, "tool_use", None)


def tool_result_of(result: Any) -> Any:
    """An ``AfterToolCallEvent.result`` as a ``ToolResultBlock``: 0.0.57 gives a list of blocks
    (one ``ToolResultBlock`` and what a hook appended), every other release the block itself."""
    if isinstance(result, list):
        return next((b for b in result if isinstance(b, ToolResultBlock)), None)
    return result


LEDGER_FIELDS: Final[dict[type[Any], str]] = {
    events.BeforeToolCallEvent: "tool_use",
    events.AfterToolCallEvent: "result",
}
"""Tool events whose payload field hooks may replace, and whose changes the ledger records."""

CALLS_EVENT: Final[type[Any] | None] = getattr(events, "BeforeToolCallsEvent", None)
"""0.0.92+: one model message's calls, which a hook may answer itself (None before 0.0.92)."""

CONTENT_EVENTS: Final[frozenset[type[Any]]] = frozenset(
    t
    for t in (
        events.StartTurnEvent,
        events.MessageAcceptedEvent,
        CALLS_EVENT,
        events.BeforeToolCallEvent,
        events.AfterToolCallEvent,
        events.ResultMessageEvent,
    )
    if t is not None
)
"""Events the adapter acts on once every handler has run (and whose handlers see values a hook
may be about to redact: an agent run started inside them records no content)."""

UNCHANGED_ALONE: Final[frozenset[type[Any]]] = frozenset({events.BeforeToolCallEvent})
"""Content events the adapter learns nothing from when no handler but its marker saw them: no hook
changed the call, so the ``ToolCallSpan``'s tool use is the call as the model made it (and the
ledger has nothing to record)."""

DELTA_EVENTS: Final[frozenset[type[Any]]] = frozenset({TextDeltaEvent, ThinkingDeltaEvent})
"""Streaming chunks: watched when emitted (time to first chunk), never subscribed to (a handler
would switch flowra to streaming)."""

CUT_OFF_CALLS_ANSWERED: Final[bool] = hasattr(TurnAgent, "_TurnAgent__incomplete_tool_result")
"""0.0.77+: ``TurnAgent.call_llm`` answers the call a cut-off response ends on with an error (a
span of its own, ``flowra.tool.cut_off``). Before, such a response completes the turn: its calls
never run and nothing answers them, so they get no span (the chat's output shows them as made)."""

CUT_OFF_STOP_REASONS: Final = frozenset(
    {StopReason.MAX_TOKENS, StopReason.STOP_SEQUENCE, StopReason.SCHEMA_VALIDATION_FAILED, StopReason.OTHER}
)
"""Stop reasons after which a response ending in a tool call has that call cut off
(``TurnAgent.call_llm``): it is answered with an error and never run."""


def handlers_of(hooks: Any, event_type: type[Any]) -> list[Callable[..., Any]]:
    """The handlers ``HooksImpl.emit`` would call for ``event_type``, in its order (global
    subscriptions first, then the scoped ones that match the emitter's call stack)."""
    handlers: list[Callable[..., Any]] = hooks._HooksImpl__resolve(hooks._root._events, event_type)
    return handlers


def is_tool_loop(source: Any) -> bool:
    """A tool loop (flowra's ``TurnAgent`` or a subclass of it): its span counts its LLM calls
    as iterations; an agent that only orchestrates others has none of its own."""
    return isinstance(source, type) and issubclass(source, TurnAgent)


def may_stream(hooks: Any, context: Any) -> bool:
    """Whether flowra streams the LLM call whose span was opened in ``context`` (the span event's
    ``ExecutionContext``): ``LLMCaller`` streams when the calling agent's hooks have a delta
    handler that would fire there, so the same check runs on a view of the runtime's hooks for
    that context (a handler scoped to another agent does not count). No delta handler at all,
    the usual case, is seen without building the view."""
    group = hooks._root._events
    for event_type in DELTA_EVENTS:
        if group.global_subscriptions.get(event_type) or group.scoped_subscriptions.get(event_type):
            break
    else:
        return False
    view = hooks.for_agent(context) if context is not None else hooks
    return any(view.has_handlers(t) for t in DELTA_EVENTS)


def subscribe(hooks: Any, event_type: type[Any], handler: Callable[..., Any]) -> None:
    """``hooks.on(event_type, handler)`` with flowra's own ``HooksImpl.on``, never a subclass's
    override (which may wrap the handler): the handler stays the bound method it is."""
    HooksImpl.on(hooks, event_type, handler)


def subscribe_span(hooks: Any, span_type: type[Any], handler: Callable[..., Any]) -> None:
    """``hooks.on_span(span_type, handler)`` with flowra's own ``HooksImpl.on_span`` (see ``subscribe``)."""
    HooksImpl.on_span(hooks, span_type, handler)


def context_of(hooks: Any) -> Any:
    """The ``ExecutionContext`` an emitting ``HooksImpl`` stamps on its events."""
    return hooks._HooksImpl__context


def remove_global(hooks: Any, handler_self: object) -> None:
    """Drop every global subscription (events and spans) whose handler is a method of
    ``handler_self`` (the zero-code instrumentor's tracing, replaced by the app's own)."""
    root = hooks._root
    for group in (root._events, root._spans):
        for subscriptions in group.global_subscriptions.values():
            subscriptions[:] = [s for s in subscriptions if getattr(s.handler, "__self__", None) is not handler_self]


RUN_META_KEY: Final = "__flowra_meta__"
"""Where ``AgentRuntime`` keeps its run counter in the session storage (``__next_run_id``)."""


def runtime_storage(runtime: Any) -> Any:
    """The ``SessionStorage`` of a durable ``AgentRuntime`` (None without one)."""
    return getattr(runtime, "_AgentRuntime__storage", None)


def root_node_id(runtime: Any) -> str | None:
    """The node id of the run the runtime is executing (``r<run number>``; the same after a
    resume), or None between runs. Set only once the run loop runs: ``run()`` and ``resume()``
    open the root's span before (``run_node_id`` reads it from the storage then)."""
    root = getattr(runtime, "_AgentRuntime__root", None)
    node_id = getattr(root, "node_id", None)
    return node_id if isinstance(node_id, str) else None


async def run_node_id(runtime: Any, storage: Any, resumed: bool) -> str | None:
    """The root node id of the run whose root agent starts now, from the durable ``storage``:
    ``run()`` has just saved the run number (``__flowra_meta__``'s ``run_counter``; the root is
    ``r<run number>``), ``resume()`` has just read the execution snapshot (its ``node_id``)."""
    node_id = root_node_id(runtime)
    if node_id is not None:
        return node_id
    if resumed:
        execution = await storage.load_execution()
        node_id = execution.get("node_id") if isinstance(execution, dict) else None
        return node_id if isinstance(node_id, str) else None
    meta = await storage.load(RUN_META_KEY)
    counter = meta.get("run_counter") if isinstance(meta, dict) else None
    return f"r{counter}" if type(counter) is int else None


def _has_handler_storage(hooks: Any) -> bool:
    """``hooks._root._events.global_subscriptions`` / ``.scoped_subscriptions``: what ``emit``
    reads to see whether an event has any handler (``emit_patch``; flowra's ``__resolve`` reads
    the same), and the subscriptions' ``handler``."""
    group = getattr(getattr(hooks, "_root", None), "_events", None)
    return isinstance(getattr(group, "global_subscriptions", None), dict) and isinstance(
        getattr(group, "scoped_subscriptions", None), dict
    )


def emit_shape_missing() -> list[str]:
    """What ``emit_patch``'s ``emit`` reads that this flowra's ``HooksImpl`` lacks (empty: all
    there), checked on a fresh ``HooksImpl`` before ``HooksImpl.emit`` is patched: a patch built on
    another handler storage would break every run of the app (0.0.47 - 0.0.55's
    ``_HandlerGroup.global_handlers``)."""
    try:
        probe = HooksImpl()
    except Exception:
        return ["HooksImpl() (a root HooksImpl)"]
    return [
        name
        for name, ok in (
            ("HooksImpl._root._events.global_subscriptions / .scoped_subscriptions", _has_handler_storage(probe)),
            ("HooksImpl._context", hasattr(probe, "_context")),
            ("HooksImpl.__resolve", callable(getattr(HooksImpl, "_HooksImpl__resolve", None))),
            ("HooksImpl.emit", callable(HooksImpl.__dict__.get("emit"))),
        )
        if not ok
    ]


def check(runtime: Any) -> None:
    """Fail now, with a clear message, if this flowra's internals are not the ones read above."""
    hooks = getattr(runtime, "hooks", None)
    missing = [
        name
        for name, ok in (
            ("AgentRuntime", isinstance(runtime, AgentRuntime)),
            ("runtime.hooks (HooksImpl)", isinstance(hooks, HooksImpl)),
            ("HooksImpl.__resolve", callable(getattr(HooksImpl, "_HooksImpl__resolve", None))),
            ("HooksImpl.__context", isinstance(getattr(HooksImpl, "_HooksImpl__context", None), property)),
            ("HooksImpl.for_agent", callable(getattr(HooksImpl, "for_agent", None))),
            ("HooksImpl._root._events (handler storage)", _has_handler_storage(hooks)),
            ("runtime.flowing", hasattr(runtime, "flowing")),
        )
        if not ok
    ]
    if missing:
        msg = f"flowra_otel cannot trace this runtime: missing {', '.join(missing)} (flowra 0.0.56 - 0.0.93 expected)"
        raise TypeError(msg)
    services = getattr(runtime, "_AgentRuntime__services", None)
    subscription = services.get(HookSubscription, hooks) if isinstance(services, dict) else hooks
    if subscription is not hooks:
        # flowra gives its agents hooks only from a HooksImpl service; runtime.hooks is then a
        # HooksImpl of its own that no agent emits on: tracing it would record nothing, silently.
        msg = (
            f"flowra_otel cannot trace this runtime: its HookSubscription service is a "
            f"{type(subscription).__name__}, not a flowra HooksImpl, so flowra gives its agents no hooks "
            "(no spans, no events reach runtime.hooks); pass a HooksImpl (or a subclass of it)"
        )
        raise TypeError(msg)
