"""Hostile input on flowra 0.0.86+ never changes the run, never leaves a span open, never reaches
flowra as an exception, and never becomes a value the exporter cannot encode.

Odd values come from three places a run does not control: the model (usage counts that are None,
negative or beyond int64, a NaN cost, tool calls with non-str ids and names, huge or broken
arguments, empty responses, a response without an assistant message), the hooks (results and
calls replaced with odd objects) and the tools (bytes, huge strings, media blocks, empty or odd
blocks). Each case runs twice on real flowra: once with flowra's own ``emit`` and no tracing at
all, once traced with content capture on; the outcome (the result, or the exception) and every
request the model received must be identical, every started span ended, the spans and metrics
must encode as OTLP, and neither flowra_otel (autouse ``no_internal_errors``) nor flowra's span
machinery (``flowra_span_handlers_never_fail`` below) logs an error.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import pytest
from flowra.agent import AgentRuntime, Event
from flowra.lib.turn import make_agent_tool
from flowra.lib.turn.hook_events import AfterToolCallEvent, BeforeToolCallEvent
from flowra.llm import (
    AssistantMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    MediaBlock,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
)
from flowra.tools import ToolResult, tool
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import emit_patch
from flowra_otel.core import semconv
from flowra_otel.core.content import DEFAULT_MAX_CONTENT_LENGTH
from flowra_otel.testing import assert_no_leak
from tests.otlp_receiver import OtlpReceiver
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, wrapped_result
from tests.runtime_hooks.support import (
    CALLS_EVENT,
    HAS_CALLS_EVENT,
    HAS_RESULT_BLOCKS,
    HAS_TOOL_BLOCKS,
    PARALLEL_SAME_AGENT,
    SSN,
    ResearcherAgent,
    ResearcherSetup,
    Script,
    ScriptedProvider,
    chat_runtime,
    get_weather,
    lookup_customer,
    requires,
    research_runtime,
    research_tool,
    run_chat,
    text_response,
    tool_calls_response,
    usage,
)

MakeHooks = Callable[..., OtelHooks]
INT64_MAX = 2**63 - 1
NASTY = "lone \ud800 and \udfff surrogates, NUL \x00, ESC \x1b[31m, emoji \U0001f600, RTL \u202e end"
FIXED = NASTY.replace("\ud800", "\ufffd").replace("\udfff", "\ufffd")
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
NEEDS_CALLS_EVENT = pytest.mark.skipif(not HAS_CALLS_EVENT, reason="BeforeToolCallsEvent is flowra 0.0.92+")


@pytest.fixture(autouse=True)
def flowra_span_handlers_never_fail(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """flowra catches and logs (``Span enter/exit handler failed``) what a span handler raises,
    so an adapter bug there would pass ``no_internal_errors``: fail on those too, and on any
    error the OTLP encoders log (an attribute they could not encode is dropped with an ERROR)."""
    caplog.set_level(logging.ERROR, logger="flowra.agent.flow.hooks")
    caplog.set_level(logging.ERROR, logger="opentelemetry")
    yield
    records = caplog.get_records("call")
    failed = [r for r in records if r.name == "flowra.agent.flow.hooks" and r.levelno >= logging.ERROR]
    assert failed == [], [r.getMessage() for r in failed]
    encoder = [r for r in records if r.name.startswith("opentelemetry") and r.levelno >= logging.ERROR]
    assert encoder == [], [r.getMessage() for r in encoder]


# ------------------------------------------------------------------------------------ the pairing
@dataclasses.dataclass(frozen=True)
class Case:
    """One run: the model's script, the tools, the hooks the app registers, the user's text."""

    script: Callable[[], Sequence[Script]]
    tools: Sequence[Any] = (get_weather,)
    hooks: Callable[[AgentRuntime], None] = lambda runtime: None
    text: str = "go"


_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def normalised(text: str) -> str:
    return _ADDRESS.sub(" at 0x?", text)


async def outcome(run: Awaitable[Any]) -> str:
    """The run's result, or the exception it raised, as comparable text."""
    try:
        result = await run
    except Exception as exc:
        return normalised(f"raised {type(exc).__qualname__}: {exc!r}")
    return normalised(f"returned {result!r}")


async def run_case(case: Case, otel: OtelHooks | None) -> tuple[str, str]:
    provider = ScriptedProvider(*case.script())
    runtime = chat_runtime(provider, *case.tools)
    if otel is not None:
        otel.install(runtime)
    case.hooks(runtime)
    result = await outcome(run_chat(runtime, case.text))
    return result, normalised(repr(provider.requests))


async def paired(case: Case, make_otel_hooks: MakeHooks, **options: Any) -> str:
    """Run ``case`` untraced (flowra's own ``emit``), then traced with content capture on:
    the same outcome and the same requests to the model, or the test fails."""
    emit_patch.uninstall()
    bare = await run_case(case, None)
    otel = make_otel_hooks(capture_content=True, **options)  # puts the patched emit back
    assert emit_patch.installed()
    traced = await run_case(case, otel)
    assert traced[0] == bare[0], "the run's outcome changed under tracing"
    assert traced[1] == bare[1], "the model was given something else under tracing"
    return traced[0]


