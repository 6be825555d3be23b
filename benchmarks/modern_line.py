"""The benchmark's workloads on flowra 0.0.86 - 0.0.93 (``runtime.hooks``), and its hook points there.

``build`` makes a ``workloads.Workload`` a real runtime: flowra's ``ChatAgent`` (with a system
prompt) or ``TurnAgent``, a zero-latency scripted provider that asks for the workload's tool
calls one LLM call after the other and then answers (every response with usage), the tools it
names (see ``workloads``), and the app's hook on ``AfterToolCallEvent`` that rewrites
``check_stock``'s result. ``install_plugin`` / ``install_ext_otel`` put telemetry on it as an app
does; ``subscribe_markers`` / ``subscribe_floor`` are the hook points of the exact floor
(``replay``): the opens and exits of flowra's ``AgentSpan``, ``LLMCallSpan`` and ``ToolCallSpan``,
and the turn's events (streaming deltas left out: a handler for them switches flowra to streaming).

Self-contained (nothing from ``tests/``); ``flowra_otel`` is imported only by ``install_plugin``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, Final

from flowra.agent import (
    Agent,
    AgentDefinitionRef,
    AgentRuntime,
    AgentSpan,
    AgentStore,
    CallAgent,
    Event,
    Hooks,
    ServiceLocator,
    Spawn,
    step,
)
from flowra.lib import LLMCaller, LLMConfig
from flowra.lib.chat import ChatAgent, ChatConfig, ChatResult, ChatSpec
from flowra.lib.observability import LLMCallSpan, ToolCallSpan
from flowra.lib.turn import TurnAgent, TurnConfig, TurnResult, TurnSpec, hook_events, make_agent_tool
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
from opentelemetry import metrics, trace
from replay import EVENT, EXIT, OPEN, Floor, Note
from workloads import Workload

NAME: Final = "modern"
MODEL = "anthropic/sonnet-4-5"
SPECIALIST_MODEL = "anthropic/haiku-4-5"
USER_MESSAGE = "My order 1042 has not arrived and the replacement part seems out of stock. Can you help?"
SYSTEM = "You are the support agent of an online shop. Be brief and precise."
ANSWER = "Your parcel is with DPD and arrives tomorrow; the part ships in 5 days."
CONSULTED = "In transit, arrives tomorrow."
RESEARCHED = "Found it: the part ships from the second warehouse."
REWRITTEN = "0 in stock, next delivery in 5 days"

SPAN_TYPES: Final[dict[str, type[Any]]] = {t.__name__: t for t in (AgentSpan, LLMCallSpan, ToolCallSpan)}
EVENT_TYPES: Final[dict[str, type[Any]]] = {
    name: getattr(hook_events, name)
    for name in hook_events.__all__
    if isinstance(getattr(hook_events, name), type) and not name.endswith("DeltaEvent")
}


# ------------------------------------------------------------------------------------------ tools


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
class PingParams:
    seq: str = ""


@tool("ping", "Answer pong. The benchmark's trivial tool.")
def ping(params: PingParams) -> str:
    return "pong"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QuestionSpec:
    question: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AnswerResult:
    answer: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SubAgentModels:
    """The sub-agents' own models (a service every specialist and researcher reads)."""

    specialist: LLMConfig
    researcher: LLMConfig


class Specialist(Agent[QuestionSpec, AnswerResult]):
    """A custom agent used as a tool: one step asks its own model through ``LLMCaller``."""

    __slots__ = ("_hooks", "_models")

    def __init__(self, models: SubAgentModels, hooks: Hooks) -> None:
        self._models = models
        self._hooks = hooks

    @step("ask", entry=True)
    async def ask(self, spec: QuestionSpec) -> AnswerResult:
        response = await LLMCaller().call(
            self._models.specialist,
            system=[SystemMessage(blocks=[TextBlock(text="You are a logistics specialist.")])],
            messages=[UserMessage.text(spec.question)],
            hooks=self._hooks,
        )
        texts = [b.text for m in response.messages for b in m.blocks if isinstance(b, TextBlock)]
        return AnswerResult(answer="\n".join(texts))


