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
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from opentelemetry import _logs as otel_logs
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.metrics import Meter, MeterProvider, NoOpMeterProvider
from opentelemetry.trace import NoOpTracerProvider, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

from . import semconv
from .content import DEFAULT_MAX_CONTENT_LENGTH, ContentPolicy, Redactor
from .details_event import events_supported
from .instruments import Instruments
from .mcp_invocation import McpInstruments, McpPropagation, McpSettings
from .modes import ContentMode, content_mode_from_env, parse_content_mode, semconv_compat_from_env
from .options import (
    NameOverride,
    TraceOptions,
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
from .upload import ContentUploader, upload_target_from_env, validate_content_upload
from .version import VERSION

logger = logging.getLogger("flowra_otel.options")


@dataclasses.dataclass(frozen=True, slots=True)
class Telemetry:
    """Tracer, instruments and options of one ``OtelHooks``: what a span needs to be recorded."""

    tracer: Tracer
    instruments: Instruments
    options: TraceOptions
    disabled: bool = False
    """Explicit no-op providers for both signals: nothing could ever be recorded, so an adapter
    subscribes to nothing and patches nothing (tracing "off" then costs nothing)."""
    event_logger: otel_logs.Logger | None = None
    """Where each model call's details event goes (content modes with events only)."""
    uploader: ContentUploader | None = None
    """Writes content to storage by reference (``content_upload``)."""
    mcp: McpSettings | None = None
    """What an MCP tool call under one of this instance's ``execute_tool`` spans is recorded and
    propagated with: the ``mcp.client.*`` metrics, the propagation options, the tracer (built once:
    every tool span points to it; docs/configuration.md, docs/semconv-mapping.md)."""
    global_tracer: bool = False
    """Spans go to the global tracer provider (no ``tracer_provider`` given): the first run checks
    that one is set up (``provider_check``)."""

    @classmethod
    def build(
        cls,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | str | ContentMode | None = None,
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
        semconv_compat: bool | None = None,
        logger_provider: otel_logs.LoggerProvider | None = None,
        content_upload: str | os.PathLike[str] | Literal[False] | None = None,
        user_id: str | Callable[[Mapping[str, Any]], str | None] | None = None,
        agent_version: NameOverride | None = None,
        mcp_propagation: bool = True,
        mcp_servers: Iterable[str] | None = None,
    ) -> Telemetry:
        """Validate every option (``TypeError``/``ValueError`` now, never a surprise mid-run) and
        build the tracer and instruments. The options are documented on ``OtelHooks``."""
        check_instance("tracer_provider", tracer_provider, TracerProvider)
        check_instance("meter_provider", meter_provider, MeterProvider)
        mode = parse_content_mode(capture_content)
        check_instance("logger_provider", logger_provider, otel_logs.LoggerProvider)
        compat = validate_bool_or_none("semconv_compat", semconv_compat)
        upload = validate_content_upload(content_upload)
        redact = validate_redactor(redact)
        check_redact_secrets(redact_secrets)
        check_max_length(max_content_length)
        record_metrics = validate_bool_or_none("metrics", metrics)
        if record_metrics is None:
            record_metrics = metrics_enabled_from_env()
        if validate_bool_or_none("openinference", openinference) is None:
            msg = "openinference must be True or False, got None"
            raise TypeError(msg)
        mcp = McpPropagation.build(mcp_propagation, mcp_servers)
        options = TraceOptions(
            mcp=mcp,
            content_mode=mode if mode is not None else content_mode_from_env(),
            semconv_compat=compat if compat is not None else semconv_compat_from_env(),
            content_upload=(upload_target_from_env() if upload is None else upload) or None,
            user_id=validate_conversation_id(user_id, "user_id"),
            agent_version=validate_override("agent_version", agent_version),
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
        event_logger = None
        if options.content_mode.in_events:
            if events_supported():
                event_logger = otel_logs.get_logger(
                    semconv.INSTRUMENTATION_NAME, VERSION, logger_provider, schema_url=semconv.SCHEMA_URL
                )
            else:
                logger.warning(
                    "content mode %s asks for events, but this opentelemetry-api's LogRecord has no event_name: "
                    "no event is emitted (upgrade opentelemetry-api and opentelemetry-sdk)",
                    options.content_mode.value,
                )
        uploader = ContentUploader(options.content_upload) if options.content_upload is not None else None
        return cls(
            tracer,
            Instruments(meter, enabled=record_metrics),
            options,
            disabled,
            event_logger,
            uploader,
            McpSettings(McpInstruments(meter, enabled=record_metrics), options.mcp, tracer),
            global_tracer=tracer_provider is None,
        )


__all__ = ["Telemetry"]
