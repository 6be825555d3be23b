"""Bad input: odd, huge, binary, deep or broken values in a run, and invalid ``OtelHooks`` options.

Whatever flowra lets an agent carry (tool inputs are plain dicts the model fills, tool results
and messages are whatever tools and providers produce) must never crash the plugin, never
change the agent's result, and must end up on spans as bounded, exportable attributes. The
autouse ``no_internal_errors`` fixture fails any test in which the plugin logs an internal error.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, cast

import pytest
from flowra.agent import HookRegistry
from flowra.lib.tool_loop import ToolLoopConfig, ToolLoopResult, ToolLoopStatus
from flowra.llm import AssistantMessage, ImageBlock, LLMResponse, StopReason, TextBlock, UserMessage
from flowra.tools import LocalTool, ToolDefinition, ToolExecutionContext, ToolRegistry, ToolResult
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from flowra_otel.core.bounded_json import CIRCULAR, MAX_DEPTH, TOO_DEEP
from flowra_otel.core.content import DEFAULT_MAX_CONTENT_LENGTH, MESSAGE_OMITTED, OMITTED_MESSAGES, TRUNCATION_MARKER
from tests.hook_registry.conftest import wrapped_result
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    ScriptStep,
    ToolLike,
    get_weather,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_config,
    tool_loop_runtime,
    tool_registry,
    usage,
)
from tests.hook_registry.test_content_pipeline import HISTORY_FLOOR, valid
from tests.otlp_receiver import OtlpReceiver

MakeHooks = Callable[..., OtelHooks]
Handler = Callable[[ToolExecutionContext], Awaitable[ToolResult]]


# ------------------------------------------------------------------------------------ helpers
def named_tool(name: str, handler: Handler) -> LocalTool:
    """A tool without a typed input: flowra hands it the model's input dict as is, unvalidated."""
    definition = ToolDefinition(name=name, description=f"The {name} tool.", input_schema={"type": "object"})
    return LocalTool(definition=definition, handler=handler)


