"""``TraceOptions``: every setting of ``OtelHooks``, validated once, frozen afterwards.

Why a separate frozen object: one ``OtelHooks`` serves many registries, runtimes and concurrent
runs, so its settings must not change under a running agent, and a bad setting must fail at
construction with a clear message instead of misbehaving in the middle of a run.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.util.types import AttributeValue

from . import semconv
from .content import ContentPolicy, ContentRenderer, MessageReader, Redactor
from .environment_variables import OTEL_METRICS_EXPORTER
from .mcp_invocation import McpPropagation
from .modes import ContentMode, content_mode_from_env
from .safety import INT64_MAX, INT64_MIN, failure_summary, safe_str, utf8_safe

if TYPE_CHECKING:
    from .upload import UploadTarget

logger = logging.getLogger("flowra_otel.options")

type NameOverride = Mapping[str, str] | Callable[[str], str | None]
"""Either a mapping from flowra's name to the name to report, or a function that returns the
name to report (or None to keep the default)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TraceOptions:
    """The validated settings of one ``OtelHooks`` instance."""

    content_mode: ContentMode = ContentMode.NO_CONTENT
    """Where message, argument and result content is recorded (opt-in; see docs/redaction.md):
    nowhere, on spans, in each model call's details event, or both."""
    semconv_compat: bool = False
    """Also write the convention names the current target replaced (docs/semconv-mapping.md)."""
    content_upload: UploadTarget | None = None
    """Where each model call's content is written, with references on its span (None: nowhere)."""
    user_id: str | Callable[[Mapping[str, Any]], str | None] | None = None
    """``user.id``: a fixed value, or a function of the run's spec metadata (default: its ``user_id``)."""
    agent_version: NameOverride | None = None
    """``gen_ai.agent.version`` of ``invoke_agent`` spans, looked up by the agent's flowra path."""
    agent_name: NameOverride | None = None
    """Override ``gen_ai.agent.name``; looked up by the owning agent's flowra path."""
    provider_name: NameOverride | None = None
    """Override ``gen_ai.provider.name``; looked up by the model string given to flowra."""
    content: ContentPolicy = dataclasses.field(default_factory=ContentPolicy)
    """Scrubbing and size limits applied to every content value (when capture is on)."""
    redaction_hmac_key: bytes | None = None
    """Key for the ledger's HMAC of redacted originals; no HMAC without it."""
    conversation_id: str | Callable[[Mapping[str, Any]], str | None] | None = None
    """``gen_ai.conversation.id``: a fixed value, or a function of the run's spec metadata."""
    attributes: Mapping[str, AttributeValue] = dataclasses.field(default_factory=dict)
    """Stamped on every span this plugin starts (e.g. tenant, deployment)."""
    openinference: bool = False
    """Also write OpenInference's ``input.value``/``output.value`` (content rules unchanged) and a
    zero own token count on ``invoke_agent`` spans, and a tool's arguments as ``input.value`` on
    ``execute_tool`` spans, for Phoenix and Arize (docs/backends.md)."""
    metric_metadata_keys: tuple[str, ...] = ()
    """Spec ``metadata`` keys copied onto every metric record (low-cardinality, e.g. a tenant)."""
    mcp: McpPropagation = dataclasses.field(default_factory=McpPropagation)
    """Whether MCP tool calls carry the trace context in ``params._meta``, and to which servers."""
    _resolved: dict[tuple[str, str | None], tuple[str, str]] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )
    """Memo of ``resolve_provider_and_model`` (the options themselves never change)."""

    @property
    def capture_content(self) -> bool:
        """Whether content is recorded on spans (``SPAN_ONLY`` or ``SPAN_AND_EVENT``)."""
        return self.content_mode.on_spans

    @property
    def renders_content(self) -> bool:
        """Whether content is rendered at all: for spans, events or storage."""
        return self.content_mode is not ContentMode.NO_CONTENT or self.content_upload is not None

    @property
    def finish_reason_in_messages(self) -> bool:
        """Whether output messages keep the ``finish_reason`` that #363 deprecated: for readers of
        the old names (``semconv_compat``), and for Phoenix and Arize (``openinference``), whose
        GenAI conversion (Phoenix 20.x) drops an output message without it."""
        return self.semconv_compat or self.openinference

    def content_renderer(self, reader: MessageReader) -> ContentRenderer | None:
        """A fresh renderer when content goes anywhere (None when not): one per agent, whose cache
        of rendered messages follows that agent's own history (agents' histories never mix)."""
        return self.content.renderer(reader) if self.renders_content else None

    def user_id_from(self, metadata: Mapping[str, Any]) -> str | None:
        """``user.id``: the option (a value, or a function of the metadata; a failing function costs
        the id, not the run), else the spec metadata's ``user_id``."""
        option = self.user_id
        if isinstance(option, str):
            return option
        if option is not None:
            try:
                returned: object = option(metadata)
            except Exception as exc:  # by type and place only: its message may echo the metadata
                logger.error("flowra_otel: user_id= raised %s; the run gets no user.id", failure_summary(exc))
                return None
            # Whatever it returned becomes text a span can carry (``str()`` of it may raise).
            if returned is None or returned is False or (type(returned) is str and not returned):
                return None
            return safe_str(returned) or None
        value = metadata.get("user_id")
        if isinstance(value, bool) or not isinstance(value, str | int) or not str(value):
            return None
        return utf8_safe(str(value))

    def resolve_agent_version(self, path: str) -> str | None:
        """``gen_ai.agent.version`` for the agent at ``path``: only when the user gives one
        (flowra's agents carry no version)."""
        return _apply_override(self.agent_version, path)

    def metric_attributes_from(self, metadata: Mapping[str, Any]) -> dict[str, AttributeValue]:
        """The allow-listed metadata values as metric attributes: str, int or bool only, strings
        cut at 64 characters, an int beyond int64 (which OTLP cannot carry: the encoder drops it
        from every point, with an error) as its decimal text; anything else (or absent) is left out."""
        out: dict[str, AttributeValue] = {}
        for key in self.metric_metadata_keys:
            value = metadata.get(key)
            if isinstance(value, bool | int):
                out[key] = value if isinstance(value, bool) or INT64_MIN <= value <= INT64_MAX else str(int(value))
            elif isinstance(value, str) and value:
                out[key] = utf8_safe(value[:64])
        return out

    def conversation_id_from(self, metadata: Mapping[str, Any]) -> str | None:
        """Option first; else the spec metadata's ``conversation_id`` (or ``session_id``)."""
        if isinstance(self.conversation_id, str):
            return self.conversation_id
        if self.conversation_id is not None:
            try:
                returned: object = self.conversation_id(metadata)
            except Exception as exc:  # by type and place only: its message may echo the metadata
                logger.error("flowra_otel: conversation_id= raised %s; the run gets none", failure_summary(exc))
                return None
            # Whatever it returned becomes text a span can carry (``str()`` of it may raise).
            if returned is None or returned is False or (type(returned) is str and not returned):
                return None
            return safe_str(returned) or None
        for key in ("conversation_id", "session_id", "thread_id"):
            value = metadata.get(key)
            if isinstance(value, str | int) and str(value):
                return str(value)
        return None

    def resolve_agent_name(self, path: str) -> str:
        return _apply_override(self.agent_name, path) or path

    def resolve_provider_and_model(self, model: str, provider_class: str | None = None) -> tuple[str, str]:
        """``_resolve_provider_and_model``, remembered per (model, provider class): a handful of
        distinct values per app, asked once per LLM call."""
        key = (model, provider_class)
        cached = self._resolved.get(key)
        if cached is None:
            cached = self._resolve_provider_and_model(model, provider_class)
            if len(self._resolved) < 1024:
                self._resolved[key] = cached
        return cached

    def _resolve_provider_and_model(self, model: str, provider_class: str | None) -> tuple[str, str]:
        """Split flowra's ``vendor/model`` naming into semconv provider and request model.

        In order: the ``provider_name`` override; a known vendor prefix (``anthropic/...``,
        stripped from the model) or model family (``gpt-4o``, ``claude-...``); flowra's own
        provider class (``OpenAIProvider`` -> ``openai``); an unknown ``vendor/`` prefix itself
        (a custom value, as the conventions allow; kept in the model); else ``unknown``.
        """
        vendor, sep, rest = model.partition("/")
        known = semconv.PROVIDER_BY_VENDOR.get(vendor.lower()) if sep else None
        request_model = rest if known is not None and rest else model
        if known is None and not sep:
            family = model.partition("-")[0].lower()
            known = semconv.PROVIDER_BY_VENDOR.get(family) if family != model.lower() else None
        provider = (
            _apply_override(self.provider_name, model)
            or known
            or semconv.PROVIDER_BY_FLOWRA_CLASS.get(provider_class or "")
            or (vendor.lower() if sep and vendor else None)
            or semconv.UNKNOWN_PROVIDER
        )
        return provider, request_model


