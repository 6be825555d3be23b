"""A tool name the model invented (not offered by the request) is model output, hence content.

A model can call any name it likes; flowra answers it with an error result (``Unknown tool:
<name>``). Put into span names, ``gen_ai.tool.name`` or metric attributes, such a name would leak
model output with capture off and open an unbounded metric series. So spans and metrics name the
placeholder ``_unknown_tool``; with capture on the name the model asked for is kept in
``flowra.tool.requested_name``. Only a name the request offered is trusted, whoever passed it on:
a ``BeforeToolCallEvent`` hook that redirects the invented call to an offered tool names that
tool; a hook that only normalises names (strips a ``functions.`` prefix) vouches for nothing.
With capture on, an invented name is content wherever it is recorded, so ``redact=`` and
``redact_secrets=`` scrub it there: the requested name and the messages' ``tool_call`` parts.

Everything is scanned: span names, attributes, events, status, and every metric point's
attributes, with a paired check that an offered name *is* found by the same scans. The app's
hooks are registered after the plugin, and on 0.0.3 - 0.0.8 before it too (``S.HOOK_ORDERS``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from flowra.agent import Event
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.core import content, instruments, semconv
from flowra_otel.testing import assert_no_leak, find_leaks
from tests.both_lines.line import MakeHooks, S, ToolCall
from tests.conftest import SpanLedger

INVENTED = "wire_money_to_account_q7"
OFFERED = "get_weather"
PLACEHOLDER = semconv.INVENTED_TOOL_NAME
CALLS: tuple[ToolCall, ...] = (("c1", INVENTED, {"amount": 100}), ("c2", OFFERED, {"city": "Paris"}))
"""The model calls a name it made up, then the offered tool."""

MESSAGE_CONTENT = {
    f"attribute {semconv.GEN_AI_INPUT_MESSAGES}",
    f"attribute {semconv.GEN_AI_OUTPUT_MESSAGES}",
}
"""Where a capture-on trace legitimately shows the model's tool calls: the messages themselves."""

