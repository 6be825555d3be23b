"""Provider failures on flowra 0.0.86+: typed errors, fallback chains, plain exceptions, refusals.

flowra 0.0.83+ raises its own typed ``LLMError`` subclasses (``flowra.llm.errors``) for provider
failures, and its ``LLMCaller`` walks an ``LLMConfig``'s ``fallback`` chain, one ``LLMCallSpan``
per attempt. What must hold:

* each attempt is a ``chat`` span of its own; a failed one carries ``error.type`` (the typed
  class, fully qualified) and the failure's classification (``flowra.error.kind``, retryability,
  HTTP status, retry delay, request id), decided by flowra's class first (it read the provider's
  body: a 429 that is an exhausted quota is ``QuotaExhaustedError``); the attempt that answered
  is clean, and so is the agent whose fallback saved the run;
* a chain that fails throughout, or an error that does not switch (a bad request, a plain
  exception), ends the run with that very error and every span ended;
* the provider's message (it can echo the prompt) is recorded nowhere unless content capture is
  on; duration metrics carry the low-cardinality part of the classification only;
* a refusal is an answer, not a failure: finish reason ``content_filter``, no error;
* a tool that calls a model through ``LLMCaller`` with its hooks gets its calls' spans under its
  ``execute_tool`` span, fallback attempts included.

flowra's own providers cannot be imported here (their ``httpx2`` extra is not installed), so the
errors are built the way those providers build them: ``status_error`` with the HTTP status and
headers, ``error_for_status`` for the class a bare status means.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from tests.runtime_hooks.support import FLOWRA_VERSION, HAS_LLM_CALLER

if not HAS_LLM_CALLER:
    pytest.skip(
        f"LLMCaller, fallback chains and typed LLMError are flowra 0.0.84+; installed: flowra {FLOWRA_VERSION}",
        allow_module_level=True,
    )

from flowra.agent import Hooks
from flowra.lib import FallbackPolicy, LLMCaller
from flowra.llm import (
    AssistantMessage,
    ContextTooLongError,
    LLMError,
    LLMResponse,
    LLMTimeoutError,
    OverloadedError,
    QuotaExhaustedError,
    RateLimitedError,
    Refusal,
    StopReason,
    TextBlock,
    TransientLLMError,
    UnavailableError,
    UserMessage,
)
from flowra.llm.errors import error_for_status, status_error
from flowra.tools import tool
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from flowra_otel import OtelHooks
from flowra_otel.core import instruments, provider_errors, semconv
from flowra_otel.core.provider_errors import classify_provider_error
from flowra_otel.testing import assert_no_leak, find_leaks
from tests import span_tree
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced
from tests.runtime_hooks.support import (
    ScriptedProvider,
    chat_runtime,
    get_weather,
    llm_config,
    result_text,
    run_chat,
    text_response,
    tool_calls_response,
    usage,
)

MakeHooks = Callable[..., OtelHooks]

MARKER = "echo-of-the-prompt-7f3a91"
"""Put in every provider error message: it stands for content the provider echoes back."""
PRIMARY = "anthropic/sonnet-4-5"
FALLBACK = "openai/gpt-4o"
THIRD = "gemini/gemini-2.5-flash"
MODELS = {
    PRIMARY: ("anthropic", "sonnet-4-5"),
    FALLBACK: ("openai", "gpt-4o"),
    THIRD: ("gcp.gemini", "gemini-2.5-flash"),
}
CLASSIFICATION_KEYS = (
    semconv.FLOWRA_ERROR_KIND,
    semconv.FLOWRA_ERROR_RETRYABLE,
    semconv.HTTP_RESPONSE_STATUS_CODE,
    semconv.FLOWRA_ERROR_RETRY_AFTER,
    semconv.FLOWRA_ERROR_REQUEST_ID,
)
METRIC_KEYS = (semconv.FLOWRA_ERROR_KIND, semconv.FLOWRA_ERROR_RETRYABLE, semconv.HTTP_RESPONSE_STATUS_CODE)


def failure(
    error_class: type[LLMError],
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
    model: str = PRIMARY,
) -> LLMError:
    """An ``LLMError`` as flowra's providers build it from an HTTP error response (or, without a
    status, from a transport failure), its message echoing the prompt."""
    message = f"ScriptedProvider {model}: provider said: {MARKER}"
    if status is None:
        return error_class(message, provider="ScriptedProvider", model=model)
    return status_error(
        error_class,
        message,
        provider="ScriptedProvider",
        model=model,
        status_code=status,
        headers=dict(headers or {}),
        partial=False,
    )


def qualified(exc: BaseException) -> str:
    cls = type(exc)
    return f"{cls.__module__}.{cls.__qualname__}"


def chat_base(model: str, *, agent: str | None = "assistant") -> dict[str, Any]:
    provider, name = MODELS[model]
    attrs: dict[str, Any] = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
        semconv.GEN_AI_PROVIDER_NAME: provider,
        semconv.GEN_AI_REQUEST_MODEL: name,
        semconv.FLOWRA_LLM_MODEL: model,
    }
    if agent is not None:
        attrs[semconv.GEN_AI_AGENT_NAME] = agent
    return attrs


def answered(model: str, *, agent: str | None = "assistant") -> dict[str, Any]:
    """The attributes of a ``chat`` span whose call answered ``text_response()``."""
    return {
        **chat_base(model, agent=agent),
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["stop"],
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 10,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 5,
    }


def failed(
    model: str, exc: BaseException, classification: Mapping[str, Any], *, agent: str | None = "assistant"
) -> dict[str, Any]:
    """The attributes of a ``chat`` span whose call raised ``exc`` (content capture off)."""
    return {
        **chat_base(model, agent=agent),
        semconv.FLOWRA_END_REASON: semconv.END_ERROR,
        semconv.ERROR_TYPE: qualified(exc),
        **classification,
    }


def metric_base(model: str, *, agent: str | None = "assistant") -> dict[str, Any]:
    provider, name = MODELS[model]
    attrs: dict[str, Any] = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
        semconv.GEN_AI_PROVIDER_NAME: provider,
        semconv.GEN_AI_REQUEST_MODEL: name,
    }
    if agent is not None:
        attrs[semconv.GEN_AI_AGENT_NAME] = agent
    return attrs


def low_cardinality(exc: BaseException, classification: Mapping[str, Any]) -> dict[str, Any]:
    """What a duration metric of a call failed by ``exc`` adds: never the request id or the delay."""
    return {semconv.ERROR_TYPE: qualified(exc), **{k: v for k, v in classification.items() if k in METRIC_KEYS}}


def durations(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], int]]:
    """(attributes, count) of every point of the histogram ``name``, in a stable order."""
    data = reader.get_metrics_data()
    found: list[tuple[dict[str, Any], int]] = []
    if data is not None:
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        found += [
                            (dict(p.attributes or {}), p.count)
                            for p in metric.data.data_points
                            if isinstance(p, HistogramDataPoint)
                        ]
    return canonical(found)


def canonical(points: list[tuple[dict[str, Any], int]]) -> list[tuple[dict[str, Any], int]]:
    """``points`` in an order that depends on their content only (not on dict insertion order)."""
    return sorted(points, key=lambda point: (repr(sorted(point[0].items())), point[1]))


def tree(exporter: InMemorySpanExporter) -> list[span_tree.Node]:
    return span_tree.build(exporter.get_finished_spans())


def exception_event(node: span_tree.Node) -> dict[str, Any]:
    assert node.span is not None
    (event,) = [e for e in node.span.events if e.name == "exception"]
    return dict(event.attributes or {})


def fallback_runtime(*links: tuple[str, ScriptedProvider], **config: Any) -> Any:
    """A chat whose ``LLMConfig`` is the first link, with the others as its ``fallback`` chain."""
    (model, provider), *rest = links
    chain = llm_config(provider, model, fallback=[llm_config(p, m) for m, p in rest])
    return chat_runtime(provider, get_weather, llm=chain, **config)


# ----------------------------------------------------------------------------- flowra's typed errors
@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    error: Callable[[], LLMError]
    classification: dict[str, Any]


def classification(kind: str, retryable: bool, status: int | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {semconv.FLOWRA_ERROR_KIND: kind, semconv.FLOWRA_ERROR_RETRYABLE: retryable}
    if status is not None:
        out[semconv.HTTP_RESPONSE_STATUS_CODE] = status
    if "retry_after" in extra:
        out[semconv.FLOWRA_ERROR_RETRY_AFTER] = extra["retry_after"]
    if "request_id" in extra:
        out[semconv.FLOWRA_ERROR_REQUEST_ID] = extra["request_id"]
    return out


class AppRateLimitError(RateLimitedError):
    """An application's own subclass: classified as its flowra base."""