def assert_exportable(exporter: InMemorySpanExporter, reader: InMemoryMetricReader | None = None) -> None:
    """Every attribute is a value OTLP can carry (UTF-8 text, int64), and the real OTLP encoders
    encode the spans and metrics (an encoder error fails the test through the autouse fixture)."""
    spans = exporter.get_finished_spans()
    for span in spans:
        for key, value in (span.attributes or {}).items():
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, str):
                    item.encode("utf-8")  # raises on a lone surrogate
                elif isinstance(item, int) and not isinstance(item, bool):
                    assert -(2**63) <= item <= INT64_MAX, (span.name, key, item)
    encode_spans(spans)
    if reader is not None:
        data = reader.get_metrics_data()
        if data is not None:
            encode_metrics(data)


def spans_named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return sorted(
        (s for s in exporter.get_finished_spans() if s.name.startswith(prefix)), key=lambda s: s.start_time or 0
    )


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


OSLO: dict[str, Any] = {"city": "Oslo"}


def weather_call(call_id: Any = "c1", name: Any = "get_weather", arguments: Any = OSLO) -> LLMResponse:
    block = ToolUseBlock(id=call_id, name=name, input=arguments)
    return LLMResponse(messages=[AssistantMessage(blocks=[block])], stop_reason=StopReason.TOOL_USE, usage=usage())


def one_call(call: LLMResponse | None = None, answer: str = "done") -> Callable[[], list[Script]]:
    return lambda: [call if call is not None else weather_call(), text_response(answer)]


# ------------------------------------------------------------------------------------ usage from the model
def with_usage(odd: Usage | None, text: str = "fine") -> LLMResponse:
    return LLMResponse(messages=text_response(text).messages, stop_reason=StopReason.END_TURN, usage=odd)


USAGES: list[Any] = [
    pytest.param(
        Usage(input_tokens=None, output_tokens=None),  # type: ignore[arg-type]
        {semconv.GEN_AI_USAGE_INPUT_TOKENS: 0, semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 0},
        id="none-counts",
    ),
    pytest.param(
        Usage(input_tokens=-5, output_tokens=-1, cache_read_input_tokens=-3),
        {semconv.GEN_AI_USAGE_INPUT_TOKENS: 0, semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 0},
        id="negative-counts",
    ),
    pytest.param(
        Usage(input_tokens=2**64 - 1, output_tokens=2**64 - 1, cache_read_input_tokens=2**63),
        {
            semconv.GEN_AI_USAGE_INPUT_TOKENS: INT64_MAX,
            semconv.GEN_AI_USAGE_OUTPUT_TOKENS: INT64_MAX,
            semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: INT64_MAX,
        },
        id="beyond-int64",
    ),
    pytest.param(
        Usage(input_tokens=3, output_tokens=2, cost_usd=float("nan")),
        {semconv.GEN_AI_USAGE_INPUT_TOKENS: 3, semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 2},
        id="nan-cost",
    ),
    pytest.param(
        Usage(input_tokens=3, output_tokens=2, cost_usd=float("inf")),
        {semconv.GEN_AI_USAGE_INPUT_TOKENS: 3, semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 2},
        id="infinite-cost",
    ),
    pytest.param(
        Usage(input_tokens="12", output_tokens="many", cost_usd="n/a"),  # type: ignore[arg-type]
        {semconv.GEN_AI_USAGE_INPUT_TOKENS: 12, semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 0},
        id="strings",
    ),
    pytest.param(None, {}, id="no-usage"),
]


