"""flowra-otel quickstart on flowra 0.0.3 - 0.0.8: one real run, traced with one line, printed as a tree.

    .venv-flowra-0.0.8/bin/python examples/hook_registry/quickstart.py   # the trace prints in the terminal

(``./dev pytest-on 0.0.8`` builds that environment.) To send the trace to Jaeger instead, set
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://localhost:4318/v1/traces`` (see docs/backends.md).

The agent is a real ``ToolLoopAgent`` on a real ``AgentRuntime``. Only the LLM is scripted
(no network, no API key): it first asks for the weather tool and the ``research`` agent-as-tool
in parallel, then answers. The ``research`` tool is itself an agent with its own tool loop,
which calls its own tool, so the trace shows agents nested inside tool calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import ClassVar

from flowra.agent import Agent, AgentDefinitionRef, CallAgent, HookRegistry, ServiceLocator, Spawn, step
from flowra.lib import LLMConfig
from flowra.lib.tool_loop import ToolLoopAgent, ToolLoopConfig, ToolLoopResult, ToolLoopSpec, make_agent_tool
from flowra.llm import (
    AssistantMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    StopReason,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from flowra.runtime import AgentRuntime
from flowra.tools import ToolRegistry, get_local_tool, tool

from flowra_otel import OtelHooks
from flowra_otel.export import configure_telemetry

MODEL = "anthropic/sonnet-4-5"


# --- a scripted LLM: answers by looking at the conversation, like a (very) small model --------
class ScriptedLLM(LLMProvider):
    """Plays the model: tool calls first, a final answer once the tool results are in."""

    async def call(self, request: LLMRequest) -> LLMResponse:
        await asyncio.sleep(0.02)  # pretend the network took a moment
        system = " ".join(b.text for m in request.messages if isinstance(m, SystemMessage) for b in m.blocks)
        has_results = any(isinstance(b, ToolResultBlock) for m in request.messages for b in m.blocks)
        usage = Usage(input_tokens=120 + 40 * len(request.messages), output_tokens=35, cost_usd=0.0009)
        if "researcher" in system:
            if not has_results:
                return _tools([("w2", "get_weather", {"city": "Lisbon"})], usage)
            return _text("Lisbon: sunny, 24°C; a good week for a trip.", usage)
        if not has_results:
            return _tools(
                [("w1", "get_weather", {"city": "Porto"}), ("r1", "research", {"query": "Is Lisbon nice now?"})],
                usage,
            )
        return _text("Porto is mild and cloudy; Lisbon is sunny and 24°C. Go south!", usage)


def _tools(calls: list[tuple[str, str, dict[str, str]]], usage: Usage) -> LLMResponse:
    blocks = [ToolUseBlock(id=i, name=n, input=a) for i, n, a in calls]
    return LLMResponse(message=AssistantMessage(blocks=list(blocks)), stop_reason=StopReason.TOOL_USE, usage=usage)


def _text(text: str, usage: Usage) -> LLMResponse:
    return LLMResponse(
        message=AssistantMessage(blocks=[TextBlock(text=text)]), stop_reason=StopReason.END_TURN, usage=usage
    )


# --- tools -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WeatherParams:
    city: str


@tool("get_weather")
async def get_weather(params: WeatherParams) -> str:
    """Current weather for a city."""
    await asyncio.sleep(0.01)
    return {"Porto": "mild, cloudy, 17°C", "Lisbon": "sunny, 24°C"}.get(params.city, "unknown")


# --- a sub-agent used as a tool: it runs its own tool loop ------------------------------------
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearchSpec:
    query: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearchResult:
    answer: str | None


class ResearcherAgent(Agent[ResearchSpec, ResearchResult]):
    """Answers a research query with its own tool loop and system prompt."""

    __subagents__: ClassVar[dict[str, AgentDefinitionRef]] = {"tool_loop": ToolLoopAgent}

    def __init__(self, services: ServiceLocator) -> None:
        services.provide(
            ToolLoopConfig,
            ToolLoopConfig(
                llm_config=LLMConfig(model=MODEL),
                session_messages=[SystemMessage(blocks=[TextBlock(text="You are a researcher.")])],
            ),
        )

    @step("research", entry=True)
    async def research(self, spec: ResearchSpec) -> Spawn:
        return Spawn(
            children=[CallAgent(agent=ToolLoopAgent, spec=ToolLoopSpec(user_message=spec.query))],
            then=self.collect,
        )

    @step("collect")
    async def collect(self, result: ToolLoopResult) -> ResearchResult:
        message = result.result_message
        return ResearchResult(answer=message.blocks[0].text if message else None)  # type: ignore[union-attr]


async def main() -> None:
    telemetry = configure_telemetry(service_name="flowra-otel-quickstart")

    hooks = HookRegistry()
    hooks.add(OtelHooks())  # <- the one line

    research = make_agent_tool(ResearcherAgent, name="research", description="Research a question.")
    async with await ToolRegistry.create([get_local_tool(get_weather), research]) as tools:
        runtime = AgentRuntime(
            agents={"concierge": ToolLoopAgent, "research": ResearcherAgent},
            services={
                HookRegistry: hooks,
                LLMProvider: ScriptedLLM(),
                ToolRegistry: tools,
                ToolLoopConfig: ToolLoopConfig(
                    llm_config=LLMConfig(model=MODEL),
                    session_messages=[SystemMessage(blocks=[TextBlock(text="You are a travel concierge.")])],
                ),
            },
        )
        result = await runtime.run(
            agent="concierge",
            spec=ToolLoopSpec(user_message="Porto or Lisbon this week?", metadata={"conversation_id": "demo-1"}),
        )
    answer = result.result_message.blocks[0].text if result.result_message else None
    print(f"\nagent answered: {answer}")
    telemetry.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
