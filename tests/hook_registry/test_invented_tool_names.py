"""A tool name the model invented (not offered by the request) is model output, hence content.

A model can call any name it likes; flowra answers ``Unknown tool: <name>``. Put into span names,
``gen_ai.tool.name`` or metric attributes, such a name would leak model output with capture off
and open an unbounded metric series. So spans and metrics name the placeholder ``_unknown_tool``;
with capture on the name the model asked for is kept in ``flowra.tool.requested_name``. A hook
that redirects the invented call to a tool the request offered names that tool; a hook that only
normalises names (strips a ``functions.`` prefix) vouches for nothing: only an offered name is
trusted. With capture on, an invented name is content wherever it is recorded, so ``redact=`` and
``redact_secrets=`` scrub it there: the requested name and the messages' ``tool_call`` parts.

Everything is scanned: span names, attributes, events, status, and every metric point's
attributes, with a paired check that an offered name *is* found by the same scan.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import BeforeToolCallEvent, ToolLoopStatus
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import content, instruments, semconv
from flowra_otel.testing import assert_no_leak, find_leaks
from tests.hook_registry.conftest import SpanLedger, assert_all_ended
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    get_weather,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
    tool_results,
)

MakeHooks = Callable[..., OtelHooks]

INVENTED = "wire_money_to_account_q7"
OFFERED = "get_weather"
PLACEHOLDER = semconv.INVENTED_TOOL_NAME

MESSAGE_CONTENT = {
    f"attribute {semconv.GEN_AI_INPUT_MESSAGES}",
    f"attribute {semconv.GEN_AI_OUTPUT_MESSAGES}",
}
"""Where a capture-on trace legitimately shows the model's tool calls: the messages themselves."""


def script() -> list[Any]:
    return [
        tool_calls_response([("c1", INVENTED, {"amount": 100}), ("c2", OFFERED, {"city": "Paris"})]),
        text_response("Done."),
    ]


async def run(registry: HookRegistry) -> Any:
    provider = ScriptedProvider(script())
    async with tool_registry(get_weather) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Pay the bill, then weather?")
    assert result.status == ToolLoopStatus.COMPLETED
    provider.assert_exhausted()
    return result


def registry_of(otel: OtelHooks, *handlers: Any, handlers_first: bool = False) -> HookRegistry:
    registry = HookRegistry()
    if not handlers_first:
        registry.add(otel)
    for handler in handlers:
        registry.on(BeforeToolCallEvent, handler)
    if handlers_first:
        registry.add(otel)
    return registry


def metric_texts(reader: InMemoryMetricReader) -> Iterator[tuple[str, str]]:
    """(metric name, text) for every string in every metric point's attributes (keys too)."""
    data = reader.get_metrics_data()
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    for key, value in (point.attributes or {}).items():
                        yield metric.name, key
                        values = value if isinstance(value, tuple | list) else (value,)
                        yield from ((metric.name, str(v)) for v in values)


def metrics_mentioning(reader: InMemoryMetricReader, text: str) -> set[str]:
    return {name for name, value in metric_texts(reader) if text in value}


def tool_names_in_metrics(reader: InMemoryMetricReader, metric: str) -> list[str]:
    data = reader.get_metrics_data()
    assert data is not None
    return sorted(
        str((p.attributes or {}).get(semconv.GEN_AI_TOOL_NAME))
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == metric
        for p in m.data.data_points
    )


