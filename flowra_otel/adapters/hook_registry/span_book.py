"""``SpanBook``: routes one flowra run's events and engine steps to the invocation objects.

Why a book per run, keyed by engine node: flowra runs every step of every node in a task of its
own, so "the current span" does not survive from one step to the next, and parallel tool calls
or concurrent runs would steal each other's parent if we relied on it. The patched engine tells
us which ``ExecutionNode`` each step runs (``patches.py``, as a ``StepScope``), and the book keeps
one ``AgentInvocation`` per running tool-loop node; the agent holds its open ``ChatInvocation``
and its ``ToolInvocation`` objects. Each invocation owns its span's whole life; the book only
decides which object an event or a step's end concerns, and who is whose parent:

* a new agent's parent is the nearest ancestor agent's ``execute_tool`` span when we came up
  through one of its tool-call nodes (agent-as-tool), else that agent's ``invoke_agent`` span,
  else the span that was current when ``run()`` was called;
* a tool-call node is bound to its ``ToolInvocation`` by its position among the children its
  agent spawned (flowra spawns one per announced tool call, in order), never by the model's id.

Values are recorded after *every* handler of an event has run, wherever it was registered: the
book sees the outermost ``emit`` of each event (``propagate_to`` forwarders' nested emits belong
to it) and finishes the event only when that returns. The book is dropped when the run returns.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import Span

from ...core import attributes, semconv
from ...core.agent_invocation import AgentInvocation
from ...core.chat_invocation import ChatInvocation
from ...core.current_span import context_with
from ...core.durable_link import LinkStore
from ...core.errors import hook_boundary
from ...core.field_tracker import FieldTracker
from ...core.provider_check import check_global_tracer_provider
from ...core.run_state import RunState
from ...core.safety import guarded, internal_error, safe_str, utf8_safe
from ...core.tool_invocation import ToolInvocation
from ._flowra import (
    CONTINUATION_TYPES,
    DELTA_EVENTS,
    INTERRUPT_EXCEPTIONS,
    INTERRUPTED_TYPE,
    LEDGER_FIELDS,
    SPAN_EVENTS,
    SPAWN_TYPE,
    Event,
    HookRegistry,
    ToolLoopResult,
    agent_llm_config,
    agent_name_of,
    child_index_of,
    children_of,
    context_of_registry,
    events,
    forward_target,
    handler_map,
    is_completed,
    node_id_of,
    offered_tools,
    owning_agent_path,
    parent_of,
    provider_class_of,
    registry_context,
    registry_handlers,
    run_id_of,
    services_of,
    spawned_tool_uses,
    tool_call_of,
)
from .messages import MESSAGES
from .owner import Owner
from .registry_view import PLUGIN_HANDLERS, is_plugin_handler, is_streaming, owner_on, takes_over
from .step_scope import IN_HOOKS, EmitFrame, StepScope

logger = logging.getLogger("flowra_otel")

_TRACED = frozenset(SPAN_EVENTS)
DELTA_EVENT_TYPES = frozenset(DELTA_EVENTS)
INTERESTING_EVENTS = _TRACED | DELTA_EVENT_TYPES
"""What the emit patch hands to the book; every other event goes straight to flowra."""

type Emit = Callable[[Any, Any], Awaitable[Any]]

_MAX_SCOPES = 256
"""Engine scopes whose OtelHooks ownership one run remembers (beyond that, it is read per step)."""


def runs_handlers_itself(registry: Any) -> bool:
    """Whether ``SpanBook.emit`` runs the handler loop of ``registry`` itself (with the ledger
    watching each handler): flowra's ``HookRegistry`` and every subclass of it, whose handlers
    and context live in ``HookRegistry``'s own slots, whatever the subclass overrides."""
    return isinstance(registry, HookRegistry)