SWITCHING = [
    Case(
        "rate-limited-429",
        lambda: failure(RateLimitedError, 429, {"retry-after": "3", "x-request-id": "req_r"}),
        classification("rate_limited", True, 429, retry_after=3.0, request_id="req_r"),
    ),
    Case(
        # The status alone says rate limited: flowra read the body (insufficient_quota).
        "quota-exhausted-429",
        lambda: failure(QuotaExhaustedError, 429, {"x-request-id": "req_q"}),
        classification("quota_exhausted", False, 429, request_id="req_q"),
    ),
    Case(
        "overloaded-529",
        lambda: failure(error_for_status(529), 529, {"request-id": "req_o"}),
        classification("overloaded", True, 529, request_id="req_o"),
    ),
    Case("unavailable-500", lambda: failure(error_for_status(500), 500), classification("unavailable", True, 500)),
    Case(
        # A transport failure: no status, no cause this process could read; the class says it all.
        "unavailable-connection",
        lambda: failure(UnavailableError),
        classification("unavailable", True),
    ),
    Case("timeout-no-status", lambda: failure(LLMTimeoutError), classification("timeout", True)),
    Case("auth-401", lambda: failure(error_for_status(401), 401), classification("auth", False, 401)),
    Case("not-found-404", lambda: failure(error_for_status(404), 404), classification("not_found", False, 404)),
    Case(
        "app-subclass",
        lambda: AppRateLimitError("busy", provider="p", model=PRIMARY, retry_after=2.5),
        classification("rate_limited", True, retry_after=2.5),
    ),
]
NOT_SWITCHING = [
    Case(
        # The status alone says invalid request (the message has none of the telltale words).
        "context-too-long-400",
        lambda: failure(ContextTooLongError, 400),
        classification("context_too_long", False, 400),
    ),
    Case("bad-request-422", lambda: failure(error_for_status(422), 422), classification("invalid_request", False, 422)),
]


