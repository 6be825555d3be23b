"""A support agent on flowra 0.0.86 - 0.0.93: parallel tools, an agent used as a tool, an app hook.

The workload of issue 27, built like a real support agent rather than a one-tool loop: flowra's
``ChatAgent`` (``assistant``) with a zero-latency scripted provider that answers with usage, and
three tools: ``lookup_order`` (a plain function), ``check_stock`` (a coroutine) and ``consult``,
a ``Specialist`` agent used as a tool (``make_agent_tool``) whose one step asks its own model
through flowra's ``LLMCaller`` with its hooks. One app hook on ``AfterToolCallEvent`` (it rewrites
``check_stock``'s result, as a redaction hook would). Per round, the assistant's model asks for

1. the three tools at once (the specialist makes its own LLM call),
2. ``lookup_order`` and ``check_stock`` at once,
3. ``consult`` alone (another LLM call of the specialist's),

and after ``ITERATIONS`` rounds it answers: 6 LLM calls per run with one round. flowra-otel makes
``1 invoke_agent + 4 chat + 6 execute_tool + 2 x (invoke_agent + chat)`` = 15 spans per round-1
run (``spans_per_run``).

The interface is ``modern_workload``'s (``build_runtime``, ``run_once``, ``check_run``,
``spans_per_run``, with ``iterations`` meaning rounds), so the same worker and floor serve both.
Self-contained, and it never imports ``flowra_otel``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flowra.agent import Agent, AgentRuntime, Event, Hooks, step
from flowra.lib import LLMCaller, LLMConfig
from flowra.lib.chat import ChatAgent, ChatConfig, ChatResult, ChatSpec
from flowra.lib.turn import make_agent_tool
from flowra.lib.turn.hook_events import AfterToolCallEvent
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
from modern_workload import DropSpanExporter, RecordingSdk

ITERATIONS = 1
"""Rounds per run (each: three tools at once, two at once, the specialist alone); then the answer."""

MODEL = "anthropic/sonnet-4-5"
SPECIALIST_MODEL = "anthropic/haiku-4-5"
USER_MESSAGE = "My order 1042 has not arrived and the replacement part seems out of stock. Can you help?"
AGENT = "assistant"
SYSTEM = "You are the support agent of an online shop. Be brief and precise."


def spans_per_run(iterations: int = ITERATIONS) -> int:
    """flowra-otel's spans: the assistant's invoke_agent, its 3 chat + 1 per round, 6 execute_tool
    and 2 specialists (invoke_agent + chat) per round."""
    return 1 + (3 * iterations + 1) + 6 * iterations + 2 * 2 * iterations


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OrderParams:
    order_id: str


@tool("lookup_order")
def lookup_order(params: OrderParams) -> str:
    """An order's status (a plain function)."""
    return f"order {params.order_id}: shipped 3 days ago, carrier DPD, tracking 00340434161234567890"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StockParams:
    sku: str


@tool("check_stock")
async def check_stock(params: StockParams) -> str:
    """Stock of a part (a coroutine)."""
    return f"{params.sku}: 0 in stock, next delivery in 5 days; internal note: supplier ACME-77"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ConsultSpec:
    question: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ConsultResult:
    answer: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SpecialistSetup:
    llm_config: LLMConfig


class Specialist(Agent[ConsultSpec, ConsultResult]):
    """A custom agent used as a tool: one step asks its own model through ``LLMCaller``."""

    __slots__ = ("_hooks", "_setup")

    def __init__(self, setup: SpecialistSetup, hooks: Hooks) -> None:
        self._setup = setup
        self._hooks = hooks

    @step("ask", entry=True)
    async def ask(self, spec: ConsultSpec) -> ConsultResult:
        response = await LLMCaller().call(
            self._setup.llm_config,
            system=[SystemMessage(blocks=[TextBlock(text="You are a logistics specialist.")])],
            messages=[UserMessage.text(spec.question)],
            hooks=self._hooks,
        )
        texts = [b.text for m in response.messages for b in m.blocks if isinstance(b, TextBlock)]
        return ConsultResult(answer="\n".join(texts))


consult = make_agent_tool(Specialist, name="consult", description="Ask the logistics specialist one question")


def _response(blocks: list[Any], stop: StopReason, model: str) -> LLMResponse:
    return LLMResponse(
        messages=[AssistantMessage(blocks=blocks)],
        stop_reason=stop,
        usage=Usage(input_tokens=840, output_tokens=64),
        model=model,
    )


