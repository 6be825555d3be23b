"""Cooperation with provider instrumentations built on opentelemetry-util-genai (1.3b0 and later).

The problem: flowra calls the provider SDK inside our ``chat`` span, and an instrumentation of that
SDK (``opentelemetry-instrumentation-google-genai``, ``-genai-openai``, ``-genai-anthropic`` ...)
records the same call again: two model spans per call, and every token counted twice in
``gen_ai.client.token.usage``.

util-genai's answer, which this module follows: while an outer instrumentation's inference span is
current, the context holds an ``InferenceData`` object under ``CLIENT_INFERENCE_CONTEXT_KEY``.
An inner util-genai inference that finds it records no span, no metric and no event, and merges
what it learnt (response id, server address, its own reading of the usage ...) into that object.
So while our ``chat`` span is current around the provider call, its context carries a fresh
``InferenceData``; when the call returned we take from it only what flowra does not know
(``gen_ai.response.id``, ``server.address`` / ``server.port``, a missing ``gen_ai.response.model``)
and never its token counts: flowra's usage is already on the span and in the metrics, once.

util-genai is never a dependency: without it (or with a release that lacks the key) the context
is the span's alone and nothing else changes. Inner content is never taken (``capture_content``
stays False: ours went through our redaction pipeline; theirs did not).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Final

from opentelemetry.context import Context

from . import semconv
from .safety import internal_error, utf8_safe

logger = logging.getLogger("flowra_otel")

__all__ = ["enrichment", "inference_key", "with_inference_data"]

_UNSET: Final = object()
_key: Any = _UNSET
_factory: Any = None


def inference_key() -> str | None:
    """util-genai's ``CLIENT_INFERENCE_CONTEXT_KEY`` if it can be imported (looked up once)."""
    global _key, _factory  # noqa: PLW0603 - one import attempt per process
    if _key is _UNSET:
        try:
            from opentelemetry.util.genai.invocation import CLIENT_INFERENCE_CONTEXT_KEY, InferenceData
        except Exception:  # not installed, or a release without the cooperation key
            _key = None
        else:
            _key, _factory = CLIENT_INFERENCE_CONTEXT_KEY, _cheap_factory(InferenceData)
    return _key  # type: ignore[no-any-return]


def _cheap_factory(cls: Any) -> Any:
    """A maker of empty ``InferenceData`` for every LLM call: its dataclass ``__init__`` takes
    some 55 defaulted arguments (about 12 us); a subclass whose instances start with the two
    dicts and read every other field from the class defaults (all None) costs a tenth of that
    and is still an ``InferenceData`` (util-genai checks ``isinstance``; ``merge`` reads and
    sets fields by name). Used only when ``cls`` is a plain dataclass whose fields are all
    class-level defaults but those two dicts; else its own constructor."""
    try:
        dicts = ("attributes", "metric_attributes")
        mro: tuple[type, ...] = getattr(cls, "__mro__", ())
        plain = (
            dataclasses.is_dataclass(cls)
            and "__slots__" not in cls.__dict__
            and not hasattr(cls, "__post_init__")
            and all(f.name in dicts or any(f.name in c.__dict__ for c in mro) for f in dataclasses.fields(cls))
        )
    except Exception:
        plain = False
    if not plain:
        return lambda: cls(capture_content=False, upload_completion=False)

    class _EmptyInferenceData(cls):  # type: ignore[misc]
        def __init__(self) -> None:  # the defaults stay on the class until util-genai sets a field
            self.attributes: dict[str, Any] = {}
            self.metric_attributes: dict[str, Any] = {}

    _EmptyInferenceData.__qualname__ = _EmptyInferenceData.__name__ = "InferenceData"
    return _EmptyInferenceData


def with_inference_data(context: Context) -> tuple[Context, Any]:
    """``context`` plus a fresh ``InferenceData`` under util-genai's key, and that object; the
    context unchanged and None when util-genai is not importable."""
    key = inference_key()
    if key is None:
        return context, None
    try:
        data = _factory()  # capture_content and upload_completion stay False: content never crosses
    except Exception:  # a util-genai whose InferenceData takes other arguments: no cooperation
        internal_error(
            "flowra_otel: opentelemetry-util-genai's InferenceData could not be built", level=logging.WARNING
        )
        return context, None
    return Context({**context, key: data}), data


def enrichment(data: Any, known: Any) -> dict[str, Any]:
    """What an inner instrumentation handed over that the ``chat`` span lacks: attributes to set.

    ``known``: the attribute keys the span already has (flowra's values win). Token counts are
    deliberately not taken: flowra's usage is recorded already; an inner count would be the same
    tokens again (or, for a provider that counts differently, a disagreeing second number).
    """
    attrs: dict[str, Any] = {}
    response_id = getattr(data, "response_id", None)
    if isinstance(response_id, str) and response_id and semconv.GEN_AI_RESPONSE_ID not in known:
        attrs[semconv.GEN_AI_RESPONSE_ID] = utf8_safe(response_id[:256])
    model = getattr(data, "response_model", None)
    if isinstance(model, str) and model and semconv.GEN_AI_RESPONSE_MODEL not in known:
        attrs[semconv.GEN_AI_RESPONSE_MODEL] = utf8_safe(model[:256])
    address = getattr(data, "server_address", None)
    port = getattr(data, "server_port", None)
    if (
        isinstance(address, str)
        and address
        and type(port) is int
        and 0 < port < 65536
        and semconv.SERVER_ADDRESS not in known
    ):
        # Both or neither: the conventions require the port with the address.
        attrs[semconv.SERVER_ADDRESS] = utf8_safe(address[:256])
        attrs[semconv.SERVER_PORT] = port
    return attrs