class Researcher(Agent[QuestionSpec, AnswerResult]):
    """An agent used as a tool that runs its own tool loop (a ``TurnAgent`` with ``ping``)."""

    __slots__ = ()
    __subagents__: ClassVar[dict[str, AgentDefinitionRef]] = {"turn": TurnAgent}

    def __init__(self, services: ServiceLocator, models: SubAgentModels, store: AgentStore) -> None:
        services.provide(
            TurnConfig(
                llm_config=models.researcher,
                system=[SystemMessage(blocks=[TextBlock(text="You research one question.")])],
                history=[],
                tools=ToolRegistry([ping]),
            )
        )

    @step("ask", entry=True)
    async def ask(self, spec: QuestionSpec) -> Spawn:
        return Spawn(
            children=[CallAgent(agent=TurnAgent, spec=TurnSpec(messages=[UserMessage.text(spec.question)]))],
            then=self.answer,
        )

    @step("answer")
    async def answer(self, result: TurnResult) -> AnswerResult:
        message = result.result_message
        texts = [b.text for b in message.blocks if isinstance(b, TextBlock)] if message is not None else []
        return AnswerResult(answer="\n".join(texts))


TOOLS: Final[dict[str, Any]] = {
    "lookup_order": lookup_order,
    "check_stock": check_stock,
    "ping": ping,
    "consult": make_agent_tool(Specialist, name="consult", description="Ask the logistics specialist one question"),
    "research": make_agent_tool(Researcher, name="research", description="Research one question in depth"),
}
ARGUMENT: Final = {
    "lookup_order": "order_id",
    "check_stock": "sku",
    "ping": "seq",
    "consult": "question",
    "research": "question",
}


# ------------------------------------------------------------------------------------------ models


def _response(blocks: list[Any], stop: StopReason, model: str = MODEL) -> LLMResponse:
    return LLMResponse(
        messages=[AssistantMessage(blocks=blocks)],
        stop_reason=stop,
        usage=Usage(input_tokens=840, output_tokens=64),
        model=model,
    )


class ScriptedProvider(LLMProvider):
    """Zero latency; call ``k`` (``k`` assistant messages in the request) gets the script's
    response ``k``, the last one after that. Responses are built once; while ``checking`` it keeps
    the last request (the whole conversation, every tool result in it)."""

    __slots__ = ("checking", "last", "responses")

    def __init__(self, responses: list[LLMResponse]) -> None:
        self.responses = responses
        self.checking = False
        self.last: LLMRequest | None = None

    async def call(self, request: LLMRequest) -> LLMResponse:
        if self.checking:
            self.last = request
        done = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        return self.responses[min(done, len(self.responses) - 1)]


def script(workload: Workload) -> list[LLMResponse]:
    responses = []
    for k, call in enumerate(workload.calls):
        blocks: list[Any] = [TextBlock(text=call.text)] if call.text else []
        blocks += [
            ToolUseBlock(id=f"c{k}_{j}", name=name, input={ARGUMENT[name]: argument})
            for j, (name, argument) in enumerate(call.tools)
        ]
        responses.append(_response(blocks, StopReason.TOOL_USE))
    return [*responses, _response([TextBlock(text=ANSWER)], StopReason.END_TURN)]


def rewrite_stock_note(event: Event[AfterToolCallEvent]) -> None:
    """The app's hook: internal notes never reach the model (it rewrites ``check_stock``'s result)."""
    data = event.data
    if data.tool_use.name == "check_stock":
        data.result = dataclasses.replace(data.result, content=[TextBlock(text=REWRITTEN)])


# ------------------------------------------------------------------------------------------ bench


