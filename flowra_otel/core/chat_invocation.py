"""``ChatInvocation``: one ``chat`` span, the whole life of one LLM call.

Why an object per span (the shape of opentelemetry-util-genai's invocation types): every fact
about the call (request, response, first chunk, post-hook tool uses) is gathered on the object,
the span's start attributes are built before ``start_span`` (samplers see them), and the span is
ended by exactly one ``stop()`` or ``fail()``, whose ``span.end()`` runs whatever building the
end attributes or the metrics does. No input can leave a ``chat`` span open.

The span ends at the moment the response arrived, but its output is written only when the step
that made the call ends: the BeforeToolCallEvent hooks of that step may still rewrite the tool
calls the output message shows, and output is withheld if one of them raised.

Content goes where the content mode says: on the span, in the call's details event (a log record,
``details_event``), to storage by reference (``upload``), or any of these; it is rendered once.
While the provider is called, the span's context also carries opentelemetry-util-genai's
``InferenceData`` (``cooperation``), so a provider instrumentation built on util-genai records no
second model span and no second token count, and hands over what only it knows.
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

from . import attributes, cooperation, semconv
from .attributes import TokenUsage
from .content import ContentRenderer
from .current_span import context_with
from .details_event import emit_inference_details
from .errors import end_error_type, end_metric_error, record_end
from .instruments import ChatMetricAttributes
from .safety import internal_error, safe_str, utf8_safe
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
        "inner",
        "inputs",
        "last_chunk_ns",
        "metric_extra",
        "model",
        "provider",
        "response",
        "span",
        "start_attributes",
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
        # The run's renderer when content goes anywhere (span, event, storage); None: no content.
        self.content = content
        self.inputs: tuple[str, str | None, str | None] | None = None  # rendered (messages, system, tools)
        self.inner: Any = None  # util-genai's InferenceData, handed to an inner instrumentation
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
        self.start_attributes = shape.attributes
        # ``shape.attributes`` is shared by every call of this shape: the SDK copies it, never keeps it.
        self.span = telemetry.tracer.start_span(
            shape.name, context=parent, kind=SpanKind.CLIENT, attributes=shape.attributes, start_time=start_ns
        )

    def record_request(self, request: Any) -> None:
        """The request as every BeforeLLMCallEvent hook left it (content capture only): on the
        span, and kept for the call's event and upload when those are on."""
        content = self.content
        if content is None or not self.span.is_recording():
            return
        span = self.span
        system, messages = content.request_messages(request)
        definitions = content.tool_definitions(request.tools)
        telemetry = self.telemetry
        if telemetry.options.capture_content:
            span.set_attribute(semconv.GEN_AI_INPUT_MESSAGES, messages)
            if system is not None:
                span.set_attribute(semconv.GEN_AI_SYSTEM_INSTRUCTIONS, system)
            if definitions is not None:
                span.set_attribute(semconv.GEN_AI_TOOL_DEFINITIONS, definitions)
        if telemetry.event_logger is not None or telemetry.uploader is not None:
            self.inputs = (messages, system, definitions)

    def provider_context(self, parent: Context | None = None) -> Context:
        """The context to make current while the provider is called: ``parent`` (default: the
        current one) with this span, and util-genai's ``InferenceData`` when util-genai is
        importable, so an inner util-genai inference is folded into this span (``cooperation``)."""
        context, self.inner = cooperation.with_inference_data(context_with(self.span, parent))
        return context

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
            self._apply_finish(error, reason, usage, end_ns, withhold_output=withhold_output)
        except Exception:
            internal_error("flowra_otel: could not record the end of a chat span; it still ends")
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
                internal_error("flowra_otel: could not record the metrics of a chat span")
        return usage

    def _apply_finish(
        self,
        error: BaseException | None,
        reason: str | None,
        usage: TokenUsage | None,
        end_ns: int,
        *,
        withhold_output: bool,
    ) -> None:
        span = self.span
        if not span.is_recording():
            return
        response = self.response
        content = self.content
        options = self.telemetry.options
        on_spans = options.capture_content
        legacy = options.semconv_compat
        ended: attributes.Attributes = {}  # what the span gets at its end (the event repeats it)
        output: str | None = None
        if response is not None:
            ended = attributes.chat_response_attributes(response, usage, legacy=legacy)
            if self.inner is not None:  # what an inner util-genai instrumentation alone knew
                ended.update(cooperation.enrichment(self.inner, ended))
            span.set_attributes(ended)
            if content is not None and not withhold_output:
                # #363: the finish reason is in gen_ai.response.finish_reasons; in the message only for old readers
                finish = attributes.finish_reason(response.stop_reason) if options.finish_reason_in_messages else None
                output = content.output_messages(response.message, finish, self.tool_uses)
                if on_spans:
                    span.set_attribute(semconv.GEN_AI_OUTPUT_MESSAGES, output)
        if self.first_chunk_ns is not None:
            ttfc = (self.first_chunk_ns - self.start_ns) / 1e9
            ended[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = ttfc
            span.set_attribute(semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, ttfc)
        if error is not None or reason is not None:
            render = content.text if content is not None and on_spans else None
            record_end(span, error=error, reason=reason, render=render, classify=True)
            error_type = end_error_type(error, reason)
            if error_type is not None:
                ended[semconv.ERROR_TYPE] = error_type
        if content is not None:
            self._record_details(ended, output, end_ns)

    def _record_details(self, ended: attributes.Attributes, output: str | None, end_ns: int) -> None:
        """The call's content beyond the span: written to storage (references on the span), and
        its details event. The same rendered values the span has (or would have)."""
        telemetry = self.telemetry
        messages, system, definitions = self.inputs or (None, None, None)
        refs: dict[str, str] = {}
        uploader = telemetry.uploader
        if uploader is not None:
            refs = uploader.chat_refs(messages, output, system, definitions)
            self.span.set_attributes(refs)
        event_logger = telemetry.event_logger
        if event_logger is not None:
            emit_inference_details(
                event_logger,
                self.span,
                end_ns,
                {**self.start_attributes, **ended, **refs},
                {
                    semconv.GEN_AI_INPUT_MESSAGES: messages,
                    semconv.GEN_AI_OUTPUT_MESSAGES: output,
                    semconv.GEN_AI_SYSTEM_INSTRUCTIONS: system,
                    semconv.GEN_AI_TOOL_DEFINITIONS: definitions,
                },
            )

    def _metric_attributes(self) -> ChatMetricAttributes:
        return self.telemetry.instruments.chat_attributes(self.provider, self.model, self.agent_name, self.metric_extra)