class SupportProvider(LLMProvider):
    """Zero latency; call ``k`` of a run (``k`` assistant messages in the request) follows the script."""

    __slots__ = ("_final", "_rounds")

    def __init__(self, iterations: int = ITERATIONS) -> None:
        def use(call_id: str, name: str, **arguments: str) -> ToolUseBlock:
            return ToolUseBlock(id=call_id, name=name, input=arguments)

        rounds: list[LLMResponse] = []
        for r in range(iterations):
            rounds += [
                _response(
                    [
                        TextBlock(text="Let me look at the order, the stock and ask logistics."),
                        use(f"r{r}a", "lookup_order", order_id="1042"),
                        use(f"r{r}b", "check_stock", sku="PART-7"),
                        use(f"r{r}c", "consult", question="Where is parcel 00340434161234567890?"),
                    ],
                    StopReason.TOOL_USE,
                    MODEL,
                ),
                _response(
                    [use(f"r{r}d", "lookup_order", order_id="1043"), use(f"r{r}e", "check_stock", sku="PART-8")],
                    StopReason.TOOL_USE,
                    MODEL,
                ),
                _response([use(f"r{r}f", "consult", question="Can PART-8 ship today?")], StopReason.TOOL_USE, MODEL),
            ]
        self._rounds = rounds
        self._final = _response(
            [TextBlock(text="Your parcel is with DPD and arrives tomorrow; the part ships in 5 days.")],
            StopReason.END_TURN,
            MODEL,
        )

    async def call(self, request: LLMRequest) -> LLMResponse:
        done = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        return self._rounds[done] if done < len(self._rounds) else self._final


class SpecialistProvider(LLMProvider):
    __slots__ = ("_answer",)

    def __init__(self) -> None:
        self._answer = _response(
            [TextBlock(text="In transit, arrives tomorrow.")], StopReason.END_TURN, SPECIALIST_MODEL
        )

    async def call(self, request: LLMRequest) -> LLMResponse:
        return self._answer


_CHECKED: list[list[ToolResultBlock]] = []
"""While ``check_run`` runs: every tool result the app hook saw (before it rewrote it)."""


def redact_supplier(event: Event[AfterToolCallEvent]) -> None:
    """The app's hook: internal notes never reach the model (it rewrites ``check_stock``'s result)."""
    data = event.data
    if _CHECKED:
        _CHECKED[-1].append(data.result)
    if data.tool_use.name == "check_stock":
        data.result = dataclasses.replace(data.result, content=[TextBlock(text="0 in stock, next delivery in 5 days")])


def build_runtime(iterations: int = ITERATIONS) -> AgentRuntime:
    """``assistant`` (a ``ChatAgent``) with the three tools, the specialist, and the app hook."""
    chat = ChatConfig(
        llm_config=LLMConfig(provider=SupportProvider(iterations), model=MODEL),
        system=[SystemMessage(blocks=[TextBlock(text=SYSTEM)])],
        tools=ToolRegistry([lookup_order, check_stock, consult]),
        max_llm_calls=3 * iterations + 5,
    )
    specialist = SpecialistSetup(llm_config=LLMConfig(provider=SpecialistProvider(), model=SPECIALIST_MODEL))
    runtime = AgentRuntime(
        agents={AGENT: ChatAgent, "specialist": Specialist},
        services={ChatConfig: chat, SpecialistSetup: specialist},
    )
    runtime.hooks.on(AfterToolCallEvent, redact_supplier)
    return runtime


async def run_once(runtime: AgentRuntime) -> object:
    return await runtime.run(agent=ChatAgent, spec=ChatSpec.text(USER_MESSAGE))


async def check_run(runtime: AgentRuntime, iterations: int = ITERATIONS) -> None:
    """Fail loudly if the workload is not the one described."""
    results: list[ToolResultBlock] = []
    _CHECKED.append(results)
    try:
        result = await run_once(runtime)
    finally:
        _CHECKED.remove(results)
    if not isinstance(result, ChatResult) or str(result.status) != "completed":
        raise RuntimeError(f"expected a completed ChatResult, got {result!r}")
    errors = [b for b in results if b.is_error]
    texts = " ".join(str(b.content) for b in results)
    if len(results) != 6 * iterations or errors or "ACME-77" not in texts or "arrives tomorrow" not in texts:
        raise RuntimeError(f"bad workload run: tool_results={len(results)} errors={errors} results={texts[:400]}")


__all__ = ["DropSpanExporter", "RecordingSdk", "build_runtime", "check_run", "run_once", "spans_per_run"]
