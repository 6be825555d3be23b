"""``OtelHooks``: the flowra ``HookProvider`` users add with one line.

    hooks.add(OtelHooks())

It subscribes to the tool-loop events (never to the streaming delta events: a delta handler
would switch flowra to streaming) and hands each event to the run's ``SpanBook``. The book,
not this object, holds per-run state, so one ``OtelHooks`` can serve many registries,
runtimes and concurrent runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.metrics import Meter, MeterProvider, NoOpMeterProvider
from opentelemetry.trace import NoOpTracerProvider, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

from . import __version__, patches, registry_view, semconv
from ._flowra import DELTA_EVENTS, SPAN_EVENTS, TRACED_EVENTS, HookContext, HookRegistry, registry_handlers
from .content import DEFAULT_MAX_CONTENT_LENGTH, ContentPolicy, Redactor
from .instruments import Instruments
from .options import (
    NameOverride,
    TraceOptions,
    capture_content_from_env,
    metrics_enabled_from_env,
    validate_attributes,
    validate_bool_or_none,
    validate_conversation_id,
    validate_metric_metadata_keys,
    validate_override,
    validate_redactor,
)

logger = logging.getLogger("flowra_otel")


class OtelHooks:
    """Turn every flowra agent run on a registry into GenAI-semconv spans and metrics.

    Args:
        tracer_provider: where spans go; default the global tracer provider.
        meter_provider: where metrics go; default the global meter provider.
        capture_content: record messages, tool arguments and results. ``None`` (default)
            reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``; off unless opted in.
        agent_name: override ``gen_ai.agent.name``, by the owning agent's flowra path
            (a mapping, or a callable returning a name or None).
        provider_name: override ``gen_ai.provider.name``, by the model string given to flowra.
        redact: a ``str -> str`` function applied to every content value before it is set on
            a span (a second line of defence after your redaction hooks).
        redact_secrets: also replace common secret shapes (API keys, bearer tokens, e-mails,
            card numbers) with ``[REDACTED:<kind>]``; True for all, or an iterable of names
            from ``flowra_otel.content.BUILTIN_SECRET_PATTERNS``.
        max_content_length: the size budget of each content attribute, applied *inside* the JSON
            (long leaves cut with a visible marker, oldest messages dropped first), so every value
            stays valid JSON; None for no limit.
        redaction_hmac_key: when set (bytes or str), the redaction ledger adds an
            HMAC-SHA256 of each redacted original, so it can be proven later without storing it.
        conversation_id: ``gen_ai.conversation.id`` for every span of a run: a fixed string, or
            a function of the spec's ``metadata``; default: ``metadata["conversation_id"]``
            (or ``session_id`` / ``thread_id``) when the spec carries one.
        attributes: extra attributes stamped on every span, nested agents' spans included.
        metrics: record the GenAI metrics; False for spans only. ``None`` (default): on, unless
            ``OTEL_METRICS_EXPORTER=none``.
        metric_attributes_from_metadata: spec ``metadata`` keys (at most 8, low-cardinality,
            e.g. ``("tenant",)``) whose values are added to every metric record of a run.
        openinference: also write OpenInference's ``input.value``/``output.value`` on
            ``invoke_agent`` spans (when content capture is on, same redaction) and a zero own
            token count, so Phoenix and Arize show each run's input and output and count each
            token once.

    Raises:
        TypeError: an option of the wrong type (an async callable included), at construction.
        ValueError: an option of the right type but a bad value (a length below 1, an HMAC key
            under 16 bytes, an unknown secret pattern, bad or too many metric metadata keys).
    """

    __slots__ = ("_auto", "_disabled", "instruments", "options", "tracer")

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | None = None,
        agent_name: NameOverride | None = None,
        provider_name: NameOverride | None = None,
        redact: Redactor | None = None,
        redact_secrets: bool | Iterable[str] = False,
        max_content_length: int | None = DEFAULT_MAX_CONTENT_LENGTH,
        redaction_hmac_key: bytes | str | None = None,
        conversation_id: str | Callable[[Mapping[str, Any]], str | None] | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        metrics: bool | None = None,
        metric_attributes_from_metadata: Iterable[str] | None = None,
        openinference: bool = False,
    ) -> None:
        _check_instance("tracer_provider", tracer_provider, TracerProvider)
        _check_instance("meter_provider", meter_provider, MeterProvider)
        capture = validate_bool_or_none("capture_content", capture_content)
        redact = validate_redactor(redact)
        _check_redact_secrets(redact_secrets)
        _check_max_length(max_content_length)
        record_metrics = validate_bool_or_none("metrics", metrics)
        if record_metrics is None:
            record_metrics = metrics_enabled_from_env()
        if validate_bool_or_none("openinference", openinference) is None:
            msg = "openinference must be True or False, got None"
            raise TypeError(msg)
        self.options: Final[TraceOptions] = TraceOptions(
            capture_content=capture if capture is not None else capture_content_from_env(),
            agent_name=validate_override("agent_name", agent_name),
            provider_name=validate_override("provider_name", provider_name),
            content=ContentPolicy.build(redact=redact, redact_secrets=redact_secrets, max_length=max_content_length),
            redaction_hmac_key=_hmac_key(redaction_hmac_key),
            conversation_id=validate_conversation_id(conversation_id),
            attributes=validate_attributes(attributes),
            openinference=openinference,
            metric_metadata_keys=validate_metric_metadata_keys(metric_attributes_from_metadata),
        )
        self.tracer: Final[Tracer] = trace.get_tracer(
            semconv.INSTRUMENTATION_NAME, __version__, tracer_provider, schema_url=semconv.SCHEMA_URL
        )
        meter: Meter = otel_metrics.get_meter(
            semconv.INSTRUMENTATION_NAME,
            __version__,
            meter_provider if record_metrics else NoOpMeterProvider(),
            schema_url=semconv.SCHEMA_URL,
        )
        self.instruments: Final[Instruments] = Instruments(meter, enabled=record_metrics)
        # tracer, instruments and options are plain read-only (Final) attributes, not properties:
        # the invocation objects read them for every span and metric record.
        self._auto = False  # True only for the zero-code instrumentor's instance
        # Explicit no-op providers for both signals: nothing could ever be recorded, so subscribe
        # to nothing and patch nothing (tracing "off" then costs nothing). The global providers
        # are not judged here: a proxy may become real after this object is built.
        self._disabled = isinstance(tracer_provider, NoOpTracerProvider) and (
            not record_metrics or isinstance(meter_provider, NoOpMeterProvider)
        )
        if not self._disabled:
            patches.install()

    def register_hooks(self, registry: HookRegistry) -> None:
        """``HookProvider`` protocol: subscribe to the tool-loop events on ``registry``.

        An ``OtelHooks`` the app adds itself takes over from the one the zero-code
        instrumentor put on the registry, so the app's own options (content capture,
        redaction, providers) are the ones that apply.
        """
        if not self._auto:
            _drop_auto_handlers(registry)
        if self._disabled:
            return
        for event_type in SPAN_EVENTS:
            registry.on(event_type, self._on_event)

    @staticmethod
    def child_registry(
        parent: HookRegistry, *, agent_path: str | None = None, agent_type: type[Any] | None = None
    ) -> HookRegistry:
        """An isolated child registry for a sub-agent that still traces into ``parent``.

        Use it where a parent agent gives its children their own registry
        (``services.provide(HookRegistry, OtelHooks.child_registry(hooks, agent_path="planner"))``).
        It forwards the tool-loop events to ``parent`` (so the parent's ``OtelHooks`` and any
        redaction hooks there see them, once) and stamps ``HookContext(agent_path=...)``, which
        becomes the child's ``gen_ai.agent.name``. Streaming delta events are forwarded only if
        ``parent`` already has delta handlers: forwarding them otherwise would switch the child
        agent to streaming.
        """
        context = HookContext(agent_type=agent_type, agent_path=agent_path) if agent_path is not None else None
        child = HookRegistry(context=context)
        forwarded = list(TRACED_EVENTS) + [t for t in DELTA_EVENTS if parent.has_handlers(t)]
        child.propagate_to(parent, only=forwarded)
        return child

    def _on_event(self, event: Any) -> None:
        step = patches.current_step()
        if step is None:
            return
        try:
            step.book.claim(self, step, event.data, event.context)
        except Exception:
            logger.exception("flowra_otel: internal error handling %s; the agent is unaffected", type(event.data))

    def __repr__(self) -> str:
        return f"OtelHooks(capture_content={self.options.capture_content})"


registry_view.PLUGIN_HANDLERS.add(OtelHooks._on_event)


def _drop_auto_handlers(registry: HookRegistry) -> None:
    for event_type in TRACED_EVENTS:
        current = registry_handlers(registry, event_type)
        if current:
            current[:] = [
                h for h in current if not (isinstance(owner := getattr(h, "__self__", None), OtelHooks) and owner._auto)
            ]


def _check_instance(name: str, value: object, cls: type) -> None:
    if value is not None and not isinstance(value, cls):
        msg = f"{name} must be an opentelemetry {cls.__name__} or None, got {type(value).__name__}"
        raise TypeError(msg)


def _check_redact_secrets(value: object) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, str) or not isinstance(value, Iterable):
        msg = f"redact_secrets must be a bool or an iterable of pattern names, got {value!r}"
        raise TypeError(msg)


def _check_max_length(value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"max_content_length must be an int or None, got {value!r}"
        raise TypeError(msg)
    if value < 1:
        msg = f"max_content_length must be at least 1, got {value}"
        raise ValueError(msg)


def _hmac_key(value: object) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = value.encode("utf-8")
    if not isinstance(value, bytes):
        msg = f"redaction_hmac_key must be bytes, str or None, got {type(value).__name__}"
        raise TypeError(msg)
    if len(value) < 16:
        msg = "redaction_hmac_key must be at least 16 bytes long"
        raise ValueError(msg)
    return value
