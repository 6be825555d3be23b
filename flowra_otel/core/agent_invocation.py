"""``AgentInvocation``: one ``invoke_agent`` span, the life of one tool-loop node of flowra's engine.

Why an object per span: see ``chat_invocation``. The agent owns the spans it opened (its open
``chat`` and the ``execute_tool`` spans of its current tool calls) and ends them before itself,
so a parent never ends before its children, whatever ends the agent. Usage is summed from its
chat spans (or taken from flowra's own ``ToolLoopResult.usage``) and written under the
``gen_ai.usage.*`` keys the conventions give ``invoke_agent`` (backends that sum model spans count
each token once; ``openinference=True`` keeps Phoenix, which sums every span, from counting twice).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import AttributeValue

from . import attributes, semconv
from .attributes import TokenUsage
from .chat_invocation import ChatInvocation, ChatShape
from .content import ContentRenderer
from .current_span import context_with
from .errors import end_metric_error, record_end
from .safety import guarded, internal_error, utf8_safe
from .telemetry import Telemetry
from .tool_invocation import ToolInvocation

if TYPE_CHECKING:
    from opentelemetry.context import Context

logger = logging.getLogger("flowra_otel")


class AgentInvocation:
    """One running tool-loop agent: its span, its open chat, its current tool calls."""

    __slots__ = (
        "chat",
        "chat_shapes",
        "content",
        "context",
        "ended",
        "llm_calls",
        "metric_extra",
        "model_at_start",
        "models",
        "name",
        "node",
        "pending_tools",
        "provider_class",
        "renderer",
        "span",
        "start_ns",
        "system_recorded",
        "telemetry",
        "tool_calls",
        "tool_descriptions",
        "tool_loop",
        "tool_shapes",
        "tools",
        "usage",
    )

    def __init__(
        self,
        telemetry: Telemetry,
        parent: Context,
        node: Any,
        *,
        name: str,
        attrs: attributes.Attributes,
        links: list[Link],
        start_ns: int,
        content: ContentRenderer | None,
        metric_extra: Mapping[str, AttributeValue],
        provider_class: str | None = None,
        tool_loop: bool = True,
    ) -> None:
        self.telemetry = telemetry
        self.tool_loop = tool_loop  # a tool loop (flowra's ToolLoopAgent / TurnAgent) counts iterations
        self.provider_class = provider_class  # the LLMProvider class its calls go to, read once
        self.renderer = content  # the run's renderer when content goes anywhere (its chats use it)
        self.content = content if telemetry.options.capture_content else None  # content on spans
        self.metric_extra = metric_extra  # the run's extra metric attributes (filled in as known)
        self.model_at_start = semconv.GEN_AI_REQUEST_MODEL in attrs  # from the agent's own config
        self.system_recorded = False
        self.tool_descriptions: dict[str, str] = {}  # tools offered by the latest request: name -> description
        # Span names and start attributes of its chat and tool spans, built once per shape.
        self.chat_shapes: dict[Any, ChatShape] = {}
        self.tool_shapes: dict[Any, tuple[str, attributes.Attributes]] = {}
        self.node = node  # strong ref: keeps id(node) unique while the invocation lives
        self.name = name
        self.start_ns = start_ns
        self.chat: ChatInvocation | None = None
        self.pending_tools: list[ToolInvocation] = []  # announced this iteration, not spawned yet
        self.tools: list[ToolInvocation | None] = []  # the spawned batch, by child position
        self.models: set[str] = set()
        self.llm_calls = 0
        self.tool_calls = 0
        self.usage: TokenUsage | None = None
        self.ended = False
        if telemetry.options.agent_version is not None:
            version = telemetry.options.resolve_agent_version(str(attrs.get(semconv.FLOWRA_AGENT_PATH, name)))
            if version is not None:
                attrs = {**attrs, semconv.GEN_AI_AGENT_VERSION: utf8_safe(version)}
        self.span = telemetry.tracer.start_span(
            f"{semconv.OP_INVOKE_AGENT} {name}" if name else semconv.OP_INVOKE_AGENT,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            links=links,
            start_time=start_ns,
        )
        self.context = context_with(self.span)  # the parent of its chat and tool spans

    # ------------------------------------------------------------------ children
    def chat_started(self, chat: ChatInvocation, request: Any) -> None:
        if self.chat is not None:  # a previous call never saw its AfterLLMCallEvent
            self.end_chat(reason=semconv.END_ERROR)
        self.chat = chat
        self.models.add(chat.model)
        self.llm_calls += 1
        self.tool_descriptions = attributes.tool_descriptions(getattr(request, "tools", None))

    def record_input(self, messages: Any) -> None:
        """The run's input, as every UserMessageEvent hook left it (content capture only)."""
        content = self.content
        if content is None or not self.span.is_recording():
            return
        rendered = content.conversation(messages)
        self.span.set_attribute(semconv.GEN_AI_INPUT_MESSAGES, rendered)
        if self.telemetry.options.openinference:
            self.span.set_attributes({semconv.OI_INPUT_VALUE: rendered, semconv.OI_INPUT_MIME_TYPE: semconv.MIME_JSON})

    def record_system(self, request: Any) -> None:
        """The agent's system instructions, from its first LLM request (content capture only)."""
        content = self.content
        if content is None or self.system_recorded or not self.span.is_recording():
            return
        self.system_recorded = True
        system = content.request_system(request)
        if system is not None:
            self.span.set_attribute(semconv.GEN_AI_SYSTEM_INSTRUCTIONS, system)

    def end_chat(
        self,
        error: BaseException | None = None,
        *,
        reason: str | None = None,
        end_ns: int | None = None,
        withhold_output: bool = False,
    ) -> None:
        """End the open chat: normally (its response arrived) or with ``error``/``reason``."""
        chat, self.chat = self.chat, None
        if chat is None:
            return
        if error is None and reason is None and chat.response is not None:
            usage = chat.stop(withhold_output=withhold_output)
        else:
            usage = chat.fail(error, reason=reason, end_ns=end_ns)
        if usage is not None:
            if self.usage is None:
                self.usage = TokenUsage()
            self.usage.add(usage)

    def tool_announced(self, tool: ToolInvocation) -> None:
        self.pending_tools.append(tool)
        self.tool_calls += 1

    def tools_spawned(self, tool_uses: list[Any]) -> None:
        """The step returned ``Spawn``: child ``i`` runs ``tool_uses[i]``; bind the announced tool
        calls to those positions (flowra spawns them in the order they were announced)."""
        pending, self.pending_tools = self.pending_tools, []
        batch: list[ToolInvocation | None] = []  # by child position; None: not a tool call
        for tool_use in tool_uses:
            if tool_use is None or not pending:
                batch.append(None)
                continue
            # The announced call whose final tool use this is; else the next one in order.
            match = pending[0]
            for candidate in pending:
                if candidate.tool_use is tool_use:
                    match = candidate
                    break
            pending.remove(match)
            batch.append(match)
        for leftover in pending:  # announced but never spawned
            leftover.fail(reason=semconv.END_ERROR)
        self.tools = batch

    def tool_at(self, index: int | None) -> ToolInvocation | None:
        tools = self.tools
        return tools[index] if index is not None and 0 <= index < len(tools) else None

    def tool_for_result(self, tool_use: Any) -> ToolInvocation | None:
        """The spawned call an AfterToolCallEvent reports on: results arrive in call order; the
        same tool-use object, else the same id, else the next open call."""
        open_tools = [t for t in self.tools if t is not None and not t.ended]
        if not open_tools:
            return None
        for tool in open_tools:
            if tool.tool_use is tool_use:
                return tool
        wanted = getattr(tool_use, "id", None)
        for tool in open_tools:
            if getattr(tool.tool_use, "id", None) == wanted:
                return tool
        return open_tools[0]

    # ------------------------------------------------------------------ end
    def stop(self, result: Any = None) -> None:
        """The agent completed (``result``: its tool loop's result, if it returned one; read by the
        fields both flowra lines' results have: ``usage``, ``status``, ``stop_reason``,
        ``result_message``)."""
        self._end(None, None, result)

    def fail(self, error: BaseException | None = None, *, reason: str | None = None) -> None:
        """The agent raised, was interrupted, or its run ended around it."""
        self._end(error, reason, None)

    def _end(self, error: BaseException | None, reason: str | None, result: Any) -> None:
        if self.ended:
            return
        self.ended = True
        end_ns = time.time_ns()
        metric_error = end_metric_error(error, reason, classify=True)
        try:
            child_reason = reason or semconv.END_RUN_ENDED
            guarded(self.end_chat, error, reason=child_reason, end_ns=end_ns)
            for tool in self.pending_tools + self.tools:
                if tool is not None:
                    guarded(tool.fail, error, reason=child_reason, end_ns=end_ns)
            self._apply_finish(error, reason, result)
        except Exception:
            internal_error("flowra_otel: could not record the end of an invoke_agent span; it still ends")
        finally:
            self.span.end(end_time=end_ns)
        if self.telemetry.instruments.enabled:
            self._record_metrics(end_ns, metric_error)

    def _apply_finish(self, error: BaseException | None, reason: str | None, result: Any) -> None:
        span = self.span
        if not span.is_recording():
            return
        result_usage = TokenUsage.of(getattr(result, "usage", None)) if result is not None else None
        usage = result_usage or self.usage
        if usage is not None:  # totals only: no cache counts on the internal agent span (#469)
            span.set_attributes(
                attributes.usage_attributes(usage, cache=False, legacy=self.telemetry.options.semconv_compat)
            )
        if result is not None:
            span.set_attributes(
                attributes.loop_result_attributes(getattr(result, "status", None), getattr(result, "stop_reason", None))
            )
            self._record_output(result)
        if self.tool_loop:  # an agent that only orchestrates others has no iterations of its own
            span.set_attribute(semconv.FLOWRA_TOOL_LOOP_ITERATIONS, self.llm_calls)
        if not self.model_at_start and len(self.models) == 1:
            span.set_attribute(semconv.GEN_AI_REQUEST_MODEL, next(iter(self.models)))
        if self.telemetry.options.openinference:
            # OpenInference counts tokens on LLM spans only; an agent's own count is zero, so
            # Phoenix does not add the run's total to the sum of its LLM calls a second time.
            span.set_attributes(dict.fromkeys(semconv.OI_TOKEN_COUNT_KEYS, 0))
        content = self.content
        if error is not None or reason is not None:
            record_end(
                span, error=error, reason=reason, render=content.text if content is not None else None, classify=True
            )

    def _record_output(self, result: Any) -> None:
        content = self.content
        message = getattr(result, "result_message", None)
        if content is None or message is None:
            return
        finish = None  # #363: in gen_ai.response.finish_reasons; in the message for old readers only
        if self.telemetry.options.finish_reason_in_messages:
            finish = attributes.finish_reason(getattr(result, "stop_reason", None) or "end_turn")
        rendered = content.output_messages(message, finish)
        self.span.set_attribute(semconv.GEN_AI_OUTPUT_MESSAGES, rendered)
        if self.telemetry.options.openinference:
            self.span.set_attributes(
                {semconv.OI_OUTPUT_VALUE: rendered, semconv.OI_OUTPUT_MIME_TYPE: semconv.MIME_JSON}
            )

    def _record_metrics(self, end_ns: int, error: Mapping[str, AttributeValue] | None) -> None:
        """The agent's metric records, after its span ended. Never raises: a failed record is logged."""
        try:
            self.telemetry.instruments.record_agent(
                self.name,
                next(iter(self.models)) if len(self.models) == 1 else None,
                self.metric_extra,
                duration_s=(end_ns - self.start_ns) / 1e9,
                error=error,
                inference_calls=self.llm_calls,
                tool_calls=self.tool_calls,
            )
        except Exception:
            internal_error("flowra_otel: could not record the metrics of an invoke_agent span")