def _apply_override(override: NameOverride | None, key: str) -> str | None:
    if override is None:
        return None
    try:
        value = override.get(key) if isinstance(override, Mapping) else override(key)
    except Exception as exc:
        # A failing user callable costs the override, not the spans: the default name is kept.
        # Logged by type and place only: its message may echo what it was given.
        logger.error("flowra_otel: name override raised %s for %r; the default name is used", failure_summary(exc), key)
        return None
    return value if isinstance(value, str) and value else None


def capture_content_from_env() -> bool:
    """Whether the standard GenAI content switch puts content on spans (``modes.content_mode_from_env``)."""
    return content_mode_from_env().on_spans


def is_async_callable(value: object) -> bool:
    """Whether calling ``value`` returns an awaitable or async iterator instead of a value: an
    ``async def`` function or method, a ``functools.partial`` of one, or an object whose
    ``__call__`` is ``async def``."""
    target = value
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target):
        return True
    if inspect.isroutine(target) or isinstance(target, type):
        return False
    call = getattr(type(target), "__call__", None)  # noqa: B004 - the class's, not the instance's
    return call is not None and (inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call))


def reject_async(name: str, value: object) -> None:
    """The plugin calls these options inline while it records a span, where nothing can be
    awaited: an async one would never run (and leak an un-awaited coroutine), so it fails now."""
    if is_async_callable(value):
        msg = (
            f"{name} must be a plain (synchronous) callable; {value!r} is async, and flowra_otel calls it "
            "inline while recording a span, where it cannot be awaited"
        )
        raise TypeError(msg)


