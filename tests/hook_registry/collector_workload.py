"""flowra 0.0.6 - 0.0.8 runs for the collector and Jaeger end-to-end tests (the interface is
``tests.collector_workload.Workload``): real agents, a research agent used as a tool (flowra
0.0.6+), a scripted model, ``OtelHooks`` on the tracer provider the test passes."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from flowra.agent import HookRegistry
from flowra.lib.tool_loop import ToolLoopStatus
from opentelemetry.sdk.trace import TracerProvider

from flowra_otel import OtelHooks
from tests.hook_registry.flowra_support import (
    HAS_AGENT_TOOLS,
    ResearcherSetup,
    ScriptedProvider,
    fail_tool,
    final_text,
    get_weather,
    research_tool,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
    usage,
)
from tests.hook_registry.test_otlp_export_end_to_end import SECRET_KEY, RedactionHooks, lookup_account

LINE: Final = "hook_registry"
HAS_LINKS: Final = False
SECRETS: Final = (SECRET_KEY,)
QUESTION: Final = "Which ledger did Zanzibar Trading file last quarter?"
RESEARCH_QUERY: Final = "Find the Zanzibar Trading ledger and its owner"
RESEARCH_ANSWER: Final = "The ledger of Ada Quillfeather, filed in Stone Town."
FINAL_ANSWER: Final = "Zanzibar Trading filed the Quillfeather ledger; Paris is sunny."
CONTENT_MARKERS: Final = (
    QUESTION,
    RESEARCH_QUERY,
    RESEARCH_ANSWER,
    FINAL_ANSWER,
    "Quillfeather",
    "Sunny, 21 C in Paris",
)
MULTI_AGENT_SPANS: Final = 10
"""invoke_agent assistant; its 2 chats, execute_tool research and get_weather; under research:
invoke_agent research, its tool loop's 2 chats, lookup_account and fail_tool."""


def _require_agent_tools() -> None:
    assert HAS_AGENT_TOOLS, "an agent used as a tool needs flowra >= 0.0.6"


async def multi_agent_run(
    tracer_provider: TracerProvider, conversation_id: str, *, openinference: bool = False
) -> None:
    _require_agent_tools()
    registry = HookRegistry()
    registry.add(OtelHooks(tracer_provider=tracer_provider, capture_content=True, openinference=openinference))
    registry.add(RedactionHooks())
    main = ScriptedProvider(
        [
            tool_calls_response(
                [("r1", "research", {"query": RESEARCH_QUERY}), ("w1", "get_weather", {"city": "Paris"})],
                usage=usage(31, 12),
            ),
            text_response(FINAL_ANSWER, usage=usage(95, 17)),
        ]
    )
    researcher = ScriptedProvider(
        [
            tool_calls_response(
                [("c1", "lookup_account", {"user": "ada"}), ("e1", "fail_tool", {"reason": "vault closed"})],
                usage=usage(22, 8),
            ),
            text_response(RESEARCH_ANSWER, usage=usage(40, 6)),
        ]
    )
    async with (
        tool_registry(research_tool(), get_weather) as main_tools,
        tool_registry(lookup_account, fail_tool) as researcher_tools,
    ):
        runtime = tool_loop_runtime(
            main, main_tools, registry, researcher=ResearcherSetup(provider=researcher, registry=researcher_tools)
        )
        result = await run_tool_loop(runtime, QUESTION, metadata={"conversation_id": conversation_id})
    assert result.status == ToolLoopStatus.COMPLETED and final_text(result) == FINAL_ANSWER, result
    main.assert_exhausted()
    researcher.assert_exhausted()


async def linked_run(tracer_provider: TracerProvider, workdir: Path) -> None:
    raise NotImplementedError("no linked run on this line (HAS_LINKS is False)")


class ProviderDownError(RuntimeError):
    """What the failing runs' model raises on its second call."""


async def outcome_run(tracer_provider: TracerProvider, index: int, *, fail: bool) -> bool:
    _require_agent_tools()
    provider_fails = fail and index % 2 == 0
    tool_fails = fail and not provider_fails
    call = ("e1", "fail_tool", {"reason": "vault closed"}) if tool_fails else ("w1", "get_weather", {"city": "Rome"})
    registry = HookRegistry()
    registry.add(OtelHooks(tracer_provider=tracer_provider))
    main = ScriptedProvider(
        [
            tool_calls_response([("r1", "research", {"query": f"question {index}"})]),
            ProviderDownError("model unavailable") if provider_fails else text_response(f"answer {index}"),
        ]
    )
    researcher = ScriptedProvider([tool_calls_response([call]), text_response(f"research {index}")])
    async with (
        tool_registry(research_tool()) as main_tools,
        tool_registry(fail_tool if tool_fails else get_weather) as researcher_tools,
    ):
        runtime = tool_loop_runtime(
            main, main_tools, registry, researcher=ResearcherSetup(provider=researcher, registry=researcher_tools)
        )
        try:
            await run_tool_loop(runtime, f"run {index}", metadata={"conversation_id": f"run-{index}"})
        except ProviderDownError:
            return True
    return False
