"""``OtelHooks``: the flowra ``HookProvider`` users add with one line.

    hooks.add(OtelHooks())

It subscribes to the tool-loop events (never to the streaming delta events: a delta handler
would switch flowra to streaming) and hands each event to the run's ``SpanBook``. The book,
not this object, holds per-run state, so one ``OtelHooks`` can serve many registries,
runtimes and concurrent runs.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import Meter, MeterProvider
from opentelemetry.trace import Tracer, TracerProvider

from . import patches, semconv
from ._flowra import TRACED_EVENTS, HookRegistry
from .instruments import Instruments
from .options import NameOverride, TraceOptions, capture_content_from_env, validate_bool_or_none, validate_override

logger = logging.getLogger("flowra_otel")

_VERSION = "0.1.0"


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

    Raises:
        TypeError: an option of the wrong type, at construction, never mid-run.
    """

    __slots__ = ("_instruments", "_options", "_tracer")

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | None = None,
        agent_name: NameOverride | None = None,
        provider_name: NameOverride | None = None,
    ) -> None:
        if tracer_provider is not None and not isinstance(tracer_provider, TracerProvider):
            msg = f"tracer_provider must be an opentelemetry TracerProvider, got {type(tracer_provider).__name__}"
            raise TypeError(msg)
        if meter_provider is not None and not isinstance(meter_provider, MeterProvider):
            msg = f"meter_provider must be an opentelemetry MeterProvider, got {type(meter_provider).__name__}"
            raise TypeError(msg)
        capture = validate_bool_or_none("capture_content", capture_content)
        self._options = TraceOptions(
            capture_content=capture if capture is not None else capture_content_from_env(),
            agent_name=validate_override("agent_name", agent_name),
            provider_name=validate_override("provider_name", provider_name),
        )
        self._tracer: Tracer = trace.get_tracer(
            semconv.INSTRUMENTATION_NAME, _VERSION, tracer_provider, schema_url=semconv.SCHEMA_URL
        )
        meter: Meter = metrics.get_meter(
            semconv.INSTRUMENTATION_NAME, _VERSION, meter_provider, schema_url=semconv.SCHEMA_URL
        )
        self._instruments = Instruments(meter)
        patches.install()

    @property
    def tracer(self) -> Tracer:
        return self._tracer

    @property
    def instruments(self) -> Instruments:
        return self._instruments

    @property
    def options(self) -> TraceOptions:
        return self._options

    def register_hooks(self, registry: HookRegistry) -> None:
        """``HookProvider`` protocol: subscribe to the tool-loop events on ``registry``."""
        for event_type in TRACED_EVENTS:
            registry.on(event_type, self._on_event)

    def _on_event(self, event: Any) -> None:
        book = patches.current_book()
        if book is None:
            return
        try:
            book.claim(self, event.data, event.context)
        except Exception:
            logger.exception("flowra_otel: internal error handling %s; the agent is unaffected", type(event.data))

    def __repr__(self) -> str:
        return f"OtelHooks(capture_content={self._options.capture_content})"