class Bench:
    """One workload made a runtime: ``run()`` is one run, ``check()`` one run that must be the
    workload described (else it raises)."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.provider = ScriptedProvider(script(workload))
        self.sub_providers = (
            ScriptedProvider([_response([TextBlock(text=CONSULTED)], StopReason.END_TURN, SPECIALIST_MODEL)]),
            ScriptedProvider(
                [
                    _response([ToolUseBlock(id="p0", name="ping", input={"seq": "0"})], StopReason.TOOL_USE),
                    _response([TextBlock(text=RESEARCHED)], StopReason.END_TURN),
                ]
            ),
        )
        tools = ToolRegistry([TOOLS[name] for name in dict.fromkeys(n for c in workload.calls for n, _ in c.tools)])
        llm = LLMConfig(provider=self.provider, model=MODEL)
        agents: dict[str, AgentDefinitionRef] = {"specialist": Specialist, "researcher": Researcher}
        services: dict[type, Any] = {
            SubAgentModels: SubAgentModels(
                specialist=LLMConfig(provider=self.sub_providers[0], model=SPECIALIST_MODEL),
                researcher=LLMConfig(provider=self.sub_providers[1], model=MODEL),
            )
        }
        limit = len(workload.calls) + 5
        system = [SystemMessage(blocks=[TextBlock(text=SYSTEM)])]
        if workload.agent == "chat":
            agents["assistant"] = ChatAgent
            services[ChatConfig] = ChatConfig(llm_config=llm, system=system, tools=tools, max_llm_calls=limit)
        elif workload.agent == "turn":
            agents["assistant"] = TurnAgent
            services[TurnConfig] = TurnConfig(
                llm_config=llm, system=system, history=[], tools=tools, max_llm_calls=limit
            )
        else:
            raise ValueError(f"{workload.name}: agent {workload.agent!r} is not on flowra 0.0.56+")
        self.runtime = AgentRuntime(agents=agents, services=services)
        if workload.hook:
            self.runtime.hooks.on(AfterToolCallEvent, rewrite_stock_note)
        self.begin: Callable[[], None] | None = None  # the floor's per-run set-up

    async def run(self) -> object:
        if self.begin is not None:
            self.begin()
        if self.workload.agent == "chat":
            return await self.runtime.run(agent=ChatAgent, spec=ChatSpec.text(USER_MESSAGE))
        return await self.runtime.run(agent=TurnAgent, spec=TurnSpec.text(USER_MESSAGE))

    async def check(self) -> None:
        self.provider.checking = True
        try:
            result = await self.run()
        finally:
            self.provider.checking = False
        last, self.provider.last = self.provider.last, None
        if not isinstance(result, ChatResult | TurnResult) or str(result.status) != "completed":
            raise RuntimeError(f"{self.workload.name}: expected a completed run, got {result!r}")
        results = [b for m in (last.messages if last else ()) for b in m.blocks if isinstance(b, ToolResultBlock)]
        texts = [b.text for b in results]
        problems = []
        if len(results) != self.workload.tool_calls() or any(b.is_error for b in results):
            problems.append(f"{len(results)} tool results ({sum(b.is_error for b in results)} errors)")
        if self.workload.uses("consult") and not any(CONSULTED in t for t in texts):
            problems.append("no specialist's answer")
        if self.workload.uses("research") and not any(RESEARCHED in t for t in texts):
            problems.append("no researcher's answer")
        if any("ACME-77" in t for t in texts) != (self.workload.uses("check_stock") and not self.workload.hook):
            problems.append("the app's hook did not rewrite check_stock's result as it should")
        if problems:
            raise RuntimeError(f"bad {self.workload.name} run: {'; '.join(problems)}: {texts}")


async def build(workload: Workload) -> Bench:
    return Bench(workload)


# ------------------------------------------------------------------------------------------ telemetry


def install_plugin(
    bench: Bench, tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider, **options: Any
) -> None:
    """``OtelHooks(...).install(runtime)``: the plugin as an app sets it up."""
    from flowra_otel import OtelHooks

    OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider, **options).install(bench.runtime)


def install_ext_otel(bench: Bench, tracer_provider: trace.TracerProvider, *, content: bool) -> None:
    """flowra's own tracer, its defaults (agent, step, LLM and tool spans; no metrics); it takes
    the *global* tracer provider, set to the recording one."""
    from flowra.ext.otel import OTEL_TRACING

    trace.set_tracer_provider(tracer_provider)
    OTEL_TRACING.install(bench.runtime, capture_content=content)


def subscribe_markers(bench: Bench, note: Note, *, before: bool) -> None:
    """Markers on every hook point (see ``replay.Line``)."""
    hooks = bench.runtime.hooks
    for name, span_type in SPAN_TYPES.items():
        if before:

            def on_open(event: Any, name: str = name) -> Callable[[BaseException | None], None]:
                span = event.data

                def on_exit(error: BaseException | None) -> None:
                    note(EXIT, name, span)

                return on_exit

            hooks.on_span(span_type, on_open)
        else:

            def on_open_after(event: Any, name: str = name) -> None:
                note(OPEN, name, event.data)

            hooks.on_span(span_type, on_open_after)
    if before:
        return
    for name, event_type in EVENT_TYPES.items():

        def on_event(event: Any, name: str = name) -> None:
            note(EVENT, name, None)

        hooks.on(event_type, on_event)


def subscribe_floor(bench: Bench, floor: Floor) -> None:
    hooks = bench.runtime.hooks
    for kind, name in sorted(floor.plan.subscribed()):
        if kind == OPEN:
            hooks.on_span(SPAN_TYPES[name], floor.open)
        else:
            hooks.on(EVENT_TYPES[name], floor.step)
    bench.begin = Floor.begin_run


__all__ = ["NAME", "Bench", "build", "install_ext_otel", "install_plugin", "subscribe_floor", "subscribe_markers"]
