"""``RuntimeTracing``: one runtime's flowra 0.0.47+ spans and events, turned into core invocations.

What flowra reports, and what becomes of it:

* ``AgentSpan`` (opened when an agent starts on a node): an ``invoke_agent`` span, except for
  flowra's machinery (``ToolCallAgent``, ``TimeoutAgent``) and a ``ChatAgent``, whose
  ``TurnAgent`` child stands for it and takes its name. The run's root also starts the run
  (conversation id, stamps, the durable trace link).
* ``LLMCallSpan`` (one per attempt of flowra's ``LLMCaller``, fallbacks included): a ``chat`` span,
  made current (attached and detached in the step's own task) while the provider is called, so
  HTTP client spans made there nest under it. Its output waits until the ``BeforeToolCallEvent``
  hooks of its response ran: the tool calls it shows are the ones that run.
* ``ToolCallSpan`` (opened with the tool-call agent; on 0.0.47 - 0.0.67, where it opens inside that
  agent's step, the agent's own ``AgentSpan`` stands for it): an ``execute_tool`` span, current for the
  tool's steps and the parent of an agent used as a tool. It ends when the tool returned, but its
  result is written only once the value the model is given is known: the matching result in the
  agent's next LLM request, or in the turn's messages when the agent ends (every hook, global or
  agent-scoped, and flowra's own changes after them, have run by then).
* ``BeforeToolCallsEvent`` / ``BeforeToolCallEvent`` / ``AfterToolCallEvent`` / ``StartTurnEvent``
  (0.0.47: ``UserMessageEvent``, ``_flowra.INPUT_EVENT``) / ``MessageAcceptedEvent``, after every
  handler (``emit_patch``): the redaction ledger, calls answered by a hook (``prefilled``) or cut
  off by the token limit (spans of their own), the run's input, conversation id and metric
  attributes.

Never raises into flowra: ``emit`` does not guard event handlers, so every entry point here
catches and logs (without content) whatever goes wrong, and the agent's result is unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import Span, get_current_span

from ...core import attributes, semconv
from ...core.agent_invocation import AgentInvocation
from ...core.chat_invocation import ChatInvocation
from ...core.current_span import attach, context_with, detach, inherited_tokens
from ...core.field_tracker import FieldTracker
from ...core.mcp_invocation import note_tool_span
from ...core.provider_check import check_global_tracer_provider
from ...core.run_state import RunState
from ...core.safety import internal_error, safe_str, utf8_safe
from ...core.telemetry import Telemetry
from ...core.tool_invocation import ToolInvocation
from . import _flowra, run_timeout
from ._flowra import (
    CUT_OFF_STOP_REASONS,
    PLUMBING_AGENTS,
    AgentSpan,
    ChatAgent,
    FlowraInterruptedError,
    LLMCallSpan,
    ToolCallSpan,
    events,
)
from .durable import EphemeralLinkStore
from .frames import RESUMING, AgentScope, Frame, PendingResult, RunScope, enter, exit_, nearest_open, take
from .messages import MESSAGES
from .task_state import CURRENT_CHAT, IN_HOOKS

logger = logging.getLogger("flowra_otel")

type ExitHandler = Callable[[BaseException | None], None]


class RuntimeTracing:
    """The adapter's subscriptions on one ``AgentRuntime`` and the flowing frame they share."""

    __slots__ = ("__weakref__", "adapter", "frame", "runtime", "telemetry")  # weak: the instrumentor's set

    def __init__(self, adapter: Any, runtime: Any) -> None:
        self.adapter = adapter  # the RuntimeHooksAdapter (its _auto flag: zero-code or the app's own)
        self.telemetry: Telemetry = adapter.telemetry
        self.runtime = runtime
        self.frame: Any = runtime.flowing.create_var(default=None, on_enter=enter, on_exit=exit_)
        hooks = runtime.hooks
        # flowra's own ``on``/``on_span``: a ``HooksImpl`` subclass's override may wrap handlers,
        # and the plugin must find its own subscriptions (``tracings_of``, the emit marker).
        _flowra.subscribe_span(hooks, AgentSpan, self.on_agent_span)
        _flowra.subscribe_span(hooks, LLMCallSpan, self.on_llm_span)
        if not _flowra.TOOL_SPAN_IN_TOOL_STEP:  # else the tool-call agent's AgentSpan opens the tool
            _flowra.subscribe_span(hooks, ToolCallSpan, self.on_tool_span)
        for event_type in _flowra.CONTENT_EVENTS:
            _flowra.subscribe(hooks, event_type, self.on_event)

    def on_event(self, event: Any) -> None:
        """The marker of this tracing's subscription: the patched ``emit`` never calls it; it acts
        once every handler ran (``event_done``)."""

    # ------------------------------------------------------------------ agents
    def on_agent_span(self, event: Any) -> Any:
        """An agent starts on a node (again, after a resume): its ``invoke_agent`` span."""
        try:
            span = event.data
            if _flowra.TOOL_SPAN_IN_TOOL_STEP:
                tool_use = _flowra.tool_use_of(span)
                if tool_use is not None:  # the tool call's span opens with its agent, as from 0.0.68
                    return self._open_tool(tool_use, event.context.stack)
            current = self.frame.get()
            parent = nearest_open(current)
            if parent is not None and span.agent_info.source_type in PLUMBING_AGENTS and not span.is_resume:
                return None  # flowra's machinery inside a traced run (a tool call's agent): no span
            stack = event.context.stack
            depth = len(stack) - 1
            if depth == 0 and parent is not None:
                # A run's root while a traced node's frame flows in: a run started from inside that
                # node (a tool calling ``runtime.run`` on this same runtime). It is a run of its own,
                # with its own metadata, under the node's span (current in the step that started it).
                return self._start_run(span, stack, nested=True)
            run = parent.run if parent is not None else None
            if run is None and depth > 0:  # a resume reopens children outside their parents' values
                run = RESUMING.get()
                parent = nearest_open(run.resumed_parent(depth)) if run is not None else None
            elif run is None and current is not None:  # GotoAgent replaced the run's root agent
                run = current.run
                parent = _replaced_root(run)
                self.frame.set(parent)
            if run is None:
                return self._start_run(span, stack)
            return self._open_agent(span, stack, parent, run, depth)
        except Exception:
            internal_error("flowra_otel: internal error opening an agent's span; the agent is unaffected")
            return None

    def _start_run(self, span: Any, stack: Any, *, nested: bool = False) -> Any:
        """The root of a run: the run's state first (a resumed run's trace link is read from
        flowra's session storage, hence a coroutine then), then its agent. ``nested``: started
        inside a traced node's step (its flowing frame is replaced in the step's task)."""
        storage = _flowra.link_storage(self.runtime)
        content = not IN_HOOKS.get()
        if storage is None:
            run = RunScope(RunState(), content=content)
            if nested:
                with inherited_tokens():
                    return self._open_root(span, stack, run)
            return self._open_root(span, stack, run)
        return self._open_durable_root(span, stack, storage, content, nested)

    async def _open_durable_root(self, span: Any, stack: Any, storage: Any, content: bool, nested: bool) -> Any:
        store: EphemeralLinkStore | None = None
        resumed = None
        try:
            node_id = await _flowra.run_node_id(self.runtime, storage, span.is_resume)
            store = EphemeralLinkStore(storage, node_id) if node_id is not None else None
            resumed = await store.load() if store is not None and span.is_resume else None
        except Exception:
            internal_error("flowra_otel: could not read the trace link of a durable run")
        run = RunScope(RunState(link_store=store, resumed=resumed), content=content)
        if nested:
            with inherited_tokens():
                on_exit = self._open_root(span, stack, run)
        else:
            on_exit = self._open_root(span, stack, run)
        await self.persist_run(run)
        return on_exit

    def _open_root(self, span: Any, stack: Any, run: RunScope) -> Any:
        RESUMING.set(run if span.is_resume else None)
        run.caller = otel_context.get_current()
        return self._open_agent(span, stack, None, run, 0)

    def _open_agent(self, span: Any, stack: Any, parent: Frame | None, run: RunScope, depth: int) -> Any:
        info = span.agent_info
        source = info.source_type
        if source in PLUMBING_AGENTS or _is_chat(source):
            if parent is None:  # a run whose root flowra handles itself: the run still needs a frame
                parent = Frame(None, run)
                self.frame.set(parent)
            if span.is_resume:
                run.resumed_at(depth, parent)
            return None
        agent = self._agent_invocation(span, stack, parent, run)
        frame = Frame(agent.context, run, AgentScope(agent, run), parent=parent)
        self.frame.set(frame)
        if span.is_resume:
            run.resumed_at(depth, frame)
        return _AgentExit(self, frame, span)

    def _agent_invocation(self, span: Any, stack: Any, parent: Frame | None, run: RunScope) -> AgentInvocation:
        info = span.agent_info
        telemetry = self.telemetry
        path = utf8_safe(safe_str(info.path))
        # A ChatAgent's TurnAgent child speaks for the chat: it takes the chat's name.
        named = stack[-2].agent.path if len(stack) > 1 and _is_chat(stack[-2].agent.source_type) else info.path
        name = utf8_safe(telemetry.options.resolve_agent_name(safe_str(named)))
        attrs: attributes.Attributes = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.GEN_AI_AGENT_NAME: name,
            semconv.FLOWRA_AGENT_PATH: path,
            **run.state.stamp(telemetry),
        }
        via_tool = parent.tool if parent is not None else None
        if via_tool is not None and via_tool.description:  # an agent used as a tool: its description
            attrs[semconv.GEN_AI_AGENT_DESCRIPTION] = via_tool.description
        first = run.state.root_span is None  # the run's topmost agent: the trace's root span
        links = run.state.root_links(attrs) if first else []
        if span.is_resume and not first:
            attrs[semconv.FLOWRA_AGENT_RESUMED] = True
        context = parent.context if parent is not None else None
        agent = AgentInvocation(
            telemetry,
            context if context is not None else otel_context.get_current(),
            span,
            name=name,
            attrs=attrs,
            links=links,
            start_ns=time.time_ns(),
            content=telemetry.options.content_renderer(MESSAGES) if run.content else None,
            metric_extra=run.state.metric_extra,
            tool_loop=_flowra.is_tool_loop(info.source_type),
        )
        if first:
            run.state.root_started(agent.span)
            if telemetry.global_tracer:
                check_global_tracer_provider()
        return agent

    def agent_ended(self, frame: Frame, span: Any, error: BaseException | None) -> None:
        frame.closed = True
        scope = frame.agent
        if scope is None:
            return
        agent = scope.invocation
        result = span.result
        messages = getattr(result, "messages", None) if error is None else None
        scope.settle(messages)
        if error is None:
            agent.end_chat(withhold_output=scope.withhold_output)
            agent.stop(result if _is_turn_result(result) else None)
            return
        reason, failure = _end_reason(error)
        agent.end_chat(failure, reason=reason)
        agent.fail(failure, reason=reason)

    # ------------------------------------------------------------------ LLM calls
    def on_llm_span(self, event: Any) -> ExitHandler | None:
        """One attempt at an LLM call: its ``chat`` span, current while the provider is called."""
        try:
            span = event.data
            frame = nearest_open(self.frame.get())
            scope = frame.agent if frame is not None else None
            start_ns = time.time_ns()
            request = span.request
            if scope is not None:
                agent = scope.invocation
                # the results this call gives the model (and the tools it offers)
                scope.settle(getattr(request, "messages", None), getattr(request, "tools", None))
                agent.end_chat(withhold_output=scope.withhold_output)  # the previous call's hooks all ran
                scope.withhold_output = False
                run = scope.run
                state = run.state
                telemetry = self.telemetry
                chat = ChatInvocation(
                    telemetry,
                    agent.context,
                    request,
                    # the run's stamp, read inline while it is this OtelHooks's (``RunState.stamp``)
                    stamp=state.last_stamp if state.stamp_owner is telemetry else state.stamp(telemetry),
                    streaming=_flowra.may_stream(self.runtime.hooks, event.context),
                    start_ns=start_ns,
                    content=agent.renderer,
                    agent_name=agent.name,
                    metric_extra=run.state.metric_extra,
                    shapes=agent.chat_shapes,
                )
                agent.chat_started(chat, request)
                if chat.content is not None:
                    chat.record_request(request)
                    agent.record_system(request)
            else:  # a call outside a traced agent (a tool that calls a model): a span of its own
                parent = frame.context if frame is not None and frame.context is not None else None
                stamp = (
                    frame.run.state.stamp(self.telemetry)
                    if frame is not None
                    else dict(self.telemetry.options.attributes)
                )
                chat = ChatInvocation(
                    self.telemetry,
                    parent if parent is not None else otel_context.get_current(),
                    request,
                    stamp=stamp,
                    streaming=_flowra.may_stream(self.runtime.hooks, event.context),
                    start_ns=start_ns,
                    content=None,
                )
            token = attach(chat.provider_context())  # the span, and util-genai's cooperation key
            chat_token = CURRENT_CHAT.set(chat)
            return _LLMExit(self, scope, chat, span, token, chat_token)
        except Exception:
            internal_error("flowra_otel: internal error opening an LLM call's span; the agent is unaffected")
            return None

    # ------------------------------------------------------------------ tool calls
    def on_tool_span(self, event: Any) -> ExitHandler | None:
        """A tool call starts (its tool-call agent opened): its ``execute_tool`` span."""
        try:
            return self._open_tool(event.data.tool_use, event.context.stack)
        except Exception:
            internal_error("flowra_otel: internal error opening a tool call's span; the agent is unaffected")
            return None

    def _open_tool(self, tool_use: Any, stack: Any) -> ExitHandler | None:
        """The ``execute_tool`` span of ``tool_use`` and its frame, opened while flowra opens the
        tool-call agent's ``AgentSpan`` (the ``ToolCallSpan`` handler, or that span's own on
        releases where the ``ToolCallSpan`` opens inside the agent's step)."""
        try:
            frame = nearest_open(self.frame.get())
            if frame is None:  # reopened by a resume, outside its parent's flowing value
                run = RESUMING.get()
                depth = len(stack) - 1
                frame = nearest_open(run.resumed_parent(depth)) if run is not None else None
            scope = frame.agent if frame is not None else None
            if frame is None or scope is None:
                return None
            agent = scope.invocation
            agent.end_chat(withhold_output=scope.withhold_output)  # every BeforeToolCallEvent ran
            call_id = safe_str(getattr(tool_use, "id", ""))
            # announced: by a BeforeToolCallEvent that a hook saw (none is noted when no hook did)
            entry = take(scope.announced, call_id, lambda e: e[2] is tool_use) if scope.announced else None
            original, change = (entry[0], entry[1]) if entry is not None else (tool_use, None)
            tool = self._tool(scope, original, tool_use, time.time_ns())
            if change is not None or tool.content is not None:
                tool.called(change)
            scope.running.setdefault(call_id, []).append(tool)
            child = Frame(context_with(tool.span, agent.context), scope.run, tool=tool, parent=frame)
            self.frame.set(child)
            if frame.run.resume_frames:
                frame.run.resumed_at(len(stack) - 1, child)
            return _ToolExit(scope, child, call_id)
        except Exception:
            internal_error("flowra_otel: internal error opening a tool call's span; the agent is unaffected")
            return None

    def _tool(
        self, scope: AgentScope, original: Any, tool_use: Any, start_ns: int, extra: attributes.Attributes | None = None
    ) -> ToolInvocation:
        agent = scope.invocation
        state = scope.run.state
        telemetry = self.telemetry
        tool = ToolInvocation(
            telemetry,
            agent.context,
            original,
            tool_use,
            agent_name=agent.name,
            stamp=state.last_stamp if state.stamp_owner is telemetry else state.stamp(telemetry),
            start_ns=start_ns,
            content=agent.content,
            # None before the agent's first request: a call a resume reopened (named at settle)
            offered=agent.tool_descriptions if agent.llm_calls else None,
            metric_extra=scope.run.state.metric_extra,
            shapes=agent.tool_shapes,
            extra=extra,
        )
        agent.tool_announced(tool)
        if telemetry.mcp is not None:
            note_tool_span(tool.span, telemetry.mcp)  # its MCP calls: ours
        return tool

    # ------------------------------------------------------------------ events, after every hook
    def event_done(self, event: Any, tracker: FieldTracker | None, start_ns: int, exc: BaseException | None) -> bool:
        """Every handler of a content event ran (or one raised ``exc``). Returns whether the run's
        trace link should be saved again. Never raises."""
        return self.data_done(event.data, tracker, exc)

    def data_done(self, data: Any, tracker: FieldTracker | None, exc: BaseException | None) -> bool:
        """``event_done`` for the event's data (the emit patch's path when no other handler ran)."""
        try:
            frame = nearest_open(self.frame.get())
            scope = frame.agent if frame is not None else None
            if frame is None:
                return False
            cls = type(data)
            if scope is not None:
                if cls is events.AfterToolCallEvent:
                    self._tool_answered(scope, data, tracker, exc)
                elif cls is events.BeforeToolCallEvent:
                    self._tool_announced(scope, data, tracker, exc)
                elif cls is _flowra.CALLS_EVENT:
                    self._calls_announced(scope, data, exc)
                elif cls is _flowra.INPUT_EVENT and exc is None:
                    scope.invocation.record_input(data.messages)
            if cls in _flowra.METADATA_EVENTS:
                state = frame.run.state
                state.accept_metadata(self.telemetry, data.metadata or {}, _open_spans(frame))
                return state.persist_pending
        except Exception:
            internal_error("flowra_otel: internal error after an event's hooks; the agent is unaffected")
        return False

    async def persist(self) -> None:
        frame = nearest_open(self.frame.get())
        if frame is not None:
            await self.persist_run(frame.run)

    @staticmethod
    async def persist_run(run: RunScope) -> None:
        if run.state.persist_pending:
            await run.state.persist()

    def _calls_announced(self, scope: AgentScope, data: Any, exc: BaseException | None) -> None:
        """``BeforeToolCallsEvent`` (0.0.92+), one model message's calls: note which a hook answered."""
        scope.calls_ns = time.time_ns()
        if exc is None:
            scope.prefilled = {safe_str(k) for k in (data.results or {})}

    def response_arrived(self, scope: AgentScope, response: Any, now: int) -> None:
        """A response that ends on a call it cut off (``max_tokens`` and the like): flowra answers
        that call with an error and never runs it; it gets its span here (releases that answer it)."""
        if response.stop_reason not in CUT_OFF_STOP_REASONS or not _flowra.CUT_OFF_CALLS_ANSWERED:
            return
        try:
            blocks = response.message.blocks or ()
        except ValueError:  # a response without an assistant message
            return
        cut_off = blocks[-1] if blocks else None
        if type(cut_off).__name__ != "ToolUseBlock":
            return
        scope.calls_ns = now
        tool = self._tool(scope, cut_off, cut_off, now, {semconv.FLOWRA_TOOL_CUT_OFF: True})
        if tool.content is not None:
            tool.called(None)  # the arguments as far as the model got (no hook sees this call)
        scope.awaiting.append(PendingResult(safe_str(getattr(cut_off, "id", "")), tool, None, None, now))

    def _tool_announced(
        self, scope: AgentScope, data: Any, tracker: FieldTracker | None, exc: BaseException | None
    ) -> None:
        """``BeforeToolCallEvent``: the call that runs, and what its hooks changed."""
        if exc is not None:
            scope.withhold_output = True  # the step fails: its chat's output is not what ran
            return
        original = tracker.initial if tracker is not None else data.tool_use
        # A hook may leave anything there (flowra then fails the step on the missing id).
        call_id = safe_str(getattr(data.tool_use, "id", ""))
        change = tracker.change if tracker is not None else None
        scope.announced.setdefault(call_id, []).append((original, change, data.tool_use))
        chat = scope.invocation.chat
        if chat is not None:  # the response's block -> the tool use that runs
            chat.tool_uses[id(original)] = data.tool_use

    def _tool_answered(
        self, scope: AgentScope, data: Any, tracker: FieldTracker | None, exc: BaseException | None
    ) -> None:
        """``AfterToolCallEvent``: the result every hook left; recorded once the model is given it."""
        scope.invocation.end_chat(withhold_output=scope.withhold_output)  # a batch answered by hooks alone
        # flowra goes on with its own call, whatever a hook left in the event's tool_use
        use = data.tool_use
        result = _flowra.tool_result_of(data.result)
        call_id = safe_str(use.id if hasattr(use, "id") else getattr(result, "tool_use_id", ""))
        tool = take(scope.running, call_id, lambda t: t.tool_use is use)  # the same object, unless copied
        now = time.time_ns()
        end_ns = scope.ended_tools.pop(tool, now) if tool is not None else now
        if tool is None:
            if not getattr(data, "prefilled", False) and call_id not in scope.prefilled:
                return
            tool = self._tool(
                scope, data.tool_use, data.tool_use, scope.calls_ns or now, {semconv.FLOWRA_TOOL_PREFILLED: True}
            )
            if tool.content is not None:
                tool.called(None)  # a hook answered it: the arguments are the model's, as no hook saw them
        if exc is not None:
            tool.fail(exc)
            return
        kind = getattr(data, "error_kind", None)
        change = tracker.change if tracker is not None else None
        error_kind = safe_str(getattr(kind, "value", kind)) if kind is not None else None
        scope.awaiting.append(PendingResult(call_id, tool, result, change, end_ns, error_kind))


