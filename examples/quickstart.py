"""flowra-otel quickstart: one real flowra run, traced with one line, printed as a tree.

    ./dev demo                                  # the trace prints in the terminal
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://localhost:4318/v1/traces ./dev demo   # ...or goes to Jaeger

The agent is flowra's own ``ChatAgent`` on a real ``AgentRuntime`` (flowra 0.0.56 - 0.0.93). Only
the model is scripted (no network, no API key): it first asks for the weather tool and the
``research`` agent-as-tool in parallel, then answers. ``research`` is an agent with its own tool
loop, which calls its own tool, so the trace shows an agent nested inside a tool call.
(``examples/hook_registry/`` has the same examples for flowra 0.0.3 - 0.0.8.)
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import ClassVar

from flowra.agent import Agent, AgentDefinitionRef, AgentRuntime, CallAgent, ServiceLocator, Spawn, step
from flowra.lib import LLMConfig
from flowra.lib.chat import ChatAgent, ChatConfig, ChatResult, ChatSpec
from flowra.lib.turn import TurnAgent, TurnConfig, TurnResult, TurnSpec, make_agent_tool
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
    UserMessage,
)
from flowra.tools import ToolRegistry, tool

from flowra_otel import OtelHooks
from flowra_otel.export import configure_telemetry

MODEL = "anthropic/sonnet-4-5"


# --- a scripted LLM: answers by looking at the conversation, like a (very) small model --------
class ScriptedLLM(LLMProvider):
    """Plays the model: tool calls first, a final answer once the tool results are in."""

    async def call(self, request: LLMRequest) -> LLMResponse:
        await asyncio.sleep(0.02)  # pretend the network took a moment
        system = " ".join(b.text for m in request.system for b in m.blocks if isinstance(b, TextBlock))
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
    return LLMResponse(messages=[AssistantMessage(blocks=list(blocks))], stop_reason=StopReason.TOOL_USE, usage=usage)


def _text(text: str, usage: Usage) -> LLMResponse:
    return LLMResponse(
        messages=[AssistantMessage(blocks=[TextBlock(text=text)])], stop_reason=StopReason.END_TURN, usage=usage
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

    __slots__ = ()
    __subagents__: ClassVar[dict[str, AgentDefinitionRef]] = {"turn": TurnAgent}

    def __init__(self, services: ServiceLocator, llm: LLMConfig) -> None:
        services.provide(
            TurnConfig(
                llm_config=llm,
                system=[SystemMessage(blocks=[TextBlock(text="You are a researcher.")])],
                history=[],
                tools=ToolRegistry([get_weather]),
            )
        )

    @step("research", entry=True)
    async def research(self, spec: ResearchSpec) -> Spawn:
        return Spawn(
            children=[CallAgent(agent=TurnAgent, spec=TurnSpec(messages=[UserMessage.text(spec.query)]))],
            then=self.collect,
        )

    @step("collect")
    async def collect(self, result: TurnResult) -> ResearchResult:
        message = result.result_message
        texts = [b.text for b in message.blocks if isinstance(b, TextBlock)] if message else []
        return ResearchResult(answer="\n".join(texts) or None)


async def main() -> None:
    telemetry = configure_telemetry(service_name="flowra-otel-quickstart")

    llm = LLMConfig(provider=ScriptedLLM(), model=MODEL)
    research = make_agent_tool(ResearcherAgent, name="research", description="Research a question.")
    runtime = AgentRuntime(
        agents={"concierge": ChatAgent, "research": ResearcherAgent},
        services={
            LLMConfig: llm,
            ChatConfig: ChatConfig(
                llm_config=llm,
                system=[SystemMessage(blocks=[TextBlock(text="You are a travel concierge.")])],
                tools=ToolRegistry([get_weather, research]),
            ),
        },
    )
    OtelHooks().install(runtime)  # <- the one line

    result = await runtime.run(
        agent=ChatAgent, spec=ChatSpec.text("Porto or Lisbon this week?", metadata={"conversation_id": "demo-1"})
    )
    assert isinstance(result, ChatResult)
    print(f"\nagent answered: {result.response}")
    telemetry.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
