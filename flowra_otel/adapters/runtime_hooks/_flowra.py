"""The facts about flowra 0.0.47 - 0.0.93 this adapter relies on, in one place.

``agent/flow/context.py``, the flowing registry and the span types have one shape across the
range. The differences inside it are named here by what they mean, read once from flowra
itself, never as version comparisons elsewhere:

* ``STORAGE``: where ``HooksImpl`` keeps its handlers. 0.0.56+: ``_Subscription`` records in
  ``global_subscriptions`` / ``scoped_subscriptions`` (``SUBSCRIPTIONS``); 0.0.47 - 0.0.55: bare
  handlers in ``global_handlers`` and path or agent-type entries in ``scoped`` / ``type_scoped``
  (``HANDLER_LISTS``), where flowra wraps a handler scoped to an agent type in an
  ``event_wrapper`` of its own (``hook_of`` finds the app's function again). Every read of the
  storage is a function here (``lone_handler``, ``handlers_of``, ``may_stream``,
  ``global_handlers``, ``remove_global``); ``emit_shape_missing()`` accepts exactly these two;
* ``EPHEMERAL_STATE`` (0.0.49+): the session storage keeps per-run state that flowra clears when
  the run completes, where a durable run's trace link is kept; none on 0.0.47 - 0.0.48;
* ``INPUT_EVENT``: the event that carries a turn's input messages after its hooks,
  ``StartTurnEvent`` (0.0.48+) or 0.0.47's ``UserMessageEvent`` (its ``StartTurnEvent`` has
  only ``context``); ``METADATA_EVENTS``: the events that carry the spec's ``metadata``;
* ``TOOL_SPAN_IN_TOOL_STEP`` (0.0.47 - 0.0.67): the ``ToolCallSpan`` opens inside the tool-call
  agent's step, not around its ``AgentSpan``; the tool's frame is then opened from that
  ``AgentSpan`` (``tool_use_of``);
* ``CUT_OFF_CALLS_ANSWERED`` (0.0.77+): a response cut off mid tool call has that call answered
  with an error; before, the turn ends there and no call of that response runs or is answered;
* ``CALLS_EVENT``: ``BeforeToolCallsEvent`` (0.0.92+; none before: no prefilled calls);
* ``ToolResultBlock.content`` is a string before 0.0.86 (a list of blocks from then on), and 0.0.57
  alone gives ``AfterToolCallEvent.result`` as a list of blocks (``tool_result_of``);
* what tests and docs name per release (``LLMConfig.provider`` 0.0.56+, the provider a service
  before; typed ``LLMError`` 0.0.83+, ``LLMCaller`` and fallback 0.0.84+, ``headers`` / ``meta`` on
  ``BeforeToolCallEvent`` 0.0.79+) needs nothing here: the adapter reads them only where they are.

This is the only module of the adapter that reads flowra's private names: ``HooksImpl``'s handler
storage and resolution (to run an event's handler loop as flowra does, with the redaction ledger
watching each handler) and the runtime's storage and current root node (where a durable run's
trace link is kept). ``emit_shape_missing()`` verifies the storage before ``emit_patch`` patches,
and ``check()`` verifies everything when tracing is installed.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from types import CodeType
from typing import Any, Final

from flowra.agent import AgentRuntime, AgentSpan, FlowingVar, SessionStorage
from flowra.agent import InterruptedError as FlowraInterruptedError
from flowra.agent.flow import TimeoutAgent
from flowra.agent.flow import hooks as flowra_hooks
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
    "EPHEMERAL_STATE",
    "HANDLER_LISTS",
    "INPUT_EVENT",
    "LEDGER_FIELDS",
    "METADATA_EVENTS",
    "PLUMBING_AGENTS",
    "SEVERAL",
    "STORAGE",
    "SUBSCRIPTIONS",
    "TOOL_SPAN_IN_TOOL_STEP",
    "UNCHANGED_ALONE",
    "AgentRuntime",
    "AgentSpan",
    "ChatAgent",
    "Event",
    "FlowingVar",
    "FlowraInterruptedError",
    "HandlerStorage",
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
    "global_handlers",
    "handlers_of",
    "hook_of",
    "is_tool_loop",
    "link_storage",
    "lone_handler",
    "may_stream",
    "remove_global",
    "root_node_id",
    "run_node_id",
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
"""0.0.47 - 0.0.67: ``ToolCallAgent.execute`` opens the ``ToolCallSpan`` inside its step (and
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

INPUT_EVENT: Final[type[Any]] = (
    events.StartTurnEvent
    if "messages" in getattr(events.StartTurnEvent, "__dataclass_fields__", {})
    else getattr(events, "UserMessageEvent", events.StartTurnEvent)
)
"""The event whose ``messages``, after its hooks, are a turn's input: ``StartTurnEvent`` (0.0.48+);
on 0.0.47 ``StartTurnEvent`` has only ``context`` and ``UserMessageEvent`` carries the input."""

METADATA_EVENTS: Final[frozenset[type[Any]]] = frozenset(
    t
    for t in (events.StartTurnEvent, events.MessageAcceptedEvent)
    if "metadata" in getattr(t, "__dataclass_fields__", {})
)
"""The events that carry the spec's ``metadata`` (conversation and user ids, metric attributes):
``MessageAcceptedEvent`` on every release, ``StartTurnEvent`` too from 0.0.48."""

CONTENT_EVENTS: Final[frozenset[type[Any]]] = frozenset(
    t
    for t in (
        INPUT_EVENT,
        *METADATA_EVENTS,
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


@dataclasses.dataclass(frozen=True, slots=True)
class HandlerStorage:
    """Where one era of flowra's ``HooksImpl`` keeps its handlers: each ``_HandlerGroup`` (the
    root's ``_events`` and ``_spans``) holds, per event type, a list of global entries (registered
    on ``runtime.hooks`` without a scope) and lists of scoped ones."""

    releases: str
    global_entries: str
    """The group's attribute of global entries."""
    scoped_entries: tuple[str, ...]
    """The group's attributes of scoped entries."""
    records: bool
    """Entries are ``_Subscription`` records (the handler is their ``handler``); else a global
    entry is the handler itself."""
    resolve_parameters: tuple[str, ...]
    """``HooksImpl.__resolve``'s parameters (0.0.47 - 0.0.55 also take ``is_span``)."""

    @property
    def attributes(self) -> tuple[str, ...]:
        return (self.global_entries, *self.scoped_entries)

    def describe(self) -> str:
        return f"_HandlerGroup.{' / '.join(self.attributes)} ({self.releases})"


SUBSCRIPTIONS: Final = HandlerStorage(
    "flowra 0.0.56 - 0.0.93", "global_subscriptions", ("scoped_subscriptions",), True, ("self", "group", "key")
)
"""0.0.56+: records, scoped ones matched against the emitter's call stack."""

HANDLER_LISTS: Final = HandlerStorage(
    "flowra 0.0.47 - 0.0.55",
    "global_handlers",
    ("scoped", "type_scoped"),
    False,
    ("self", "group", "key", "is_span"),
)
"""0.0.47 - 0.0.55: bare global handlers; ``(path, inclusive, handler)`` and ``(path, agent type,
handler)`` scoped entries, matched against the emitter's registry path (``run()`` clears them)."""


def _storage_of(hooks: Any) -> HandlerStorage | None:
    """The known storage ``hooks`` keeps its handlers in, exactly (its groups have those
    attributes and no others, each a dict), else None."""
    root = getattr(hooks, "_root", None)
    groups = (getattr(root, "_events", None), getattr(root, "_spans", None))
    for storage in (SUBSCRIPTIONS, HANDLER_LISTS):
        if all(
            set(getattr(type(group), "__slots__", ()) or ()) == set(storage.attributes)
            and all(isinstance(getattr(group, name, None), dict) for name in storage.attributes)
            for group in groups
        ):
            return storage
    return None


def _resolve_parameters() -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(HooksImpl._HooksImpl__resolve).parameters)  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):
        return ()


def _read_storage() -> HandlerStorage | None:
    try:
        storage = _storage_of(HooksImpl())
    except Exception:
        return None
    return storage if storage is not None and storage.resolve_parameters == _resolve_parameters() else None


STORAGE: Final[HandlerStorage | None] = _read_storage()
"""This flowra's handler storage (read once from a fresh ``HooksImpl``), or None: another one,
which nothing here reads (``emit_shape_missing`` refuses it)."""

_READ: Final = STORAGE or SUBSCRIPTIONS
"""The storage the functions below read (an unknown one is refused before anything reads it)."""

SEVERAL: Final = object()
"""``lone_handler``'s answer when an event type has a scoped handler or more than one global one."""


def _lone_in_records(hooks: Any, event_type: type[Any]) -> Any:
    group = hooks._root._events
    if group.scoped_subscriptions.get(event_type):
        return SEVERAL
    entries = group.global_subscriptions.get(event_type)
    if not entries:
        return None
    return entries[0].handler if len(entries) == 1 else SEVERAL


def _lone_in_lists(hooks: Any, event_type: type[Any]) -> Any:
    group = hooks._root._events
    if group.scoped.get(event_type) or group.type_scoped.get(event_type):
        return SEVERAL
    entries = group.global_handlers.get(event_type)
    if not entries:
        return None
    return entries[0] if len(entries) == 1 else SEVERAL


lone_handler: Final[Callable[[Any, type[Any]], Any]] = _lone_in_lists if _READ is HANDLER_LISTS else _lone_in_records
"""``lone_handler(hooks, event_type)``: None when nothing subscribes to ``event_type``; the handler
when it is the one subscription (a global one: no filter, it always runs); else ``SEVERAL``.
What ``emit_patch`` reads on every emit (the storage's own function, chosen once)."""


def handlers_of(hooks: Any, event_type: type[Any]) -> list[Callable[..., Any]]:
    """The handlers ``HooksImpl.emit`` would call for ``event_type``, in its order (global
    subscriptions first, then the scoped ones that match the emitter), by flowra's own resolution."""
    group = hooks._root._events
    handlers: list[Callable[..., Any]]
    if _READ is HANDLER_LISTS:
        handlers = hooks._HooksImpl__resolve(group, event_type, is_span=False)
    else:
        handlers = hooks._HooksImpl__resolve(group, event_type)
    return handlers


def _type_scope_wrapper_code() -> CodeType | None:
    """The code of the ``event_wrapper`` flowra 0.0.47 - 0.0.55 runs in place of a handler scoped
    to an agent type (``_make_type_filter``), made once on a probe; None elsewhere."""
    make = getattr(flowra_hooks, "_make_type_filter", None)
    if STORAGE is not HANDLER_LISTS or make is None:
        return None
    try:
        wrapper = make(lambda event: None, TurnAgent, "", is_span=False)
    except Exception:
        return None
    code = getattr(wrapper, "__code__", None)
    return code if isinstance(code, CodeType) and "handler" in code.co_freevars else None


_TYPE_SCOPE_WRAPPER: Final[CodeType | None] = _type_scope_wrapper_code()
_TYPE_SCOPE_WRAPPER_FREEVARS: Final[tuple[str, ...]] = _TYPE_SCOPE_WRAPPER.co_freevars if _TYPE_SCOPE_WRAPPER else ()


def hook_of(handler: Any) -> Any:
    """The app's own hook behind ``handler``: on 0.0.47 - 0.0.55 a handler registered with an
    agent type as its scope reaches ``emit`` as flowra's ``event_wrapper`` around it (which the
    redaction ledger must not name); any other handler is its own hook."""
    code = _TYPE_SCOPE_WRAPPER
    if code is None or getattr(handler, "__code__", None) is not code:
        return handler
    cells = dict(zip(_TYPE_SCOPE_WRAPPER_FREEVARS, handler.__closure__ or (), strict=False))
    cell = cells.get("handler")
    return cell.cell_contents if cell is not None else handler


def global_handlers(hooks: Any, key: type[Any], *, spans: bool = False) -> list[Callable[..., Any]]:
    """The handlers registered on ``runtime.hooks`` without a scope for an event type (``spans``:
    a span type), in order."""
    root = hooks._root
    entries = getattr(root._spans if spans else root._events, _READ.global_entries).get(key, ())
    return [entry.handler for entry in entries] if _READ.records else list(entries)


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
    for event_type in DELTA_EVENTS:
        if lone_handler(hooks, event_type) is not None:
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
    ``handler_self`` (the zero-code instrumentor's tracing, replaced by the app's own, or a tracing
    uninstalled), and every entry list this leaves empty: flowra's ``on`` made it for that
    subscription (``setdefault``) and has no way to remove one, so the storage is as flowra would
    have it without the plugin."""
    root = hooks._root
    for group in (root._events, root._spans):
        entries_of = getattr(group, _READ.global_entries)
        for key, entries in list(entries_of.items()):
            kept = [
                e for e in entries if getattr(e.handler if _READ.records else e, "__self__", None) is not handler_self
            ]
            if len(kept) == len(entries):
                continue
            if kept:
                entries[:] = kept
            else:
                del entries_of[key]


RUN_META_KEY: Final = "__flowra_meta__"
"""Where ``AgentRuntime`` keeps its run counter in the session storage (``__next_run_id``)."""


EPHEMERAL_STATE: Final[bool] = all(
    callable(getattr(SessionStorage, name, None)) for name in ("save_ephemeral", "load_ephemeral", "load")
)
"""0.0.49+: a ``SessionStorage`` keeps per-node ephemeral state, cleared when a run completes,
where a durable run's trace link is kept (``durable.EphemeralLinkStore``). 0.0.47 - 0.0.48 have
none (``save_node_state`` alone): a resumed run starts a trace of its own there."""


def link_storage(runtime: Any) -> Any:
    """The ``SessionStorage`` of a durable ``AgentRuntime`` where its runs' trace links are kept;
    None without one, or on a release without ephemeral state (``EPHEMERAL_STATE``)."""
    return getattr(runtime, "_AgentRuntime__storage", None) if EPHEMERAL_STATE else None


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


class _Probe:
    """An event type no flowra emits: what ``emit_shape_missing`` subscribes on its probe."""


def _probe_handler(event: Any) -> None:
    """The handler ``emit_shape_missing`` subscribes on its probe (never called)."""


def emit_shape_missing() -> list[str]:
    """What ``emit_patch``'s ``emit`` reads that this flowra's ``HooksImpl`` lacks (empty: all
    there), checked on a fresh ``HooksImpl`` before ``HooksImpl.emit`` is patched. Exactly one of
    the two known handler storages is accepted, with a handler subscribed on the probe read back
    where ``lone_handler`` reads it: a patch that read another storage would break every run of
    the app."""
    try:
        probe = HooksImpl()
    except Exception:
        return ["HooksImpl() (a root HooksImpl)"]
    try:  # a handler subscribed on the probe is where the emit patch looks for it
        HooksImpl.on(probe, _Probe, _probe_handler)
        found = STORAGE is not None and lone_handler(probe, _Probe) is _probe_handler
    except Exception:
        found = False
    known = " or ".join(s.describe() for s in (SUBSCRIPTIONS, HANDLER_LISTS))
    return [
        name
        for name, ok in (
            (f"a known handler storage ({known})", found),
            ("HooksImpl._context", hasattr(probe, "_context")),
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
            ("a known handler storage", STORAGE is not None and _storage_of(hooks) is STORAGE),
            ("runtime.flowing", hasattr(runtime, "flowing")),
        )
        if not ok
    ]
    if missing:
        msg = f"flowra_otel cannot trace this runtime: missing {', '.join(missing)} (flowra 0.0.47 - 0.0.93 expected)"
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
