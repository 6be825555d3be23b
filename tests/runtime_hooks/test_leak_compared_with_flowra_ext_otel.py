"""flowra's own tracer records the raw tool result a hook redacted; flowra-otel records what the model got.

One run, both tracers installed on the same runtime with content capture on: flowra's
``flowra.ext.otel`` (``OTEL_TRACING.install(runtime, capture_content=True)`` on every release
0.0.47 - 0.0.93, which takes its tracer from the global tracer provider) and ``OtelHooks``.
``./dev test`` runs it on one release of each era at least (the era boundaries' modern suite:
0.0.47, 0.0.49, 0.0.55, 0.0.56 and 0.0.67, the tool span inside the tool-call agent's step; 0.0.57,
a list result; 0.0.68 - 0.0.85, a text result; 0.0.86 - 0.0.93, result blocks). An ``AfterToolCallEvent`` hook
registered on ``runtime.hooks`` masks the SSN and card number in ``lookup_customer``'s record
before the model sees it. flowra's ``execute_tool`` span carries the record as the tool
returned it (``ToolCallSpan.result``, read when the tool-call agent ends, before the hook runs);
ours carries the masked record, exactly as the model was given it. The documentation cites this
test for that difference.

The last test checks another row of docs/moving-from-flowra-ext-otel.md: where a span the tool
itself starts ends up under each tracer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from flowra.agent import Event
from flowra.ext.otel import OTEL_TRACING
from flowra.lib.chat import ChatAgent, ChatResult
from flowra.lib.turn.hook_events import AfterToolCallEvent
from flowra.llm import ToolResultBlock, UserMessage
from flowra.tools import tool
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from flowra_otel.testing import assert_no_leak, find_leaks
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced, wrapped_result
from tests.runtime_hooks.support import (
    CARD,
    SSN,
    CityParams,
    ScriptedProvider,
    chat_runtime,
    chat_spec,
    lookup_customer,
    replace_result_text,
    result_text,
    text_response,
    tool_calls_response,
)

MakeHooks = Callable[..., OtelHooks]

RECORD = f"Ada: SSN {SSN}, card {CARD}"
MASKED_RECORD = "Ada: SSN [SSN], card [CARD]"


def mask_record(event: Event[AfterToolCallEvent]) -> None:
    """The redaction hook: the model must never see the SSN or the card number."""
    event.data.result = replace_result_text(
        event.data.result, lambda text: text.replace(SSN, "[SSN]").replace(CARD, "[CARD]")
    )


@pytest.fixture
def flowra_exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Where ``flowra.ext.otel``'s spans go: a provider of their own, set as the global tracer
    provider for this test only (OpenTelemetry lets a process set it once: the guard is reset
    around the test, and the previous global comes back after it)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()


def the_tool_span(spans: tuple[ReadableSpan, ...]) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == "execute_tool lookup_customer"]
    return span


async def test_flowra_ext_otel_records_the_raw_result_beside_our_clean_trace_of_the_same_run(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    flowra_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    provider = ScriptedProvider(tool_calls_response(("c1", "lookup_customer", {"name": "Ada"})), text_response("ok"))
    runtime = traced(make_otel_hooks, chat_runtime(provider, lookup_customer), capture_content=True)
    OTEL_TRACING.install(runtime, capture_content=True)
    runtime.hooks.on(AfterToolCallEvent, mask_record)
    result = await runtime.run(agent=ChatAgent, spec=chat_spec("Look up Ada"))
    assert isinstance(result, ChatResult) and result.response == "ok"

    # The model was given the masked record.
    (given,) = [
        b
        for m in provider.requests[1].messages
        if isinstance(m, UserMessage)
        for b in m.blocks
        if isinstance(b, ToolResultBlock)
    ]
    assert result_text(given) == MASKED_RECORD

    # flowra.ext.otel: its execute_tool span carries the raw record, both secrets, and only there.
    theirs = flowra_exporter.get_finished_spans()
    their_tool = the_tool_span(theirs)
    assert (their_tool.attributes or {})["gen_ai.tool.call.id"] == "c1"
    assert (their_tool.attributes or {})["gen_ai.tool.call.result"] == RECORD
    assert {(leak.secret_index, leak.span_name, leak.where) for leak in find_leaks(theirs, [SSN, CARD])} == {
        (secret, "execute_tool lookup_customer", "attribute gen_ai.tool.call.result") for secret in (0, 1)
    }

    # flowra-otel, the same run: the masked record the model got, on the tool span and the next
    # chat's input, the ledger naming the hook, and neither secret anywhere.
    ours = span_exporter.get_finished_spans()
    our_tool = the_tool_span(ours)
    our_attrs = dict(our_tool.attributes or {})
    assert our_attrs[semconv.GEN_AI_TOOL_CALL_ID] == "c1"
    assert our_attrs[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(MASKED_RECORD)
    assert our_attrs["flowra.redaction.result.handlers"] == (f"{__name__}.mask_record",)
    assert any(MASKED_RECORD in str((s.attributes or {}).get(semconv.GEN_AI_INPUT_MESSAGES, "")) for s in ours)
    assert_no_leak(ours, [SSN, CARD])
    assert_all_ended(ledger, span_exporter)


@tool("fetch")
async def fetch(params: CityParams) -> str:
    """Makes an HTTP-like span of its own, as an instrumented client inside a tool would."""
    await asyncio.sleep(0.01)
    with trace.get_tracer("app").start_as_current_span("http GET"):
        pass
    return f"fetched {params.city}"


@pytest.mark.parametrize("tracer", ["flowra.ext.otel", "flowra-otel"])
async def test_a_span_made_inside_a_tool(
    tracer: str,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    flowra_exporter: InMemorySpanExporter,
) -> None:
    """What docs/moving-from-flowra-ext-otel.md says: under flowra.ext.otel a span the tool starts
    has no parent and a trace of its own (flowra's spans are never current); under flowra-otel it
    nests under the ``execute_tool`` span. (The app's span goes to the global provider either way.)"""
    provider = ScriptedProvider(tool_calls_response(("f1", "fetch", {"city": "Oslo"})), text_response("ok"))
    runtime = chat_runtime(provider, fetch)
    if tracer == "flowra.ext.otel":
        OTEL_TRACING.install(runtime)
    else:
        make_otel_hooks().install(runtime)
    result = await runtime.run(agent=ChatAgent, spec=chat_spec("Fetch Oslo"))
    assert isinstance(result, ChatResult) and result.response == "ok"
    finished = flowra_exporter.get_finished_spans() + span_exporter.get_finished_spans()
    (http,) = [s for s in finished if s.name == "http GET"]
    tool_span = next(s for s in finished if s.name == "execute_tool fetch")
    assert http.context is not None and tool_span.context is not None
    if tracer == "flowra.ext.otel":
        assert http.parent is None
        assert http.context.trace_id != tool_span.context.trace_id
    else:
        assert http.parent is not None and http.parent.span_id == tool_span.context.span_id
        assert http.context.trace_id == tool_span.context.trace_id
