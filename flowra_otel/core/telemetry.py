"""``Telemetry``: the small handle every invocation object records through.

Why a handle and not the adapter's hook object: the invocation objects (``chat``, ``execute_tool``,
``invoke_agent``) are the framework-neutral core, shared by both flowra adapters. They need a
tracer, the metric instruments and the validated options, nothing else; handing them the adapter's
``OtelHooks`` would tie the core to one flowra line (and make an import cycle). Each adapter's
``OtelHooks`` builds one ``Telemetry`` from its keyword options with ``Telemetry.build`` (the same
options, checks and error messages on both lines) and passes it down.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.metrics import Meter, MeterProvider, NoOpMeterProvider
from opentelemetry.trace import NoOpTracerProvider, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

from . import semconv
from .content import DEFAULT_MAX_CONTENT_LENGTH, ContentPolicy, Redactor
from .instruments import Instruments
from .options import (
    NameOverride,
    TraceOptions,
    capture_content_from_env,
    check_instance,
    check_max_length,
    check_redact_secrets,
    hmac_key,
    metrics_enabled_from_env,
    validate_attributes,
    validate_bool_or_none,
    validate_conversation_id,
    validate_metric_metadata_keys,
    validate_override,
    validate_redactor,
)
from .version import VERSION


@dataclasses.dataclass(frozen=True, slots=True)
class Telemetry:
    """Tracer, instruments and options of one ``OtelHooks``: what a span needs to be recorded."""

    tracer: Tracer
    instruments: Instruments
    options: TraceOptions
    disabled: bool = False
    """Explicit no-op providers for both signals: nothing could ever be recorded, so an adapter
    subscribes to nothing and patches nothing (tracing "off" then costs nothing)."""

    @classmethod
    def build(
        cls,
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
    ) -> Telemetry:
        """Validate every option (``TypeError``/``ValueError`` now, never a surprise mid-run) and
        build the tracer and instruments. The options are documented on ``OtelHooks``."""
        check_instance("tracer_provider", tracer_provider, TracerProvider)
        check_instance("meter_provider", meter_provider, MeterProvider)
        capture = validate_bool_or_none("capture_content", capture_content)
        redact = validate_redactor(redact)
        check_redact_secrets(redact_secrets)
        check_max_length(max_content_length)
        record_metrics = validate_bool_or_none("metrics", metrics)
        if record_metrics is None:
            record_metrics = metrics_enabled_from_env()
        if validate_bool_or_none("openinference", openinference) is None:
            msg = "openinference must be True or False, got None"
            raise TypeError(msg)
        options = TraceOptions(
            capture_content=capture if capture is not None else capture_content_from_env(),
            agent_name=validate_override("agent_name", agent_name),
            provider_name=validate_override("provider_name", provider_name),
            content=ContentPolicy.build(redact=redact, redact_secrets=redact_secrets, max_length=max_content_length),
            redaction_hmac_key=hmac_key(redaction_hmac_key),
            conversation_id=validate_conversation_id(conversation_id),
            attributes=validate_attributes(attributes),
            openinference=openinference,
            metric_metadata_keys=validate_metric_metadata_keys(metric_attributes_from_metadata),
        )
        tracer = trace.get_tracer(semconv.INSTRUMENTATION_NAME, VERSION, tracer_provider, schema_url=semconv.SCHEMA_URL)
        meter: Meter = otel_metrics.get_meter(
            semconv.INSTRUMENTATION_NAME,
            VERSION,
            meter_provider if record_metrics else NoOpMeterProvider(),
            schema_url=semconv.SCHEMA_URL,
        )
        # The global providers are not judged here: a proxy may become real after this is built.
        disabled = isinstance(tracer_provider, NoOpTracerProvider) and (
            not record_metrics or isinstance(meter_provider, NoOpMeterProvider)
        )
        return cls(tracer, Instruments(meter, enabled=record_metrics), options, disabled)


__all__ = ["Telemetry"]