class _AgentExit:
    """The exit callback of one agent's span (an object, not a closure: fewer cells to build)."""

    __slots__ = ("frame", "span", "tracing")

    def __init__(self, tracing: RuntimeTracing, frame: Frame, span: Any) -> None:
        self.tracing = tracing
        self.frame = frame
        self.span = span

    def __call__(self, error: BaseException | None = None) -> None:
        try:
            self.tracing.agent_ended(self.frame, self.span, error)
        except Exception:
            internal_error("flowra_otel: internal error ending an agent's span; the agent is unaffected")


class _LLMExit:
    __slots__ = ("chat", "chat_token", "scope", "span", "token", "tracing")

    def __init__(
        self,
        tracing: RuntimeTracing,
        scope: AgentScope | None,
        chat: ChatInvocation,
        span: Any,
        token: Any,
        chat_token: Any,
    ) -> None:
        self.tracing = tracing
        self.scope = scope
        self.chat = chat
        self.span = span
        self.token = token
        self.chat_token = chat_token

    def __call__(self, error: BaseException | None = None) -> None:
        now = time.time_ns()
        try:
            detach(self.token)  # the same task that attached it: the LLM call's step
            CURRENT_CHAT.reset(self.chat_token)
        except Exception:
            internal_error("flowra_otel: could not restore the context after an LLM call")
        try:
            chat = self.chat
            response = self.span.response
            if error is None and response is not None:
                chat.respond(response, now)
                if self.scope is None:
                    chat.stop()
                else:
                    self.tracing.response_arrived(self.scope, response, now)
                return
            reason, failure = _end_reason(error) if error is not None else (semconv.END_ERROR, None)
            if self.scope is not None and self.scope.invocation.chat is chat:
                self.scope.invocation.end_chat(failure, reason=reason, end_ns=now)
            else:
                chat.fail(failure, reason=reason, end_ns=now)
        except Exception:
            internal_error("flowra_otel: internal error ending an LLM call's span; the agent is unaffected")


