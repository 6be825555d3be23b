"""Multi-agent tracing: a tool loop that delegates to a research sub-agent (agent as tool).

    .venv-flowra-0.0.8/bin/python examples/hook_registry/multi_agent.py

(``./dev pytest-on 0.0.8`` builds ``.venv-flowra-0.0.8``; any Python >= 3.12 environment with flowra
0.0.3 - 0.0.8 and this package installed works too. The ``python3`` on many machines is older and
has no flowra: plain ``python ...`` fails there.)

The ``assistant`` tool loop has one tool, ``research``, which is a whole agent
(``make_agent_tool(ResearchAgent)``, flowra >= 0.0.6); the researcher runs its own tool loop with
its own system prompt and a ``search_web`` tool. One ``OtelHooks`` on the one ``HookRegistry``
traces both, and the researcher's ``invoke_agent`` span nests under the parent's
``execute_tool research`` span (the plain dataclass spec/result need flowra >= 0.0.7)::

    invoke_agent assistant
    ├─ chat gpt-4o
    ├─ execute_tool research
    │  └─ invoke_agent research
    │     ├─ chat gpt-4o-mini
    │     ├─ execute_tool search_web
    │     └─ chat gpt-4o-mini
    └─ chat gpt-4o

With no ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, ``configure_telemetry()`` prints that tree to the
console; set it (see ``otlp_export.py``) and the same program ships OTLP instead. The LLM is a
small scripted provider, so the example runs offline and prints the same tree every time.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

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
    ToolUseBlock,
    Usage,
    UserMessage,
)
from flowra.runtime import AgentRuntime
from flowra.tools import ToolRegistry, get_local_tool, tool

from flowra_otel import OtelHooks
from flowra_otel.export import configure_telemetry

QUESTION = "What changed in Python 3.13? One sentence, please."
RESEARCH_QUERY = "Python 3.13 release highlights"


# --------------------------------------------------------------------------------- a scripted LLM
def _answer(text: str, usage: Usage) -> LLMResponse:
    return LLMResponse(
        message=AssistantMessage(blocks=[TextBlock(text=text)]), stop_reason=StopReason.END_TURN, usage=usage
    )


def _call(call_id: str, name: str, arguments: dict[str, Any], usage: Usage) -> LLMResponse:
    return LLMResponse(
        message=AssistantMessage(blocks=[ToolUseBlock(id=call_id, name=name, input=arguments)]),
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
@dataclasses.dataclass(frozen=True, slots=True)
class SearchInput:
    query: str


@tool("search_web", "Search the web; returns the best matching snippet.")
async def search_web(params: SearchInput) -> str:
    return f"docs.python.org: What's New In Python 3.13 ({params.query})"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearchSpec:
    query: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearchResult:
    answer: str | None = None


RESEARCH_CONFIG = ToolLoopConfig(
    llm_config=LLMConfig(model="openai/gpt-4o-mini"),
    session_messages=[SystemMessage(blocks=[TextBlock(text="You research. Search, then answer briefly.")])],
    max_llm_calls=5,
)


class ResearchAgent(Agent[ResearchSpec, ResearchResult]):
    """Runs its own tool loop (``research/tool_loop``) with its own model and prompt."""

    __subagents__: ClassVar[dict[str, AgentDefinitionRef]] = {"tool_loop": ToolLoopAgent}

    def __init__(self, services: ServiceLocator) -> None:
        services.provide(ToolLoopConfig, RESEARCH_CONFIG)  # for this agent's subtree only

    @step("research", entry=True)
    async def research(self, spec: ResearchSpec) -> Spawn:
        child = CallAgent(agent=ToolLoopAgent, spec=ToolLoopSpec(user_message=spec.query))
        return Spawn(children=[child], then=self.collect)

    @step("collect")
    async def collect(self, result: ToolLoopResult) -> ResearchResult:
        message = result.result_message
        texts = [b.text for b in message.blocks if isinstance(b, TextBlock)] if message else []
        return ResearchResult(answer="\n".join(texts) or None)


async def main() -> None:
    handles = configure_telemetry(service_name="flowra-multi-agent-example")
    hooks = HookRegistry()
    hooks.add(OtelHooks())  # the one line: global providers, content capture off

    research_tool = make_agent_tool(ResearchAgent, name="research", description="Research a topic with a sub-agent.")
    async with await ToolRegistry.create([research_tool, get_local_tool(search_web)]) as tools:
        runtime = AgentRuntime(
            agents={"assistant": ToolLoopAgent, "research": ResearchAgent},
            services={
                LLMProvider: ScriptedLLM(SCRIPTS),
                ToolRegistry: tools,
                ToolLoopConfig: ToolLoopConfig(llm_config=LLMConfig(model="openai/gpt-4o"), session_messages=[]),
                HookRegistry: hooks,
            },
        )
        result = await runtime.run(agent="assistant", spec=ToolLoopSpec(user_message=QUESTION))

    assert isinstance(result, ToolLoopResult) and result.result_message is not None
    answer = next(b.text for b in result.result_message.blocks if isinstance(b, TextBlock))
    handles.shutdown()  # flush before printing the answer, so the tree comes first
    print(f"answer: {answer}")


if __name__ == "__main__":
    asyncio.run(main())
