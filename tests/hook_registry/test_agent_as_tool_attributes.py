"""An agent used as a tool: descriptions and model settings on the spans, known when they start.

A parent tool loop offers ``research`` (``make_agent_tool(ResearcherAgent)``, flowra >= 0.0.6)
next to ``get_weather``; the researcher runs its own tool loop with its own model and tools.

* the child ``invoke_agent`` carries ``gen_ai.agent.description`` = the agent tool's description
  (what the parent's model was told the agent does); a root agent has none;
* every ``execute_tool`` span carries ``gen_ai.tool.description`` from the tool definitions of
  the request whose response asked for the call;
* every ``invoke_agent`` span carries the agent's own ``gen_ai.request.model`` (and temperature,
  max tokens and stop sequences when configured) from the moment it starts, so samplers and
  span processors see them: checked with a ``SpanProcessor.on_start`` that copies the attributes.
"""

from __future__ import annotations

from typing import Any

import pytest
from flowra.lib.tool_loop import ToolLoopStatus
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from tests.hook_registry.conftest import SpanLedger, assert_all_ended, hooks_with
from tests.hook_registry.flowra_support import (
    HAS_AGENT_TOOLS,
    ResearcherSetup,
    ScriptedProvider,
    get_weather,
    research_tool,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)

pytestmark = pytest.mark.skipif(not HAS_AGENT_TOOLS, reason="agents as tools need flowra >= 0.0.6")

RESEARCH_DESCRIPTION = "Research a travel question with a sub-agent that can look up live weather."
WEATHER_DESCRIPTION = "Get the current weather for a city."  # get_weather's docstring
CHILD_MODEL = "openai/gpt-4o-mini"


class StartAttributes(SpanProcessor):
    """The attributes each span had when it started, by span id."""

    def __init__(self) -> None:
        self.at_start: dict[int, tuple[str, dict[str, Any]]] = {}

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        self.at_start[span.context.span_id] = (span.name, dict(span.attributes or {}))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [attrs for span_name, attrs in self.at_start.values() if span_name == name]


@pytest.fixture
def starts(tracer_provider: TracerProvider) -> StartAttributes:
    processor = StartAttributes()
    tracer_provider.add_span_processor(processor)
    return processor


def finished(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in exporter.get_finished_spans() if s.name == name]
    assert len(found) == 1, sorted(s.name for s in exporter.get_finished_spans())
    return found[0]


async def run_parent_with_researcher(hooks: OtelHooks) -> None:
    parent = ScriptedProvider(
        [
            tool_calls_response([("p1", "research", {"query": "Is it warm in Rome?"})]),
            text_response("Yes, Rome is warm."),
        ]
    )
    child = ScriptedProvider(
        [tool_calls_response([("c1", "get_weather", {"city": "Rome"})]), text_response("Sunny, 21 C.")]
    )
    async with (
        tool_registry(research_tool(description=RESEARCH_DESCRIPTION), get_weather) as parent_tools,
        tool_registry(get_weather) as child_tools,
    ):
        runtime = tool_loop_runtime(
            parent,
            parent_tools,
            hooks_with(hooks),
            temperature=0.3,
            max_tokens=512,
            stop_sequences=["END", "STOP"],
            researcher=ResearcherSetup(provider=child, registry=child_tools, model=CHILD_MODEL),
        )
        result = await run_tool_loop(runtime, "Should I pack sunscreen for Rome?")
    assert result.status == ToolLoopStatus.COMPLETED
    parent.assert_exhausted()
    child.assert_exhausted()


async def test_child_agent_is_described_by_its_agent_tool(
    make_otel_hooks: Any, span_exporter: InMemorySpanExporter, ledger: SpanLedger, starts: StartAttributes
) -> None:
    await run_parent_with_researcher(make_otel_hooks())
    assert_all_ended(ledger, span_exporter)

    (child_start,) = starts.named("invoke_agent research")
    assert child_start[semconv.GEN_AI_AGENT_DESCRIPTION] == RESEARCH_DESCRIPTION
    child = finished(span_exporter, "invoke_agent research")
    assert (child.attributes or {})[semconv.GEN_AI_AGENT_DESCRIPTION] == RESEARCH_DESCRIPTION
    # The root agent is nobody's tool: no description.
    (parent_start,) = starts.named("invoke_agent assistant")
    assert semconv.GEN_AI_AGENT_DESCRIPTION not in parent_start
    assert semconv.GEN_AI_AGENT_DESCRIPTION not in (finished(span_exporter, "invoke_agent assistant").attributes or {})


async def test_execute_tool_spans_carry_the_offered_tool_description(
    make_otel_hooks: Any, span_exporter: InMemorySpanExporter, starts: StartAttributes
) -> None:
    await run_parent_with_researcher(make_otel_hooks())
    research = finished(span_exporter, "execute_tool research")
    assert (research.attributes or {})[semconv.GEN_AI_TOOL_DESCRIPTION] == RESEARCH_DESCRIPTION
    (research_start,) = starts.named("execute_tool research")
    assert research_start[semconv.GEN_AI_TOOL_DESCRIPTION] == RESEARCH_DESCRIPTION
    # The child's own tool call, described by the child's request.
    weather = finished(span_exporter, "execute_tool get_weather")
    assert (weather.attributes or {})[semconv.GEN_AI_TOOL_DESCRIPTION] == WEATHER_DESCRIPTION
    assert (weather.attributes or {})[semconv.GEN_AI_AGENT_NAME] == "research"


async def test_invoke_agent_has_its_model_settings_when_it_starts(
    make_otel_hooks: Any, span_exporter: InMemorySpanExporter, starts: StartAttributes
) -> None:
    await run_parent_with_researcher(make_otel_hooks())
    (parent_start,) = starts.named("invoke_agent assistant")
    assert {k: parent_start.get(k) for k in _SETTINGS} == {
        semconv.GEN_AI_REQUEST_MODEL: "sonnet-4-5",
        semconv.GEN_AI_REQUEST_TEMPERATURE: 0.3,
        semconv.GEN_AI_REQUEST_MAX_TOKENS: 512,
        semconv.GEN_AI_REQUEST_STOP_SEQUENCES: ("END", "STOP"),
    }
    (child_start,) = starts.named("invoke_agent research")
    # The child's own config: its model, and none of the parent's settings.
    assert {k: child_start.get(k) for k in _SETTINGS} == {
        semconv.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
        semconv.GEN_AI_REQUEST_TEMPERATURE: None,
        semconv.GEN_AI_REQUEST_MAX_TOKENS: None,
        semconv.GEN_AI_REQUEST_STOP_SEQUENCES: None,
    }
    # Unchanged at the end.
    parent_end = finished(span_exporter, "invoke_agent assistant").attributes or {}
    assert parent_end[semconv.GEN_AI_REQUEST_MODEL] == "sonnet-4-5"
    assert tuple(parent_end[semconv.GEN_AI_REQUEST_STOP_SEQUENCES]) == ("END", "STOP")  # type: ignore[arg-type]
    child_end = finished(span_exporter, "invoke_agent research").attributes or {}
    assert child_end[semconv.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"


_SETTINGS = (
    semconv.GEN_AI_REQUEST_MODEL,
    semconv.GEN_AI_REQUEST_TEMPERATURE,
    semconv.GEN_AI_REQUEST_MAX_TOKENS,
    semconv.GEN_AI_REQUEST_STOP_SEQUENCES,
)