def tool_spans(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    return {str((s.attributes or {})[semconv.GEN_AI_TOOL_CALL_ID]): s for s in spans}


async def test_capture_off_the_invented_name_is_nowhere(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    result = await run(registry_of(make_otel_hooks(capture_content=False)))
    assert_all_ended(ledger, span_exporter)
    # flowra did see the invented call (and answered it with an error).
    assert [r.is_error for r in tool_results(result)] == [True, False]

    spans = span_exporter.get_finished_spans()
    assert_no_leak(spans, [INVENTED])
    assert metrics_mentioning(metric_reader, INVENTED) == set()

    tools = tool_spans(span_exporter)
    invented = tools["c1"]
    assert invented.name == f"execute_tool {PLACEHOLDER}"
    attrs = dict(invented.attributes or {})
    assert attrs[semconv.GEN_AI_TOOL_NAME] == PLACEHOLDER
    assert semconv.FLOWRA_TOOL_REQUESTED_NAME not in attrs
    assert semconv.GEN_AI_TOOL_DESCRIPTION not in attrs
    assert tool_names_in_metrics(metric_reader, instruments.GEN_AI_EXECUTE_TOOL_DURATION) == sorted(
        [OFFERED, PLACEHOLDER]
    )
    assert tool_names_in_metrics(metric_reader, instruments.FLOWRA_TOOL_ERRORS) == [PLACEHOLDER]

    # Paired negative: the same scans do find an offered tool's name.
    assert tools["c2"].name == f"execute_tool {OFFERED}"
    assert find_leaks(spans, [OFFERED])
    assert instruments.GEN_AI_EXECUTE_TOOL_DURATION in metrics_mentioning(metric_reader, OFFERED)


async def test_capture_on_the_invented_name_is_only_content(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    await run(registry_of(make_otel_hooks(capture_content=True)))
    invented = tool_spans(span_exporter)["c1"]
    attrs = dict(invented.attributes or {})
    assert invented.name == f"execute_tool {PLACEHOLDER}"
    assert attrs[semconv.GEN_AI_TOOL_NAME] == PLACEHOLDER
    assert attrs[semconv.FLOWRA_TOOL_REQUESTED_NAME] == INVENTED

    # Outside the message content, the requested-name attribute is the only place it appears
    # (and flowra's "Unknown tool: <name>" error text, which is the tool result: content too).
    places = {(leak.span_name, leak.where) for leak in find_leaks(span_exporter.get_finished_spans(), [INVENTED])}
    outside_messages = {(name, where) for name, where in places if where not in MESSAGE_CONTENT}
    assert outside_messages == {
        (invented.name, f"attribute {semconv.FLOWRA_TOOL_REQUESTED_NAME}"),
        (invented.name, "status description"),
    }
    assert all(not name.endswith(INVENTED) for name, _ in places)  # never in a span name
    assert metrics_mentioning(metric_reader, INVENTED) == set()


def redirect_to_weather(event: Event[BeforeToolCallEvent]) -> None:
    """Application code mapping a name the model made up onto a real tool."""
    tool_use = event.data.tool_use
    if tool_use.name == INVENTED:
        event.data.tool_use = dataclasses.replace(tool_use, name=OFFERED, input={"city": "Zurich"})


@pytest.mark.parametrize("handlers_first", [False, True], ids=["hook_after_plugin", "hook_before_plugin"])
@pytest.mark.parametrize("capture", [False, True], ids=["capture_off", "capture_on"])
async def test_a_hook_redirecting_an_invented_call_names_the_real_tool(
    handlers_first: bool,
    capture: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    otel = make_otel_hooks(capture_content=capture)
    result = await run(registry_of(otel, redirect_to_weather, handlers_first=handlers_first))
    assert_all_ended(ledger, span_exporter)
    assert [r.is_error for r in tool_results(result)] == [False, False]  # the redirected call ran

    redirected = tool_spans(span_exporter)["c1"]
    assert redirected.name == f"execute_tool {OFFERED}"
    assert (redirected.attributes or {})[semconv.GEN_AI_TOOL_NAME] == OFFERED
    assert tool_names_in_metrics(metric_reader, instruments.GEN_AI_EXECUTE_TOOL_DURATION) == [OFFERED]
    assert instruments.FLOWRA_TOOL_ERRORS not in {name for name, _ in metric_texts(metric_reader)}
    assert metrics_mentioning(metric_reader, INVENTED) == set()
    assert metrics_mentioning(metric_reader, PLACEHOLDER) == set()
    if not capture:
        assert_no_leak(span_exporter.get_finished_spans(), [INVENTED])


# ==================================================================================== hooks that only normalise names
def strip_functions_prefix(event: Event[BeforeToolCallEvent]) -> None:
    """Application code that only tidies names (some models prefix them with ``functions.``): it
    does not decide which tool runs, so it vouches for nothing."""
    tool_use = event.data.tool_use
    if tool_use.name.startswith("functions."):
        event.data.tool_use = dataclasses.replace(tool_use, name=tool_use.name.removeprefix("functions."))


def prefixed_script() -> list[Any]:
    return [
        tool_calls_response(
            [("c1", f"functions.{INVENTED}", {"amount": 100}), ("c2", f"functions.{OFFERED}", {"city": "Paris"})]
        ),
        text_response("Done."),
    ]


@pytest.mark.parametrize("handlers_first", [False, True], ids=["hook_after_plugin", "hook_before_plugin"])
async def test_a_hook_that_only_normalises_names_does_not_vouch_for_an_invented_one(
    handlers_first: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    """Only a name the request offered is trusted, whoever passed it on: the invented name a hook
    tidied up is still the model's output (the placeholder in span name, ``gen_ai.tool.name`` and
    both tool metrics, no new time series); the offered one it tidied names its tool."""
    provider = ScriptedProvider(prefixed_script())
    registry = registry_of(
        make_otel_hooks(capture_content=False), strip_functions_prefix, handlers_first=handlers_first
    )
    async with tool_registry(get_weather) as weather:
        result = await run_tool_loop(tool_loop_runtime(provider, weather, registry), "Pay, then weather?")
    assert [r.is_error for r in tool_results(result)] == [True, False]  # flowra: unknown tool, then the weather
    assert_all_ended(ledger, span_exporter)

    tools = tool_spans(span_exporter)
    assert tools["c1"].name == f"execute_tool {PLACEHOLDER}"
    assert (tools["c1"].attributes or {})[semconv.GEN_AI_TOOL_NAME] == PLACEHOLDER
    assert tools["c2"].name == f"execute_tool {OFFERED}"
    assert (tools["c2"].attributes or {})[semconv.GEN_AI_TOOL_NAME] == OFFERED
    assert_no_leak(span_exporter.get_finished_spans(), [INVENTED])
    assert metrics_mentioning(metric_reader, INVENTED) == set()
    assert tool_names_in_metrics(metric_reader, instruments.GEN_AI_EXECUTE_TOOL_DURATION) == sorted(
        [OFFERED, PLACEHOLDER]
    )
    assert tool_names_in_metrics(metric_reader, instruments.FLOWRA_TOOL_ERRORS) == [PLACEHOLDER]


# ==================================================================================== invented names in messages
SECRET_NAME = "notify_bob@example.com"
"""A name a model made up from what it read: an e-mail address (the built-in ``email`` pattern)."""


def mask_bob(text: str) -> str:
    return text.replace("bob@example.com", "[BOB]")


@pytest.mark.parametrize(
    ("options", "scrubbed"),
    [({"redact_secrets": True}, "[REDACTED:email]"), ({"redact": mask_bob}, "notify_[BOB]")],
    ids=["redact_secrets", "redact"],
)
async def test_an_invented_name_is_scrubbed_everywhere_it_is_content(
    options: dict[str, Any],
    scrubbed: str,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    """``redact=`` / ``redact_secrets=`` scrub a model-chosen tool name wherever capture records
    it: ``flowra.tool.requested_name`` and the ``tool_call`` parts of the output messages (the
    response) and of the input messages (the next request's history)."""
    provider = ScriptedProvider([tool_calls_response([("c1", SECRET_NAME, {"to": "Bob"})]), text_response("Sent.")])
    async with tool_registry(get_weather) as tools:
        registry = registry_of(make_otel_hooks(capture_content=True, **options))
        await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Tell Bob")
    assert_all_ended(ledger, span_exporter)
    assert SECRET_NAME in str(provider.requests[1].messages)  # the model's history keeps its own call

    spans = span_exporter.get_finished_spans()
    assert_no_leak(spans, ["bob@example.com"])
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert (tool.attributes or {})[semconv.FLOWRA_TOOL_REQUESTED_NAME] == scrubbed
    first, second = [s for s in spans if s.name == "chat sonnet-4-5"]
    output = json.loads(str((first.attributes or {})[semconv.GEN_AI_OUTPUT_MESSAGES]))
    history = json.loads(str((second.attributes or {})[semconv.GEN_AI_INPUT_MESSAGES]))
    calls = [p for m in [*output, *history] for p in m["parts"] if p["type"] == "tool_call"]
    assert [(p["id"], p["name"]) for p in calls] == [("c1", scrubbed), ("c1", scrubbed)]


async def test_without_scrubbing_names_in_messages_the_invented_name_leaks_there(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: a tool_call part's name set as it is (``content._name`` made the bare
    id-bounding it was) shows the address in both message attributes, and only there."""
    monkeypatch.setattr(content, "_name", lambda walk, value: content._ident(value))
    provider = ScriptedProvider([tool_calls_response([("c1", SECRET_NAME, {"to": "Bob"})]), text_response("Sent.")])
    async with tool_registry(get_weather) as tools:
        registry = registry_of(make_otel_hooks(capture_content=True, redact_secrets=True))
        await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Tell Bob")
    places = {(leak.span_name, leak.where) for leak in find_leaks(span_exporter.get_finished_spans(), [SECRET_NAME])}
    assert places == {
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_OUTPUT_MESSAGES}"),
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
    }
