"""Beside a provider instrumentation built on opentelemetry-util-genai, one model call is one model span.

End to end, nothing mocked: flowra's own ``GoogleVertexProvider`` (a ``ChatAgent``'s provider on
flowra 0.0.86+, a ``ToolLoopAgent``'s before) with the real google-genai client in API-key mode
against a loopback Gemini (``tests/fake_model_api.py``), the real
``opentelemetry-instrumentation-google-genai`` 1.3b0 (util-genai 1.3b0) and the plugin, both on the
test's SDK providers. Without cooperation each call is recorded twice: our ``chat gemini-2.5-flash``
and, under it, their ``generate_content gemini-2.5-flash``, and ``gen_ai.client.token.usage`` sums
every token twice. With it (the plugin puts util-genai's ``InferenceData`` in the context while its
chat span is current), their inference folds into our span: no span, no metric of theirs, and the
response id only they know is on our span. Whichever of the two is installed first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flowra.llm.providers.google_vertex import GoogleVertexProvider
from google import genai
from google.genai import types as genai_types
from openai import AsyncOpenAI
from opentelemetry.context import Context
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import cooperation, semconv
from tests.both_lines.line import MakeHooks, S
from tests.conftest import SpanLedger
from tests.fake_model_api import (
    FakeGemini,
    FakeOpenAI,
    gemini_function_call,
    gemini_text,
    openai_text,
    openai_tool_call,
)
from tests.provider_instrumentation import GOOGLE_GENAI_SCOPE as THEIR_SCOPE
from tests.provider_instrumentation import OUR_SCOPE, duration_counts, model_spans, ours, token_sums
from tests.semconv_conformance import check_spans
from tests.span_tree import build, shape

MODEL = "gemini-2.5-flash"
CONTENT_KEYS = {
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
    semconv.GEN_AI_TOOL_DEFINITIONS,
}


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        server.replies += [
            gemini_function_call("get_weather", {"city": "Paris"}, response_id="resp-1", tokens=(11, 7)),
            gemini_text("Sunny in Paris.", response_id="resp-2", tokens=(11, 7)),
        ]
        yield server


@pytest.fixture
def google_genai_instrumentation(
    tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> Iterator[Callable[[], None]]:
    """Calling it instruments the google-genai SDK on the test's providers (undone at teardown)."""
    instrumentor = GoogleGenAiSdkInstrumentor()

    def instrument() -> None:
        instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

    yield instrument
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


async def run_weather(
    server: FakeGemini,
    make_plugin: Callable[[], OtelHooks] | None,
    first: Callable[[], None],
    then: Callable[[], None] = lambda: None,
) -> str:
    """The assistant asks Gemini twice (a tool call, then the answer) through flowra's own Gemini
    provider in API-key mode; ``first`` runs before the plugin is made and put on the agent's
    hooks, ``then`` right after (the other install order: the instrumentation comes after)."""
    first()
    client = genai.Client(api_key="test-key", http_options=genai_types.HttpOptions(base_url=server.url))
    try:
        otel = make_plugin() if make_plugin is not None else None
        answer = await S.provider_weather_run(
            GoogleVertexProvider(client=client), otel, model=MODEL, after_install=then
        )
    finally:
        await client.aio.aclose()
        client.close()
    return answer or ""