def returning(content: object, *, name: str = "odd") -> LocalTool:
    async def handler(ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult(content=cast("str", content))

    return named_tool(name, handler)


def registry_with(otel: OtelHooks | None) -> HookRegistry:
    registry = HookRegistry()
    if otel is not None:
        registry.add(otel)
    return registry


async def run_once(
    otel: OtelHooks | None,
    tools: ToolRegistry,
    script: Sequence[ScriptStep],
    *,
    user_message: str = "go",
    **runtime_options: Any,
) -> ToolLoopResult:
    runtime = tool_loop_runtime(ScriptedProvider(list(script)), tools, registry_with(otel), **runtime_options)
    return await run_tool_loop(runtime, user_message)


async def run_paired(
    otel: OtelHooks,
    tools: Sequence[ToolLike],
    script: Callable[[], Sequence[ScriptStep]],
    **options: Any,
) -> ToolLoopResult:
    """The run without the plugin, then with it: the results must be identical."""
    async with tool_registry(*tools) as registry:
        bare = await run_once(None, registry, script(), **options)
        traced = await run_once(otel, registry, script(), **options)
    assert traced == bare
    return traced


def one_call(name: str, arguments: dict[Any, Any], answer: str = "done") -> Callable[[], list[ScriptStep]]:
    return lambda: [tool_calls_response([("c1", name, arguments)]), text_response(answer)]


def spans_named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def attr(span: ReadableSpan, key: str) -> Any:
    return (span.attributes or {}).get(key)


def marker_for(total: int, limit: int) -> str:
    return TRUNCATION_MARKER.format(dropped=total - limit, total=total)


def assert_every_string_bounded(exporter: InMemorySpanExporter, limit: int) -> None:
    """No attribute may exceed the limit plus the longest marker this test could produce (a plain
    text value is cut at the limit and gets the marker; a JSON value fits in the limit, its marker
    included, or is at most ``HISTORY_FLOOR`` when the limit is tiny)."""
    bound = max(limit + len(marker_for(10**12, 0)), HISTORY_FLOOR)
    for span in exporter.get_finished_spans():
        for key, value in (span.attributes or {}).items():
            if isinstance(value, str):
                assert len(value) <= bound, (span.name, key, len(value))


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": True}
    for _ in range(depth):
        value = {"d": value}
    return value


# ------------------------------------------------------------------------------------ odd values
class Opaque:
    """Neither JSON nor a dataclass; its ``str`` is all a model could ever see of it."""

    def __str__(self) -> str:
        return "opaque-thing"


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


async def test_non_json_tool_input_is_rendered_not_crashed_on(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    seen: list[dict[str, Any]] = []

    async def handler(ctx: ToolExecutionContext) -> ToolResult:
        seen.append(dict(ctx.input))
        return ToolResult(content="accepted")

    arguments: dict[Any, Any] = {
        "tags": {"only"},
        "frozen": frozenset({1}),
        "blob": b"\x00\xffbinary",
        "point": Point(1, 2),
        "pair": (1, "two"),
        "opaque": Opaque(),
        "nan": float("nan"),
        7: "non-str key",
    }
    otel = make_otel_hooks(capture_content=True)
    result = await run_paired(otel, [named_tool("odd", handler)], one_call("odd", arguments))

    assert result.status == ToolLoopStatus.COMPLETED
    assert seen[-1] == seen[0]  # the tool got the same input with and without the plugin
    (tool,) = spans_named(span_exporter, "execute_tool")
    rendered = json.loads(attr(tool, semconv.GEN_AI_TOOL_CALL_ARGUMENTS))
    assert rendered["tags"] == ["only"]
    assert rendered["frozen"] == [1]
    assert rendered["blob"] == base64.b64encode(b"\x00\xffbinary").decode("ascii")
    assert rendered["point"] == {"x": 1, "y": 2}
    assert rendered["pair"] == [1, "two"]
    assert rendered["opaque"] == "<Opaque>"
    assert rendered["7"] == "non-str key"
    assert attr(tool, semconv.GEN_AI_TOOL_CALL_RESULT) == wrapped_result("accepted")
    # The assistant's output message carries the same arguments.
    first_chat = spans_named(span_exporter, "chat")[0]
    (call,) = json.loads(attr(first_chat, semconv.GEN_AI_OUTPUT_MESSAGES))[0]["parts"]
    assert call["arguments"]["blob"] == rendered["blob"]


@pytest.mark.parametrize(
    ("content", "recorded"),
    [
        (Opaque(), {"content": "opaque-thing"}),
        (b"raw \xff bytes", {"content": "b'raw \\xff bytes'"}),
        ({"set": {1}}, {"set": [1]}),
        (None, {"content": "None"}),
        (12345, {"content": "12345"}),
        (["a", Point(0, 0)], {"content": ["a", {"x": 0, "y": 0}]}),
    ],
    ids=["object", "bytes", "dict-with-set", "none", "int", "list"],
)
async def test_a_tool_result_that_is_not_a_string(
    content: object, recorded: dict[str, Any], make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """``ToolResult.content`` is typed ``str``, but nothing in flowra enforces it.

    The result attribute is always a JSON object (the schema's type): a dict as JSON (a set as a
    list), a list as JSON inside ``{"content": ...}``, anything else as its ``str()`` inside it."""
    otel = make_otel_hooks(capture_content=True)
    result = await run_paired(otel, [returning(content)], one_call("odd", {}))

    assert result.status == ToolLoopStatus.COMPLETED
    (tool,) = spans_named(span_exporter, "execute_tool")
    assert valid("tool-call-result", attr(tool, semconv.GEN_AI_TOOL_CALL_RESULT)) == recorded
    # The next request carries the result back to the model: still valid JSON on the chat span.
    second_chat = spans_named(span_exporter, "chat")[1]
    messages = valid("input-messages", attr(second_chat, semconv.GEN_AI_INPUT_MESSAGES))
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]


# ------------------------------------------------------------------------------------ huge values
TEN_MB = 10 * 1024 * 1024


@pytest.mark.parametrize("limit", [DEFAULT_MAX_CONTENT_LENGTH, 100])
async def test_a_10_mb_tool_output_is_truncated_with_the_marker(
    limit: int, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    big = "x" * TEN_MB
    # The default limit applies without the option.
    options = {} if limit == DEFAULT_MAX_CONTENT_LENGTH else {"max_content_length": limit}
    otel = make_otel_hooks(capture_content=True, **options)
    await run_paired(otel, [returning(big, name="dump")], one_call("dump", {}))

    (tool,) = spans_named(span_exporter, "execute_tool")
    value = attr(tool, semconv.GEN_AI_TOOL_CALL_RESULT)
    assert len(value) <= limit  # the text is cut inside {"content": ...}: wrapper and marker fit the limit
    content = valid("tool-call-result", value)["content"]
    kept = content.split("…", 1)[0]
    assert kept and set(kept) == {"x"}
    assert content == kept + marker_for(TEN_MB, len(kept))
    second_chat = spans_named(span_exporter, "chat")[1]
    history = attr(second_chat, semconv.GEN_AI_INPUT_MESSAGES)
    messages = valid("input-messages", history)
    assert messages[0]["role"] == "system" and "earlier messages omitted" in messages[0]["parts"][0]["content"]
    (part,) = messages[-1]["parts"]
    if limit == DEFAULT_MAX_CONTENT_LENGTH:  # the newest message, the tool's, is kept and cut inside its part
        assert len(history) <= limit
        assert (messages[-1]["role"], part["type"]) == ("tool", "tool_call_response")
        assert part["response"].startswith("x" * 1000) and part["response"].endswith(f" of {TEN_MB} chars]")
    else:  # a budget too small for any of it: the newest message becomes a marker
        assert len(history) <= HISTORY_FLOOR
        assert part == {"type": "text", "content": MESSAGE_OMITTED}
    assert_every_string_bounded(span_exporter, limit)


# ------------------------------------------------------------------------------------ binary
def with_image(data: bytes) -> ToolLoopConfig:
    """A loop config whose session starts with a user message holding an image."""
    config = tool_loop_config()
    image = UserMessage(blocks=[TextBlock(text="Look at this:"), ImageBlock(data=data, media_type="image/png")])
    return dataclasses.replace(config, session_messages=[image])


def blob_parts(span: ReadableSpan) -> list[dict[str, Any]]:
    messages = json.loads(attr(span, semconv.GEN_AI_INPUT_MESSAGES))
    return [part for message in messages for part in message["parts"] if part["type"] == "blob"]


async def test_an_image_in_a_user_message_becomes_a_base64_blob_part(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    data = bytes(range(256)) * 2
    otel = make_otel_hooks(capture_content=True)
    await run_paired(
        otel, [], lambda: [text_response("A gradient.")], extra_services={ToolLoopConfig: with_image(data)}
    )

    (chat,) = spans_named(span_exporter, "chat")
    assert blob_parts(chat) == [
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": base64.b64encode(data).decode()}
    ]


async def test_a_large_image_is_still_truncated_by_the_limit(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    data = b"\x89PNG" + bytes(1024 * 1024)
    otel = make_otel_hooks(capture_content=True, max_content_length=2_000)
    await run_paired(
        otel, [], lambda: [text_response("Mostly black.")], extra_services={ToolLoopConfig: with_image(data)}
    )

    (chat,) = spans_named(span_exporter, "chat")
    value = attr(chat, semconv.GEN_AI_INPUT_MESSAGES)
    assert len(value) <= 2_000
    # The image message is not the newest ("go" is): over budget, it is dropped whole, oldest first,
    # behind the marker message (a newest message is cut inside its blob part instead: see
    # test_content_pipeline.py::test_images_become_blob_parts_and_huge_ones_are_cut_inside_the_part).
    assert valid("input-messages", value) == [
        {"role": "system", "parts": [{"type": "text", "content": OMITTED_MESSAGES.format(count=1)}]},
        {"role": "user", "parts": [{"type": "text", "content": "go"}]},
    ]
    assert_every_string_bounded(span_exporter, 2_000)


# ------------------------------------------------------------------------------------ deep / cyclic
async def test_deeply_nested_tool_input(make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter) -> None:
    otel = make_otel_hooks(capture_content=True)
    result = await run_paired(otel, [returning("deep ok", name="deep")], one_call("deep", nested(2_000)))

    assert result.status == ToolLoopStatus.COMPLETED
    (tool,) = spans_named(span_exporter, "execute_tool")
    arguments = attr(tool, semconv.GEN_AI_TOOL_CALL_ARGUMENTS)
    assert isinstance(arguments, str)
    assert arguments.startswith('{"d":{"d":') or arguments.startswith('"<unserialisable')
    assert_every_string_bounded(span_exporter, DEFAULT_MAX_CONTENT_LENGTH)


async def test_absurdly_deep_and_cyclic_tool_input_get_a_placeholder(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    cyclic: dict[str, Any] = {"name": "loop"}
    cyclic["self"] = cyclic
    otel = make_otel_hooks(capture_content=True)
    async with tool_registry(returning("ok", name="deep"), returning("ok", name="cyclic")) as tools:
        for name, arguments in (("deep", nested(200_000)), ("cyclic", cyclic)):
            result = await run_once(otel, tools, one_call(name, arguments)())
            assert result.status == ToolLoopStatus.COMPLETED

    deep, cyclic_span = spans_named(span_exporter, "execute_tool")
    # Everything up to the limit is kept; only the part too deep, or the cycle, becomes a marker.
    value = valid("tool-call-arguments", attr(deep, semconv.GEN_AI_TOOL_CALL_ARGUMENTS))
    for _ in range(MAX_DEPTH - 1):
        value = value["d"]
    assert value == {"d": TOO_DEEP.format(depth=MAX_DEPTH)}
    # ``tool_calls_response`` puts a shallow copy of the input in the tool-use block: the copy's
    # "self" is the original dict, whose "self" is the cycle back to it.
    assert valid("tool-call-arguments", attr(cyclic_span, semconv.GEN_AI_TOOL_CALL_ARGUMENTS)) == {
        "name": "loop",
        "self": {"name": "loop", "self": CIRCULAR.format(kind="dict")},
    }
    assert_every_string_bounded(span_exporter, DEFAULT_MAX_CONTENT_LENGTH)


# ------------------------------------------------------------------------------------ broken text
NASTY = "lone \ud800 and \udfff surrogates, NUL \x00, ESC \x1b[31m red, DEL \x7f, BEL \x07 end"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as rx:
        yield rx


async def test_surrogates_and_control_characters_still_export(
    receiver: OtlpReceiver, meter_provider: MeterProvider, caplog: pytest.LogCaptureFixture
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(HttpSpanExporter(endpoint=receiver.http_traces_endpoint)))
    otel = OtelHooks(tracer_provider=provider, meter_provider=meter_provider, capture_content=True)
    try:
        result = await run_paired(otel, [returning(NASTY, name="nasty")], one_call("nasty", {"q": NASTY}, NASTY))
    finally:
        provider.shutdown()
    assert result.status == ToolLoopStatus.COMPLETED

    spans = receiver.wait_for_spans(4, timeout=5)
    assert sorted(s.name for s in spans) == sorted(
        ["invoke_agent assistant", "chat sonnet-4-5", "execute_tool nasty", "chat sonnet-4-5"]
    )
    (tool,) = [s for s in spans if s.name == "execute_tool nasty"]
    exported = tool.attributes[semconv.GEN_AI_TOOL_CALL_RESULT]
    assert isinstance(exported, str)
    # Unencodable surrogates are replaced; every other character, control ones included, survives
    # (JSON-escaped in the attribute, so it parses back to them).
    fixed = NASTY.replace("\ud800", "\ufffd").replace("\udfff", "\ufffd")
    assert "\ufffd" in fixed
    assert valid("tool-call-result", exported) == {"content": fixed}
    arguments = tool.attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]
    assert isinstance(arguments, str)
    assert valid("tool-call-arguments", arguments)["q"] == fixed
    # Nothing was dropped on the way: the exporter encoded every attribute.
    encoder_errors = [r for r in caplog.records if r.name.startswith("opentelemetry") and r.levelno >= logging.ERROR]
    assert encoder_errors == []


# ------------------------------------------------------------------------------------ model names
@pytest.mark.parametrize(
    ("model", "options", "provider_name"),
    [
        ("gpt-4o", {}, "openai"),  # a known model family
        ("house-model-7", {}, semconv.UNKNOWN_PROVIDER),  # nothing to go by (never "_OTHER")
        ("acme/house-model-7", {}, "acme"),  # an unknown vendor prefix: a custom value
        ("house-model-7", {"provider_name": {"house-model-7": "acme"}}, "acme"),
    ],
    ids=["family", "unknown", "custom-prefix", "override"],
)
async def test_a_model_name_without_a_known_vendor_prefix(
    model: str,
    options: dict[str, Any],
    provider_name: str,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
) -> None:
    otel = make_otel_hooks(**options)
    await run_paired(otel, [], lambda: [text_response("hi")], model=model)

    (chat,) = spans_named(span_exporter, "chat")
    assert chat.name == f"chat {model}"
    assert attr(chat, semconv.GEN_AI_PROVIDER_NAME) == provider_name
    assert attr(chat, semconv.GEN_AI_REQUEST_MODEL) == model
    assert attr(chat, semconv.FLOWRA_LLM_MODEL) == model


# ------------------------------------------------------------------------------------ missing values
def token_points(reader: InMemoryMetricReader) -> int:
    data = reader.get_metrics_data()
    count = 0
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == "gen_ai.client.token.usage":
                    count += len(list(metric.data.data_points))
    return count


async def test_no_usage_means_no_usage_attributes_and_no_token_points(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    await run_paired(otel_hooks, [get_weather], one_call("get_weather", {"city": "Rome"}))

    spans = span_exporter.get_finished_spans()
    assert len(spans) == 4
    for span in spans:
        keys = set(span.attributes or {})
        assert not {k for k in keys if k.startswith(("gen_ai.usage.", "flowra.agent.usage."))}, span.name
    assert token_points(metric_reader) == 0


async def test_usage_on_one_call_only(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    def script() -> list[ScriptStep]:
        return [tool_calls_response([("c1", "get_weather", {"city": "Rome"})]), text_response("ok", usage=usage(4, 2))]

    await run_paired(otel_hooks, [get_weather], script)
    first, second = spans_named(span_exporter, "chat")
    assert attr(first, semconv.GEN_AI_USAGE_INPUT_TOKENS) is None
    assert attr(second, semconv.GEN_AI_USAGE_INPUT_TOKENS) == 4
    (agent,) = spans_named(span_exporter, "invoke_agent")
    assert attr(agent, semconv.GEN_AI_USAGE_OUTPUT_TOKENS) == 2
    assert token_points(metric_reader) == 2  # input and output of the one call that reported usage


async def test_empty_user_message_and_empty_tool_input(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    otel = make_otel_hooks(capture_content=True)
    result = await run_paired(otel, [returning("", name="noop")], one_call("noop", {}, ""), user_message="")

    assert result.status == ToolLoopStatus.COMPLETED
    (tool,) = spans_named(span_exporter, "execute_tool")
    assert attr(tool, semconv.GEN_AI_TOOL_CALL_ARGUMENTS) == "{}"
    assert attr(tool, semconv.GEN_AI_TOOL_CALL_RESULT) == wrapped_result("")
    first_chat = spans_named(span_exporter, "chat")[0]
    assert json.loads(attr(first_chat, semconv.GEN_AI_INPUT_MESSAGES)) == [
        {"role": "user", "parts": [{"type": "text", "content": ""}]}
    ]


async def test_a_user_message_without_blocks(make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter) -> None:
    config = tool_loop_config()
    config = dataclasses.replace(config, session_messages=[UserMessage(blocks=[])])
    otel = make_otel_hooks(capture_content=True)
    await run_paired(otel, [], lambda: [text_response("hm")], extra_services={ToolLoopConfig: config})

    (chat,) = spans_named(span_exporter, "chat")
    messages = json.loads(attr(chat, semconv.GEN_AI_INPUT_MESSAGES))
    assert messages[-1]["role"] == "user"


@pytest.mark.parametrize("stop_reason", [StopReason.END_TURN, StopReason.MAX_TOKENS])
async def test_a_response_with_zero_blocks(
    stop_reason: StopReason, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    def script() -> list[ScriptStep]:
        return [LLMResponse(message=AssistantMessage(blocks=[]), stop_reason=stop_reason, usage=None)]

    otel = make_otel_hooks(capture_content=True)
    await run_paired(otel, [], script)

    (chat,) = spans_named(span_exporter, "chat")
    output = json.loads(attr(chat, semconv.GEN_AI_OUTPUT_MESSAGES))
    assert output == [{"role": "assistant", "parts": []}]  # the finish reason is not in the message (#363)
    expected = semconv.FINISH_REASON_BY_STOP_REASON[stop_reason.value]
    assert attr(chat, semconv.GEN_AI_RESPONSE_FINISH_REASONS) == (expected,)
    assert len(span_exporter.get_finished_spans()) == 2


# ------------------------------------------------------------------------------------ invalid options
class NotAProvider:
    pass


INVALID_OPTIONS: list[tuple[str, object, type[Exception]]] = [
    ("tracer_provider", "global", TypeError),
    ("tracer_provider", NotAProvider(), TypeError),
    ("meter_provider", object(), TypeError),
    ("capture_content", "yes", ValueError),  # a str, but not a content mode
    ("capture_content", "events", ValueError),
    ("capture_content", 1, TypeError),
    ("logger_provider", object(), TypeError),
    ("semconv_compat", "dup", TypeError),
    ("content_upload", 42, TypeError),
    ("content_upload", True, TypeError),
    ("content_upload", "gs-nope://bucket/x", ValueError),
    ("user_id", 7, TypeError),
    ("user_id", "", TypeError),
    ("agent_version", 42, TypeError),
    ("agent_version", {"assistant": ""}, TypeError),
    ("agent_name", 42, TypeError),
    ("agent_name", {"assistant": 1}, TypeError),
    ("agent_name", {"assistant": ""}, TypeError),
    ("provider_name", ["openai"], TypeError),
    ("provider_name", {1: "openai"}, TypeError),
    ("redact", "lower", TypeError),
    ("redact_secrets", "api_key", TypeError),
    ("redact_secrets", 5, TypeError),
    ("redact_secrets", None, TypeError),
    ("redact_secrets", ["api_key", "no_such_pattern"], ValueError),
    ("max_content_length", "100", TypeError),
    ("max_content_length", 1.5, TypeError),
    ("max_content_length", True, TypeError),
    ("max_content_length", 0, ValueError),
    ("max_content_length", -5, ValueError),
    ("redaction_hmac_key", 123, TypeError),
    ("redaction_hmac_key", b"short", ValueError),
    ("redaction_hmac_key", "short", ValueError),
    ("conversation_id", "", TypeError),
    ("conversation_id", 7, TypeError),
    ("attributes", [("tenant", "a")], TypeError),
    ("attributes", {"tenant": object()}, TypeError),
    ("attributes", {"tenant": None}, TypeError),
    ("attributes", {"": "a"}, TypeError),
    ("attributes", {1: "a"}, TypeError),
    ("attributes", {"tags": ["a", object()]}, TypeError),
    ("capture", True, TypeError),  # a misspelt option is refused by name too
]


@pytest.mark.parametrize(
    ("option", "value", "error"),
    INVALID_OPTIONS,
    ids=[f"{name}={value!r}"[:40] for name, value, _ in INVALID_OPTIONS],
)
def test_invalid_options_fail_at_construction_naming_the_option(
    option: str, value: object, error: type[Exception]
) -> None:
    with pytest.raises(error) as raised:
        OtelHooks(**cast("dict[str, Any]", {option: value}))
    assert type(raised.value) is error
    assert option in str(raised.value)
