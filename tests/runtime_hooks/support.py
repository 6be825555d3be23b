"""Test support for flowra 0.0.47 - 0.0.93: real agents through a real ``AgentRuntime``.

A scripted ``LLMProvider`` (it answers from a list and records every request; it streams when
flowra asks it to), real ``@tool`` functions, flowra's own ``ChatAgent`` / ``TurnAgent`` and an
agent used as a tool (``make_agent_tool``), built the way flowra's own examples build them. What
differs by release is named here (the tests' facts table, below the imports), read from flowra
itself, and a test that needs a feature skips with the reason where the release lacks it:
``LLMConfig.provider`` is 0.0.56+ (``PROVIDER_IN_CONFIG``; the provider is a service before,
which ``chat_runtime`` and the other builders give), a spec holds messages from 0.0.48
(``SPEC_MESSAGES``; ``chat_spec`` / ``turn_spec`` build one on every release), hooks scoped to an
agent follow the call stack and survive ``run()`` from 0.0.56 (``CALL_STACK_SCOPES``,
``scoped_hook``), a durable storage keeps ephemeral state from 0.0.49 (``EPHEMERAL_STATE``),
``ToolResultBlock.content`` is text before 0.0.86 and 0.0.57's ``AfterToolCallEvent.result`` a
list of blocks (``result_text``, ``replace_result_text``), ``LLMResponse.model`` is 0.0.82+
(``HAS_RESPONSE_MODEL``), typed ``LLMError`` 0.0.83+
(``HAS_LLM_ERRORS``), ``LLMCaller`` and fallback 0.0.84+ (``HAS_LLM_CALLER``), 0.0.89 let a tool
answer with blocks (``HAS_TOOL_BLOCKS``), 0.0.92 added ``BeforeToolCallsEvent``
(``HAS_CALLS_EVENT``), 0.0.93 ``TurnConfig.render`` (``HAS_RENDER``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, ClassVar

import pytest
from flowra.agent import (
    Agent,
    AgentDefinitionRef,
    AgentRuntime,
    AgentSpan,
    AgentStore,
    HookSubscription,
    ServiceLocator,
    SessionStorage,
    Spawn,
    step,
)
from flowra.agent.flow.hooks import HooksImpl
from flowra.lib import LLMConfig
from flowra.lib.chat import ChatAgent, ChatConfig, ChatResult, ChatSpec
from flowra.lib.turn import TurnAgent, TurnConfig, TurnResult, TurnSpec, make_agent_tool
from flowra.lib.turn import hook_events as turn_events
from flowra.llm import (
    AssistantMessage,
    ContentComplete,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    StopReason,
    StreamEvent,
    SystemMessage,
    TextBlock,
    TextDelta,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from flowra.tools import ToolRegistry, ToolResult, tool

FLOWRA_VERSION = importlib.metadata.version("flowra")
PROVIDER_IN_CONFIG = "provider" in LLMConfig.__dataclass_fields__
"""0.0.56+: ``LLMConfig(provider=...)``; before, a turn agent reads its provider from the services
(``LLMProvider``), and ``LLMConfig`` has no ``provider``."""
SPEC_MESSAGES = "messages" in ChatSpec.__dataclass_fields__
"""0.0.48+: a ``ChatSpec`` / ``TurnSpec`` holds messages (``.text(...)``); 0.0.47's holds one
``user_message`` string, and its ``StartTurnEvent`` has only ``context`` (the input is
``UserMessageEvent``'s)."""
INPUT_EVENT: Any = turn_events.StartTurnEvent if SPEC_MESSAGES else vars(turn_events)["UserMessageEvent"]
"""The event whose ``messages`` a hook rewrites to change a turn's input (0.0.47: ``UserMessageEvent``)."""
METADATA_EVENT_TYPES: tuple[type, ...] = tuple(
    t
    for t in (turn_events.StartTurnEvent, turn_events.MessageAcceptedEvent)
    if "metadata" in getattr(t, "__dataclass_fields__", {})
)
"""The turn events that carry the spec's ``metadata`` (0.0.47: ``MessageAcceptedEvent`` alone)."""
CALL_STACK_SCOPES = "during" in inspect.signature(HooksImpl.on).parameters
"""0.0.56+: a hook scoped to an agent reaches what that agent runs (its tools' agents included:
the call stack), and a ``scope=`` registration on ``runtime.hooks`` lasts across runs. Before
(0.0.47 - 0.0.55), scopes follow registry paths (an agent's hook reaches its registered
sub-agents, not an agent it runs as a tool) and ``run()`` clears every ``scope=`` registration:
an agent registers its scoped hooks itself, when it is built."""
HANDLER_STORAGE: tuple[str, ...] = tuple(
    name
    for name in ("global_subscriptions", "global_handlers", "scoped_subscriptions", "scoped", "type_scoped")
    if name in HooksImpl()._root._events.__slots__
)
"""Where ``HooksImpl`` keeps handlers, global entries first: ``global_subscriptions`` /
``scoped_subscriptions`` (0.0.56+), ``global_handlers`` / ``scoped`` / ``type_scoped`` (0.0.47 - 0.0.55)."""
EPHEMERAL_STATE = hasattr(SessionStorage, "save_ephemeral")
"""0.0.49+: a durable storage keeps per-run ephemeral state (where the trace link is kept): a
resumed run continues its trace. 0.0.47 - 0.0.48 have none."""
CALLS_EVENT: Any = getattr(turn_events, "BeforeToolCallsEvent", None)
"""0.0.92+: a hook can answer tool calls itself (``BeforeToolCallsEvent.results``); None before."""
HAS_CALLS_EVENT = CALLS_EVENT is not None
HAS_RENDER = "render" in getattr(TurnConfig, "__dataclass_fields__", {})
"""0.0.93: ``TurnConfig.render`` turns the stored conversation into what each call sends."""
HAS_TOOL_BLOCKS = hasattr(ToolResult, "blocks")
"""0.0.89+: a tool answers with blocks (``ToolResult.content`` a list of blocks, media included;
a ``@tool`` function may return a ``ToolResult``). Before, a tool's answer is text: media reaches
a tool result only through a hook (``AfterToolCallEvent.result``)."""

HAS_RESPONSE_MODEL = "model" in getattr(LLMResponse, "__dataclass_fields__", {})
"""0.0.82+: ``LLMResponse.model`` (the model that answered)."""
HAS_LLM_ERRORS = importlib.util.find_spec("flowra.llm.errors") is not None
"""0.0.83+: typed provider errors (``flowra.llm.errors.LLMError``), refusals."""
HAS_LLM_CALLER = hasattr(importlib.import_module("flowra.lib"), "LLMCaller")
"""0.0.84+: ``LLMCaller`` (one ``LLMCallSpan`` per attempt) and fallback chains."""
CUT_OFF_ANSWERED = hasattr(TurnAgent, "_TurnAgent__incomplete_tool_result")
"""0.0.77+: the call a cut-off response (``max_tokens``...) ends on is answered with an error; before,
the turn completes there and none of that response's calls runs."""
PARALLEL_SAME_AGENT = not hasattr(
    importlib.import_module("flowra.agent.runtime.engine").Engine, "_Engine__acquire_persistent_key"
)
"""0.0.76+: two live instances of one agent (its persistent key) may run in parallel (the engine
waits on the key); before, the engine raises "Duplicate persistent key"."""
CHILD: Any = getattr(importlib.import_module("flowra.agent").agent_arg, "CHILD", None) or getattr(
    importlib.import_module("flowra.agent.definition.step_arg"), "CHILD", None
)
"""The marker of a step parameter that takes a child's result: ``agent_arg.CHILD`` (0.0.50+),
``step_arg.CHILD`` before (``Annotated[TurnResult, CHILD]``, ``CHILD("tag")``)."""
UNIQUE_CHILD_IDS = (
    "spawn_counter" in importlib.import_module("flowra.agent.runtime.execution").ExecutionNode.__dataclass_fields__
)
"""0.0.52+: the children of a node's successive spawns get node ids of their own; before, a second
spawn reuses the first one's ids, and a resumed run may run a finished child's last call again."""
HAS_RESULT_BLOCKS = "list" in str(ToolResultBlock.__dataclass_fields__["content"].type)
"""0.0.86+: ``ToolResultBlock.content`` is a list of blocks (text before)."""


APP_DIALECT = f'''
from flowra.lib import LLMConfig
from flowra.lib.chat import ChatSpec
from flowra.lib.turn import TurnSpec
from flowra.llm import LLMProvider


def llm_config(provider, model):
    """The model's settings: the provider is in them from flowra 0.0.56, a service before."""
    return LLMConfig(provider=provider, model=model) if {PROVIDER_IN_CONFIG} else LLMConfig(model=model)


def provider_services(provider):
    return {{}} if {PROVIDER_IN_CONFIG} else {{LLMProvider: provider}}


def turn_spec(text):
    return TurnSpec.text(text) if {SPEC_MESSAGES} else TurnSpec(user_message=text)


def chat_spec(text):
    return ChatSpec.text(text) if {SPEC_MESSAGES} else ChatSpec(user_message=text)
'''
"""``llm_config``, ``provider_services``, ``turn_spec`` and ``chat_spec`` (as above) in the source of
an app a test runs in a process of its own (it replaces the app's ``APP_DIALECT`` line)."""


def global_subscriptions(hooks: Any) -> int:
    """How many global event and span subscriptions ``hooks`` (a ``runtime.hooks``) holds."""
    root = hooks._root
    return sum(
        len(entries) for group in (root._events, root._spans) for entries in getattr(group, HANDLER_STORAGE[0]).values()
    )


def subscribed(hooks: Any, event_type: type) -> bool:
    """Whether any handler, global or scoped, is subscribed to ``event_type`` on ``hooks``."""
    group = hooks._root._events
    return any(getattr(group, name).get(event_type) for name in HANDLER_STORAGE)


def scoped_hook(runtime: AgentRuntime, event_type: type, handler: Callable[..., Any], scope: Any) -> None:
    """``runtime.hooks.on(event_type, handler, scope=scope)`` for every run of ``runtime``: 0.0.56+
    keeps the registration; 0.0.47 - 0.0.55's ``run()`` and ``resume()`` clear every ``scope=``
    registration first, so (as an app there must) it is made again when each run's root agent opens."""
    runtime.hooks.on(event_type, handler, scope=scope)
    if CALL_STACK_SCOPES:
        return

    def again(event: Any) -> None:
        if len(event.context.stack) == 1:
            runtime.hooks.on(event_type, handler, scope=scope)

    runtime.hooks.on_span(AgentSpan, again)


def requires(present: bool, feature: str) -> pytest.MarkDecorator:
    """Skip, saying why, on a release that lacks ``feature`` (never a silent gap)."""
    return pytest.mark.skipif(not present, reason=f"{feature}; installed: flowra {FLOWRA_VERSION}")


def result_block(result: Any) -> Any:
    """The ``ToolResultBlock`` of an ``AfterToolCallEvent.result`` (0.0.57: a list holding it)."""
    return next(b for b in result if isinstance(b, ToolResultBlock)) if isinstance(result, list) else result


def append_result_text(result: Any, text: str) -> Any:
    """``result`` with ``text`` added: a block after its blocks (0.0.86+), else appended to its text."""
    if isinstance(result, list):
        return [append_result_text(b, text) if isinstance(b, ToolResultBlock) else b for b in result]
    if isinstance(result.content, str):
        return dataclasses.replace(result, content=result.content + text)
    return dataclasses.replace(result, content=[*result.content, TextBlock(text=text)])


def result_text(block: Any) -> str:
    """A ``ToolResultBlock``'s text, on every release (``content`` is text before 0.0.86; 0.0.57's
    ``AfterToolCallEvent.result`` is a list of blocks holding it)."""
    if isinstance(block, list):
        block = next(b for b in block if isinstance(b, ToolResultBlock))
    content = block.content
    return content if isinstance(content, str) else block.text


def replace_result_text(result: Any, change: Callable[[str], str]) -> Any:
    """``AfterToolCallEvent.result`` with ``change`` applied to its text, in the release's shape:
    a ``ToolResultBlock`` whose content is text (before 0.0.86) or blocks, or 0.0.57's list of
    blocks."""
    if isinstance(result, list):
        return [replace_result_text(b, change) if isinstance(b, ToolResultBlock) else b for b in result]
    if isinstance(result.content, str):
        return dataclasses.replace(result, content=change(result.content))
    blocks = [dataclasses.replace(b, text=change(b.text)) if isinstance(b, TextBlock) else b for b in result.content]
    return dataclasses.replace(result, content=blocks)


MODEL = "anthropic/sonnet-4-5"
SYSTEM_PROMPT = "You are a helpful assistant."
RESEARCHER_PROMPT = "You research one question."

SSN = "123-45-6789"
CARD = "4111 1111 1111 1111"
REDACTED = "[REDACTED]"

type Script = LLMResponse | BaseException | Callable[[LLMRequest], LLMResponse]


class ScriptExhaustedError(AssertionError):
    """The agent asked for more responses than the test scripted."""


class ScriptedProvider(LLMProvider):
    """Answers from ``script`` in order (a response, an exception to raise, or a function of the
    request) and records every request; streams (text deltas, then the response) when asked."""

    def __init__(self, *script: Script, delay: float = 0.0) -> None:
        self.script: list[Script] = list(script)
        self.requests: list[LLMRequest] = []
        self.delay = delay

    def _next(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if not self.script:
            raise ScriptExhaustedError(f"no scripted response left for request {len(self.requests)}")
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item(request) if callable(item) else item

    async def call(self, request: LLMRequest) -> LLMResponse:
        if self.delay:
            await asyncio.sleep(self.delay)
        return self._next(request)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        response = self._next(request)
        for message in response.messages:
            for block in message.blocks:
                if isinstance(block, TextBlock):
                    for i in range(0, len(block.text), 4):
                        await asyncio.sleep(0)
                        yield TextDelta(text=block.text[i : i + 4])
        yield ContentComplete(response=response)


def usage(input_tokens: int = 10, output_tokens: int = 5, **extra: Any) -> Usage:
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, **extra)


def text_response(
    text: str = "done", *, tokens: tuple[int, int] = (10, 5), stop_reason: StopReason = StopReason.END_TURN, **kw: Any
) -> LLMResponse:
    return LLMResponse(
        messages=[AssistantMessage(blocks=[TextBlock(text=text)])],
        stop_reason=stop_reason,
        usage=usage(*tokens),
        **kw,
    )


def tool_calls_response(
    *calls: tuple[str, str, dict[str, Any]],
    tokens: tuple[int, int] = (10, 5),
    stop_reason: StopReason = StopReason.TOOL_USE,
    text: str | None = None,
) -> LLMResponse:
    blocks: list[Any] = [TextBlock(text=text)] if text else []
    blocks += [ToolUseBlock(id=call_id, name=name, input=arguments) for call_id, name, arguments in calls]
    return LLMResponse(messages=[AssistantMessage(blocks=blocks)], stop_reason=stop_reason, usage=usage(*tokens))


# ----------------------------------------------------------------------------------------- tools
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CityParams:
    city: str


@tool("get_weather")
async def get_weather(params: CityParams) -> str:
    """Current weather for a city."""
    return f"Sunny in {params.city}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CustomerParams:
    name: str


@tool("lookup_customer")
async def lookup_customer(params: CustomerParams) -> str:
    """A customer's record (it holds secrets)."""
    return f"{params.name}: SSN {SSN}, card {CARD}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SleepParams:
    seconds: float


@tool("slow")
async def slow(params: SleepParams) -> str:
    """Waits, then answers."""
    await asyncio.sleep(params.seconds)
    return f"slept {params.seconds}"


CURRENT_SPAN_IN_TOOL: dict[str, int] = {}
"""``probe``'s record: call name -> the id of the span current while the tool ran."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProbeParams:
    name: str


@tool("probe")
async def probe(params: ProbeParams) -> str:
    """Records the span that is current while it runs (after yielding once, as real I/O would)."""
    from opentelemetry import trace

    await asyncio.sleep(0.01)
    CURRENT_SPAN_IN_TOOL[params.name] = trace.get_current_span().get_span_context().span_id
    return params.name


class ToolFailureError(RuntimeError):
    """What ``explode`` raises."""


@tool("explode")
async def explode(params: CityParams) -> str:
    """Always fails."""
    raise ToolFailureError(f"boom in {params.city}")


def registry(*tools: Any) -> ToolRegistry:
    return ToolRegistry(list(tools))


# --------------------------------------------------------------------------------------- runtimes
def llm_config(provider: LLMProvider, model: str = MODEL, **kw: Any) -> LLMConfig:
    """The ``LLMConfig`` of ``provider``'s model (0.0.47 - 0.0.55: ``provider`` goes in the
    services instead, ``provider_services``)."""
    if PROVIDER_IN_CONFIG:
        return LLMConfig(provider=provider, model=model, **kw)
    return LLMConfig(model=model, **kw)


def provider_services(provider: LLMProvider) -> dict[type, Any]:
    """The services that give a turn agent ``provider`` on this release: none when it is in the
    ``LLMConfig`` (0.0.56+), else ``LLMProvider``."""
    return {} if PROVIDER_IN_CONFIG else {LLMProvider: provider}


def chat_spec(text: str, metadata: dict[str, Any] | None = None) -> ChatSpec:
    """A ``ChatSpec`` of one user message (0.0.47: its ``user_message``)."""
    if SPEC_MESSAGES:
        return ChatSpec.text(text, metadata=metadata)
    return ChatSpec(user_message=text, metadata=metadata)  # type: ignore[call-arg]


def turn_spec(text: str, metadata: dict[str, Any] | None = None) -> TurnSpec:
    """A ``TurnSpec`` of one user message (0.0.47: its ``user_message``)."""
    if SPEC_MESSAGES:
        return TurnSpec.text(text, metadata=metadata)
    return TurnSpec(user_message=text, metadata=metadata)  # type: ignore[call-arg]


def system(text: str = SYSTEM_PROMPT) -> list[SystemMessage]:
    return [SystemMessage(blocks=[TextBlock(text=text)])]


def chat_runtime(
    provider: LLMProvider,
    *tools: Any,
    agents: dict[str, AgentDefinitionRef] | None = None,
    services: dict[type, Any] | None = None,
    storage: Any = None,
    model: str = MODEL,
    **config: Any,
) -> AgentRuntime:
    """A ``ChatAgent`` named ``assistant`` (its ``TurnAgent`` child does the work)."""
    chat = ChatConfig(
        llm_config=config.pop("llm", None) or llm_config(provider, model),
        system=system(),
        tools=registry(*tools) if tools else None,
        **config,
    )
    return AgentRuntime(
        agents={"assistant": ChatAgent, **(agents or {})},
        services={ChatConfig: chat, **provider_services(provider), **(services or {})},
        storage=storage,
    )


def turn_runtime(
    provider: LLMProvider, *tools: Any, model: str = MODEL, llm: dict[str, Any] | None = None, **config: Any
) -> AgentRuntime:
    """A bare ``TurnAgent`` named ``assistant`` at the root (``llm``: more ``LLMConfig`` fields)."""
    turn = TurnConfig(
        llm_config=llm_config(provider, model, **(llm or {})),
        system=system(),
        history=[],
        tools=registry(*tools) if tools else None,
        **config,
    )
    return AgentRuntime(agents={"assistant": TurnAgent}, services={TurnConfig: turn, **provider_services(provider)})


async def run_chat(runtime: AgentRuntime, text: str = "Hello", **metadata: Any) -> ChatResult:
    result = await runtime.run(agent=ChatAgent, spec=chat_spec(text, metadata or None))
    assert isinstance(result, ChatResult), result
    return result


async def run_turn(runtime: AgentRuntime, text: str = "Hello", **metadata: Any) -> TurnResult:
    result = await runtime.run(agent=TurnAgent, spec=turn_spec(text, metadata or None))
    assert isinstance(result, TurnResult), result
    return result


# ----------------------------------------------------------------------------- agents as tools
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearchSpec:
    question: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearchResult:
    answer: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearcherSetup:
    """The researcher's own model (a service: every researcher reads it), and the app's hooks the
    researcher scopes to its own tool loop (``(event type, handler)``; an agent type as the scope)."""

    provider: LLMProvider
    tools: Sequence[Any] = ()
    model: str = MODEL
    hooks: Sequence[tuple[type, Callable[..., Any]]] = ()


class ResearcherAgent(Agent[ResearchSpec, ResearchResult]):
    """Researches one question with its own tool loop."""

    __slots__ = ()
    __subagents__: ClassVar[dict[str, AgentDefinitionRef]] = {"turn": TurnAgent}

    def __init__(
        self, services: ServiceLocator, setup: ResearcherSetup, store: AgentStore, hooks: HookSubscription
    ) -> None:
        for event_type, handler in setup.hooks:  # an agent's own scoped hook, on every release
            hooks.on(event_type, handler, scope=TurnAgent)
        for service_type, service in provider_services(setup.provider).items():
            services.provide(service_type, service)
        services.provide(
            TurnConfig(
                llm_config=llm_config(setup.provider, setup.model),
                system=system(RESEARCHER_PROMPT),
                history=[],
                tools=registry(*setup.tools) if setup.tools else None,
            )
        )

    @step("ask", entry=True)
    async def ask(self, spec: ResearchSpec) -> Spawn:
        from flowra.agent import CallAgent

        return Spawn(
            children=[CallAgent(agent=TurnAgent, spec=turn_spec(spec.question))],
            then=self.answer,
        )

    @step("answer")
    async def answer(self, result: TurnResult) -> ResearchResult:
        message = result.result_message
        texts = [b.text for b in message.blocks if isinstance(b, TextBlock)] if message is not None else []
        return ResearchResult(answer="\n".join(texts))


research_tool = make_agent_tool(ResearcherAgent, name="research", description="Research one question in depth")


def research_runtime(provider: LLMProvider, researcher: LLMProvider, *researcher_tools: Any, **kw: Any) -> AgentRuntime:
    """``assistant`` (a chat) with the ``research`` agent as a tool, and ``get_weather``."""
    return chat_runtime(
        provider,
        research_tool,
        get_weather,
        agents={"researcher": ResearcherAgent},
        services={ResearcherSetup: ResearcherSetup(provider=researcher, tools=researcher_tools)},
        **kw,
    )
