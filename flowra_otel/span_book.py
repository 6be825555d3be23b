"""``SpanBook``: the spans of one flowra run, tied to flowra's execution tree.

Why a book per run, keyed by engine node: flowra runs every step of every node in a task of its
own, so "the current span" does not survive from one step to the next, and parallel tool calls
or concurrent runs would steal each other's parent if we relied on it. Instead the patched
engine tells us which ``ExecutionNode`` is running (``patches.py``), and this book keeps:

* one ``AgentRecord`` per running tool-loop node -> its ``invoke_agent`` span, plus the open
  ``chat`` span and the ``execute_tool`` spans of the tool calls it spawned;
* one ``EmitFrame`` per event object while its outermost ``emit`` runs, so values are recorded
  after *every* handler has run, wherever it was registered (``prepend=True``, a child
  registry forwarding with ``propagate_to``, the parent registry a child forwards to).

A new agent's parent is found by walking up the node tree: the nearest ancestor tool-loop node's
``execute_tool`` span when we came up through one of its tool-call nodes (agent-as-tool), else
that ancestor's ``invoke_agent`` span, else the span that was current when ``run()`` was called.
The book is dropped when the run returns, whatever the outcome: no per-run state survives.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import Token
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer

from . import attributes, content, durable, redaction, semconv
from ._flowra import (
    CONTINUATION_TYPES,
    DELTA_EVENTS,
    INTERRUPTED_TYPE,
    SPAN_EVENTS,
    Event,
    HookRegistry,
    ToolLoopResult,
    Usage,
    agent_name_of,
    events,
    node_id_of,
    parent_of,
    tool_use_of,
)
from .errors import record_error
from .instruments import Instruments
from .options import TraceOptions

logger = logging.getLogger("flowra_otel")

_TRACED = frozenset(SPAN_EVENTS)
INTERESTING_EVENTS = frozenset(SPAN_EVENTS + DELTA_EVENTS)
"""What the emit patch hands to the book; every other event goes straight to flowra."""
_LEDGER_FIELDS: dict[type[Any], str] = {events.BeforeToolCallEvent: "tool_use", events.AfterToolCallEvent: "result"}
"""Tool events whose payload field hooks may replace, and whose changes the ledger records."""
_DELTAS = frozenset(DELTA_EVENTS)


class Tracing(Protocol):
    """What a book needs from the ``OtelHooks`` that claimed an event."""

    @property
    def tracer(self) -> Tracer: ...
    @property
    def instruments(self) -> Instruments: ...
    @property
    def options(self) -> TraceOptions: ...


class EmitFrame:
    """One event object during its outermost ``emit``; ``owner`` is the first OtelHooks to see it."""

    __slots__ = ("change", "data", "hook_context", "last", "node", "owner", "registry", "start_ns", "tool_id")

    def __init__(self, data: Any, registry: Any, node: Any) -> None:
        self.data = data
        self.tool_id: str | None = None  # BeforeToolCallEvent: the id the span was opened under
        self.last: Any = None  # tool events: the field's value after the latest handler
        self.change: redaction.FieldChange | None = None
        self.registry = registry
        self.node = node
        self.start_ns = time.time_ns()
        self.owner: Tracing | None = None
        self.hook_context: Any = None


class ChatRecord:
    __slots__ = (
        "context_token",
        "end_ns",
        "final_tool_uses",
        "first_chunk_ns",
        "model",
        "owner",
        "provider",
        "response",
        "span",
        "start_ns",
    )

    def __init__(self, owner: Tracing, span: Span, start_ns: int, provider: str, model: str) -> None:
        self.owner = owner
        self.span = span
        self.start_ns = start_ns
        self.provider = provider
        self.model = model
        self.end_ns: int | None = None
        self.first_chunk_ns: int | None = None
        self.context_token: Token[Context] | None = None
        self.response: Any = None  # set by AfterLLMCallEvent; the span ends when the step does
        self.final_tool_uses: dict[str, Any] = {}  # original tool-use id -> tool use after hooks


class ToolRecord:
    __slots__ = ("name", "owner", "redacted_fields", "span", "start_ns", "tool_type")

    def __init__(self, owner: Tracing, span: Span, start_ns: int, name: str) -> None:
        self.owner = owner
        self.span = span
        self.start_ns = start_ns
        self.name = name
        self.tool_type = semconv.TOOL_TYPE_FUNCTION
        self.redacted_fields: list[str] = []


class AgentRecord:
    __slots__ = (
        "chat",
        "llm_calls",
        "models",
        "name",
        "node",
        "owner",
        "span",
        "span_context",
        "start_ns",
        "tool_calls",
        "tools",
        "usage",
    )

    def __init__(self, owner: Tracing, node: Any, span: Span, start_ns: int, name: str) -> None:
        self.owner = owner
        self.node = node  # strong ref: keeps id(node) unique while the record lives
        self.span = span
        self.span_context = trace.set_span_in_context(span)  # parent of its chat and tool spans
        self.start_ns = start_ns
        self.name = name
        self.chat: ChatRecord | None = None
        self.tools: dict[str, ToolRecord] = {}
        self.models: set[str] = set()
        self.llm_calls = 0
        self.tool_calls = 0
        self.usage: Usage | None = None


type Wrapped = Callable[..., Awaitable[Any]]


class SpanBook:
    """All open spans of one ``AgentRuntime.run``/``resume`` call."""

    __slots__ = (
        "agents",
        "caller_context",
        "closed",
        "conversation_id",
        "frames",
        "persist_pending",
        "resumed_from",
        "root_span",
        "storage",
    )

    def __init__(
        self, caller_context: Context, *, storage: Any = None, resumed: Mapping[str, Any] | None = None
    ) -> None:
        self.caller_context = caller_context
        self.agents: dict[int, AgentRecord] = {}
        self.frames: dict[int, EmitFrame] = {}
        self.closed = False
        self.storage = storage  # flowra SessionStorage of a durable run, where the trace link is kept
        self.persist_pending = False
        self.root_span: Span | None = None
        self.resumed_from = durable.parse_traceparent(resumed.get("traceparent")) if resumed else None
        self.conversation_id: str | None = (
            str(resumed["conversation_id"]) if resumed and resumed.get("conversation_id") else None
        )

    # ------------------------------------------------------------------ emit (patched)
    async def emit(self, wrapped: Wrapped, registry: Any, data: Any, node: Any, args: Any, kwargs: Any) -> Any:
        """Run flowra's ``emit`` and, for the outermost emit of a traced event, finish it after."""
        cls = type(data)
        if cls not in _TRACED:
            if cls in _DELTAS:
                self._guard(self._on_chunk, node)
            return await wrapped(*args, **kwargs)
        return await self._emit_traced(wrapped, registry, data, node, args, kwargs)

    async def _emit_traced(self, wrapped: Wrapped, registry: Any, data: Any, node: Any, args: Any, kwargs: Any) -> Any:
        cls = type(data)
        key = id(data)
        outer = self.frames.get(key)
        if outer is not None:  # forwarded by propagate_to: the outer emit owns it
            if cls in _LEDGER_FIELDS and type(registry) is HookRegistry:
                return await self._emit_tracked(registry, data, outer)
            return await wrapped(*args, **kwargs)
        frame = EmitFrame(data, registry, node)
        if cls is events.AfterLLMCallEvent:
            self._guard(self._detach_node_chat, node)
        tracked = cls in _LEDGER_FIELDS
        if tracked:
            frame.last = getattr(data, _LEDGER_FIELDS[cls])
        self.frames[key] = frame
        try:
            if tracked and type(registry) is HookRegistry:
                result = await self._emit_tracked(registry, data, frame)
            else:
                result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            del self.frames[key]
            if frame.owner is not None:
                self._guard(self._after_emit, frame, exc)
            raise
        del self.frames[key]
        if frame.owner is not None:
            try:
                self._after_emit(frame, None)
            except Exception:
                logger.exception("flowra_otel: internal error after %s; the agent is unaffected", cls.__name__)
        if self.persist_pending:
            await self._persist()
        return result

    async def _persist(self) -> None:
        """Keep this run's root span context (and conversation id) in flowra's own session
        state, so a ``resume()`` in another process can link back to this trace."""
        self.persist_pending = False
        try:
            if self.storage is not None and self.root_span is not None:
                await durable.save(self.storage, self.root_span, self.conversation_id)
        except Exception:
            logger.exception("flowra_otel: could not save the trace link in session storage")

    async def _emit_tracked(self, registry: Any, data: Any, frame: EmitFrame) -> Any:
        """``HookRegistry.emit``, handler by handler, noting which handler changed the tool field.

        Same semantics as flowra's emit in 0.0.3 - 0.0.8 (same ``Event``, same live handler
        list, same order, same awaiting), plus one comparison after each handler: that is how
        the ledger can name the redacting hook, even behind ``propagate_to`` forwarders (the
        forwarded emit updates ``frame.last`` first, so the forwarder itself is not blamed).
        """
        event = Event(data=data, context=getattr(registry, "_HookRegistry__context", None))
        handlers = getattr(registry, "_HookRegistry__handlers", {}).get(type(data))
        if handlers:
            field = _LEDGER_FIELDS[type(data)]
            for handler in handlers:
                result = handler(event)
                if inspect.isawaitable(result):
                    await result
                value = getattr(data, field)
                if value is not frame.last and value != frame.last:
                    self._guard(self._note_change, frame, field, value, handler)
        return event.data

    @staticmethod
    def _note_change(frame: EmitFrame, field: str, value: Any, handler: Any) -> None:
        if frame.change is None:
            ledger_field = redaction.FIELD_ARGUMENTS if field == "tool_use" else redaction.FIELD_RESULT
            frame.change = redaction.FieldChange(ledger_field, frame.last)
        frame.change.handlers.append(redaction.handler_name(handler))
        frame.last = value

    def claim(self, owner: Tracing, data: Any, hook_context: Any) -> None:
        """Called by an ``OtelHooks`` handler: the first one to see an event traces it."""
        frame = self.frames.get(id(data))
        if frame is None or frame.owner is not None or self.closed:
            return
        frame.owner = owner
        frame.hook_context = hook_context
        self._on_seen(frame)

    # ------------------------------------------------------------------ engine (patched)
    def step_ended(self, node: Any, result: Any, exc: BaseException | None) -> None:
        """A node's step returned or raised: end what that outcome ends."""
        rec = self.agents.get(id(node))
        if rec is not None:
            self._detach_node_chat(node)
            if rec.chat is not None and rec.chat.response is not None:
                # The call itself succeeded. Its output goes on the span only if every hook of
                # this step (BeforeToolCallEvent rewrites included) ran without raising.
                self._end_chat(rec, withhold_output=exc is not None)
        if isinstance(exc, asyncio.CancelledError):
            return  # the run itself is being cancelled or timed out; finish() knows which
        if exc is not None:
            if rec is not None:
                self._end_agent(rec, error=exc, reason=semconv.END_ERROR)
            else:
                self._fail_tool_of(node, exc)
            return
        if rec is None or isinstance(result, CONTINUATION_TYPES):
            return
        if INTERRUPTED_TYPE is not None and isinstance(result, INTERRUPTED_TYPE):
            self._end_agent(rec, reason=semconv.END_INTERRUPTED)
        elif isinstance(result, ToolLoopResult):
            self._end_agent(rec, result=result)
        else:
            self._end_agent(rec)

    def finish(self, exc: BaseException | None) -> None:
        """The run is over: end every span still open, saying why, and forget everything."""
        self.closed = True
        error: BaseException | None
        if exc is None:
            reason, error = semconv.END_RUN_ENDED, None
        elif isinstance(exc, TimeoutError):
            reason, error = semconv.END_TIMED_OUT, exc
        elif isinstance(exc, asyncio.CancelledError):
            reason, error = semconv.END_CANCELLED, exc
        else:
            reason, error = semconv.END_ERROR, exc
        # Deepest agents first, so children end no later than their parents.
        for rec in sorted(self.agents.values(), key=lambda r: -node_id_of(r.node).count(".")):
            self._end_agent(rec, error=error, reason=reason)
        self.agents.clear()
        self.frames.clear()

    def tool_context(self, node: Any) -> Context | None:
        """For a tool-call node's step: a context with its ``execute_tool`` span current."""
        tool_use = tool_use_of(node)
        if tool_use is None:
            return None
        rec = self.agents.get(id(parent_of(node)))
        tool = rec.tools.get(str(tool_use.id)) if rec is not None else None
        return trace.set_span_in_context(tool.span, self.caller_context) if tool is not None else None

    def context_for_node(self, node: Any) -> Context:
        """The context a nested run started from inside ``node``'s step should use as parent."""
        return self._parent_context(node, include_self=True)

    # ------------------------------------------------------------------ event handling
    def _on_seen(self, frame: EmitFrame) -> None:
        rec = self._agent_for(frame)
        if rec is None:
            return
        data = frame.data
        cls = type(data)
        if cls is events.BeforeLLMCallEvent:
            self._start_chat(rec, frame)
        elif cls is events.AfterLLMCallEvent:
            if rec.chat is not None:
                rec.chat.end_ns = frame.start_ns
        elif cls is events.BeforeToolCallEvent:
            self._start_tool(rec, frame)
        elif cls is events.MessageAcceptedEvent and self.conversation_id is None:
            cid = rec.owner.options.conversation_id_from(data.metadata or {})
            if cid:
                self._set_conversation_id(cid)

    def _set_conversation_id(self, cid: str) -> None:
        """Known now: stamp it on every span already open in this run, and on all later ones."""
        self.conversation_id = cid
        for rec in self.agents.values():
            spans = [rec.span] + [t.span for t in rec.tools.values()] + ([rec.chat.span] if rec.chat else [])
            for span in spans:
                span.set_attribute(semconv.GEN_AI_CONVERSATION_ID, cid)
        if self.storage is not None:
            self.persist_pending = True

    def _stamp(self, owner: Tracing) -> attributes.Attributes:
        """Attributes every span of the run carries: the user's, and the conversation id."""
        if self.conversation_id is None and isinstance(owner.options.conversation_id, str):
            self.conversation_id = owner.options.conversation_id
        if self.conversation_id is None:
            return owner.options.attributes  # type: ignore[return-value]
        return {**owner.options.attributes, semconv.GEN_AI_CONVERSATION_ID: self.conversation_id}

    def _after_emit(self, frame: EmitFrame, exc: BaseException | None) -> None:
        rec = self.agents.get(id(frame.node))
        if rec is None:
            return
        data = frame.data
        cls = type(data)
        if cls is events.BeforeLLMCallEvent:
            chat = rec.chat
            if chat is None:
                return
            if exc is not None:
                self._end_chat(rec, error=exc)
                return
            if chat.owner.options.capture_content and chat.span.is_recording():
                self._record_request_content(chat, data.request)
            self._attach_chat_context(chat)
        elif cls is events.AfterLLMCallEvent:
            if rec.chat is not None:
                if exc is not None:
                    self._end_chat(rec, error=exc)
                else:
                    rec.chat.response = data.response
        elif cls is events.BeforeToolCallEvent:
            self._after_before_tool(rec, frame, exc)
        elif cls is events.AfterToolCallEvent:
            self._after_after_tool(rec, frame, exc)

    @staticmethod
    def _record_request_content(chat: ChatRecord, request: Any) -> None:
        options = chat.owner.options
        system, messages = content.split_messages(request.messages)
        span = chat.span
        span.set_attribute(semconv.GEN_AI_INPUT_MESSAGES, options.render(messages))
        if system:
            span.set_attribute(semconv.GEN_AI_SYSTEM_INSTRUCTIONS, options.render(system))
        if request.tools:
            span.set_attribute(semconv.GEN_AI_TOOL_DEFINITIONS, options.render(content.tool_definitions(request.tools)))

    def _agent_for(self, frame: EmitFrame) -> AgentRecord | None:
        node = frame.node
        if node is None:
            logger.debug("flowra_otel: event %s emitted outside an engine step; not traced", type(frame.data).__name__)
            return None
        rec = self.agents.get(id(node))
        if rec is None:
            rec = self._start_agent(frame)
        return rec

    # ------------------------------------------------------------------ invoke_agent
    def _start_agent(self, frame: EmitFrame) -> AgentRecord:
        owner = frame.owner
        assert owner is not None
        node = frame.node
        path = agent_name_of(node)
        # The emitting registry's own HookContext names the agent; a forwarded event reaches
        # the plugin re-wrapped with the *target's* context, so prefer the outermost registry's.
        emitting_context = getattr(frame.registry, "_HookRegistry__context", None) or frame.hook_context
        hook_path = getattr(emitting_context, "agent_path", None)
        name = owner.options.resolve_agent_name(hook_path or _owning_agent_path(node))
        attrs: attributes.Attributes = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.GEN_AI_AGENT_NAME: name,
            semconv.FLOWRA_AGENT_PATH: path,
            semconv.FLOWRA_NODE_ID: node_id_of(node),
            **self._stamp(owner),
        }
        parent = self._parent_context(node, include_self=False)
        is_root = parent is self.caller_context
        links = []
        if is_root and self.resumed_from is not None:
            links.append(Link(self.resumed_from, {durable.LINK_TYPE: durable.LINK_RESUMED_FROM}))
            attrs[durable.RESUMED] = True
        span = owner.tracer.start_span(
            f"{semconv.OP_INVOKE_AGENT} {name}" if name else semconv.OP_INVOKE_AGENT,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            links=links,
            start_time=frame.start_ns,
        )
        if is_root and self.root_span is None:
            self.root_span = span
            self.persist_pending = self.storage is not None
        rec = AgentRecord(owner, node, span, frame.start_ns, name)
        self.agents[id(node)] = rec
        return rec

    def _end_agent(
        self,
        rec: AgentRecord,
        *,
        result: ToolLoopResult | None = None,
        error: BaseException | None = None,
        reason: str | None = None,
    ) -> None:
        if self.agents.get(id(rec.node)) is rec:
            del self.agents[id(rec.node)]
        end_ns = time.time_ns()
        if rec.chat is not None:
            self._end_chat(rec, error=error, reason=reason or semconv.END_RUN_ENDED, end_ns=end_ns)
        for tool_id in list(rec.tools):
            self._end_tool(rec, tool_id, error=error, reason=reason or semconv.END_RUN_ENDED, end_ns=end_ns)
        span = rec.span
        if span.is_recording():
            usage = result.usage if result is not None and result.usage is not None else rec.usage
            if usage is not None:
                span.set_attributes(attributes.agent_usage_attributes(usage))
            if result is not None:
                span.set_attributes(attributes.tool_loop_result_attributes(result))
            span.set_attribute(semconv.FLOWRA_TOOL_LOOP_ITERATIONS, rec.llm_calls)
            if len(rec.models) == 1:
                span.set_attribute(semconv.GEN_AI_REQUEST_MODEL, next(iter(rec.models)))
        etype = _record_end(span, error=error, reason=reason, render=rec.owner.options.renderer)
        span.end(end_time=end_ns)
        metric_attrs: attributes.Attributes = {semconv.GEN_AI_AGENT_NAME: rec.name}
        if len(rec.models) == 1:
            metric_attrs[semconv.GEN_AI_REQUEST_MODEL] = next(iter(rec.models))
        if etype is not None:
            metric_attrs[semconv.ERROR_TYPE] = etype
        inst = rec.owner.instruments
        inst.agent_duration.record((end_ns - rec.start_ns) / 1e9, metric_attrs)
        count_attrs: attributes.Attributes = {semconv.GEN_AI_AGENT_NAME: rec.name}
        inst.agent_inference_calls.record(rec.llm_calls, count_attrs)
        inst.agent_tool_calls.record(rec.tool_calls, count_attrs)

    # ------------------------------------------------------------------ chat
    def _start_chat(self, rec: AgentRecord, frame: EmitFrame) -> None:
        owner = frame.owner
        assert owner is not None
        if rec.chat is not None:  # a previous call never saw its AfterLLMCallEvent
            self._end_chat(rec, reason=semconv.END_ERROR)
        request = frame.data.request
        provider, model = owner.options.resolve_provider_and_model(str(request.model))
        streaming = _is_streaming(frame.registry)
        attrs = attributes.chat_start_attributes(request, provider, model, streaming=streaming)
        attrs.update(self._stamp(owner))
        span = owner.tracer.start_span(
            f"{semconv.OP_CHAT} {model}" if model else semconv.OP_CHAT,
            context=rec.span_context,
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=frame.start_ns,
        )
        rec.chat = ChatRecord(owner, span, frame.start_ns, provider, model)
        rec.models.add(model)
        rec.llm_calls += 1

    def _end_chat(
        self,
        rec: AgentRecord,
        *,
        error: BaseException | None = None,
        reason: str | None = None,
        end_ns: int | None = None,
        withhold_output: bool = False,
    ) -> None:
        """End the open chat span at the moment its response arrived (or now, if it never did)."""
        chat = rec.chat
        if chat is None:
            return
        rec.chat = None
        usage = self._close_chat(chat, error=error, reason=reason, end_ns=end_ns, withhold_output=withhold_output)
        if usage is not None:
            rec.usage = usage if rec.usage is None else rec.usage + usage

    def _close_chat(
        self,
        chat: ChatRecord,
        *,
        error: BaseException | None = None,
        reason: str | None = None,
        end_ns: int | None = None,
        withhold_output: bool = False,
    ) -> Any:
        """End a chat span, record its metrics; returns its usage (or None)."""
        self._detach_chat_context(chat)
        response = chat.response
        if response is not None:
            error, reason = None, None  # the call completed; a later failure is not the call's
        end = chat.end_ns if response is not None and chat.end_ns is not None else (end_ns or time.time_ns())
        span = chat.span
        owner = chat.owner
        usage = getattr(response, "usage", None) if response is not None else None
        if span.is_recording():
            if response is not None:
                span.set_attributes(attributes.chat_response_attributes(response))
                if owner.options.capture_content and not withhold_output:
                    span.set_attribute(
                        semconv.GEN_AI_OUTPUT_MESSAGES,
                        owner.options.render(
                            content.output_messages(response.message, response.stop_reason, chat.final_tool_uses)
                        ),
                    )
            if chat.first_chunk_ns is not None:
                span.set_attribute(
                    semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, (chat.first_chunk_ns - chat.start_ns) / 1e9
                )
        etype = _record_end(span, error=error, reason=reason, render=owner.options.renderer)
        span.end(end_time=end)
        inst = owner.instruments
        base, input_attrs, output_attrs = inst.chat_attributes(chat.provider, chat.model)
        duration_attrs = base if etype is None else {**base, semconv.ERROR_TYPE: etype}
        inst.operation_duration.record((end - chat.start_ns) / 1e9, duration_attrs)
        if chat.first_chunk_ns is not None:
            inst.time_to_first_chunk.record((chat.first_chunk_ns - chat.start_ns) / 1e9, base)
        if usage is not None:
            inst.token_usage.record(attributes.total_input_tokens(usage), input_attrs)
            inst.token_usage.record(int(usage.output_tokens or 0), output_attrs)
            if usage.cost_usd:
                inst.cost.add(float(usage.cost_usd), base)
        return usage

    # ------------------------------------------------------------------ direct provider calls
    def start_direct_chat(self, node: Any, request: Any) -> ChatRecord | None:
        """A provider call made by a custom (non tool-loop) agent's step; None = not ours to trace."""
        rec = self.agents.get(id(node))
        if rec is not None and rec.chat is not None:
            return None  # the tool loop's own call: already traced by its events
        owner = _owner_on(node)
        if owner is None or request is None:
            return None
        provider, model = owner.options.resolve_provider_and_model(str(request.model))
        attrs = attributes.chat_start_attributes(request, provider, model, streaming=False)
        attrs.update(self._stamp(owner))
        start = time.time_ns()
        span = owner.tracer.start_span(
            f"{semconv.OP_CHAT} {model}" if model else semconv.OP_CHAT,
            context=self._parent_context(node, include_self=True),
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=start,
        )
        chat = ChatRecord(owner, span, start, provider, model)
        if owner.options.capture_content and span.is_recording():
            self._record_request_content(chat, request)
        return chat

    def end_direct_chat(self, chat: ChatRecord, response: Any, exc: BaseException | None) -> None:
        chat.response = response
        chat.end_ns = time.time_ns()
        self._close_chat(chat, error=exc, reason=semconv.END_ERROR if exc is not None else None)

    def _on_chunk(self, node: Any) -> None:
        rec = self.agents.get(id(node))
        if rec is not None and rec.chat is not None and rec.chat.first_chunk_ns is None:
            rec.chat.first_chunk_ns = time.time_ns()

    def _attach_chat_context(self, chat: ChatRecord) -> None:
        """Make ``chat`` current for the provider call only (same task, detached right after).

        HTTP or LLM-SDK instrumentations then parent their spans under ``chat``. Attach and
        detach both happen inside the one step task that makes the call.
        """
        chat.context_token = otel_context.attach(trace.set_span_in_context(chat.span))

    @staticmethod
    def _detach_chat_context(chat: ChatRecord) -> None:
        if chat.context_token is not None:
            token, chat.context_token = chat.context_token, None
            otel_context.detach(token)

    def _detach_node_chat(self, node: Any) -> None:
        """The provider call of ``node``'s open chat has returned: it is no longer current."""
        rec = self.agents.get(id(node))
        if rec is not None and rec.chat is not None:
            self._detach_chat_context(rec.chat)

    # ------------------------------------------------------------------ execute_tool
    def _start_tool(self, rec: AgentRecord, frame: EmitFrame) -> None:
        owner = frame.owner
        assert owner is not None
        tool_use = frame.data.tool_use
        name = str(tool_use.name)
        attrs: attributes.Attributes = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: name,
            semconv.GEN_AI_TOOL_TYPE: semconv.TOOL_TYPE_FUNCTION,
            semconv.GEN_AI_TOOL_CALL_ID: str(tool_use.id),
            semconv.GEN_AI_AGENT_NAME: rec.name,
            **self._stamp(owner),
        }
        span = owner.tracer.start_span(
            f"{semconv.OP_EXECUTE_TOOL} {name}",
            context=rec.span_context,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=frame.start_ns,
        )
        old = rec.tools.pop(str(tool_use.id), None)
        if old is not None:  # a duplicate id while the first is still open: end the first
            rec.tools[str(tool_use.id)] = old
            self._end_tool(rec, str(tool_use.id), reason=semconv.END_ERROR)
        rec.tools[str(tool_use.id)] = ToolRecord(owner, span, frame.start_ns, name)
        frame.tool_id = str(tool_use.id)
        rec.tool_calls += 1

    def _after_before_tool(self, rec: AgentRecord, frame: EmitFrame, exc: BaseException | None) -> None:
        original_id = frame.tool_id
        if original_id is None or original_id not in rec.tools:
            return
        if exc is not None:
            self._end_tool(rec, original_id, error=exc)
            return
        final = frame.data.tool_use
        final_id = str(final.id)
        tool = rec.tools[original_id]
        if final_id != original_id:  # a hook replaced the tool use with another id
            del rec.tools[original_id]
            rec.tools[final_id] = tool
            if tool.span.is_recording():
                tool.span.set_attribute(semconv.GEN_AI_TOOL_CALL_ID, final_id)
        final_name = str(final.name)
        if final_name != tool.name:  # a hook redirected the call: name the tool that actually runs
            tool.name = final_name
            if tool.span.is_recording():
                tool.span.update_name(f"{semconv.OP_EXECUTE_TOOL} {final_name}")
                tool.span.set_attribute(semconv.GEN_AI_TOOL_NAME, final_name)
        if rec.chat is not None:
            rec.chat.final_tool_uses[original_id] = final
        self._record_ledger(tool, frame, final)
        options = tool.owner.options
        if options.capture_content and tool.span.is_recording():
            tool.span.set_attribute(semconv.GEN_AI_TOOL_CALL_ARGUMENTS, options.render(final.input))

    def _after_after_tool(self, rec: AgentRecord, frame: EmitFrame, exc: BaseException | None) -> None:
        tool_id = str(frame.data.tool_use.id)
        if tool_id not in rec.tools:
            return
        if exc is not None:
            self._end_tool(rec, tool_id, error=exc)
            return
        result = frame.data.result
        tool = rec.tools[tool_id]
        self._record_ledger(tool, frame, result)
        options = tool.owner.options
        if options.capture_content and not result.is_error and tool.span.is_recording():
            tool.span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, options.render(str(result.content)))
        self._end_tool(rec, tool_id, result=result)

    @staticmethod
    def _record_ledger(tool: ToolRecord, frame: EmitFrame, final: Any) -> None:
        change = frame.change
        if change is None or final == change.original:
            return
        options = tool.owner.options
        span = tool.span
        tool.redacted_fields.append(change.field)
        if span.is_recording():
            span.set_attribute(redaction.APPLIED, True)
            span.set_attribute(redaction.FIELDS, list(tool.redacted_fields))
            span.set_attributes(change.attributes(final, options.redaction_hmac_key))
        tool.owner.instruments.redactions.add(
            1, {semconv.GEN_AI_TOOL_NAME: tool.name, "flowra.redaction.field": change.field}
        )

    def _end_tool(
        self,
        rec: AgentRecord,
        tool_id: str,
        *,
        result: Any = None,
        error: BaseException | None = None,
        reason: str | None = None,
        end_ns: int | None = None,
    ) -> None:
        tool = rec.tools.pop(tool_id, None)
        if tool is None:
            return
        end = end_ns or time.time_ns()
        span = tool.span
        etype = _record_end(span, error=error, reason=reason, render=tool.owner.options.renderer)
        if etype is None and result is not None and getattr(result, "is_error", False):
            etype = semconv.ERROR_TYPE_TOOL
            if span.is_recording():
                span.set_attribute(semconv.ERROR_TYPE, etype)
                span.set_attribute(semconv.FLOWRA_TOOL_IS_ERROR, True)
                # The result text is content: it goes in the description only when capture is on.
                render = tool.owner.options.renderer
                desc = render(str(result.content)) if render is not None else None
                span.set_status(Status(StatusCode.ERROR, desc))
            tool.owner.instruments.tool_errors.add(1, {semconv.GEN_AI_TOOL_NAME: tool.name})
        span.end(end_time=end)
        attrs: attributes.Attributes = {
            semconv.GEN_AI_TOOL_NAME: tool.name,
            semconv.GEN_AI_TOOL_TYPE: tool.tool_type,
            semconv.GEN_AI_AGENT_NAME: rec.name,
        }
        if etype is not None:
            attrs[semconv.ERROR_TYPE] = etype
        tool.owner.instruments.tool_duration.record((end - tool.start_ns) / 1e9, attrs)

    def _fail_tool_of(self, node: Any, exc: BaseException) -> None:
        """A tool-call node's step raised: end that tool's span with the error."""
        tool_use = tool_use_of(node)
        parent = parent_of(node)
        rec = self.agents.get(id(parent)) if parent is not None else None
        if tool_use is not None and rec is not None:
            self._end_tool(rec, str(tool_use.id), error=exc)

    # ------------------------------------------------------------------ parenting
    def _parent_context(self, node: Any, *, include_self: bool) -> Context:
        prev = node
        cur = node if include_self else parent_of(node)
        while cur is not None:
            rec = self.agents.get(id(cur))
            if rec is not None:
                if prev is not cur:
                    tool_use = tool_use_of(prev)
                    tool = rec.tools.get(str(tool_use.id)) if tool_use is not None else None
                    if tool is not None:
                        return trace.set_span_in_context(tool.span, self.caller_context)
                return trace.set_span_in_context(rec.span, self.caller_context)
            prev, cur = cur, parent_of(cur)
        return self.caller_context

    @staticmethod
    def _guard(fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            logger.exception("flowra_otel: internal error in %s; the agent is unaffected", fn.__name__)


def _owner_on(node: Any) -> Tracing | None:
    """The ``OtelHooks`` on the ``HookRegistry`` a node's agent receives, if any.

    A custom agent emits no events, so no handler ever claims its provider calls; the
    plugin traces them only when the registry that agent is given carries an ``OtelHooks``.
    """
    scope = getattr(node, "scope", None)
    services = scope.get_services() if scope is not None else {}
    registry = services.get(HookRegistry)
    handlers_map = getattr(registry, "_HookRegistry__handlers", None) or {}
    for handler in handlers_map.get(events.BeforeLLMCallEvent, ()):
        owner = getattr(handler, "__self__", None)
        if owner is not None and hasattr(owner, "tracer") and hasattr(owner, "instruments"):
            return owner  # type: ignore[no-any-return]
    return None


def _owning_agent_path(node: Any) -> str:
    """The user's agent that owns a tool loop: ``chat`` for ``chat/tool_loop``.

    A tool loop registered as a sub-agent of its parent node's agent belongs to that agent
    (ChatAgent and user agents built the same way); a tool loop registered on its own is the
    agent.
    """
    path = agent_name_of(node)
    parent = parent_of(node)
    if parent is not None:
        parent_path = agent_name_of(parent)
        if parent_path and path.startswith(parent_path + "/"):
            return parent_path
    return path


def _is_streaming(registry: Any) -> bool:
    has = getattr(registry, "has_handlers", None)
    if has is None:
        return False
    return any(bool(has(cls)) for cls in DELTA_EVENTS)


def _record_end(
    span: Span, *, error: BaseException | None, reason: str | None, render: Callable[[str], str] | None
) -> str | None:
    """Say on ``span`` how it ended; returns the ``error.type`` for the duration metric, if any.

    ``reason`` (``flowra.end_reason``) is set whenever a span ends other than by its own
    event: interrupted (a requested stop, status left unset), cancelled or timed out (ERROR,
    with the exception), error (ERROR), or run_ended (the run returned around it).
    """
    if reason is not None and span.is_recording():
        span.set_attribute(semconv.FLOWRA_END_REASON, reason)
    if error is not None:
        return record_error(span, error, render=render)
    if reason == semconv.END_ERROR:
        if span.is_recording():
            span.set_attribute(semconv.ERROR_TYPE, semconv.ERROR_TYPE_OTHER)
            span.set_status(Status(StatusCode.ERROR))
        return semconv.ERROR_TYPE_OTHER
    return None


__all__ = ["AgentRecord", "ChatRecord", "EmitFrame", "SpanBook", "ToolRecord", "Tracing"]