@pytest.mark.parametrize("order", ["instrumentation-first", "plugin-first"])
async def test_one_model_call_is_one_model_span_and_its_tokens_count_once(
    order: str,
    gemini: FakeGemini,
    google_genai_instrumentation: Callable[[], None],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Their content capture on: what they capture must never reach our spans (ours is off).
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")

    def plugin() -> OtelHooks:
        return make_otel_hooks(capture_content=False)

    def no_op() -> None:
        pass

    first, then = (
        (no_op, google_genai_instrumentation) if order == "plugin-first" else (google_genai_instrumentation, no_op)
    )
    assert await run_weather(gemini, plugin, first, then) == "Sunny in Paris."

    assert len(gemini.requests) == 2  # both calls went through the real SDK and its instrumentation
    assert shape(build(span_exporter.get_finished_spans())) == [
        (
            "invoke_agent assistant",
            [("chat gemini-2.5-flash", []), ("execute_tool get_weather", []), ("chat gemini-2.5-flash", [])],
        )
    ]
    assert model_spans(span_exporter) == [(OUR_SCOPE, "chat gemini-2.5-flash")] * 2
    chats = [s for s in ours(span_exporter) if s.name.startswith("chat")]
    # What only the inner instrumentation knew (flowra has no response id) enriches our span.
    assert [(s.attributes or {}).get(semconv.GEN_AI_RESPONSE_ID) for s in chats] == ["resp-1", "resp-2"]
    assert [
        (
            (s.attributes or {})[semconv.GEN_AI_USAGE_INPUT_TOKENS],
            (s.attributes or {})[semconv.GEN_AI_USAGE_OUTPUT_TOKENS],
        )
        for s in chats
    ] == [(11, 7), (11, 7)]
    assert all(not (set(s.attributes or {}) & CONTENT_KEYS) for s in span_exporter.get_finished_spans())
    # Tokens once, in the metrics as on the spans: ours only, 22 in and 14 out.
    assert token_sums(metric_reader) == {(OUR_SCOPE, "input"): 22, (OUR_SCOPE, "output"): 14}
    assert duration_counts(metric_reader) == {OUR_SCOPE: 2}
    S.assert_all_ended(ledger, span_exporter)


@pytest.mark.semconv_exempt  # their spans: server.address without server.port (checked: ours conform)
async def test_without_the_suppression_every_call_is_recorded_twice(
    gemini: FakeGemini,
    google_genai_instrumentation: Callable[[], None],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The paired negative: with the plugin's cooperation key removed (``with_inference_data``
    hands the context back unchanged), the duplicate spans and the doubled tokens of the issue
    come back, in the same run as above."""

    def no_cooperation(context: Context) -> tuple[Context, Any]:
        return context, None

    monkeypatch.setattr(cooperation, "with_inference_data", no_cooperation)
    assert await run_weather(gemini, make_otel_hooks, google_genai_instrumentation)
    assert sorted(model_spans(span_exporter)) == sorted(
        [(OUR_SCOPE, "chat gemini-2.5-flash")] * 2 + [(THEIR_SCOPE, "generate_content gemini-2.5-flash")] * 2
    )
    tree = build(span_exporter.get_finished_spans())
    (agent,) = tree
    assert [c.name for c in agent.children] == [
        "chat gemini-2.5-flash",
        "execute_tool get_weather",
        "chat gemini-2.5-flash",
    ]
    assert [[g.name for g in c.children] for c in agent.children if c.name.startswith("chat")] == [
        ["generate_content gemini-2.5-flash"]
    ] * 2
    assert token_sums(metric_reader) == {
        (OUR_SCOPE, "input"): 22,
        (OUR_SCOPE, "output"): 14,
        (THEIR_SCOPE, "input"): 22,
        (THEIR_SCOPE, "output"): 14,
    }  # 44 in, 28 out: every token twice
    assert all(semconv.GEN_AI_RESPONSE_ID not in (s.attributes or {}) for s in ours(span_exporter))
    assert check_spans(ours(span_exporter)) == []


@pytest.mark.semconv_exempt  # their spans: server.address without server.port
async def test_without_the_plugin_theirs_is_unchanged(
    gemini: FakeGemini,
    google_genai_instrumentation: Callable[[], None],
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    assert await run_weather(gemini, None, google_genai_instrumentation) == "Sunny in Paris."
    spans = span_exporter.get_finished_spans()
    assert [(s.instrumentation_scope.name if s.instrumentation_scope else "", s.name) for s in spans] == [
        (THEIR_SCOPE, "generate_content gemini-2.5-flash")
    ] * 2
    assert [dict(s.attributes or {}) for s in spans] == [
        {
            semconv.GEN_AI_OPERATION_NAME: "generate_content",
            semconv.GEN_AI_PROVIDER_NAME: "gemini",
            semconv.GEN_AI_REQUEST_MODEL: MODEL,
            semconv.SERVER_ADDRESS: "127.0.0.1",
            semconv.GEN_AI_REQUEST_MAX_TOKENS: 4096,
            semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
            semconv.GEN_AI_RESPONSE_MODEL: MODEL,
            semconv.GEN_AI_RESPONSE_ID: response_id,
            semconv.GEN_AI_USAGE_INPUT_TOKENS: 11,
            semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 7,
        }
        for response_id in ("resp-1", "resp-2")
    ]
    assert token_sums(metric_reader) == {(THEIR_SCOPE, "input"): 22, (THEIR_SCOPE, "output"): 14}
    assert duration_counts(metric_reader) == {THEIR_SCOPE: 2}


# ------------------------------------------------------------------------------------ genai-openai
@pytest.mark.parametrize("order", ["instrumentation-first", "plugin-first"])
async def test_beside_genai_openai_too_one_model_call_is_one_model_span(
    order: str,
    make_otel_hooks: MakeHooks,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    """The same with ``opentelemetry-instrumentation-genai-openai`` 1.3b0 and the real openai
    client (through flowra 0.0.8's own ``OpenAIProvider``; on 0.0.86+ an app-written provider, see
    ``tests/runtime_hooks/scenarios.py``), whose own span is also named ``chat gpt-4o-mini``: only
    ours remains, with the response id, model and server only it knew."""
    instrumentor = OpenAIInstrumentor()
    with FakeOpenAI() as server:
        server.replies += [
            openai_tool_call("get_weather", {"city": "Paris"}, response_id="chatcmpl-1"),
            openai_text("Sunny in Paris.", response_id="chatcmpl-2"),
        ]
        port = int(server.url.rsplit(":", 1)[1])
        client = AsyncOpenAI(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0)
        try:
            if order == "instrumentation-first":
                instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

            def then() -> None:
                if order == "plugin-first":
                    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

            provider = S.openai_provider(client)
            answer = await S.provider_weather_run(provider, make_otel_hooks(), model="gpt-4o-mini", after_install=then)
            assert answer == "Sunny in Paris."
        finally:
            instrumentor.uninstrument()
            await client.close()
    assert len(server.requests) == 2
    assert model_spans(span_exporter) == [(OUR_SCOPE, "chat gpt-4o-mini")] * 2
    chats = [dict(s.attributes or {}) for s in ours(span_exporter) if s.name.startswith("chat")]
    handed_over = (
        semconv.GEN_AI_RESPONSE_ID,
        semconv.GEN_AI_RESPONSE_MODEL,
        semconv.SERVER_ADDRESS,
        semconv.SERVER_PORT,
    )
    assert [tuple(c.get(k) for k in handed_over) for c in chats] == [
        ("chatcmpl-1", "gpt-4o-mini", "127.0.0.1", port),
        ("chatcmpl-2", "gpt-4o-mini", "127.0.0.1", port),
    ]
    assert token_sums(metric_reader) == {(OUR_SCOPE, "input"): 22, (OUR_SCOPE, "output"): 14}
    assert duration_counts(metric_reader) == {OUR_SCOPE: 2}
