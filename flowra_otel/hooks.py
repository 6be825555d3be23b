"""``OtelHooks``: the one object users create, on either flowra API line.

    OtelHooks().install(runtime)      # flowra 0.0.47 - 0.0.93 (and 0.0.3 - 0.0.8)
    hooks.add(OtelHooks())            # flowra 0.0.3 - 0.0.8, the HookProvider way

Why a facade: the options, their checks and their documentation are the same on both lines (the
core's ``Telemetry.build``), while what subscribes to flowra's events is not. This object checks
the installed flowra first (``UnsupportedFlowraError`` names the supported releases), validates
the options, and hands the resulting ``Telemetry`` to the installed line's adapter, which it
imports only then.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider
from opentelemetry.util.types import AttributeValue

from . import adapters
from .core.content import DEFAULT_MAX_CONTENT_LENGTH, Redactor
from .core.modes import ContentMode
from .core.options import NameOverride, TraceOptions
from .core.telemetry import Telemetry


class OtelHooks:
    """Turn every flowra agent run into GenAI-semconv spans and metrics.

    One object, both flowra API lines::

        OtelHooks().install(runtime)      # any supported flowra: every agent of the runtime
        hooks.add(OtelHooks())            # flowra 0.0.3 - 0.0.8: the HookRegistry your agents get

    Args:
        tracer_provider: where spans go; default the global tracer provider.
        meter_provider: where metrics go; default the global meter provider.
        capture_content: record messages, tool arguments and results, and where: ``True`` (on
            spans) or ``False``, or a content mode, ``"no_content"``, ``"span_only"``,
            ``"event_only"`` (only in each model call's ``gen_ai.client.inference.operation.details``
            event, a log record: no content on any span) or ``"span_and_event"`` (case-insensitive,
            or a ``ContentMode``). ``None`` (default) reads
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (the same names, or true/false);
            off unless opted in.
        logger_provider: where the details events go (modes with events); default the global
            logger provider (``configure_telemetry`` sets one up when events are asked for).
        agent_name: override ``gen_ai.agent.name``, by the owning agent's flowra path
            (a mapping, or a callable returning a name or None).
        provider_name: override ``gen_ai.provider.name``, by the model string given to flowra.
        redact: a ``str -> str`` function applied to every content value before it is set on
            a span (a second line of defence after your redaction hooks).
        redact_secrets: also replace common secret shapes (API keys, bearer tokens, e-mails,
            card numbers) with ``[REDACTED:<kind>]``; True for all, or an iterable of names
            from ``flowra_otel.core.content.BUILTIN_SECRET_PATTERNS``.
        max_content_length: the size budget of each content attribute, applied *inside* the JSON
            (long leaves cut with a visible marker, oldest messages dropped first), so every value
            stays valid JSON; None for no limit.
        redaction_hmac_key: when set (bytes or str), the redaction ledger adds an
            HMAC-SHA256 of each redacted original, so it can be proven later without storing it.
        conversation_id: ``gen_ai.conversation.id`` for every span of a run: a fixed string, or
            a function of the spec's ``metadata``; default: ``metadata["conversation_id"]``
            (or ``session_id`` / ``thread_id``) when the spec carries one.
        user_id: ``user.id`` for every span of a run, the same way: a fixed string, or a
            function of the spec's ``metadata`` (return None for none); default:
            ``metadata["user_id"]`` when the spec carries one.
        agent_version: ``gen_ai.agent.version`` of ``invoke_agent`` spans, by the agent's flowra
            path (a mapping, or a callable returning a version or None); flowra's agents carry
            no version of their own.
        attributes: extra attributes stamped on every span, nested agents' spans included: str
            keys outside ``gen_ai.``, ``flowra.`` and ``error.`` (the plugin's own), values every
            exporter carries (str, bool, int within int64, finite float, or a list of one of
            those types); anything else is refused here (``TypeError`` / ``ValueError``).
        metrics: record the GenAI metrics; False for spans only. ``None`` (default): on, unless
            ``OTEL_METRICS_EXPORTER=none``.
        metric_attributes_from_metadata: spec ``metadata`` keys (at most 8, low-cardinality,
            e.g. ``("tenant",)``) whose values are added to every metric record of a run.
        openinference: also write OpenInference's ``input.value``/``output.value`` on
            ``invoke_agent`` spans (when content capture is on, same redaction) and a zero own
            token count, so Phoenix and Arize show each run's input and output and count each
            token once.
        semconv_compat: also write the convention names the current target replaced, for
            backends that still read them (``gen_ai.usage.cache_creation.input_tokens``, cache
            counts on ``invoke_agent``, ``finish_reason`` in output messages). ``None`` (default):
            on when ``OTEL_SEMCONV_STABILITY_OPT_IN`` holds ``gen_ai_latest_experimental/dup``.
        content_upload: write each model call's content (as it would be recorded: redacted,
            bounded) to a directory (a path or ``file://`` URL; with ``fsspec`` installed, any
            fsspec URL) and put references on its span (``gen_ai.input.messages_ref`` ...),
            whatever the content mode. ``False``: never. ``None`` (default):
            ``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=upload`` with
            ``OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH``, as opentelemetry-util-genai reads them.
        mcp_propagation: put the ``execute_tool`` span's W3C context (``traceparent``,
            ``tracestate``, the app's own ``baggage``) into ``params._meta`` of the tool calls
            flowra's MCP client sends, so the server continues the agent's trace (docs/configuration.md).
            Default True; False sends nothing (the MCP attributes and metrics stay).
        mcp_servers: only these servers get the context: host names or addresses, ``host:port``
            or ``http(s)://`` URLs whose path is a prefix (``"https://tools.example/team-a/"``),
            matched by parts, never as strings (docs/mcp.md); None (default): every server.

    Raises:
        UnsupportedFlowraError: the installed flowra is not a supported release (or is missing).
        TypeError: an option of the wrong type (an async callable included), at construction.
        ValueError: an option of the right type but a bad value (a length below 1, an HMAC key
            under 16 bytes, an unknown secret pattern, bad or too many metric metadata keys, an
            unknown content mode, an upload URL nothing can write to).
    """

    __slots__ = ("_adapter", "telemetry")

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | str | ContentMode | None = None,
        logger_provider: LoggerProvider | None = None,
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
        content_upload: str | os.PathLike[str] | Literal[False] | None = None,
        user_id: str | Callable[[Mapping[str, Any]], str | None] | None = None,
        agent_version: NameOverride | None = None,
        mcp_propagation: bool = True,
        mcp_servers: Iterable[str] | None = None,
    ) -> None:
        line = adapters.current()  # first: an unsupported flowra is the error to report
        self.telemetry = Telemetry.build(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            capture_content=capture_content,
            agent_name=agent_name,
            provider_name=provider_name,
            redact=redact,
            redact_secrets=redact_secrets,
            max_content_length=max_content_length,
            redaction_hmac_key=redaction_hmac_key,
            conversation_id=conversation_id,
            attributes=attributes,
            metrics=metrics,
            metric_attributes_from_metadata=metric_attributes_from_metadata,
            openinference=openinference,
            semconv_compat=semconv_compat,
            logger_provider=logger_provider,
            content_upload=content_upload,
            user_id=user_id,
            agent_version=agent_version,
            mcp_propagation=mcp_propagation,
            mcp_servers=mcp_servers,
        )
        self._adapter: Any = line.Adapter(self.telemetry)

    @property
    def options(self) -> TraceOptions:
        """The validated options (frozen)."""
        return self.telemetry.options

    def flush_uploads(self, timeout_s: float = 5.0) -> bool:
        """Wait until the content written by reference (``content_upload``) is all written;
        False when ``timeout_s`` ran out first. True when nothing is uploaded."""
        uploader = self.telemetry.uploader
        return True if uploader is None else uploader.flush(timeout_s)

    def install(self, runtime: Any) -> Installation:
        """Trace every agent run of ``runtime`` (a flowra ``AgentRuntime``), nested runs included.

        Call it once per runtime, before its first run. Returns an ``Installation``, whose
        ``uninstall()`` takes the tracing off the runtime again (a test sharing one runtime
        with others, an app switching tracing off)."""
        return Installation(self._adapter.install(runtime))

    def register_hooks(self, registry: Any) -> None:
        """flowra 0.0.3 - 0.0.8's ``HookProvider`` protocol (``hooks.add(OtelHooks())``): subscribe
        to the tool-loop events on ``registry``."""
        register = getattr(self._adapter, "register_hooks", None)
        if register is None:
            msg = (
                f"register_hooks / hooks.add(...) is the flowra 0.0.3 - 0.0.8 API; on flowra "
                f"{adapters.flowra_version()} use OtelHooks().install(runtime)"
            )
            raise TypeError(msg)
        register(registry)

    @staticmethod
    def child_registry(parent: Any, *, agent_path: str | None = None, agent_type: type[Any] | None = None) -> Any:
        """flowra 0.0.3 - 0.0.8: an isolated child ``HookRegistry`` for a sub-agent that still
        traces into ``parent`` (see ``HookRegistryAdapter.child_registry``)."""
        line = adapters.current()
        make = getattr(line.Adapter, "child_registry", None)
        if make is None:
            msg = (
                f"child_registry is for flowra 0.0.3 - 0.0.8; on flowra {adapters.flowra_version()} every "
                "agent of a runtime is traced after OtelHooks().install(runtime)"
            )
            raise TypeError(msg)
        return make(parent, agent_path=agent_path, agent_type=agent_type)

    def __repr__(self) -> str:
        return f"OtelHooks(capture_content={self.options.content_mode.value!r})"


class Installation:
    """What ``OtelHooks.install(runtime)`` did to one runtime, and its undoing.

    ``uninstall()`` takes the tracing off that runtime: its subscriptions leave flowra's handler
    storage (and, on flowra 0.0.3 - 0.0.8, a ``HookRegistry`` that ``install`` provided leaves the
    runtime's services), so the runtime is as flowra would have it without the plugin: its later runs
    are not traced, and another ``OtelHooks`` may be installed on it. Why a handle rather than
    ``OtelHooks.uninstall(runtime)``: it can only name the runtime it was made for, and the
    ``OtelHooks`` keeps no list of runtimes (flowra's runtimes take no weak references, so a
    list would keep every runtime alive as long as the ``OtelHooks``).

    Idempotent: a second ``uninstall()`` does nothing, even after the same ``OtelHooks`` was
    installed on the runtime again (that installation has its own handle). The flowra patches
    made when an ``OtelHooks`` was built stay (once per process): they pass every event of a
    runtime no ``OtelHooks`` traces to flowra's own code unchanged.
    """

    __slots__ = ("_undo",)

    def __init__(self, undo: Callable[[], None]) -> None:
        self._undo: Callable[[], None] | None = undo

    @property
    def installed(self) -> bool:
        """False once ``uninstall()`` has run."""
        return self._undo is not None

    def uninstall(self) -> None:
        """Take the tracing off the runtime; nothing when done already.

        Raises:
            RuntimeError: the runtime is running now, where flowra tells (0.0.49 - 0.0.93): its run
                would be left half traced; nothing is removed, uninstall between runs.
        """
        undo = self._undo
        if undo is None:
            return
        undo()
        self._undo = None

    def __repr__(self) -> str:
        return f"Installation(installed={self.installed})"


__all__ = ["Installation", "OtelHooks"]