@pytest.mark.parametrize(("odd", "recorded"), USAGES)
async def test_odd_usage_costs_its_numbers_not_the_spans(
    odd: Usage | None,
    recorded: dict[str, Any],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    result = await paired(Case(lambda: [with_usage(odd)]), make_otel_hooks)
    assert "response='fine'" in result and result.startswith("returned ChatResult(")
    (chat,) = spans_named(span_exporter, "chat")
    (agent,) = spans_named(span_exporter, "invoke_agent")
    for span in (chat, agent):
        usage_keys = {k: v for k, v in attrs(span).items() if k.startswith(("gen_ai.usage.", "flowra.usage."))}
        # The internal agent span keeps the totals only (#469): no cache counts there.
        expected = recorded if span is chat else {k: v for k, v in recorded.items() if ".cache_" not in k}
        assert usage_keys == expected, span.name
    assert_exportable(span_exporter, metric_reader)
    assert_all_ended(ledger, span_exporter)


@pytest.mark.parametrize(("odd", "recorded"), USAGES)
async def test_odd_usage_summed_over_two_calls(
    odd: Usage | None,
    recorded: dict[str, Any],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    """flowra sums a turn's usage itself (a sum of None counts raises in flowra, traced or not);
    the agent span's sum stays within int64 whatever the parts."""

    def script() -> list[Script]:
        call = weather_call()
        return [dataclasses.replace(call, usage=odd), with_usage(odd, "done")]

    await paired(Case(script), make_otel_hooks)
    assert_exportable(span_exporter, metric_reader)
    assert_all_ended(ledger, span_exporter)


async def test_odd_values_reach_an_otlp_collector_in_whole_batches() -> None:
    """End to end through the real OTLP/HTTP exporters: usage beyond int64 and a tool name with a
    lone surrogate cost no span and no metric point (one value the encoder refused would drop
    the attribute, and in a metric exemplar the whole metrics export, every other metric with it)."""
    odd = Usage(input_tokens=2**64 - 1, output_tokens=2**64 - 1)
    with OtlpReceiver() as rx:
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=rx.http_traces_endpoint)))
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=rx.http_metrics_endpoint), export_interval_millis=3_600_000
        )
        meter_provider = MeterProvider(metric_readers=[reader])
        otel = OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=True)
        try:
            runtime = chat_runtime(
                ScriptedProvider(
                    dataclasses.replace(weather_call(name="get_\udcffweather"), usage=odd), with_usage(odd, "sorry")
                ),
                get_weather,
            )
            otel.install(runtime)
            await run_chat(runtime, "go")
            assert tracer_provider.force_flush(10_000) and meter_provider.force_flush(10_000)
            spans = rx.wait_for_spans(4)
            points = rx.wait_for_metric_points("gen_ai.client.token.usage", 2)  # input, output
        finally:
            tracer_provider.shutdown()
            meter_provider.shutdown()
    assert sorted(s.name for s in spans) == [
        "chat sonnet-4-5",
        "chat sonnet-4-5",
        "execute_tool _unknown_tool",
        "invoke_agent assistant",
    ]
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.attributes[semconv.FLOWRA_TOOL_REQUESTED_NAME] == "get_\ufffdweather"
    (agent,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert agent.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == INT64_MAX
    assert {p.max for p in points} == {float(INT64_MAX)}


# ------------------------------------------------------------------------------------ tool calls from the model
ODD_CALLS: list[Any] = [
    pytest.param(weather_call(call_id=7), id="int-id"),
    pytest.param(weather_call(call_id=None), id="none-id"),
    pytest.param(weather_call(call_id=("t", 1)), id="tuple-id"),
    pytest.param(weather_call(call_id=["unhashable"]), id="unhashable-id"),
    pytest.param(weather_call(call_id="c\ud800"), id="surrogate-id"),
    pytest.param(weather_call(call_id="x" * 100_000), id="huge-id"),
    pytest.param(weather_call(name=None), id="none-name"),
    pytest.param(weather_call(name=42), id="int-name"),
    pytest.param(weather_call(name="get_\udcffweather"), id="surrogate-name"),
    pytest.param(weather_call(name="n" * 100_000), id="huge-name"),
    # Arguments that are no object (nor JSON of one): recorded as the model gave them, which the
    # conventions' schema (an object) does not cover.
    pytest.param(weather_call(arguments="city=Oslo"), id="str-arguments", marks=pytest.mark.semconv_exempt),
    pytest.param(weather_call(arguments=None), id="none-arguments", marks=pytest.mark.semconv_exempt),
    pytest.param(
        weather_call(arguments='{"city": "Oslo"'), id="broken-json-arguments", marks=pytest.mark.semconv_exempt
    ),
    pytest.param(weather_call(arguments='{"city": "Oslo"}'), id="json-text-arguments"),
    pytest.param(weather_call(arguments={"city": NASTY}), id="surrogate-arguments"),
    pytest.param(weather_call(arguments={7: "seven", (1, 2): "tuple", "city": "Oslo"}), id="non-str-keys"),
    pytest.param(weather_call(arguments={"city": "x" * 3_000_000}), id="huge-arguments"),
]


@pytest.mark.parametrize("call", ODD_CALLS)
async def test_odd_tool_calls_from_the_model(
    call: LLMResponse,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    await paired(Case(one_call(call)), make_otel_hooks)
    assert_exportable(span_exporter, metric_reader)
    assert_bounded(span_exporter)
    assert_all_ended(ledger, span_exporter)


def assert_bounded(exporter: InMemorySpanExporter, limit: int = DEFAULT_MAX_CONTENT_LENGTH) -> None:
    """No attribute is much longer than the content limit (its truncation marker aside); the call
    id is the model's own identifier, recorded whole."""
    for span in exporter.get_finished_spans():
        for key, value in (span.attributes or {}).items():
            if isinstance(value, str) and key != semconv.GEN_AI_TOOL_CALL_ID:
                assert len(value) <= limit + 200, (span.name, key, len(value))


async def test_a_huge_argument_is_cut_inside_valid_json(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    await paired(Case(one_call(weather_call(arguments={"city": "x" * 3_000_000}))), make_otel_hooks)
    (tool,) = spans_named(span_exporter, "execute_tool")
    arguments = json.loads(attrs(tool)[semconv.GEN_AI_TOOL_CALL_ARGUMENTS])
    assert arguments["city"].startswith("x" * 1000) and arguments["city"].endswith(" of 3000000 chars]")
    assert len(attrs(tool)[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]) <= DEFAULT_MAX_CONTENT_LENGTH
    assert_all_ended(ledger, span_exporter)


async def test_arguments_kept_as_json_text_are_recorded_as_an_object(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """flowra keeps OpenAI's tool arguments as the JSON text the provider sent (``ToolUseBlock.input``
    is a str): recorded deserialised, on the tool span and in the chat's output message."""
    await paired(Case(one_call(weather_call(arguments='{"city": "Oslo"}'))), make_otel_hooks)
    (tool,) = spans_named(span_exporter, "execute_tool")
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"city":"Oslo"}'
    first_chat = spans_named(span_exporter, "chat")[0]
    (message,) = json.loads(attrs(first_chat)[semconv.GEN_AI_OUTPUT_MESSAGES])
    assert message["parts"] == [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}]
    assert_all_ended(ledger, span_exporter)


@pytest.mark.semconv_exempt  # text arguments: no object
@pytest.mark.parametrize(
    ("arguments", "recorded", "mime"),
    [
        ('{"city": "Oslo"}', '{"city":"Oslo"}', "application/json"),
        ("[city] Oslo, please", '"[city] Oslo, please"', "application/json"),
    ],
    ids=["json-object-text", "plain-text"],
)
async def test_openinference_input_value_is_the_recorded_arguments_with_their_kind(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, arguments: str, recorded: str, mime: str
) -> None:
    """``openinference=True``: a tool span's ``input.value`` (Phoenix's Input panel) is exactly the
    recorded ``gen_ai.tool.call.arguments``, JSON in every case: an object, or a JSON string of the
    text the model left (even text that starts like JSON)."""
    await paired(Case(one_call(weather_call(arguments=arguments))), make_otel_hooks, openinference=True)
    (tool,) = spans_named(span_exporter, "execute_tool")
    values = attrs(tool)
    assert values[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] == values[semconv.OI_INPUT_VALUE] == recorded
    assert values[semconv.OI_INPUT_MIME_TYPE] == mime


@pytest.mark.semconv_exempt  # null arguments: no object
async def test_none_arguments_are_recorded_as_null(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """``None`` arguments are recorded as the model gave them, ``null``, whatever the budget
    (not the over-budget marker: ``fit``'s None means "cannot fit", and null always fits)."""
    await paired(Case(one_call(weather_call(arguments=None))), make_otel_hooks)
    (tool,) = spans_named(span_exporter, "execute_tool")
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] == "null"
    first_chat = spans_named(span_exporter, "chat")[0]
    (message,) = json.loads(attrs(first_chat)[semconv.GEN_AI_OUTPUT_MESSAGES])
    assert message["parts"] == [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": None}]
    assert_all_ended(ledger, span_exporter)


async def test_surrogates_in_ids_names_and_text_become_replacement_characters(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    call = weather_call(call_id="c\ud800", arguments={"city": NASTY})
    await paired(Case(one_call(call, NASTY), text=NASTY), make_otel_hooks)
    (tool,) = spans_named(span_exporter, "execute_tool")
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_ID] == "c\ufffd"
    assert json.loads(attrs(tool)[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"city": FIXED}
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(f"Sunny in {FIXED}")
    (agent,) = spans_named(span_exporter, "invoke_agent")
    (message,) = json.loads(attrs(agent)[semconv.GEN_AI_INPUT_MESSAGES])
    assert message["parts"] == [{"type": "text", "content": FIXED}]
    (output,) = json.loads(attrs(agent)[semconv.GEN_AI_OUTPUT_MESSAGES])
    assert output["parts"] == [{"type": "text", "content": FIXED}]
    assert_exportable(span_exporter)
    assert_all_ended(ledger, span_exporter)


# ------------------------------------------------------------------------------------ tool-use ids are not keys
def tool_rows(exporter: InMemorySpanExporter) -> list[tuple[Any, ...]]:
    return sorted(
        (
            attrs(s)[semconv.GEN_AI_TOOL_CALL_ID],
            attrs(s).get(semconv.GEN_AI_TOOL_CALL_ARGUMENTS),
            attrs(s).get(semconv.GEN_AI_TOOL_CALL_RESULT),
            s.status.status_code.name,
            attrs(s).get(semconv.FLOWRA_END_REASON),
        )
        for s in spans_named(exporter, "execute_tool")
    )


@pytest.mark.parametrize("call_id", ["dup", ""], ids=["same-id", "empty-id"])
async def test_tool_calls_sharing_an_id_each_get_their_own_span_and_result(
    call_id: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    def script() -> list[Script]:
        calls = [(call_id, "get_weather", {"city": "Oslo"}), (call_id, "get_weather", {"city": "Lima"})]
        return [tool_calls_response(*calls), text_response("done")]

    await paired(Case(script), make_otel_hooks)
    assert tool_rows(span_exporter) == [
        (call_id, '{"city":"Lima"}', wrapped_result("Sunny in Lima"), "UNSET", None),
        (call_id, '{"city":"Oslo"}', wrapped_result("Sunny in Oslo"), "UNSET", None),
    ]
    assert_all_ended(ledger, span_exporter)


class ByQuestion(LLMProvider):
    """A researcher's model: parallel researchers ask in any order, so it answers by question."""

    def __init__(self, scripts: dict[str, list[Script]]) -> None:
        self.scripts = {question: list(steps) for question, steps in scripts.items()}

    async def call(self, request: LLMRequest) -> LLMResponse:
        question = next(b.text for b in request.messages[0].blocks if isinstance(b, TextBlock))
        step = self.scripts[question].pop(0)
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            return step(request)
        return step


def research_script(alpha: Script, beta: Script) -> dict[str, list[Script]]:
    return {"alpha": [alpha], "beta": [beta]}


@requires(PARALLEL_SAME_AGENT, "one agent twice in parallel is flowra 0.0.76+ (before: Duplicate persistent key)")
async def test_agents_as_tools_sharing_an_id_nest_under_their_own_execute_tool(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    parent = ScriptedProvider(
        tool_calls_response(("same", "research", {"question": "alpha"}), ("same", "research", {"question": "beta"})),
        text_response("both done"),
    )
    researcher = ByQuestion(research_script(text_response("answer alpha"), text_response("answer beta")))
    runtime = research_runtime(parent, researcher)
    make_otel_hooks(capture_content=True).install(runtime)
    assert (await run_chat(runtime, "go")).response == "both done"
    spans = span_exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    answers = []
    for agent in spans_named(span_exporter, "invoke_agent researcher/turn"):
        assert agent.parent is not None
        researcher_span = by_id[agent.parent.span_id]
        assert researcher_span.name == "invoke_agent researcher" and researcher_span.parent is not None
        tool = by_id[researcher_span.parent.span_id]
        assert tool.name == "execute_tool research"
        (answer,) = json.loads(attrs(agent)[semconv.GEN_AI_OUTPUT_MESSAGES])[0]["parts"]
        # the researcher's answer is the result of the very execute_tool it nests under
        assert json.loads(attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT]) == {"answer": answer["content"]}
        answers.append(answer["content"])
    assert sorted(answers) == ["answer alpha", "answer beta"]
    assert_all_ended(ledger, span_exporter)


@requires(PARALLEL_SAME_AGENT, "one agent twice in parallel is flowra 0.0.76+ (before: Duplicate persistent key)")
async def test_a_failing_parallel_sub_agent_detaches_nothing_in_another_task(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """One researcher's model fails while its sibling is still waiting: the run fails, every span
    ends, and no context is detached in a task that did not attach it (the autouse fixture fails
    on opentelemetry.context's "Failed to detach context")."""

    async def late(request: LLMRequest) -> LLMResponse:
        await asyncio.sleep(0.02)
        return text_response("answer beta")

    class SlowBeta(ByQuestion):
        async def call(self, request: LLMRequest) -> LLMResponse:
            if any(b.text == "beta" for b in request.messages[0].blocks if isinstance(b, TextBlock)):
                return await late(request)
            return await super().call(request)

    parent = ScriptedProvider(
        tool_calls_response(("a", "research", {"question": "alpha"}), ("b", "research", {"question": "beta"}))
    )
    runtime = research_runtime(parent, SlowBeta({"alpha": [RuntimeError("researcher model down")]}))
    make_otel_hooks().install(runtime)
    with pytest.raises(RuntimeError, match="researcher model down"):
        await run_chat(runtime, "go")
    failed = [s for s in spans_named(span_exporter, "chat") if attrs(s).get(semconv.ERROR_TYPE) == "RuntimeError"]
    assert len(failed) == 1
    assert_all_ended(ledger, span_exporter)


class AnalystAgent(ResearcherAgent):
    """A second agent used as a tool (another persistent key: two of them run in parallel on every
    release, where one agent twice needs flowra 0.0.76+)."""

    __slots__ = ()


async def test_a_failing_sub_agent_beside_another_detaches_nothing_in_another_task(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """Two agents used as tools run in parallel; the researcher's model fails while the analyst
    still waits: the run fails, every span ends under its own tool call, and no context is
    detached in a task that did not attach it (on 0.0.56 - 0.0.67 the tool's frame opens from the
    tool-call agent's own span: this is its failure path)."""

    class SlowBeta(ByQuestion):
        async def call(self, request: LLMRequest) -> LLMResponse:
            if any(b.text == "beta" for b in request.messages[0].blocks if isinstance(b, TextBlock)):
                await asyncio.sleep(0.02)
                return text_response("answer beta")
            return await super().call(request)

    parent = ScriptedProvider(
        tool_calls_response(("a", "research", {"question": "alpha"}), ("b", "analyze", {"question": "beta"}))
    )
    runtime = chat_runtime(
        parent,
        research_tool,
        make_agent_tool(AnalystAgent, name="analyze", description="Analyse one question"),
        agents={"researcher": ResearcherAgent, "analyst": AnalystAgent},
        services={ResearcherSetup: ResearcherSetup(provider=SlowBeta({"alpha": [RuntimeError("model down")]}))},
    )
    make_otel_hooks().install(runtime)
    with pytest.raises(RuntimeError, match="model down"):
        await run_chat(runtime, "go")
    failed = [s for s in spans_named(span_exporter, "chat") if attrs(s).get(semconv.ERROR_TYPE) == "RuntimeError"]
    # the researcher's chat failed; the analyst's, stopped by it, is cancelled (older releases
    # close it with the run's error: it reads failed too)
    assert 1 <= len(failed) <= 2
    spans = span_exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    for agent_name, tool_name in (("researcher", "research"), ("analyst", "analyze")):
        (agent,) = [s for s in spans if s.name == f"invoke_agent {agent_name}"]
        assert agent.parent is not None and by_id[agent.parent.span_id].name == f"execute_tool {tool_name}"
    assert_all_ended(ledger, span_exporter)


class UnprintableError(RuntimeError):
    """A provider SDK exception whose ``__str__`` itself fails (seen with lazily formatted bodies)."""

    def __str__(self) -> str:
        raise ValueError("no message for you")


async def test_a_provider_error_whose_str_raises_still_ends_every_span(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    outcome = await paired(Case(lambda: [weather_call(), UnprintableError()]), make_otel_hooks)
    assert outcome.startswith("raised UnprintableError")
    failed = spans_named(span_exporter, "chat")[-1]
    assert attrs(failed)[semconv.ERROR_TYPE] == f"{__name__}.UnprintableError"
    (event,) = [e for e in failed.events if e.name == "exception"]
    assert "str() failed" in str((event.attributes or {})["exception.message"])
    assert_all_ended(ledger, span_exporter)


class Ambiguous:
    """An array-like: ``==`` is element-wise and its truth value raises (numpy, pandas)."""

    def __repr__(self) -> str:
        return "Ambiguous()"

    def __eq__(self, other: object) -> Any:
        return Ambiguous()

    def __ne__(self, other: object) -> Any:
        return Ambiguous()

    def __bool__(self) -> bool:
        raise ValueError("The truth value of an array with more than one element is ambiguous.")

    __hash__ = None  # type: ignore[assignment]


def array_like_input(runtime: AgentRuntime) -> None:
    """Two hooks each put a fresh array-like into the tool input: the ledger compares the second
    replacement with the first, array-like with array-like."""

    def hook(event: Event[BeforeToolCallEvent]) -> None:
        event.data.tool_use = dataclasses.replace(event.data.tool_use, input={"city": "Oslo", "matrix": Ambiguous()})

    runtime.hooks.on(BeforeToolCallEvent, hook)
    runtime.hooks.on(BeforeToolCallEvent, hook)


async def test_an_array_like_tool_input_does_not_break_the_run(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    await paired(Case(one_call(), hooks=array_like_input), make_otel_hooks, redaction_hmac_key=b"0123456789abcdef")
    (tool,) = spans_named(span_exporter, "execute_tool")
    assert attrs(tool)["flowra.redaction.fields"] == ("arguments",)  # undecidable equality counts as a change
    assert json.loads(attrs(tool)[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"city": "Oslo", "matrix": "<Ambiguous>"}
    assert_all_ended(ledger, span_exporter)


# ------------------------------------------------------------------------------------ responses
def response(*messages: Any, stop: StopReason = StopReason.END_TURN) -> Callable[[], list[Script]]:
    return lambda: [LLMResponse(messages=list(messages), stop_reason=stop, usage=None)]


RESPONSES: list[Any] = [
    pytest.param(response(AssistantMessage(blocks=[])), id="empty-end-turn"),
    pytest.param(response(AssistantMessage(blocks=[]), stop=StopReason.MAX_TOKENS), id="empty-max-tokens"),
    pytest.param(response(AssistantMessage(blocks=[TextBlock(text="")])), id="empty-text"),
    pytest.param(response(), id="no-message-at-all"),
    pytest.param(response(UserMessage(blocks=[TextBlock(text="not the model's")])), id="no-assistant-message"),
    pytest.param(
        response(UserMessage(blocks=[TextBlock(text="x")]), stop=StopReason.MAX_TOKENS),
        id="no-assistant-message-cut-off",
    ),
    pytest.param(
        lambda: [
            LLMResponse(messages=[AssistantMessage(blocks=[])], stop_reason=StopReason.TOOL_USE, usage=None),
            text_response("after nothing"),
        ],
        id="tool-use-without-calls",
    ),
    pytest.param(
        response(AssistantMessage(blocks=[ToolUseBlock(id="c1", name="get_weather", input={})]), stop=StopReason.OTHER),
        id="cut-off-call-only",
    ),
]


@pytest.mark.parametrize("script", RESPONSES)
async def test_empty_and_message_less_responses(
    script: Callable[[], list[Script]],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    await paired(Case(script), make_otel_hooks)
    assert_exportable(span_exporter, metric_reader)
    assert_all_ended(ledger, span_exporter)


# ------------------------------------------------------------------------------------ hooks with odd values
class Opaque:
    """A value a hook may leave anywhere: its ``str``, equality and truth value all raise."""

    def __repr__(self) -> str:
        return "Opaque()"

    def __str__(self) -> str:
        raise ValueError("no text for you")

    def __eq__(self, other: object) -> bool:
        raise ValueError("ambiguous comparison")

    def __bool__(self) -> bool:
        raise ValueError("ambiguous truth value")

    __hash__ = None  # type: ignore[assignment]


def after(replace: Callable[[Any], Any]) -> Callable[[AgentRuntime], None]:
    def register(runtime: AgentRuntime) -> None:
        def hook(event: Event[AfterToolCallEvent]) -> None:
            event.data.result = replace(event.data)

        runtime.hooks.on(AfterToolCallEvent, hook)

    return register


def before(replace: Callable[[ToolUseBlock], Any]) -> Callable[[AgentRuntime], None]:
    def register(runtime: AgentRuntime) -> None:
        def hook(event: Event[BeforeToolCallEvent]) -> None:
            event.data.tool_use = replace(event.data.tool_use)

        runtime.hooks.on(BeforeToolCallEvent, hook)

    return register


def after_call(replace: Callable[[Any], Any]) -> Callable[[AgentRuntime], None]:
    """An ``AfterToolCallEvent`` hook replacing the event's ``tool_use`` (flowra goes on with its own)."""

    def register(runtime: AgentRuntime) -> None:
        def hook(event: Event[AfterToolCallEvent]) -> None:
            event.data.tool_use = replace(event.data.tool_use)

        runtime.hooks.on(AfterToolCallEvent, hook)

    return register


def answer_all(result: Callable[[], Any]) -> Callable[[AgentRuntime], None]:
    def register(runtime: AgentRuntime) -> None:
        def hook(event: Event[Any]) -> None:
            for tool_use in event.data.tool_uses:
                event.data.results[tool_use.id] = result()

        runtime.hooks.on(CALLS_EVENT, hook)

    return register


def add_blocks(*blocks: Any) -> Callable[[AgentRuntime], None]:
    def register(runtime: AgentRuntime) -> None:
        def hook(event: Event[AfterToolCallEvent]) -> None:
            event.data.additional_blocks.extend(blocks)

        runtime.hooks.on(AfterToolCallEvent, hook)

    return register


HOOKS: list[Any] = [
    pytest.param(after(lambda data: "plain text"), id="result-str"),
    pytest.param(after(lambda data: None), id="result-none"),
    pytest.param(after(lambda data: Opaque()), id="result-opaque"),
    pytest.param(
        after(lambda data: ToolResultBlock(tool_use_id=data.tool_use.id, content="not a list")),  # type: ignore[arg-type]
        id="result-str-content",
    ),
    pytest.param(
        after(lambda data: ToolResultBlock(tool_use_id=data.tool_use.id, content=None)),  # type: ignore[arg-type]
        id="result-none-content",
    ),
    pytest.param(
        after(lambda data: ToolResultBlock(tool_use_id=12345, content=[TextBlock(text="other id")])),  # type: ignore[arg-type]
        id="result-for-another-id",
    ),
    pytest.param(
        after(lambda data: ToolResultBlock(tool_use_id=data.tool_use.id, content=[Opaque(), TextBlock(text="t")])),  # type: ignore[list-item]
        id="result-opaque-block",
    ),
    pytest.param(
        after(lambda data: dataclasses.replace(data.result, content=[TextBlock(text="y" * 2_000_000)])),
        id="result-huge",
    ),
    pytest.param(add_blocks(MediaBlock(data=PNG, media_type="image/png"), Opaque()), id="additional-odd-blocks"),
    pytest.param(after_call(lambda use: "not a call"), id="after-call-str"),
    pytest.param(after_call(lambda use: dataclasses.replace(use, id=Opaque())), id="after-call-opaque-id"),
    pytest.param(
        before(lambda use: dataclasses.replace(use, input=Opaque())),  # type: ignore[arg-type]
        id="call-opaque-input",
        marks=pytest.mark.semconv_exempt,  # no object: recorded as the hook left it
    ),
    pytest.param(before(lambda use: dataclasses.replace(use, name=None)), id="call-none-name"),  # type: ignore[arg-type]
    pytest.param(before(lambda use: dataclasses.replace(use, id=None)), id="call-changed-id"),  # type: ignore[arg-type]
    pytest.param(before(lambda use: "not a call"), id="call-str"),
    pytest.param(before(lambda use: dataclasses.replace(use, input={"city": "z" * 2_000_000})), id="call-huge"),
    pytest.param(
        answer_all(lambda: ToolResult(content=[MediaBlock(data=PNG, media_type="image/png")])),
        id="prefilled-media",
        marks=NEEDS_CALLS_EVENT,
    ),
    pytest.param(answer_all(lambda: ToolResult(content=[])), id="prefilled-empty", marks=NEEDS_CALLS_EVENT),
    pytest.param(answer_all(lambda: "not a ToolResult"), id="prefilled-str", marks=NEEDS_CALLS_EVENT),
    pytest.param(answer_all(lambda: None), id="prefilled-none", marks=NEEDS_CALLS_EVENT),
    pytest.param(
        answer_all(lambda: ToolResult(content=None)),  # type: ignore[arg-type]
        id="prefilled-none-content",
        marks=NEEDS_CALLS_EVENT,
    ),
]


@pytest.mark.parametrize("hooks", HOOKS)
async def test_hooks_leaving_odd_values(
    hooks: Callable[[AgentRuntime], None],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    await paired(Case(one_call(), hooks=hooks), make_otel_hooks)
    assert_exportable(span_exporter, metric_reader)
    assert_bounded(span_exporter)
    assert_all_ended(ledger, span_exporter)


async def test_a_result_replaced_by_a_string_is_recorded_as_the_model_got_it(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """No ``ToolResultBlock`` for the call reaches the model: the value every hook left is recorded."""
    case = Case(one_call(weather_call(name="lookup_customer", arguments={"name": "Ann"})), (lookup_customer,))
    await paired(dataclasses.replace(case, hooks=after(lambda data: "[withheld]")), make_otel_hooks)
    (tool,) = spans_named(span_exporter, "execute_tool")
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("[withheld]")
    assert_no_leak(span_exporter.get_finished_spans(), SSN)
    assert_all_ended(ledger, span_exporter)


async def test_a_tool_use_replaced_after_the_call_still_records_its_result(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """flowra reads its own record of the call after ``AfterToolCallEvent``: the result still
    belongs to the call's span (found by the result's ``tool_use_id``)."""
    await paired(Case(one_call(), hooks=after_call(lambda use: "not a call")), make_otel_hooks)
    (tool,) = spans_named(span_exporter, "execute_tool")
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("Sunny in Oslo")
    assert semconv.FLOWRA_END_REASON not in attrs(tool)
    assert_all_ended(ledger, span_exporter)


async def test_a_hook_leaving_no_call_records_no_arguments(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """A ``BeforeToolCallEvent`` hook that leaves a value which is no call at all: flowra 0.0.92+
    fails the step on it (the call's id changed), before 0.0.92 it keeps the value in the history
    and spawns it. The chat's output shows what runs (no id, no name, no arguments) and the tool
    span records no arguments: the value has none (not ``null``, which is arguments a call had)."""
    await paired(Case(one_call(), hooks=before(lambda use: "not a call")), make_otel_hooks)
    tools = spans_named(span_exporter, "execute_tool")
    if HAS_CALLS_EVENT:  # 0.0.92+: flowra rejects the changed id before any call runs
        assert tools == []
    else:
        (tool,) = tools
        assert semconv.GEN_AI_TOOL_CALL_ARGUMENTS not in attrs(tool)
        assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_ID] == ""
        (message,) = json.loads(attrs(spans_named(span_exporter, "chat")[0])[semconv.GEN_AI_OUTPUT_MESSAGES])
        assert message["parts"] == [{"type": "tool_call", "id": "", "name": "", "arguments": None}]
    assert_all_ended(ledger, span_exporter)


# ------------------------------------------------------------------------------------ tools with odd results
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class KindParams:
    kind: str


def chart() -> list[MediaBlock | TextBlock]:
    return [MediaBlock(data=PNG, media_type="image/png"), TextBlock(text="a chart")]


ODD_RESULTS: dict[str, Callable[[], Any]] = {
    "bytes": lambda: b"raw \x00\xff bytes",
    "huge-str": lambda: "h" * 5_000_000,
    "media": lambda: ToolResult(content=chart()),
    "media-only": lambda: ToolResult(content=[MediaBlock(data=PNG * 4_000, media_type="application/pdf")]),
    "empty-blocks": lambda: ToolResult(content=[]),
    "surrogates": lambda: ToolResult(content=[TextBlock(text=NASTY)]),
    "opaque-block": lambda: ToolResult(content=[Opaque()]),  # type: ignore[list-item]
    "none-content": lambda: ToolResult(content=None),  # type: ignore[arg-type]
    "none": lambda: None,
    "opaque": Opaque,
    "set-in-dict": lambda: {"tags": {"a"}},
    "error": lambda: ToolResult(content="it broke", is_error=True),
}


@tool("odd")
async def odd(params: KindParams) -> Any:
    """Answers with an odd value of the given kind."""
    return ODD_RESULTS[params.kind]()


@pytest.mark.parametrize("kind", list(ODD_RESULTS))
async def test_tools_returning_odd_results(
    kind: str,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    call = weather_call(name="odd", arguments={"kind": kind})
    await paired(Case(one_call(call), (odd,)), make_otel_hooks)
    assert_exportable(span_exporter, metric_reader)
    assert_bounded(span_exporter)
    assert_all_ended(ledger, span_exporter)


def media_by_hook(call_id: str) -> Callable[[AgentRuntime], None]:
    """Before flowra 0.0.89 a tool answers text: the ``media`` answer reaches the call's result
    through a hook instead (the same blocks, recorded the same way)."""
    return after(
        lambda data: (
            ToolResultBlock(tool_use_id=data.result.tool_use_id, content=chart())
            if data.result.tool_use_id == call_id
            else data.result
        )
    )


@requires(HAS_RESULT_BLOCKS, "media in a tool result is flowra 0.0.86+ (a result is text before)")
async def test_bytes_and_media_results_are_recorded_as_the_model_got_them(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    media = "media" if HAS_TOOL_BLOCKS else "none"  # flowra 0.0.86 - 0.0.88: media_by_hook gives c2 its blocks

    def script() -> list[Script]:
        return [
            tool_calls_response(("c1", "odd", {"kind": "bytes"}), ("c2", "odd", {"kind": media})),
            text_response("seen"),
        ]

    case = Case(script, (odd,)) if HAS_TOOL_BLOCKS else Case(script, (odd,), hooks=media_by_hook("c2"))
    await paired(case, make_otel_hooks)
    by_id = {attrs(s)[semconv.GEN_AI_TOOL_CALL_ID]: s for s in spans_named(span_exporter, "execute_tool")}
    # flowra base64-encodes a tool's bytes into text (format_result): the model gets that text.
    raw = base64.b64encode(b"raw \x00\xff bytes").decode("ascii")
    assert attrs(by_id["c1"])[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(raw)
    assert json.loads(attrs(by_id["c2"])[semconv.GEN_AI_TOOL_CALL_RESULT]) == {
        "content": [
            {
                "type": "blob",
                "modality": "image",
                "mime_type": "image/png",
                "content": base64.b64encode(PNG).decode("ascii"),
            },
            {"type": "text", "content": "a chart"},
        ]
    }
    assert_all_ended(ledger, span_exporter)