HOOK_ORDERS = pytest.mark.parametrize(
    "handlers_first",
    S.HOOK_ORDERS,
    ids=["hook_before_plugin" if first else "hook_after_plugin" for first in S.HOOK_ORDERS],
)


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


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_capture_off_the_invented_name_is_nowhere(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    run = await S.tool_hook_run(make_otel_hooks(capture_content=False), *CALLS)
    S.assert_all_ended(ledger, span_exporter)
    assert run.errors == [True, False]  # flowra did see the invented call, and refused it

    spans = span_exporter.get_finished_spans()
    assert_no_leak(spans, [INVENTED])
    assert metrics_mentioning(metric_reader, INVENTED) == set()

    tools = tool_spans(span_exporter)
    invented = tools["c1"]
    assert invented.name == f"execute_tool {PLACEHOLDER}"
    assert attrs(invented)[semconv.GEN_AI_TOOL_NAME] == PLACEHOLDER
    assert semconv.FLOWRA_TOOL_REQUESTED_NAME not in attrs(invented)
    assert semconv.GEN_AI_TOOL_DESCRIPTION not in attrs(invented)
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
    await S.tool_hook_run(make_otel_hooks(capture_content=True), *CALLS)
    invented = tool_spans(span_exporter)["c1"]
    assert invented.name == f"execute_tool {PLACEHOLDER}"
    assert attrs(invented)[semconv.GEN_AI_TOOL_NAME] == PLACEHOLDER
    assert attrs(invented)[semconv.FLOWRA_TOOL_REQUESTED_NAME] == INVENTED

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


# ======================================================================== hooks that redirect or normalise names
def redirect_to_weather(event: Event[Any]) -> None:
    """Application code mapping a name the model made up onto a real tool."""
    tool_use = event.data.tool_use
    if tool_use.name == INVENTED:
        event.data.tool_use = dataclasses.replace(tool_use, name=OFFERED, input={"city": "Zurich"})


def strip_functions_prefix(event: Event[Any]) -> None:
    """Application code that only tidies names (some models prefix them with ``functions.``): it
    does not decide which tool runs, so it vouches for nothing."""
    tool_use = event.data.tool_use
    if tool_use.name.startswith("functions."):
        event.data.tool_use = dataclasses.replace(tool_use, name=tool_use.name.removeprefix("functions."))


@HOOK_ORDERS
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
    run = await S.tool_hook_run(otel, *CALLS, handlers=[redirect_to_weather], handlers_first=handlers_first)
    S.assert_all_ended(ledger, span_exporter)
    assert run.errors == [False, False]  # the redirected call ran

    redirected = tool_spans(span_exporter)["c1"]
    assert redirected.name == f"execute_tool {OFFERED}"
    assert attrs(redirected)[semconv.GEN_AI_TOOL_NAME] == OFFERED
    assert tool_names_in_metrics(metric_reader, instruments.GEN_AI_EXECUTE_TOOL_DURATION) == [OFFERED]  # one series
    assert instruments.FLOWRA_TOOL_ERRORS not in {name for name, _ in metric_texts(metric_reader)}
    assert metrics_mentioning(metric_reader, INVENTED) == set()
    assert metrics_mentioning(metric_reader, PLACEHOLDER) == set()
    if not capture:
        assert_no_leak(span_exporter.get_finished_spans(), [INVENTED])


@HOOK_ORDERS
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
    run = await S.tool_hook_run(
        make_otel_hooks(capture_content=False),
        ("c1", f"functions.{INVENTED}", {"amount": 100}),
        ("c2", f"functions.{OFFERED}", {"city": "Paris"}),
        handlers=[strip_functions_prefix],
        handlers_first=handlers_first,
        text="Pay, then weather?",
    )
    assert run.errors == [True, False]  # flowra: unknown tool, then the weather
    S.assert_all_ended(ledger, span_exporter)

    tools = tool_spans(span_exporter)
    assert tools["c1"].name == f"execute_tool {PLACEHOLDER}"
    assert attrs(tools["c1"])[semconv.GEN_AI_TOOL_NAME] == PLACEHOLDER
    assert tools["c2"].name == f"execute_tool {OFFERED}"
    assert attrs(tools["c2"])[semconv.GEN_AI_TOOL_NAME] == OFFERED
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
    otel = make_otel_hooks(capture_content=True, **options)
    run = await S.tool_hook_run(otel, ("c1", SECRET_NAME, {"to": "Bob"}), text="Tell Bob", final="Sent.")
    S.assert_all_ended(ledger, span_exporter)
    assert SECRET_NAME in str(run.requests[1])  # the model's history keeps its own call

    spans = span_exporter.get_finished_spans()
    assert_no_leak(spans, ["bob@example.com"])
    assert attrs(tool_spans(span_exporter)["c1"])[semconv.FLOWRA_TOOL_REQUESTED_NAME] == scrubbed
    first, second = sorted((s for s in spans if s.name == "chat sonnet-4-5"), key=lambda s: s.start_time or 0)
    output = json.loads(str(attrs(first)[semconv.GEN_AI_OUTPUT_MESSAGES]))
    history = json.loads(str(attrs(second)[semconv.GEN_AI_INPUT_MESSAGES]))
    calls = [p for m in [*output, *history] for p in m["parts"] if p["type"] == "tool_call"]
    assert [(p["id"], p["name"]) for p in calls] == [("c1", scrubbed), ("c1", scrubbed)]


async def test_without_scrubbing_names_in_messages_the_invented_name_leaks_there(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: a tool_call part's name set as it is (``content._name`` made the bare
    id-bounding it was) shows the address in both message attributes, and only there."""
    monkeypatch.setattr(content, "_name", lambda walk, value: content._ident(value))
    otel = make_otel_hooks(capture_content=True, redact_secrets=True)
    await S.tool_hook_run(otel, ("c1", SECRET_NAME, {"to": "Bob"}), text="Tell Bob", final="Sent.")
    places = {(leak.span_name, leak.where) for leak in find_leaks(span_exporter.get_finished_spans(), [SECRET_NAME])}
    assert places == {
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_OUTPUT_MESSAGES}"),
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
    }