class _ToolExit:
    __slots__ = ("call_id", "frame", "scope")

    def __init__(self, scope: AgentScope, frame: Frame, call_id: str) -> None:
        self.scope = scope
        self.frame = frame
        self.call_id = call_id

    def __call__(self, error: BaseException | None = None) -> None:
        try:
            self.frame.closed = True
            tool = self.frame.tool
            if tool is None:
                return
            if error is not None:  # the tool raised: the call failed (the run fails with it)
                running = self.scope.running.get(self.call_id, [])
                if tool in running:
                    running.remove(tool)
                reason, failure = _end_reason(error)
                tool.fail(failure, reason=reason)
                return
            self.scope.ended_tools[tool] = time.time_ns()  # the result is recorded later
        except Exception:
            internal_error("flowra_otel: internal error ending a tool call's span; the agent is unaffected")


def _replaced_root(run: RunScope) -> Frame:
    """The parent of the agent ``GotoAgent`` puts in place of the run's root (the run goes on:
    its state, conversation id and trace link): the run's caller, if it has a span; else the
    replaced root (it has ended, but no span of the run is left open, and the run stays one
    trace)."""
    context = run.caller
    root = run.state.root_span
    if root is not None and (context is None or not get_current_span(context).get_span_context().is_valid):
        context = context_with(root)
    return Frame(context, run)