def validate_redactor(value: object) -> Redactor | None:
    """``redact=``: None or a synchronous ``str -> str`` callable."""
    if value is None:
        return None
    if not callable(value):
        msg = f"redact must be a callable str -> str or None, got {type(value).__name__}"
        raise TypeError(msg)
    reject_async("redact", value)
    return value


def validate_override(name: str, value: object) -> NameOverride | None:
    """Accept None, a str->str mapping or a synchronous callable; anything else is a TypeError now."""
    if value is None:
        return None
    if callable(value):
        reject_async(name, value)
        return value
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str) or not isinstance(v, str) or not v:
                msg = f"{name}: mapping entries must be non-empty str -> str, got {k!r}: {v!r}"
                raise TypeError(msg)
        return value
    msg = f"{name} must be a mapping of str to str or a callable, got {type(value).__name__}"
    raise TypeError(msg)


def validate_attributes(value: object) -> dict[str, AttributeValue]:
    """User attributes must be attribute values every exporter carries on every span, checked
    now, not per span: a non-empty str key outside the namespaces the plugin writes
    (``_ATTRIBUTE_PREFIXES``: a user value there would replace the plugin's own); a value that is
    a str, a bool, an int within int64 (OTLP's range: a larger one is dropped from every span, with
    an encoder error), a finite float (NaN and infinities are no JSON number), or a list or tuple
    of values of one of those types (the SDK drops a mixed one from every span)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        msg = f"attributes must be a mapping of str to attribute values, got {type(value).__name__}"
        raise TypeError(msg)
    out: dict[str, AttributeValue] = {}
    for k, v in value.items():
        items = list(v) if isinstance(v, list | tuple) else [v]
        kinds = {_attribute_kind(i) for i in items}
        if not isinstance(k, str) or not k or None in kinds:
            msg = f"attributes: {k!r}: {v!r} is not a valid OpenTelemetry attribute (str key, primitive value)"
            raise TypeError(msg)
        if len(kinds) > 1:
            msg = f"attributes: {k!r}: {v!r} mixes value types (an OpenTelemetry array holds one type)"
            raise TypeError(msg)
        if k.startswith(_ATTRIBUTE_PREFIXES):
            msg = f"attributes: {k!r} is in a namespace flowra_otel writes itself ({', '.join(_ATTRIBUTE_PREFIXES)})"
            raise ValueError(msg)
        for item in items:
            kind = _attribute_kind(item)
            if kind is int and not INT64_MIN <= item <= INT64_MAX:
                msg = f"attributes: {k!r}: {item!r} is outside the int64 range OTLP carries (pass it as a str)"
                raise ValueError(msg)
            if kind is float and not math.isfinite(item):
                msg = f"attributes: {k!r}: {item!r} is not a finite number"
                raise ValueError(msg)
        out[k] = [_safe_item(i) for i in items] if isinstance(v, list | tuple) else _safe_item(v)
    return out


_ATTRIBUTE_PREFIXES: Final = ("gen_ai.", "flowra.", "error.")


def _attribute_kind(item: object) -> type | None:
    """The attribute type a value is encoded as (bool before int: a bool is an int), or None."""
    for kind in (bool, int, float, str):
        if isinstance(item, kind):
            return kind
    return None


def _safe_item(value: AttributeValue) -> Any:
    return utf8_safe(value) if isinstance(value, str) else value


def validate_conversation_id(
    value: object, name: str = "conversation_id"
) -> str | Callable[[Mapping[str, Any]], str | None] | None:
    """``conversation_id`` / ``user_id``: a non-empty str, a synchronous callable(metadata) or None."""
    if isinstance(value, str) and value:
        return utf8_safe(value)
    if value is None:
        return value
    if callable(value):
        reject_async(name, value)
        return value
    msg = f"{name} must be a non-empty str, a callable(metadata) -> str | None, or None, got {value!r}"
    raise TypeError(msg)


def validate_metric_metadata_keys(value: object) -> tuple[str, ...]:
    """``metric_attributes_from_metadata``: metadata key names that become metric attributes.

    Names must be plain attribute keys outside the namespaces whose meaning the conventions or this
    package fix (``gen_ai.``, ``error.``, ``server.``, ``http.``, ``flowra.``), so a tenant can
    never shadow a GenAI key.
    """
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        msg = f"metric_attributes_from_metadata must be an iterable of key names, got {value!r}"
        raise TypeError(msg)
    keys = tuple(value)
    for key in keys:
        if not isinstance(key, str) or not key or not key.isascii() or key != key.strip():
            msg = f"metric_attributes_from_metadata: {key!r} is not a valid attribute key"
            raise ValueError(msg)
        if key.startswith(_RESERVED_PREFIXES):
            msg = f"metric_attributes_from_metadata: {key!r} is in a namespace the conventions own"
            raise ValueError(msg)
    if len(set(keys)) != len(keys) or len(keys) > 8:
        msg = "metric_attributes_from_metadata: at most 8 distinct keys (each one multiplies metric series)"
        raise ValueError(msg)
    return keys


_RESERVED_PREFIXES: Final = ("gen_ai.", "error.", "server.", "http.", "flowra.")


def metrics_enabled_from_env() -> bool:
    """``OTEL_METRICS_EXPORTER=none`` means no metric is recorded (nothing would be exported)."""
    return os.environ.get(OTEL_METRICS_EXPORTER, "").strip().lower() != "none"


def validate_bool_or_none(name: str, value: object) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    msg = f"{name} must be True, False or None, got {value!r}"
    raise TypeError(msg)


def check_instance(name: str, value: object, cls: type) -> None:
    if value is not None and not isinstance(value, cls):
        msg = f"{name} must be an opentelemetry {cls.__name__} or None, got {type(value).__name__}"
        raise TypeError(msg)


def check_redact_secrets(value: object) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, str) or not isinstance(value, Iterable):
        msg = f"redact_secrets must be a bool or an iterable of pattern names, got {value!r}"
        raise TypeError(msg)


def check_max_length(value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"max_content_length must be an int or None, got {value!r}"
        raise TypeError(msg)
    if value < 1:
        msg = f"max_content_length must be at least 1, got {value}"
        raise ValueError(msg)


def hmac_key(value: object) -> bytes | None:
    """``redaction_hmac_key``: bytes (a str is UTF-8 encoded) of at least 16 bytes, or None."""
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
