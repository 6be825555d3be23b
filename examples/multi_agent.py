"""Multi-agent tracing: a chat agent that delegates to a research sub-agent (an agent as a tool).

    .venv/bin/python examples/multi_agent.py

(``./dev demo`` or ``./dev setup`` builds ``.venv``; any Python >= 3.12 environment with today's
flowra and this package installed works too. The ``python3`` on many machines is older and has no
flowra: plain ``python ...`` fails there.)

(flowra 0.0.56 - 0.0.93; ``examples/hook_registry/multi_agent.py`` is the same for 0.0.3 - 0.0.8.)
The ``assistant`` (flowra's ``ChatAgent``) has one tool, ``research``, which is a whole agent
(``make_agent_tool(ResearchAgent)``); the researcher runs its own tool loop (a ``TurnAgent``) with
its own model, system prompt and a ``search_web`` tool. One ``OtelHooks().install(runtime)``
traces both, and the researcher's spans nest under the parent's ``execute_tool research`` span,
because flowra runs the sub-agent inside that tool call::

    invoke_agent assistant
    ├─ chat gpt-4o
    ├─ execute_tool research
    │  └─ invoke_agent research
    │     └─ invoke_agent research/turn
    │        ├─ chat gpt-4o-mini
    │        ├─ execute_tool search_web
    │        └─ chat gpt-4o-mini
    └─ chat gpt-4o

With no ``OTEL_EXPORTER_OTLP_*ENDPOINT`` set, ``configure_telemetry()`` prints that tree to the
console; set one (see ``otlp_export.py``) and the same program ships OTLP instead. The LLM is a
small scripted provider, so the example runs offline and prints the same tree every time.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

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
    ToolUseBlock,
    Usage,
    UserMessage,
)
from flowra.tools import ToolRegistry, tool

from flowra_otel import OtelHooks
from flowra_otel.export import configure_telemetry

QUESTION = "What changed in Python 3.13? One sentence, please."
RESEARCH_QUERY = "Python 3.13 release highlights"


# --------------------------------------------------------------------------------- a scripted LLM
def _answer(text: str, usage: Usage) -> LLMResponse:
    return LLMResponse(
        messages=[AssistantMessage(blocks=[TextBlock(text=text)])], stop_reason=StopReason.END_TURN, usage=usage
    )


def _call(call_id: str, name: str, arguments: dict[str, Any], usage: Usage) -> LLMResponse:
    return LLMResponse(
        messages=[AssistantMessage(blocks=[ToolUseBlock(id=call_id, name=name, input=arguments)])],
        stop_reason=StopReason.TOOL_USE,
        usage=usage,
    )


class ScriptedLLM(LLMProvider):
    """Plays canned responses, chosen by the conversation's first user message.

    Parent and researcher share this provider; each conversation starts with its own user
    message, so each gets its own script whatever order the calls come in.
    """

    def __init__(self, scripts: dict[str, Sequence[LLMResponse]]) -> None:
        self._scripts = {key: list(responses) for key, responses in scripts.items()}

    async def call(self, request: LLMRequest) -> LLMResponse:
        first = next(m for m in request.messages if isinstance(m, UserMessage))
        key = next(b.text for b in first.blocks if isinstance(b, TextBlock))
        return self._scripts[key].pop(0)


SCRIPTS: dict[str, Sequence[LLMResponse]] = {
    QUESTION: [
        _call("call_research", "research", {"query": RESEARCH_QUERY}, Usage(input_tokens=120, output_tokens=18)),
        _answer(
            "Python 3.13 adds a new interactive shell, an experimental free-threaded build and a JIT.",
            Usage(input_tokens=210, output_tokens=24, cost_usd=0.0021),
        ),
    ],
    RESEARCH_QUERY: [
        _call("call_search", "search_web", {"query": RESEARCH_QUERY}, Usage(input_tokens=60, output_tokens=12)),
        _answer(
            "New REPL, free-threaded build (PEP 703), experimental JIT (PEP 744).",
            Usage(input_tokens=140, output_tokens=20, cache_read_input_tokens=40),
        ),
    ],
}


# --------------------------------------------------------------------------------- the agents
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SearchInput:
    query: str


@tool("search_web")
async def search_web(params: SearchInput) -> str:
    """Search the web; returns the best matching snippet."""
    return f"docs.python.org: What's New In Python 3.13 ({params.query})"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearchSpec:
    query: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearchResult:
    answer: str | None = None


class ResearchAgent(Agent[ResearchSpec, ResearchResult]):
    """Runs its own tool loop (``research/turn``) with its own model and prompt."""

    __slots__ = ()
    __subagents__: ClassVar[dict[str, AgentDefinitionRef]] = {"turn": TurnAgent}

    def __init__(self, services: ServiceLocator, llm: LLMConfig) -> None:
        services.provide(  # for this agent's subtree only
            TurnConfig(
                llm_config=LLMConfig(provider=llm.provider, model="openai/gpt-4o-mini"),
                system=[SystemMessage(blocks=[TextBlock(text="You research. Search, then answer briefly.")])],
                history=[],
                tools=ToolRegistry([search_web]),
            )
        )

    @step("research", entry=True)
    async def research(self, spec: ResearchSpec) -> Spawn:
        child = CallAgent(agent=TurnAgent, spec=TurnSpec(messages=[UserMessage.text(spec.query)]))
        return Spawn(children=[child], then=self.collect)

    @step("collect")
    async def collect(self, result: TurnResult) -> ResearchResult:
        message = result.result_message
        texts = [b.text for b in message.blocks if isinstance(b, TextBlock)] if message else []
        return ResearchResult(answer="\n".join(texts) or None)


async def main() -> None:
    telemetry = configure_telemetry(service_name="flowra-multi-agent-example")

    llm = LLMConfig(provider=ScriptedLLM(SCRIPTS), model="openai/gpt-4o")
    research = make_agent_tool(ResearchAgent, name="research", description="Research a topic with a sub-agent.")
    runtime = AgentRuntime(
        agents={"assistant": ChatAgent, "research": ResearchAgent},
        services={
            LLMConfig: llm,
            ChatConfig: ChatConfig(
                llm_config=llm,
                system=[SystemMessage(blocks=[TextBlock(text="You answer questions; research first.")])],
                tools=ToolRegistry([research]),
            ),
        },
    )
    OtelHooks().install(runtime)  # the one line: global providers, content capture off

    result = await runtime.run(agent=ChatAgent, spec=ChatSpec.text(QUESTION))
    assert isinstance(result, ChatResult)
    telemetry.shutdown()  # flush before printing the answer, so the tree comes first
    print(f"answer: {result.response}")


if __name__ == "__main__":
    asyncio.run(main())