def _end_reason(error: BaseException) -> tuple[str, BaseException | None]:
    """How a span ends when flowra closes it with ``error``: an interrupt is a requested stop,
    not a failure; a cancelled run says so, and the cancellation by which the runtime's timeout
    stopped the run is that timeout (``run_timeout``)."""
    if isinstance(error, FlowraInterruptedError):
        return semconv.END_INTERRUPTED, None
    error = run_timeout.as_timeout(error)
    if isinstance(error, asyncio.CancelledError):
        return semconv.END_CANCELLED, error
    if isinstance(error, TimeoutError):
        return semconv.END_TIMED_OUT, error
    return semconv.END_ERROR, error


def _is_chat(source: Any) -> bool:
    """A ``ChatAgent`` or a subclass of it (an app's chat that registers its own hooks, say): its
    ``TurnAgent`` child stands for it."""
    return source is ChatAgent or (isinstance(source, type) and issubclass(source, ChatAgent))


def _is_turn_result(result: Any) -> bool:
    return type(result).__name__ == "TurnResult" and hasattr(result, "status")


def _open_spans(frame: Frame) -> list[Span]:
    """The spans of this run still open above ``frame`` (a conversation id learnt late goes on them)."""
    spans: list[Span] = []
    current: Frame | None = frame
    while current is not None:
        if not current.closed:
            if current.agent is not None:
                agent = current.agent.invocation
                spans.append(agent.span)
                if agent.chat is not None and not agent.chat.ended:
                    spans.append(agent.chat.span)
            if current.tool is not None and not current.tool.ended:
                spans.append(current.tool.span)
        current = current.parent
    return spans


__all__ = ["RuntimeTracing"]
