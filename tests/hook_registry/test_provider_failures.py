"""A provider SDK's real exception inside a real run: how the failure shows on spans and metrics.

Each case points the real openai / anthropic / google-genai client at a loopback server that
answers with the case's status, headers and body (the server of ``tests/test_provider_errors``),
so the exception is the one the SDK builds in production. A ``ScriptedProvider`` then raises that
very object from its ``call`` inside a ``ToolLoopAgent`` run.

What must hold: the failed ``chat`` span and the ``invoke_agent`` span both say what kind of
failure it was (``flowra.error.kind``, ``flowra.error.retryable``, ``http.response.status_code``,
``flowra.error.retry_after``, ``flowra.error.request_id`` when known) and ``error.type`` is the
exception's fully qualified class name; the provider's error message (which can echo the prompt)
is recorded nowhere unless content capture is on; the duration metrics carry the low-cardinality
part only (never the request id or the retry delay); and the caller gets the very same exception.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import anthropic
import openai
import pytest
from google.genai import errors as genai_errors
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from flowra_otel import OtelHooks
from flowra_otel.core import instruments, semconv
from flowra_otel.testing import assert_no_leak, find_leaks
from tests.hook_registry.conftest import SpanLedger, assert_all_ended, hooks_with
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    get_weather,
    run_tool_loop,
    tool_loop_runtime,
    tool_registry,
)
from tests.hook_registry.test_provider_errors import (
    Reply,
    ReplyServer,
    _Handler,
    anthropic_body,
    anthropic_error,
    google_body,
    google_error,
    openai_body,
    openai_error,
)

MakeHooks = Callable[..., OtelHooks]

MARKER = "echo-of-the-prompt-7f3a91"
"""Put in every provider error message: it stands for content the provider echoes back."""


@dataclasses.dataclass(frozen=True)
class Failure:
    id: str
    call: Callable[[str], BaseException]
    reply: Reply
    exc_class: type[BaseException]
    model: str  # as given to flowra
    provider_name: str
    request_model: str
    kind: str
    retryable: bool
    status: int
    retry_after: float | None = None
    request_id: str | None = None


FAILURES = [
    Failure(
        "openai-429-rate-limited",
        openai_error,
        Reply(
            429,
            openai_body(f"Rate limit reached for gpt-4o: {MARKER}", "requests", "rate_limit_exceeded"),
            {"retry-after": "3", "x-request-id": "req_oai_429"},
        ),
        openai.RateLimitError,
        "openai/gpt-4o",
        "openai",
        "gpt-4o",
        "rate_limited",
        True,
        429,
        retry_after=3.0,
        request_id="req_oai_429",
    ),
    Failure(
        "anthropic-529-overloaded",
        anthropic_error,
        Reply(529, anthropic_body("overloaded_error", f"Overloaded {MARKER}"), {"request-id": "req_ant_529"}),
        anthropic.OverloadedError,
        "anthropic/claude-sonnet-4-5",
        "anthropic",
        "claude-sonnet-4-5",
        "overloaded",
        True,
        529,
        request_id="req_ant_529",
    ),
    Failure(
        "google-503-unavailable",
        google_error,
        Reply(503, google_body(503, "UNAVAILABLE", f"The model is overloaded. {MARKER}")),
        genai_errors.ServerError,
        "gemini/gemini-2.5-flash",
        "gcp.gemini",
        "gemini-2.5-flash",
        "overloaded",
        True,
        503,
    ),
    Failure(
        "openai-401-auth",
        openai_error,
        Reply(
            401,
            openai_body(f"Incorrect API key provided: {MARKER}", "invalid_request_error", "invalid_api_key"),
            {"x-request-id": "req_oai_401"},
        ),
        openai.AuthenticationError,
        "openai/gpt-4o",
        "openai",
        "gpt-4o",
        "auth",
        False,
        401,
        request_id="req_oai_401",
    ),
]

CLASSIFICATION_KEYS = (
    semconv.FLOWRA_ERROR_KIND,
    semconv.FLOWRA_ERROR_RETRYABLE,
    semconv.HTTP_RESPONSE_STATUS_CODE,
    semconv.FLOWRA_ERROR_RETRY_AFTER,
    semconv.FLOWRA_ERROR_REQUEST_ID,
)


@pytest.fixture(scope="module")
def reply_server() -> Iterator[ReplyServer]:
    srv = ReplyServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


async def sdk_exception(failure: Failure, server: ReplyServer) -> BaseException:
    server.reply = failure.reply
    exc = await asyncio.to_thread(failure.call, server.url)
    assert type(exc) is failure.exc_class, f"the SDK raised {type(exc)!r}: {exc!r}"
    assert MARKER in str(exc)  # the message does carry the "content"
    return exc


def qualified_name(exc: BaseException) -> str:
    cls = type(exc)
    return f"{cls.__module__}.{cls.__qualname__}"


def expected_span_classification(failure: Failure) -> dict[str, Any]:
    out: dict[str, Any] = {
        semconv.FLOWRA_ERROR_KIND: failure.kind,
        semconv.FLOWRA_ERROR_RETRYABLE: failure.retryable,
        semconv.HTTP_RESPONSE_STATUS_CODE: failure.status,
    }
    if failure.retry_after is not None:
        out[semconv.FLOWRA_ERROR_RETRY_AFTER] = failure.retry_after
    if failure.request_id is not None:
        out[semconv.FLOWRA_ERROR_REQUEST_ID] = failure.request_id
    return out


def classification_on(span: ReadableSpan) -> dict[str, Any]:
    attrs = dict(span.attributes or {})
    return {k: attrs[k] for k in CLASSIFICATION_KEYS if k in attrs}


def only_span(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in exporter.get_finished_spans() if s.name == name]
    assert len(found) == 1, [s.name for s in exporter.get_finished_spans()]
    return found[0]


def histogram(reader: InMemoryMetricReader, name: str) -> list[HistogramDataPoint]:
    data = reader.get_metrics_data()
    assert data is not None
    points: list[HistogramDataPoint] = []
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    points.extend(p for p in metric.data.data_points if isinstance(p, HistogramDataPoint))
    return points


async def run_failing(failure: Failure, exc: BaseException, hooks: OtelHooks) -> tuple[BaseException, ScriptedProvider]:
    provider = ScriptedProvider([exc])
    async with tool_registry(get_weather) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks_with(hooks), model=failure.model)
        with pytest.raises(failure.exc_class) as caught:
            await run_tool_loop(runtime, "What is the weather in Paris?")
    provider.assert_exhausted()
    return caught.value, provider


@pytest.mark.parametrize("failure", FAILURES, ids=[f.id for f in FAILURES])
async def test_failed_chat_and_agent_spans_are_classified_without_the_message(
    failure: Failure,
    reply_server: ReplyServer,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    exc = await sdk_exception(failure, reply_server)
    caught, _ = await run_failing(failure, exc, make_otel_hooks(capture_content=False))
    assert caught is exc  # unchanged: same object, same attributes
    assert_all_ended(ledger, span_exporter)

    chat = only_span(span_exporter, f"chat {failure.request_model}")
    agent = only_span(span_exporter, "invoke_agent assistant")
    expected = expected_span_classification(failure)
    for span in (chat, agent):
        attrs = dict(span.attributes or {})
        assert attrs[semconv.ERROR_TYPE] == qualified_name(exc), span.name
        assert classification_on(span) == expected, span.name
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description is None  # the description would be the message
    (event,) = [e for e in chat.events if e.name == "exception"]
    event_attrs = dict(event.attributes or {})
    assert event_attrs["exception.type"] == qualified_name(exc)
    assert "exception.message" not in event_attrs
    assert "exception.stacktrace" not in event_attrs
    # Nowhere at all: names, attributes, events, status.
    assert_no_leak(span_exporter.get_finished_spans(), [MARKER])


@pytest.mark.parametrize("failure", FAILURES, ids=[f.id for f in FAILURES])
async def test_with_capture_on_the_message_is_in_the_exception_event(
    failure: Failure,
    reply_server: ReplyServer,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
) -> None:
    exc = await sdk_exception(failure, reply_server)
    caught, _ = await run_failing(failure, exc, make_otel_hooks(capture_content=True))
    assert caught is exc

    chat = only_span(span_exporter, f"chat {failure.request_model}")
    (event,) = [e for e in chat.events if e.name == "exception"]
    assert MARKER in str((event.attributes or {})["exception.message"])
    # The paired negative of the capture-off test: the scan does find the message here.
    leaks = find_leaks(span_exporter.get_finished_spans(), [MARKER])
    assert any(leak.span_name == chat.name and "exception.message" in leak.where for leak in leaks)
    # Classification is the same whatever the capture setting.
    assert classification_on(chat) == expected_span_classification(failure)
    assert (chat.attributes or {})[semconv.ERROR_TYPE] == qualified_name(exc)


@pytest.mark.parametrize("failure", FAILURES, ids=[f.id for f in FAILURES])
async def test_duration_metrics_carry_the_low_cardinality_classification_only(
    failure: Failure,
    reply_server: ReplyServer,
    make_otel_hooks: MakeHooks,
    metric_reader: InMemoryMetricReader,
) -> None:
    exc = await sdk_exception(failure, reply_server)
    await run_failing(failure, exc, make_otel_hooks())
    metric_error: Mapping[str, Any] = {
        semconv.ERROR_TYPE: qualified_name(exc),
        semconv.FLOWRA_ERROR_KIND: failure.kind,
        semconv.FLOWRA_ERROR_RETRYABLE: failure.retryable,
        semconv.HTTP_RESPONSE_STATUS_CODE: failure.status,
    }
    (chat_point,) = histogram(metric_reader, instruments.GEN_AI_CLIENT_OPERATION_DURATION)
    assert dict(chat_point.attributes or {}) == {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
        semconv.GEN_AI_PROVIDER_NAME: failure.provider_name,
        semconv.GEN_AI_REQUEST_MODEL: failure.request_model,
        semconv.GEN_AI_AGENT_NAME: "assistant",
        **metric_error,
    }
    assert chat_point.count == 1
    (agent_point,) = histogram(metric_reader, instruments.GEN_AI_INVOKE_AGENT_DURATION)
    assert dict(agent_point.attributes or {}) == {
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.GEN_AI_REQUEST_MODEL: failure.request_model,
        **metric_error,
    }
    for point in (chat_point, agent_point):
        keys = set(point.attributes or {})
        assert semconv.FLOWRA_ERROR_REQUEST_ID not in keys
        assert semconv.FLOWRA_ERROR_RETRY_AFTER not in keys
    # No tokens for a call that never answered.
    assert histogram(metric_reader, instruments.GEN_AI_CLIENT_TOKEN_USAGE) == []