@pytest.mark.parametrize("case", SWITCHING + NOT_SWITCHING, ids=lambda c: c.id)
def test_flowra_errors_are_classified_by_their_class(case: Case) -> None:
    assert classify_provider_error(case.error()).attributes() == case.classification


def test_paired_a_same_named_class_from_elsewhere_is_not_flowras() -> None:
    lookalike = type("RateLimitedError", (Exception,), {"__module__": "someone.else"})("busy")
    assert classify_provider_error(lookalike).attributes() == {semconv.FLOWRA_ERROR_KIND: "unknown"}
    # flowra's bases say too little: the status decides, else nothing does.
    assert classify_provider_error(failure(TransientLLMError, 503)).attributes() == classification(
        "overloaded", True, 503
    )
    assert classify_provider_error(failure(LLMError)).attributes() == {semconv.FLOWRA_ERROR_KIND: "unknown"}


@pytest.mark.parametrize("delay", [math.nan, math.inf, -1.0, True])
def test_an_odd_retry_after_is_left_out(delay: Any) -> None:
    exc = RateLimitedError("busy", provider="p", model=PRIMARY, status_code=429, retry_after=delay)
    assert classify_provider_error(exc).attributes() == classification("rate_limited", True, 429)


def test_paired_without_the_class_rule_the_status_would_misreport(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mechanism removed (flowra's classes unknown to the classifier): an exhausted quota
    reads as a rate limit, a context too long as any bad request, a connection failure as
    nothing, and flowra's parsed retry delay is lost."""
    monkeypatch.setattr(provider_errors, "_FLOWRA_ERROR_KINDS", {})
    by_id = {c.id: c.error() for c in SWITCHING + NOT_SWITCHING}
    assert classify_provider_error(by_id["quota-exhausted-429"]).kind.value == "rate_limited"
    assert classify_provider_error(by_id["context-too-long-400"]).kind.value == "invalid_request"
    assert classify_provider_error(by_id["unavailable-connection"]).kind.value == "unknown"
    assert classify_provider_error(by_id["rate-limited-429"]).retry_after_s is None


# ----------------------------------------------------------------------------- fallback chains
@pytest.mark.parametrize("case", SWITCHING, ids=lambda c: c.id)
async def test_a_failed_attempt_and_the_fallback_that_answered_are_two_chat_spans(
    case: Case,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    exc = case.error()
    primary, fallback = ScriptedProvider(exc), ScriptedProvider(text_response("Answered."))
    runtime = traced(make_otel_hooks, fallback_runtime((PRIMARY, primary), (FALLBACK, fallback)))
    result = await run_chat(runtime, "Hello")
    assert result.response == "Answered."
    assert (len(primary.requests), len(fallback.requests)) == (1, 1)

    (agent,) = tree(span_exporter)
    assert span_tree.shape([agent]) == [("invoke_agent assistant", [("chat sonnet-4-5", []), ("chat gpt-4o", [])])]
    first, second = agent.children
    assert (first.status, second.status, agent.status) == ("ERROR", "UNSET", "UNSET")
    assert first.attrs == failed(PRIMARY, exc, case.classification)
    assert second.attrs == answered(FALLBACK)  # the attempt that answered is clean
    assert agent.attrs == {  # and so is the agent its fallback saved
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.FLOWRA_AGENT_PATH: "assistant/turn",
        semconv.FLOWRA_TOOL_LOOP_STATUS: "completed",
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["stop"],
        semconv.FLOWRA_TOOL_LOOP_ITERATIONS: 2,  # the agent's LLM calls: both attempts
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 10,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 5,
    }  # two models: no gen_ai.request.model of its own
    assert first.span is not None and first.span.status.description is None  # it would be the message
    assert exception_event(first).keys() == {"exception.type", "flowra.exception.location"}
    assert exception_event(first)["exception.type"] == qualified(exc)
    assert_no_leak(span_exporter.get_finished_spans(), [MARKER])
    assert_all_ended(ledger, span_exporter)

    assert durations(metric_reader, instruments.GEN_AI_CLIENT_OPERATION_DURATION) == canonical(
        [
            ({**metric_base(PRIMARY), **low_cardinality(exc, case.classification)}, 1),
            (metric_base(FALLBACK), 1),
        ]
    )
    assert durations(metric_reader, instruments.GEN_AI_INVOKE_AGENT_DURATION) == [
        ({semconv.GEN_AI_AGENT_NAME: "assistant"}, 1)
    ]
    tokens = durations(metric_reader, instruments.GEN_AI_CLIENT_TOKEN_USAGE)
    assert {a[semconv.GEN_AI_PROVIDER_NAME] for a, _ in tokens} == {"openai"}  # the failed call spent none


async def test_with_capture_on_the_message_is_in_the_failed_attempts_exception_event(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    exc = failure(RateLimitedError, 429)
    runtime = traced(
        make_otel_hooks,
        fallback_runtime((PRIMARY, ScriptedProvider(exc)), (FALLBACK, ScriptedProvider(text_response()))),
        capture_content=True,
    )
    await run_chat(runtime)
    (agent,) = tree(span_exporter)
    first, second = agent.children
    assert MARKER in exception_event(first)["exception.message"]
    assert first.span is not None and MARKER in str(first.span.status.description)
    # The paired negative of the capture-off runs: the scan does find the message here, and only there.
    leaks = find_leaks(span_exporter.get_finished_spans(), [MARKER])
    assert {(leak.span_name, leak.where) for leak in leaks} == {
        ("chat sonnet-4-5", "event exception attribute exception.message"),
        ("chat sonnet-4-5", "event exception attribute exception.stacktrace"),
        ("chat sonnet-4-5", "status description"),
    }
    # Classification is the same whatever the capture setting; the answer's span is clean.
    assert {k: first.attrs[k] for k in CLASSIFICATION_KEYS if k in first.attrs} == classification(
        "rate_limited", True, 429
    )
    assert semconv.ERROR_TYPE not in second.attrs and second.status == "UNSET"


@pytest.mark.parametrize("case", NOT_SWITCHING, ids=lambda c: c.id)
async def test_an_error_that_does_not_switch_ends_the_run_and_the_fallback_is_never_tried(
    case: Case, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    exc = case.error()
    primary, fallback = ScriptedProvider(exc), ScriptedProvider(text_response())
    runtime = traced(make_otel_hooks, fallback_runtime((PRIMARY, primary), (FALLBACK, fallback)))
    with pytest.raises(type(exc)) as caught:
        await run_chat(runtime)
    assert caught.value is exc
    assert fallback.requests == []
    (agent,) = tree(span_exporter)
    assert span_tree.shape([agent]) == [("invoke_agent assistant", [("chat sonnet-4-5", [])])]
    (chat,) = agent.children
    assert chat.attrs == failed(PRIMARY, exc, case.classification)
    assert agent.attrs == {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.FLOWRA_AGENT_PATH: "assistant/turn",
        semconv.FLOWRA_TOOL_LOOP_ITERATIONS: 1,
        semconv.GEN_AI_REQUEST_MODEL: "sonnet-4-5",
        semconv.FLOWRA_END_REASON: semconv.END_ERROR,
        semconv.ERROR_TYPE: qualified(exc),
        **case.classification,
    }
    assert (chat.status, agent.status) == ("ERROR", "ERROR")
    assert_no_leak(span_exporter.get_finished_spans(), [MARKER])
    assert_all_ended(ledger, span_exporter)


async def test_a_chain_that_fails_throughout_ends_the_run_with_the_last_error(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    errors = [
        failure(OverloadedError, 529, model=PRIMARY),
        failure(RateLimitedError, 429, {"retry-after": "7"}, model=FALLBACK),
        failure(UnavailableError, model=THIRD),
    ]
    expected = [
        classification("overloaded", True, 529),
        classification("rate_limited", True, 429, retry_after=7.0),
        classification("unavailable", True),
    ]
    providers = [ScriptedProvider(e) for e in errors]
    runtime = traced(make_otel_hooks, fallback_runtime(*zip((PRIMARY, FALLBACK, THIRD), providers, strict=True)))
    with pytest.raises(UnavailableError) as caught:
        await run_chat(runtime)
    assert caught.value is errors[-1]
    assert [len(p.requests) for p in providers] == [1, 1, 1]

    (agent,) = tree(span_exporter)
    assert span_tree.shape([agent]) == [
        (
            "invoke_agent assistant",
            [("chat sonnet-4-5", []), ("chat gpt-4o", []), ("chat gemini-2.5-flash", [])],
        )
    ]
    assert [c.attrs for c in agent.children] == [
        failed(model, exc, c) for model, exc, c in zip((PRIMARY, FALLBACK, THIRD), errors, expected, strict=True)
    ]
    assert agent.attrs == {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.FLOWRA_AGENT_PATH: "assistant/turn",
        semconv.FLOWRA_TOOL_LOOP_ITERATIONS: 3,
        semconv.FLOWRA_END_REASON: semconv.END_ERROR,
        semconv.ERROR_TYPE: "flowra.llm.errors.UnavailableError",
        **expected[-1],
    }
    assert [n.status for n in span_tree.walk([agent])] == ["ERROR"] * 4
    assert_all_ended(ledger, span_exporter)

    assert durations(metric_reader, instruments.GEN_AI_CLIENT_OPERATION_DURATION) == canonical(
        [
            ({**metric_base(model), **low_cardinality(exc, c)}, 1)
            for model, exc, c in zip((PRIMARY, FALLBACK, THIRD), errors, expected, strict=True)
        ]
    )
    assert durations(metric_reader, instruments.GEN_AI_INVOKE_AGENT_DURATION) == [
        (
            {
                semconv.GEN_AI_AGENT_NAME: "assistant",
                semconv.ERROR_TYPE: "flowra.llm.errors.UnavailableError",
                semconv.FLOWRA_ERROR_KIND: "unavailable",
                semconv.FLOWRA_ERROR_RETRYABLE: True,
            },
            1,
        )
    ]
    assert durations(metric_reader, instruments.GEN_AI_CLIENT_TOKEN_USAGE) == []


# ----------------------------------------------------------------------------- plain exceptions
class ProviderDownError(RuntimeError):
    """Not an ``LLMError``: a custom provider's own failure."""


async def test_a_plain_exception_fails_the_call_and_the_run_unclassified(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    exc = ProviderDownError(f"upstream said: {MARKER}")
    runtime = traced(make_otel_hooks, chat_runtime(ScriptedProvider(exc), get_weather))
    with pytest.raises(ProviderDownError) as caught:
        await run_chat(runtime)
    assert caught.value is exc  # unchanged: same object
    (agent,) = tree(span_exporter)
    (chat,) = agent.children
    unknown = {semconv.FLOWRA_ERROR_KIND: "unknown"}  # no retryability: nobody knows
    assert chat.attrs == failed(PRIMARY, exc, unknown)
    assert chat.attrs[semconv.ERROR_TYPE] == f"{__name__}.ProviderDownError"
    assert {k: agent.attrs.get(k) for k in (semconv.ERROR_TYPE, *CLASSIFICATION_KEYS) if k in agent.attrs} == {
        semconv.ERROR_TYPE: f"{__name__}.ProviderDownError",
        **unknown,
    }
    for node in (agent, chat):
        assert node.status == "ERROR"
        assert node.span is not None and node.span.status.status_code is StatusCode.ERROR
        assert node.span.status.description is None
    assert_no_leak(span_exporter.get_finished_spans(), [MARKER])
    assert_all_ended(ledger, span_exporter)


async def test_a_plain_exception_never_switches_to_the_fallback(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    exc = ProviderDownError("down")
    fallback = ScriptedProvider(text_response())
    runtime = traced(make_otel_hooks, fallback_runtime((PRIMARY, ScriptedProvider(exc)), (FALLBACK, fallback)))
    with pytest.raises(ProviderDownError):
        await run_chat(runtime)
    assert fallback.requests == []  # flowra's LLMCaller switches on LLMError only
    (agent,) = tree(span_exporter)
    (chat,) = agent.children
    assert chat.attrs == failed(PRIMARY, exc, {semconv.FLOWRA_ERROR_KIND: "unknown"})
    assert_all_ended(ledger, span_exporter)


# ----------------------------------------------------------------------------- refusals
def refusal(explanation: str = f"declined: {MARKER}") -> LLMResponse:
    """A refusal as flowra's providers return it: an empty assistant message and the reason."""
    return LLMResponse(
        messages=[AssistantMessage(blocks=[])],
        stop_reason=StopReason.REFUSAL,
        usage=usage(10, 0),
        refusal=Refusal(explanation=explanation, categories=["cyber"]),
    )


async def test_a_refusal_is_an_answer_with_finish_reason_content_filter(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    runtime = traced(make_otel_hooks, chat_runtime(ScriptedProvider(refusal()), get_weather), capture_content=True)
    result = await run_chat(runtime, "Hello")
    assert result.stop_reason is StopReason.REFUSAL and result.refusal is not None
    (agent,) = tree(span_exporter)
    (chat,) = agent.children
    assert (agent.status, chat.status) == ("UNSET", "UNSET")
    content_keys = (semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_SYSTEM_INSTRUCTIONS, semconv.GEN_AI_TOOL_DEFINITIONS)
    assert {k: v for k, v in chat.attrs.items() if k not in content_keys} == {
        **chat_base(PRIMARY),
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["content_filter"],
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 10,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 0,
        semconv.GEN_AI_OUTPUT_MESSAGES: '[{"role":"assistant","parts":[]}]',  # the reason: finish_reasons (#363)
    }
    assert {k: v for k, v in agent.attrs.items() if k not in content_keys} == {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.FLOWRA_AGENT_PATH: "assistant/turn",
        semconv.FLOWRA_TOOL_LOOP_STATUS: "completed",
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["content_filter"],
        semconv.FLOWRA_TOOL_LOOP_ITERATIONS: 1,
        semconv.GEN_AI_REQUEST_MODEL: "sonnet-4-5",
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 10,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 0,
    }  # no output messages: the turn ended with no message of the model's
    assert_all_ended(ledger, span_exporter)


async def test_a_refusal_that_switches_is_a_clean_span_before_the_fallbacks(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    fallback = ScriptedProvider(text_response("Answered."))
    runtime = fallback_runtime(
        (PRIMARY, ScriptedProvider(refusal())),
        (FALLBACK, fallback),
        services={LLMCaller: LLMCaller(policy=FallbackPolicy(switch_on_refusal=True))},
    )
    result = await run_chat(traced(make_otel_hooks, runtime))
    assert result.response == "Answered."
    (agent,) = tree(span_exporter)
    first, second = agent.children
    assert first.attrs == {
        **chat_base(PRIMARY),
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["content_filter"],
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 10,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 0,
    }
    assert second.attrs == answered(FALLBACK)
    assert [n.status for n in span_tree.walk([agent])] == ["UNSET"] * 3
    assert agent.attrs[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ["stop"]


# ----------------------------------------------------------------------------- a tool that calls a model
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TextParams:
    text: str


def summarizer(config: Any) -> Any:
    """A tool that asks a model itself, through flowra's ``LLMCaller`` with its own hooks."""

    @tool("summarize")
    async def summarize(params: TextParams, hooks: Hooks) -> str:
        """Summarizes a text with a small model."""
        response = await LLMCaller().call(config, messages=[UserMessage.text(params.text)], hooks=hooks)
        return "".join(b.text for b in response.message.blocks if isinstance(b, TextBlock))

    return summarize


async def test_a_tools_own_llm_calls_nest_under_its_execute_tool_span(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    exc = failure(OverloadedError, 529, model=THIRD)
    small, small_fallback = ScriptedProvider(exc), ScriptedProvider(text_response("Short."))
    config = llm_config(small, THIRD, fallback=[llm_config(small_fallback, FALLBACK)])
    main = ScriptedProvider(tool_calls_response(("s1", "summarize", {"text": "A long text."})), text_response("Done."))
    result = await run_chat(traced(make_otel_hooks, chat_runtime(main, summarizer(config))), "Summarize")
    assert result.response == "Done."
    assert result_text(main.requests[1].messages[-1].blocks[0]) == "Short."

    (agent,) = tree(span_exporter)
    assert span_tree.shape([agent]) == [
        (
            "invoke_agent assistant",
            [
                ("chat sonnet-4-5", []),
                ("execute_tool summarize", [("chat gemini-2.5-flash", []), ("chat gpt-4o", [])]),
                ("chat sonnet-4-5", []),
            ],
        )
    ]
    tool_span = agent.children[1]
    first, second = tool_span.children
    # Not the agent's own calls: no gen_ai.agent.name, and they do not count as its iterations.
    assert first.attrs == failed(THIRD, exc, classification("overloaded", True, 529), agent=None)
    assert second.attrs == answered(FALLBACK, agent=None)
    assert (first.status, second.status, tool_span.status) == ("ERROR", "UNSET", "UNSET")
    assert agent.attrs[semconv.FLOWRA_TOOL_LOOP_ITERATIONS] == 2
    assert_all_ended(ledger, span_exporter)
    assert durations(metric_reader, instruments.GEN_AI_CLIENT_OPERATION_DURATION) == canonical(
        [
            (metric_base(PRIMARY), 2),
            (
                {**metric_base(THIRD, agent=None), **low_cardinality(exc, classification("overloaded", True, 529))},
                1,
            ),
            (metric_base(FALLBACK, agent=None), 1),
        ]
    )
