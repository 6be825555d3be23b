"""``ChatInvocation``: one ``chat`` span, the whole life of one LLM call.

Why an object per span (the shape of opentelemetry-util-genai's invocation types): every fact
about the call (request, response, first chunk, post-hook tool uses) is gathered on the object,
the span's start attributes are built before ``start_span`` (samplers see them), and the span is
ended by exactly one ``stop()`` or ``fail()``, whose ``span.end()`` runs whatever building the
end attributes or the metrics does. No input can leave a ``chat`` span open.

The span ends at the moment the response arrived, but its output is written only when the step
that made the call ends: the BeforeToolCallEvent hooks of that step may still rewrite the tool
calls the output message shows, and output is withheld if one of them raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from . import attributes, semconv
from .attributes import TokenUsage
from .content import ContentRenderer
from .errors import end_metric_error, record_end
from .instruments import ChatMetricAttributes
from .safety import safe_str, utf8_safe
from .telemetry import Telemetry

logger = logging.getLogger("flowra_otel")

_NO_EXTRA: Final[Mapping[str, AttributeValue]] = MappingProxyType({})


class ChatShape:
    """What every call of one agent with the same request settings starts its span with."""

    __slots__ = ("attributes", "model", "name", "provider")

    def __init__(self, provider: str, model: str, name: str, attrs: attributes.Attributes) -> None:
        self.provider = provider
        self.model = model
        self.name = name
        self.attributes = attrs  # never mutated once built: shared by the spans of this shape


_MAX_SHAPES: Final = 64


def _shape(
    telemetry: Telemetry,
    request: Any,
    stamp: attributes.Attributes,
    streaming: bool,
    agent_name: str | None,
    provider_class: str | None,
    shapes: dict[Any, ChatShape] | None,
) -> ChatShape:
    """The span name and start attributes of a call, built once per agent and request settings
    (a tool loop sends the same model and settings on every iteration)."""
    key: Any = None
    if shapes is not None:
        try:
            stop = request.stop_sequences
            key = (
                request.model,
                request.temperature,
                request.max_tokens,
                tuple(stop) if stop else None,
                request.json_schema is None,
                streaming,
                id(stamp),
            )
            shape = shapes.get(key)
            if shape is not None:
                return shape
        except Exception:  # an unhashable or odd value: built afresh, not cached
            key = None
    provider, model = telemetry.options.resolve_provider_and_model(safe_str(request.model), provider_class)
    provider, model = utf8_safe(provider), utf8_safe(model)
    attrs = attributes.chat_start_attributes(request, provider, model, streaming=streaming)
    if agent_name:
        attrs[semconv.GEN_AI_AGENT_NAME] = agent_name
    attrs.update(stamp)
    shape = ChatShape(provider, model, f"{semconv.OP_CHAT} {model}" if model else semconv.OP_CHAT, attrs)
    if key is not None and shapes is not None and len(shapes) < _MAX_SHAPES:
        shapes[key] = shape
    return shape


class ChatInvocation:
    """One LLM call: started before the provider is called, stopped when its response arrived."""

    __slots__ = (
        "agent_name",
        "content",
        "end_ns",
        "ended",
        "first_chunk_ns",
        "last_chunk_ns",
        "metric_extra",
        "model",
        "provider",
        "response",
        "span",
        "start_ns",
        "telemetry",
        "tool_uses",
    )

    def __init__(
        self,
        telemetry: Telemetry,
        parent: Context,
        request: Any,
        *,
        stamp: attributes.Attributes,
        streaming: bool,
        start_ns: int,
        content: ContentRenderer | None,
        agent_name: str | None = None,
        provider_class: str | None = None,
        metric_extra: Mapping[str, AttributeValue] = _NO_EXTRA,
        shapes: dict[Any, ChatShape] | None = None,
    ) -> None:
        self.telemetry = telemetry
        self.content = content  # None: no content is recorded on this span
        self.agent_name = agent_name
        self.metric_extra = metric_extra  # the run's extra metric attributes (filled in as known)
        self.start_ns = start_ns
        self.end_ns: int | None = None
        self.first_chunk_ns: int | None = None
        self.last_chunk_ns: int | None = None
        self.response: Any = None
        self.tool_uses: dict[int, Any] = {}  # id(original tool-use block) -> the tool use after its hooks
        self.ended = False
        shape = _shape(telemetry, request, stamp, streaming, agent_name, provider_class, shapes)
        self.provider, self.model = shape.provider, shape.model
        # ``shape.attributes`` is shared by every call of this shape: the SDK copies it, never keeps it.
        self.span = telemetry.tracer.start_span(
            shape.name, context=parent, kind=SpanKind.CLIENT, attributes=shape.attributes, start_time=start_ns
        )

    def record_request(self, request: Any) -> None:
        """The request as every BeforeLLMCallEvent hook left it (content capture only)."""
        content = self.content
        if content is None or not self.span.is_recording():
            return
        span = self.span
        system, messages = content.request_messages(request)
        span.set_attribute(semconv.GEN_AI_INPUT_MESSAGES, messages)
        if system is not None:
            span.set_attribute(semconv.GEN_AI_SYSTEM_INSTRUCTIONS, system)
        definitions = content.tool_definitions(request.tools)
        if definitions is not None:
            span.set_attribute(semconv.GEN_AI_TOOL_DEFINITIONS, definitions)

    def chunk(self) -> None:
        """A streaming chunk arrived: time to first chunk, then time per output chunk."""
        now = time.time_ns()
        last, self.last_chunk_ns = self.last_chunk_ns, now
        if last is None:
            self.first_chunk_ns = now
            return
        if not self.telemetry.instruments.enabled:
            return
        base, _, _ = self._metric_attributes()
        self.telemetry.instruments.time_per_output_chunk.record((now - last) / 1e9, base)

    def respond(self, response: Any, at_ns: int) -> None:
        """The provider returned (after every AfterLLMCallEvent hook); the span ends at ``at_ns``."""
        self.response = response
        self.end_ns = at_ns

    def stop(self, *, withhold_output: bool = False) -> TokenUsage | None:
        """The call succeeded: end the span when its response arrived. Returns its usage."""
        return self._end(None, None, self.end_ns or time.time_ns(), withhold_output=withhold_output)

    def fail(
        self, error: BaseException | None = None, *, reason: str | None = None, end_ns: int | None = None
    ) -> TokenUsage | None:
        """The call failed, or ends early because its agent does. A call whose response had
        already arrived completed: a later failure is not the call's."""
        if self.response is not None:
            return self._end(None, None, self.end_ns or end_ns or time.time_ns(), withhold_output=True)
        return self._end(error, reason, end_ns or time.time_ns(), withhold_output=True)

    def _end(
        self, error: BaseException | None, reason: str | None, end_ns: int, *, withhold_output: bool
    ) -> TokenUsage | None:
        if self.ended:
            return None
        self.ended = True
        usage: TokenUsage | None = None
        metric_error = None if error is None and reason is None else end_metric_error(error, reason, classify=True)
        try:
            usage = TokenUsage.of(getattr(self.response, "usage", None))
            self._apply_finish(error, reason, usage, withhold_output=withhold_output)
        except Exception:
            logger.exception("flowra_otel: could not record the end of a chat span; it still ends")
        finally:
            self.span.end(end_time=end_ns)
        instruments = self.telemetry.instruments
        if instruments.enabled:  # after the span ended; never raises (a failed record is logged)
            first_chunk = self.first_chunk_ns
            try:
                instruments.record_chat(
                    self._metric_attributes(),
                    duration_s=(end_ns - self.start_ns) / 1e9,
                    error=metric_error,
                    first_chunk_s=(first_chunk - self.start_ns) / 1e9 if first_chunk is not None else None,
                    input_tokens=usage.input if usage is not None else None,
                    output_tokens=usage.output if usage is not None else None,
                    cost_usd=usage.cost_usd if usage is not None else None,
                )
            except Exception:
                logger.exception("flowra_otel: could not record the metrics of a chat span")
        return usage

    def _apply_finish(
        self, error: BaseException | None, reason: str | None, usage: TokenUsage | None, *, withhold_output: bool
    ) -> None:
        span = self.span
        if not span.is_recording():
            return
        response = self.response
        content = self.content
        if response is not None:
            span.set_attributes(attributes.chat_response_attributes(response, usage))
            if content is not None and not withhold_output:
                finish = attributes.finish_reason(response.stop_reason)
                span.set_attribute(
                    semconv.GEN_AI_OUTPUT_MESSAGES, content.output_messages(response.message, finish, self.tool_uses)
                )
        if self.first_chunk_ns is not None:
            span.set_attribute(semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, (self.first_chunk_ns - self.start_ns) / 1e9)
        if error is not None or reason is not None:
            record_end(
                span, error=error, reason=reason, render=content.text if content is not None else None, classify=True
            )

    def _metric_attributes(self) -> ChatMetricAttributes:
        return self.telemetry.instruments.chat_attributes(self.provider, self.model, self.agent_name, self.metric_extra)