class SpanBook:
    """All open spans of one ``AgentRuntime.run``/``resume`` call."""

    __slots__ = (
        "agents",
        "caller_context",
        "closed",
        "content",
        "interrupted",
        "owners",
        "reopened",
        "restored",
        "resuming",
        "run",
    )

    def __init__(
        self,
        caller_context: Context,
        *,
        link_store: LinkStore | None = None,
        resumed: Mapping[str, Any] | None = None,
        content: bool = True,
        resuming: bool = False,
    ) -> None:
        self.caller_context = caller_context
        # False: the run was started by a hook (``IN_HOOKS``), whose value it may be given raw: no content.
        self.content = content
        self.agents: dict[int, AgentInvocation] = {}
        self.owners: dict[int, tuple[Any, bool]] = {}  # id(engine scope) -> (scope, has an OtelHooks)
        self.run = RunState(link_store=link_store, resumed=resumed)
        self.closed = False
        self.interrupted = False  # a step raised flowra's interrupt (0.0.7 then ends the whole run)
        # ``resume()``: the run's tree, restored by flowra, is read at its first step (``reopen``).
        self.resuming = resuming
        self.restored: dict[int, Any] = {}  # id(node) -> node, for every node the resume restored
        self.reopened: set[AgentInvocation] = set()  # agents whose tool calls ``reopen`` reopened

    # ------------------------------------------------------------------ emit (patched)
    async def emit(self, step: StepScope, original: Emit, registry: Any, data: Any) -> Any:
        """flowra's ``emit``, run here, and for the outermost emit of a traced event, finished after.

        An event the plugin's own handler alone sees on a plain registry takes the emit patch's
        faster path (a coroutine that calls ``finish_event`` when awaited); every other traced
        event comes here. One coroutine per event: for a plain ``HookRegistry`` the handler loop is
        flowra's own (same ``Event`` envelope, same live handler list, same order, same awaiting;
        identical in 0.0.3 - 0.0.8), run here so that an ``OtelHooks`` handler is a claim made in
        place (no call, no context lookup), and the redaction ledger sees each other handler's
        change. The same for a registry subclass (``runs_handlers_itself``): this is flowra's own
        ``emit`` body, reached through the subclass (an overridden ``emit`` ran around it), reading
        the handler list and context flowra keeps in ``HookRegistry``'s own slots.
        """
        cls = type(data)
        frames = step.frames
        outer = not frames or type(frames[-1].data) is not cls
        if outer:
            frame = EmitFrame(data, registry)
            if cls is events.AfterLLMCallEvent and step.token is not None:
                step.detach()  # the provider call returned: its chat span is no longer current
            field = LEDGER_FIELDS.get(cls)
            if field is not None:
                frame.tracker = FieldTracker(field, getattr(data, field, None))
            frames.append(frame)
        else:  # forwarded by propagate_to: the outermost emit owns the event
            frame = frames[-1]
        try:
            result = await self._run_handlers(frame, original, registry, data)
        except BaseException as exc:
            if outer:
                frames.pop()
                if frame.owner is not None:
                    self._finish_frame(step, frame, exc)
            raise
        if not outer:
            return result
        frames.pop()
        if frame.owner is not None:
            frame.data = result  # a handler may have replaced the event object itself
            self._finish_frame(step, frame, None)
            if self.run.persist_pending:
                await self.run.persist()
        return result

    @staticmethod
    async def _run_handlers(frame: EmitFrame, original: Emit, registry: Any, data: Any) -> Any:
        """The handlers of one emit, each watched by the ledger, with ``IN_HOOKS`` set while
        they run (a model call or an agent run a handler makes records no content); returns the
        event as they left it."""
        in_hooks = IN_HOOKS.set(True)
        try:
            if not (type(registry) is HookRegistry or runs_handlers_itself(registry)):
                return await original(registry, data)
            event = Event(data=data, context=context_of_registry(registry))
            tracker = frame.tracker
            for handler in handler_map(registry).get(type(data)) or ():
                if getattr(handler, "__func__", None) in PLUGIN_HANDLERS:
                    # The first OtelHooks to see an event traces it; the app's own takes over
                    # from the zero-code one (a child registry carries both).
                    if takes_over(frame.owner, handler.__self__):
                        frame.owner = handler.__self__
                        frame.hook_context = event.context
                    continue
                if tracker is not None:
                    guarded(tracker.start)
                result = handler(event)
                if inspect.isawaitable(result):
                    await result
                if tracker is not None:
                    tracker.after(getattr(event.data, tracker.field, None), handler)
            return event.data
        finally:
            IN_HOOKS.reset(in_hooks)

    def chunk(self, node: Any) -> None:
        agent = self.agents.get(id(node))
        if agent is not None and agent.chat is not None:
            agent.chat.chunk()

    def claim(self, owner: Owner, step: StepScope, data: Any, hook_context: Any) -> None:
        """Called by an ``OtelHooks`` handler (a registry subclass's own emit called it): the
        first one to see an event traces it (the app's own before the zero-code one), once every
        handler has run."""
        frames = step.frames
        if frames and takes_over(frames[-1].owner, owner) and type(frames[-1].data) is type(data):
            frames[-1].owner = owner
            frames[-1].hook_context = hook_context

    # ------------------------------------------------------------------ events
    def _finish_frame(self, step: StepScope, frame: EmitFrame, exc: BaseException | None) -> None:
        owner = frame.owner
        assert owner is not None
        self.finish_event(
            step, frame.data, owner, frame.registry, frame.start_ns, frame.tracker, frame.hook_context, exc
        )

    def finish_event(
        self,
        step: StepScope,
        data: Any,
        owner: Owner,
        registry: Any,
        start_ns: int,
        tracker: FieldTracker | None,
        hook_context: Any,
        exc: BaseException | None,
    ) -> None:
        """Every handler of a traced event has run (or one raised ``exc``): act on it, once. Never
        raises: an internal error is logged, the agent is unaffected.

        ``data``: the event as its handlers left it; ``owner``: the OtelHooks that traces it;
        ``registry``: where it was emitted; ``tracker``: what its hooks changed (the ledger);
        ``hook_context``: the HookContext the owner's handler saw. Plain arguments, not the
        ``EmitFrame``: an event only the plugin sees (the emit patch's fast path) needs no frame.

        Spans start here too, at the time the event was emitted (``start_ns``), with the values
        every hook left: the request that is sent, the tool call that runs.
        """
        try:
            cls = type(data)
            if cls is events.AfterLLMCallEvent and step.token is not None:
                step.detach()  # the provider call returned: its chat span is no longer current
            node = step.node
            if node is None or self.closed:
                return
            agent = self.agents.get(id(node))
            if agent is None:
                agent = self._start_agent(node, owner, registry, hook_context, start_ns)
            if cls is events.AfterLLMCallEvent:
                chat = agent.chat
                if chat is not None:
                    if exc is not None:
                        agent.end_chat(exc)
                    else:
                        chat.respond(data.response, start_ns)
            elif cls is events.BeforeLLMCallEvent:
                request = data.request
                run = self.run
                chat = ChatInvocation(
                    owner.telemetry,
                    agent.context,
                    request,
                    stamp=run.last_stamp if run.stamp_owner is owner.telemetry else run.stamp(owner.telemetry),
                    streaming=is_streaming(registry),
                    start_ns=start_ns,
                    content=agent.renderer,
                    agent_name=agent.name,
                    provider_class=agent.provider_class,
                    metric_extra=self.run.metric_extra,
                    shapes=agent.chat_shapes,
                )
                agent.chat_started(chat, request)
                if exc is not None:
                    agent.end_chat(exc)
                    return
                if chat.content is not None:  # content capture only
                    chat.record_request(request)
                    agent.record_system(request)
                step.attach(chat.provider_context())
            elif cls is events.BeforeToolCallEvent:
                self._tool_announced(agent, owner, data, tracker, start_ns, exc)
            elif cls is events.AfterToolCallEvent:
                called = agent.tool_for_result(data.tool_use)
                if called is not None and agent in self.reopened and not _same_call(called.tool_use, data.tool_use):
                    called = None  # a call that completed before the resume: it has no span here
                if called is not None:
                    if exc is not None:
                        called.fail(exc)
                    else:
                        called.stop(data.result, tracker.change if tracker is not None else None)
            elif cls is events.UserMessageEvent:
                if exc is None:
                    agent.record_input(data.messages)
            elif cls is events.MessageAcceptedEvent:
                self.run.accept_metadata(owner.telemetry, data.metadata or {}, self._open_spans())
        except Exception:
            internal_error(f"flowra_otel: internal error handling {type(data).__name__}; the agent is unaffected")

    def _tool_announced(
        self,
        agent: AgentInvocation,
        owner: Owner,
        data: Any,
        tracker: FieldTracker | None,
        start_ns: int,
        exc: BaseException | None,
    ) -> None:
        """BeforeToolCallEvent, after its hooks: the ``execute_tool`` span of the call that runs."""
        original = tracker.initial if tracker is not None else data.tool_use
        run = self.run
        tool = ToolInvocation(
            owner.telemetry,
            agent.context,
            original,
            data.tool_use,
            agent_name=agent.name,
            stamp=run.last_stamp if run.stamp_owner is owner.telemetry else run.stamp(owner.telemetry),
            start_ns=start_ns,
            content=agent.content,
            offered=agent.tool_descriptions,
            metric_extra=self.run.metric_extra,
            shapes=agent.tool_shapes,
        )
        agent.tool_announced(tool)
        if exc is not None:
            tool.fail(exc)
            return
        change = tracker.change if tracker is not None else None
        if change is not None or tool.content is not None:  # else nothing to record on the span yet
            tool.called(change)
        if agent.chat is not None:  # the response's block -> the tool use that runs
            agent.chat.tool_uses[id(original)] = data.tool_use

    def _open_spans(self) -> Iterator[Span]:
        for agent in self.agents.values():
            yield agent.span
            if agent.chat is not None:
                yield agent.chat.span
            for tool in agent.pending_tools + agent.tools:
                if tool is not None and not tool.ended:
                    yield tool.span

    def _start_agent(self, node: Any, owner: Owner, registry: Any, hook_context: Any, start_ns: int) -> AgentInvocation:
        path = utf8_safe(agent_name_of(node))
        # The emitting registry's own HookContext names the agent; a forwarded event reaches
        # the plugin re-wrapped with the *target's* context, so prefer the outermost registry's.
        emitting_context = registry_context(registry) or hook_context
        hook_path = getattr(emitting_context, "agent_path", None)
        name = utf8_safe(
            owner.options.resolve_agent_name(safe_str(hook_path) if hook_path else owning_agent_path(node))
        )
        attrs: attributes.Attributes = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.GEN_AI_AGENT_NAME: name,
            semconv.FLOWRA_AGENT_PATH: path,
            semconv.FLOWRA_NODE_ID: utf8_safe(node_id_of(node)),
            **self.run.stamp(owner.telemetry),
        }
        parent, via_tool = self._parent(node, include_self=False)
        if via_tool is not None and via_tool.description:  # an agent used as a tool: its description
            attrs[semconv.GEN_AI_AGENT_DESCRIPTION] = via_tool.description
        config = attributes.agent_config_attributes(agent_llm_config(node))
        if config:
            flowra_model = str(config[semconv.FLOWRA_LLM_MODEL])
            attrs[semconv.GEN_AI_REQUEST_MODEL] = owner.options.resolve_provider_and_model(flowra_model)[1]
            attrs.update(config)
        is_root = parent is self.caller_context
        links = self.run.root_links(attrs) if is_root else []
        if is_root:  # a durable run's trace link is kept under its own run's key
            bind = getattr(self.run.link_store, "bind", None)
            if bind is not None:
                bind(run_id_of(node))
        elif self.restored.get(id(node)) is node:  # running when the run stopped; resumed now
            attrs[semconv.FLOWRA_AGENT_RESUMED] = True
        agent = AgentInvocation(
            owner.telemetry,
            parent,
            node,
            provider_class=provider_class_of(node),
            name=name,
            attrs=attrs,
            links=links,
            start_ns=start_ns,
            content=owner.options.content_renderer(MESSAGES) if self.content else None,
            metric_extra=self.run.metric_extra,
        )
        if is_root:
            self.run.root_started(agent.span)
            if owner.telemetry.global_tracer:
                check_global_tracer_provider()
        self.agents[id(node)] = agent
        return agent

    # ------------------------------------------------------------------ engine (patched)
    def step_ended(self, step: StepScope, result: Any, exc: BaseException | None) -> None:
        """A node's step returned or raised: end what that outcome ends. Never raises."""
        try:
            node = step.node
            agent = self.agents.get(id(node))
            if agent is not None and agent.chat is not None and agent.chat.response is not None:
                # The call itself succeeded. Its output goes on the span only if every hook of this
                # step (BeforeToolCallEvent rewrites included) ran without raising.
                agent.end_chat(withhold_output=exc is not None)
            if exc is None:
                if agent is None:
                    return
                if isinstance(result, SPAWN_TYPE):
                    agent.tools_spawned(spawned_tool_uses(result) or [])
                    self.reopened.discard(agent)  # a new batch: every call of it has its span
                elif isinstance(result, CONTINUATION_TYPES):
                    return
                elif INTERRUPTED_TYPE is not None and isinstance(result, INTERRUPTED_TYPE):
                    self._end_agent(agent, None, reason=semconv.END_INTERRUPTED)
                elif isinstance(result, ToolLoopResult):
                    self._end_agent(agent, None, result=result)
                else:
                    self._end_agent(agent, None)
            elif isinstance(exc, asyncio.CancelledError):
                return  # the run itself is being cancelled or timed out; finish() knows which
            elif isinstance(exc, INTERRUPT_EXCEPTIONS):  # a requested stop, not a failure
                self.interrupted = True
                if agent is not None:
                    self._end_agent(agent, None, reason=semconv.END_INTERRUPTED)
            elif agent is not None:
                self._end_agent(agent, exc, reason=semconv.END_ERROR)
            else:
                tool = self._tool_of_node(node)
                if tool is not None:
                    tool.fail(exc)
        except Exception:
            internal_error("flowra_otel: internal error at the end of a step; the agent is unaffected")

    def _end_agent(
        self, agent: AgentInvocation, error: BaseException | None, *, reason: str | None = None, result: Any = None
    ) -> None:
        if self.agents.get(id(agent.node)) is agent:
            del self.agents[id(agent.node)]
        if error is None and reason is None:
            agent.stop(result)
        else:
            agent.fail(error, reason=reason)

    def finish(self, exc: BaseException | None) -> None:
        """The run is over: end every span still open, saying why, and forget everything."""
        self.closed = True
        error: BaseException | None
        if exc is None:
            reason, error = (semconv.END_INTERRUPTED if self.interrupted else semconv.END_RUN_ENDED), None
        elif isinstance(exc, TimeoutError):
            reason, error = semconv.END_TIMED_OUT, exc
        elif isinstance(exc, asyncio.CancelledError):
            reason, error = semconv.END_CANCELLED, exc
        else:
            reason, error = semconv.END_ERROR, exc
        # Deepest agents first, so children end no later than their parents.
        for agent in sorted(self.agents.values(), key=lambda a: -node_id_of(a.node).count(".")):
            guarded(agent.fail, error, reason=reason)
        self.agents.clear()
        self.owners.clear()

    # ------------------------------------------------------------------ durable resume
    def reopen(self, node: Any) -> None:
        """The first step of a resumed run (``resume()``; ``node``: any node of its first engine
        cycle, which the engine creates before any of them runs): flowra restored the whole tree
        of the run that stopped and runs its pending nodes again. Read once, outermost first:
        every tool loop still waiting for its tool calls gets its ``invoke_agent`` span again
        (the run's root linked to the trace it continues, any other ``flowra.agent.resumed``),
        and each of its tool calls still running its ``execute_tool`` span (its arguments as the
        hooks left them), so what runs below (a sub-agent the stop interrupted) nests under them:
        one continued trace, not a trace per resumed agent."""
        self.resuming = False
        root = node
        while parent_of(root) is not None:
            root = parent_of(root)
        pending = [root]
        while pending:
            current = pending.pop(0)  # breadth first: parents before their children
            self.restored[id(current)] = current
            children = children_of(current)
            pending.extend(children)
            if is_completed(current) or id(current) in self.agents:
                continue
            calls = [tool_call_of(child) for child in children]
            if all(call is None for call in calls):
                continue  # not a tool loop waiting for its tool calls
            registry = services_of(current).get(HookRegistry)
            owner = _tracing_owner(registry, 0) if registry is not None else None
            if owner is None:
                continue
            agent = self._start_agent(current, owner, registry, None, time.time_ns())
            self.reopened.add(agent)
            batch: list[ToolInvocation | None] = []
            for child, call in zip(children, calls, strict=True):
                if call is None or is_completed(child):
                    batch.append(None)  # its result is in: reported by the next AfterToolCallEvent
                    continue
                tool_use, spec = call
                tool = ToolInvocation(
                    owner.telemetry,
                    agent.context,
                    tool_use,
                    tool_use,
                    agent_name=agent.name,
                    stamp=self.run.stamp(owner.telemetry),
                    start_ns=time.time_ns(),
                    content=agent.content,
                    offered=offered_tools(current, spec),
                    metric_extra=self.run.metric_extra,
                    shapes=agent.tool_shapes,
                )
                agent.tool_calls += 1
                if tool.content is not None:
                    tool.called(None)
                batch.append(tool)
            agent.tools = batch

    # ------------------------------------------------------------------ direct provider calls
    def start_direct_chat(self, step: StepScope, request: Any) -> ChatInvocation | None:
        """A provider call made by a custom (non tool-loop) agent's step; None = not ours to trace.

        A call made while any event's handlers run (a hook asking a small model to scrub a value,
        ``IN_HOOKS``), or in a run a hook started, gets a span without content: the value it
        carries may be the very one being redacted.
        """
        node = step.node
        owner = owner_on(node)
        if owner is None or request is None:
            return None
        chat = ChatInvocation(
            owner.telemetry,
            self._parent_context(node, include_self=True),
            request,
            stamp=self.run.stamp(owner.telemetry),
            streaming=False,
            start_ns=time.time_ns(),
            content=(
                None if step.frames or IN_HOOKS.get() or not self.content else owner.options.content_renderer(MESSAGES)
            ),
        )
        chat.record_request(request)
        return chat

    @staticmethod
    def end_direct_chat(chat: ChatInvocation, response: Any, exc: BaseException | None) -> None:
        if exc is not None:
            chat.fail(exc, reason=semconv.END_ERROR)
            return
        chat.respond(response, time.time_ns())
        chat.stop()

    # ------------------------------------------------------------------ parenting
    def step_needs(self, node: Any) -> tuple[bool, Context | None]:
        """Whether a step of ``node`` needs a scope from its start, and for a tool call, the
        context with its ``execute_tool`` span current.

        A scope is needed by a tool loop this run traces (its step's end ends spans: the step
        patch checks ``agents`` itself before asking here), a tool call it traces (its tool runs
        under the span), and an agent whose registry carries an ``OtelHooks`` (its direct
        provider calls may run in tasks of their own). Any other step runs unwrapped and is
        adopted if an event in it turns out to be traced.
        """
        if self.agents:  # the tool call this node runs (``_tool_of_node``, inline: once per tool call)
            agent = self.agents.get(id(getattr(node, "parent", None)))
            tool = agent.tool_at(child_index_of(node)) if agent is not None else None
            if tool is not None:
                return True, context_with(tool.span, self.caller_context)
        # Whose registry carries an OtelHooks: read once per engine scope (a node keeps its scope,
        # and so its services, from step to step until it moves to another agent).
        scope = getattr(node, "scope", None)
        known = self.owners.get(id(scope))
        if known is not None and known[0] is scope:
            return known[1], None
        owned = owner_on(node) is not None
        if len(self.owners) < _MAX_SCOPES:
            self.owners[id(scope)] = (scope, owned)  # the scope itself is kept: its id stays its own
        return owned, None

    def context_for_node(self, node: Any) -> Context:
        """The context a nested run started from inside ``node``'s step should use as parent."""
        return self._parent_context(node, include_self=True)

    def _tool_of_node(self, node: Any) -> ToolInvocation | None:
        agent = self.agents.get(id(parent_of(node)))
        return agent.tool_at(child_index_of(node)) if agent is not None else None

    def _parent_context(self, node: Any, *, include_self: bool) -> Context:
        return self._parent(node, include_self=include_self)[0]

    def _parent(self, node: Any, *, include_self: bool) -> tuple[Context, ToolInvocation | None]:
        """The context to parent a span under, and the tool call it runs inside, if any."""
        prev = node
        cur = node if include_self else parent_of(node)
        while cur is not None:
            agent = self.agents.get(id(cur))
            if agent is not None:
                if prev is not cur:
                    tool = agent.tool_at(child_index_of(prev))
                    if tool is not None and not tool.ended:
                        return context_with(tool.span, self.caller_context), tool
                return context_with(agent.span, self.caller_context), None
            prev, cur = cur, parent_of(cur)
        return self.caller_context, None


def _same_call(a: Any, b: Any) -> bool:
    return a is b or getattr(a, "id", None) == getattr(b, "id", None)


def _tracing_owner(registry: Any, depth: int) -> Owner | None:
    """The ``OtelHooks`` that would trace a tool loop's AfterToolCallEvent on ``registry``: the
    one that claims it first in flowra's handler order (``propagate_to`` targets included), the
    app's own taking over from the zero-code one, as ``emit`` decides."""
    owner: Owner | None = None
    for handler in registry_handlers(registry, events.AfterToolCallEvent) or ():
        if is_plugin_handler(handler):
            found: Owner | None = handler.__self__
        else:
            target = forward_target(handler)
            found = _tracing_owner(target, depth + 1) if target is not None and depth < 8 else None
        if found is not None and takes_over(owner, found):
            owner = found
    return owner


hook_boundary(SpanBook._run_handlers)
"""An exception that left the handler loop was raised in one of the app's hooks: its span
withholds its message and stack trace (``core.errors``), which may hold the value the hook was
redacting."""

__all__ = ["DELTA_EVENT_TYPES", "INTERESTING_EVENTS", "SpanBook"]
