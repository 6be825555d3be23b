"""Test support: build and run *real* flowra agents on every flowra version we support.

flowra-otel must work against ``flowra>=0.0.3,<0.0.9`` and ``./dev test`` runs the suite on
every release, 0.0.3 to 0.0.8 (one environment each).  flowra's public API moved a lot between
those releases, so instead of sprinkling ``if FLOWRA_VERSION < ...`` over every test, the
differences are absorbed here, once, by *feature detection*:

* ``AgentRuntime.run``: ``run(agent=, step=, spec=)`` before 0.0.5 (no entry steps), then
  ``run(agent=, spec=)`` -> ``run_agent`` / ``run_tool_loop`` / ``run_chat``.
* LLM-call budget: ``ToolLoopConfig.max_iterations`` / ``ToolLoopStatus.MAX_ITERATIONS`` before
  0.0.6, then ``max_llm_calls`` / ``MAX_LLM_CALLS`` -> ``tool_loop_config(max_llm_calls=)``,
  ``chat_config``, ``LOOP_BUDGET_STATUS``.
* custom agents: before 0.0.7 specs/results must subclass ``StepSpec`` / ``AgentResult``;
  ``Agent[Spec, Result]`` and ``@step(..., entry=True)`` exist from 0.0.5; a child is spawned
  with ``Call(agent=, step=, spec=)`` before 0.0.5, ``CallAgent(agent=, spec=)`` after
  -> ``ResearcherAgent`` / ``SummarizerAgent`` are written once for all versions.
* agents as tools (``make_agent_tool``, ``ToolCallAgentContext.call_agent``): 0.0.6+
  -> ``HAS_AGENT_TOOLS``, ``research_tool``, ``summarize_tool``.
* the tool-call agent moved from ``flowra/lib/tool_loop/_tool_call_agent.py`` to
  ``flowra/lib/tool_loop/tool_call/agent.py`` in 0.0.6 -> ``ToolCallAgent``.
* interrupts, three shapes (-> ``is_interrupted``, ``INTERRUPT_RAISES``, ``HAS_INTERRUPTED_RESULT``,
  ``INTERRUPTED_LOOP_HAS_NO_RESULT``):

  - before 0.0.7 an interrupted tool loop returns ``ToolLoopResult(status=INTERRUPTED)`` (and a
    ``ChatAgent`` then returns a ``ChatResult(response=None)``, indistinguishable from an empty
    answer);
  - 0.0.7: ``flowra.agent.Interrupted`` is an *exception*; the loop's step raises it
    (``InterruptToken.check()``), ``Engine.__execute_nodes`` cancels the sibling steps still
    running, and ``Engine.advance`` completes the *whole run* with result ``None``
    (engine.py:118-123), through ``ChatAgent`` too;
  - 0.0.8: the step raises ``InterruptedError``, ``Engine.__execute_node`` turns it into the
    node's *result* ``Interrupted()``, which propagates up through parents (``ChatAgent``, an
    agent used as a tool) whose next step cannot bind the missing child result.

  No version can interrupt a non-streaming ``LLMProvider.call`` in flight; interrupting during a
  tool works (the running tools finish and report their results).
* plain dataclass specs/results (no ``StepSpec`` / ``AgentResult`` base classes): 0.0.7+
  -> ``HAS_PLAIN_RESULTS`` (the examples are written that way).

Everything else used here (``flowra.llm`` request/response/stream types, ``ToolRegistry``,
``@tool``, ``HookRegistry``) is identical in all versions.

The engine node paths and ids these builders produce, and the concurrency rules of one
``AgentRuntime``, are in docs/design.md ("Engine facts").
"""

import asyncio
import collections
import contextlib
import dataclasses
import importlib.metadata
import inspect
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast, get_type_hints

import flowra.agent
import flowra.lib.tool_loop
from flowra.agent import AbstractAgent, Agent, AgentDefinitionRef, HookProvider, HookRegistry, ServiceLocator, Spawn
from flowra.agent import step as flowra_step
from flowra.lib import LLMConfig
from flowra.lib.chat import ChatAgent, ChatConfig, ChatResult, ChatSpec
from flowra.lib.tool_loop import ToolLoopAgent, ToolLoopConfig, ToolLoopResult, ToolLoopSpec, ToolLoopStatus
from flowra.llm import (
    AssistantBlock,
    AssistantMessage,
    ContentComplete,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    Message,
    StopReason,
    StreamEvent,
    SystemMessage,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
)
from flowra.runtime import AgentRuntime, SessionStorage
from flowra.tools import LocalTool, LocalToolGroup, McpToolGroup, ToolRegistry, get_local_tool, tool

__all__ = [
    "DEFAULT_MODEL",
    "FLOWRA_VERSION",
    "HAS_AGENT_TOOLS",
    "HAS_INTERRUPTED_RESULT",
    "HAS_PLAIN_RESULTS",
    "INTERRUPTED_LOOP_HAS_NO_RESULT",
    "INTERRUPT_RAISES",
    "LOOP_BUDGET_STATUS",
    "RESEARCHER_SYSTEM_PROMPT",
    "RUNTIME_REUSABLE_AFTER_INTERRUPT",
    "RUN_TAKES_STEP",
    "SUMMARIZER_SYSTEM_PROMPT",
    "HooksArg",
    "RecordedCall",
    "ResearchResult",
    "ResearchSpec",
    "ResearcherAgent",
    "ResearcherSetup",
    "ScriptExhaustedError",
    "ScriptStep",
    "ScriptedProvider",
    "SummarizeResult",
    "SummarizeSpec",
    "SummarizerAgent",
    "ToolCallAgent",
    "ToolFailureError",
    "ToolLike",
    "add",
    "as_local_tool",
    "chat_config",
    "chat_runtime",
    "create_tool_registry",
    "delayed",
    "fail_tool",
    "final_text",
    "first_user_text",
    "get_weather",
    "is_interrupted",
    "make_hook_registry",
    "make_slow_tool",
    "research_tool",
    "run_agent",
    "run_chat",
    "run_tool_loop",
    "slow_tool",
    "specialist_runtime",
    "summarize_tool",
    "text_response",
    "tool_calls_response",
    "tool_loop_config",
    "tool_loop_runtime",
    "tool_registry",
    "tool_results",
    "tool_uses",
    "usage",
]

DEFAULT_MODEL = "anthropic/sonnet-4-5"
"""Model id put in every ``LLMRequest``; a real-looking one so model-name attributes are realistic."""


# ---------------------------------------------------------------------------------------------
# Version and feature detection
# ---------------------------------------------------------------------------------------------


def _parse_version(text: str) -> tuple[int, int, int]:
    numbers = [int(n) for n in re.findall(r"\d+", text)[:3]]
    numbers += [0] * (3 - len(numbers))
    return numbers[0], numbers[1], numbers[2]


FLOWRA_VERSION: tuple[int, int, int] = _parse_version(importlib.metadata.version("flowra"))
"""Installed flowra as ``(major, minor, patch)``; for skip conditions and messages only.

The shims below detect *features* rather than comparing versions, so an unreleased or
intermediate flowra keeps working as long as it has one of the two API shapes.
"""

HAS_AGENT_TOOLS: bool = hasattr(flowra.lib.tool_loop, "make_agent_tool")
"""Agents as tools (``make_agent_tool``, ``ToolCallAgentContext.call_agent``): flowra >= 0.0.6."""

RUN_TAKES_STEP: bool = "step" in inspect.signature(AgentRuntime.run).parameters
"""flowra < 0.0.5 has no entry steps: ``AgentRuntime.run`` must be told which step to start at."""

_INTERRUPTED: object = getattr(flowra.agent, "Interrupted", None)

INTERRUPT_RAISES: bool = isinstance(_INTERRUPTED, type) and issubclass(_INTERRUPTED, BaseException)
"""flowra 0.0.7: ``Interrupted`` is an exception; an interrupted run returns ``None``."""

HAS_INTERRUPTED_RESULT: bool = isinstance(_INTERRUPTED, type) and not INTERRUPT_RAISES
"""flowra >= 0.0.8 reports an interrupted node as an ``Interrupted()`` result, not a status."""

RUNTIME_REUSABLE_AFTER_INTERRUPT: bool = not INTERRUPT_RAISES
"""flowra 0.0.7 ends an interrupted run without releasing its root storage key
(``Engine.advance``, engine.py:118-123, skips ``__release_storage_key``), so the next ``run`` on
that ``AgentRuntime`` fails with ``ValueError: Duplicate storage_key: 'root'``: build a new one."""

INTERRUPTED_LOOP_HAS_NO_RESULT: bool = INTERRUPT_RAISES or HAS_INTERRUPTED_RESULT
"""flowra >= 0.0.7: an interrupted tool loop ends without a ``ToolLoopResult`` (it raises), so
no ``flowra.tool_loop.status`` can say "interrupted"; before, it returns status INTERRUPTED."""

HAS_PLAIN_RESULTS: bool = not hasattr(flowra.agent, "AgentResult")
"""flowra >= 0.0.7 takes plain dataclasses as specs and results; before, steps only bind
subclasses of ``StepSpec`` / ``AgentResult`` (agent compilation rejects other return types)."""

_GENERIC_AGENT: bool = bool(getattr(Agent, "__type_params__", ()))
"""flowra >= 0.0.5 declares ``Agent[S, R]``; before that ``Agent[...]`` raises TypeError."""

_STEP_HAS_ENTRY: bool = "entry" in inspect.signature(flowra_step).parameters
"""flowra >= 0.0.5 marks the entry step with ``@step(..., entry=True)``."""

_LOOP_BUDGET_FIELD: str = (
    "max_llm_calls" if "max_llm_calls" in {f.name for f in dataclasses.fields(ToolLoopConfig)} else "max_iterations"
)
"""``ToolLoopConfig`` / ``ChatConfig`` field name of the LLM-call budget (renamed in 0.0.6)."""

LOOP_BUDGET_STATUS: ToolLoopStatus = (
    ToolLoopStatus("max_llm_calls") if _LOOP_BUDGET_FIELD == "max_llm_calls" else ToolLoopStatus("max_iterations")
)
"""The status of a tool loop stopped by its LLM-call budget (``MAX_ITERATIONS`` before 0.0.6)."""

ToolCallAgent: type[AbstractAgent] = cast(
    "type[AbstractAgent]", ToolLoopAgent.__agent_definition__.subagents["tool_call"]
)
"""The agent class that executes one tool call.

It moved from ``flowra.lib.tool_loop._tool_call_agent`` (0.0.3) to
``flowra.lib.tool_loop.tool_call.agent`` (0.0.6); taking it from ``ToolLoopAgent``'s own
sub-agent table finds it on every version without importing a private module.
"""

# flowra < 0.0.7 only binds step parameters / child results that subclass ``StepSpec`` /
# ``AgentResult``; later versions have no such classes and take plain dataclasses.
if TYPE_CHECKING:
    # mypy checks against the locked flowra (0.0.8), where specs and results are plain dataclasses.
    _SpecBase = object
    _ResultBase = object
else:
    _SpecBase = getattr(flowra.agent, "StepSpec", object)
    _ResultBase = getattr(flowra.agent, "AgentResult", object)


def _entry_step[F: Callable[..., Any]](tag: str) -> Callable[[F], F]:
    """``@step(tag, entry=True)`` where entry steps exist, plain ``@step(tag)`` before 0.0.5."""
    if _STEP_HAS_ENTRY:
        return cast("Callable[[F], F]", flowra_step(tag, entry=True))
    return cast("Callable[[F], F]", flowra_step(tag))


def _spawn_child(agent: type[AbstractAgent], spec: object, *, entry_step: str) -> Any:
    """One child for ``Spawn(children=[...])``: ``CallAgent`` (>= 0.0.5) or ``Call`` (needs the step)."""
    call_agent = getattr(flowra.agent, "CallAgent", None)
    if call_agent is not None:
        return call_agent(agent=agent, spec=spec)
    legacy_call = vars(flowra.agent)["Call"]  # flowra < 0.0.5 only; unknown to mypy's 0.0.8 stubs
    return legacy_call(agent=agent, step=entry_step, spec=spec)


def _loop_budget(value: int) -> dict[str, Any]:
    return {_LOOP_BUDGET_FIELD: value}


# ---------------------------------------------------------------------------------------------
# Response builders
# ---------------------------------------------------------------------------------------------


def usage(
    input_tokens: int,
    output_tokens: int,
    *,
    cache_read: int = 0,
    cache_creation: int = 0,
    cost_usd: float | None = None,
) -> Usage:
    """A ``Usage`` with short keyword names, so token assertions in tests stay readable."""
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_input_tokens=cache_read,
        cache_creation_input_tokens=cache_creation,
        cost_usd=cost_usd,
    )


def text_response(
    text: str,
    *,
    usage: Usage | None = None,
    stop_reason: StopReason = StopReason.END_TURN,
) -> LLMResponse:
    """A final (by default ``END_TURN``) assistant answer made of a single text block."""
    return LLMResponse(
        message=AssistantMessage(blocks=[TextBlock(text=text)]),
        stop_reason=stop_reason,
        usage=usage,
    )


def tool_calls_response(
    calls: Sequence[tuple[str, str, Mapping[str, Any]]],
    *,
    text: str | None = None,
    usage: Usage | None = None,
) -> LLMResponse:
    """An assistant turn requesting tool calls ``(call_id, tool_name, input)``; ``TOOL_USE`` stop.

    Several calls in one response make the tool loop spawn one tool-call node per call and run
    them concurrently; ``text`` is the optional preamble real models often emit first.
    """
    if not calls:
        raise ValueError("tool_calls_response needs at least one (call_id, name, input) tuple")
    blocks: list[AssistantBlock] = []
    if text is not None:
        blocks.append(TextBlock(text=text))
    blocks.extend(ToolUseBlock(id=call_id, name=name, input=dict(args)) for call_id, name, args in calls)
    return LLMResponse(message=AssistantMessage(blocks=blocks), stop_reason=StopReason.TOOL_USE, usage=usage)


# ---------------------------------------------------------------------------------------------
# Scripted LLM provider
# ---------------------------------------------------------------------------------------------

type ScriptStep = LLMResponse | BaseException | Callable[[LLMRequest], LLMResponse | Awaitable[LLMResponse]]
"""One scripted LLM call: a canned response, an exception to raise, or a function of the request."""


def delayed(step: ScriptStep, seconds: float) -> ScriptStep:
    """``step``, played after ``seconds`` of ``asyncio.sleep``: one slow LLM call in a script.

    (``ScriptedProvider(delay=...)`` slows every call down instead.)
    """

    async def play(request: LLMRequest) -> LLMResponse:
        await asyncio.sleep(seconds)
        return await _play(step, request)

    return play


async def _play(step: ScriptStep, request: LLMRequest) -> LLMResponse:
    """Turn one script step into the provider's answer to ``request`` (or its exception)."""
    if isinstance(step, LLMResponse):
        return step
    if isinstance(step, BaseException):
        raise step
    result = step(request)
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, LLMResponse):
        raise TypeError(f"scripted callable returned {type(result).__name__}, expected LLMResponse")
    return result


class ScriptExhaustedError(RuntimeError):
    """The agent made an LLM call the test did not script (or used an unknown script key).

    Raised from ``LLMProvider.call`` so it surfaces from ``runtime.run`` with the offending
    request described, instead of a test hanging or silently reusing a response.
    """


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RecordedCall:
    """One LLM call received by a ``ScriptedProvider``, in arrival order."""

    request: LLMRequest
    key: str | None
    """Script key the call was routed to (``None`` for an unkeyed provider)."""
    streamed: bool
    """True when the agent used ``stream()`` (it does so only when delta hooks are registered)."""


def first_user_text(request: LLMRequest | Sequence[Message]) -> str | None:
    """Text of the first text block of the first user message, or None.

    This is the natural "conversation identity" of a tool-loop run: the loop's first user
    message is the run's ``user_message`` and stays first in every later request of that run
    (tool results are appended after it), so concurrent runs can be told apart by it.
    """
    messages = request.messages if isinstance(request, LLMRequest) else request
    for message in messages:
        if isinstance(message, UserMessage):
            for block in message.blocks:
                if isinstance(block, TextBlock):
                    return block.text
    return None


def _describe(request: LLMRequest) -> str:
    roles = [m.role for m in request.messages]
    last = request.messages[-1].blocks[-1] if request.messages and request.messages[-1].blocks else None
    return f"model={request.model!r}, first user text={first_user_text(request)!r}, roles={roles}, last block={last!r}"


class ScriptedProvider(LLMProvider):
    """A real ``flowra.llm.LLMProvider`` that replays a script instead of calling a model.

    Being a genuine subclass matters: flowra-otel instruments providers and agents, so tests
    must drive flowra's own ``ToolLoopAgent`` / ``ChatAgent`` code paths, not a mock of them.

    * Unkeyed (``ScriptedProvider([step, step, ...])``): every call consumes the next step.
    * Keyed (``keyed`` / ``by_first_user_text``): each call is routed to its own script by a
      key computed from the request, so concurrent runs sharing this provider (and a parent
      and its sub-agent, whose conversations differ) each replay their own steps regardless
      of how their calls interleave.

    Every request is recorded (``requests`` / ``calls``) before its step is resolved, also when
    the step raises.  A lock guards the scripts and the record, so runs on several threads or
    event loops may share one provider.  ``delay`` seconds are slept (``asyncio.sleep``) on every
    call, to make spans measurably long or runs overlap.
    """

    __slots__ = ("_calls", "_chunk_size", "_delay", "_key_fn", "_lock", "_scripts")

    _UNKEYED: ClassVar[str] = "<unkeyed>"

    def __init__(self, steps: Iterable[ScriptStep] = (), *, delay: float = 0.0, chunk_size: int = 4) -> None:
        """``chunk_size``: characters per ``TextDelta`` when the agent streams."""
        if chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")
        self._lock = threading.Lock()
        self._delay = delay
        self._chunk_size = chunk_size
        self._key_fn: Callable[[LLMRequest], str] | None = None
        self._scripts: dict[str, collections.deque[ScriptStep]] = {self._UNKEYED: collections.deque(steps)}
        self._calls: list[RecordedCall] = []

    @classmethod
    def keyed(
        cls,
        key: Callable[[LLMRequest], str],
        scripts: Mapping[str, Iterable[ScriptStep]],
        *,
        delay: float = 0.0,
        chunk_size: int = 4,
    ) -> Self:
        """A provider choosing the script by ``key(request)``; unknown keys raise ``ScriptExhaustedError``."""
        provider = cls(delay=delay, chunk_size=chunk_size)
        provider._key_fn = key
        provider._scripts = {name: collections.deque(steps) for name, steps in scripts.items()}
        return provider

    @classmethod
    def by_first_user_text(
        cls,
        scripts: Mapping[str, Iterable[ScriptStep]],
        *,
        delay: float = 0.0,
        chunk_size: int = 4,
    ) -> Self:
        """A provider keyed by ``first_user_text(request)``: one script per run's user message.

        For an agent-as-tool the child's key is the user message the sub-agent builds (for
        ``ResearcherAgent``: the ``query`` the parent passed to the ``research`` tool).
        """

        def key(request: LLMRequest) -> str:
            text = first_user_text(request)
            if text is None:
                raise ScriptExhaustedError(f"request has no user text to choose a script by: {_describe(request)}")
            return text

        return cls.keyed(key, scripts, delay=delay, chunk_size=chunk_size)

    # -- inspection ---------------------------------------------------------------------------

    @property
    def calls(self) -> list[RecordedCall]:
        """Every call received so far (a copy), in arrival order."""
        with self._lock:
            return list(self._calls)

    @property
    def requests(self) -> list[LLMRequest]:
        """Every ``LLMRequest`` received so far (a copy), in arrival order."""
        return [c.request for c in self.calls]

    def requests_for(self, key: str) -> list[LLMRequest]:
        """The requests routed to one script of a keyed provider."""
        return [c.request for c in self.calls if c.key == key]

    def remaining(self, key: str | None = None) -> int:
        """Steps not consumed yet: of one script (``key``), or of all scripts together."""
        with self._lock:
            if key is not None:
                return len(self._scripts.get(key, ()))
            return sum(len(steps) for steps in self._scripts.values())

    def assert_exhausted(self) -> None:
        """Fail when scripted steps were never used: the run took a shorter path than the test meant."""
        with self._lock:
            left = {key: len(steps) for key, steps in self._scripts.items() if steps}
        if left:
            raise AssertionError(f"ScriptedProvider has unused steps: {left}")

    def extend(self, steps: Iterable[ScriptStep], *, key: str | None = None) -> None:
        """Append steps (e.g. the next chat turn) to the unkeyed script or to script ``key``."""
        with self._lock:
            if key is None and self._key_fn is not None:
                raise ValueError("this provider is keyed: pass key=")
            self._scripts.setdefault(self._UNKEYED if key is None else key, collections.deque()).extend(steps)

    # -- LLMProvider --------------------------------------------------------------------------

    async def call(self, request: LLMRequest) -> LLMResponse:
        """Record the request and play the next scripted step for it."""
        return await self._respond(request, streamed=False)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        """Like a streaming provider: thinking/text deltas in chunks, then ``ContentComplete``.

        The chunks concatenate to the blocks of the scripted response, which is delivered whole
        in the final ``ContentComplete`` (what flowra's tool loop keeps); a scripted exception
        is raised before the first chunk.
        """
        response = await self._respond(request, streamed=True)
        size = self._chunk_size
        for block in response.message.blocks:
            if isinstance(block, ThinkingBlock):
                for i in range(0, len(block.text), size):
                    yield ThinkingDelta(text=block.text[i : i + size])
                    await asyncio.sleep(0)
            elif isinstance(block, TextBlock):
                for i in range(0, len(block.text), size):
                    yield TextDelta(text=block.text[i : i + size])
                    await asyncio.sleep(0)
        yield ContentComplete(response=response)

    async def _respond(self, request: LLMRequest, *, streamed: bool) -> LLMResponse:
        step = self._take(request, streamed=streamed)
        if self._delay > 0:
            await asyncio.sleep(self._delay)
        return await _play(step, request)

    def _take(self, request: LLMRequest, *, streamed: bool) -> ScriptStep:
        try:
            key = self._key_fn(request) if self._key_fn is not None else None
        except BaseException:
            with self._lock:
                self._calls.append(RecordedCall(request=request, key=None, streamed=streamed))
            raise
        with self._lock:
            self._calls.append(RecordedCall(request=request, key=key, streamed=streamed))
            used = sum(1 for c in self._calls if c.key == key)
            script = self._scripts.get(self._UNKEYED if key is None else key)
            if script is None:
                known = sorted(self._scripts)
                raise ScriptExhaustedError(
                    f"no script for key {key!r} (known keys: {known}); request: {_describe(request)}"
                )
            if not script:
                where = "" if key is None else f" for key {key!r}"
                raise ScriptExhaustedError(
                    f"script{where} ran out: LLM call #{used} was not scripted; request: {_describe(request)}"
                )
            return script.popleft()


# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------

type ToolLike = LocalTool | LocalToolGroup | McpToolGroup | Callable[..., Any]
"""What ``tool_registry`` accepts: flowra tools/groups, ``@tool`` functions, or plain functions."""


def as_local_tool(fn: ToolLike, *, name: str | None = None, description: str | None = None) -> LocalTool:
    """Turn a function into a flowra ``LocalTool`` through flowra's own ``@tool`` decorator.

    * ``LocalTool`` (e.g. from ``make_agent_tool``): returned as is.
    * a ``@tool``-decorated function: its ``LocalTool``.
    * a plain function with annotated keyword-compatible parameters, e.g.
      ``def get_weather(city: str) -> str``: flowra's ``@tool`` only accepts one *dataclass*
      input parameter, so an input dataclass is generated from the signature (defaults become
      optional schema fields) and a one-line adapter is decorated with the real ``@tool``.  The
      resulting JSON schema, validation, error wrapping and result formatting are flowra's.
      Use ``@tool`` directly for tools that need injected services.
    """
    if isinstance(fn, LocalTool):
        return fn
    if isinstance(fn, LocalToolGroup | McpToolGroup):
        raise TypeError("tool groups are registry sources, not single tools; pass them to tool_registry()")
    with contextlib.suppress(ValueError):
        return get_local_tool(fn)

    tool_name = name or fn.__name__
    tool_description = description or inspect.getdoc(fn)
    if not tool_description:
        raise ValueError(f"tool {tool_name!r} needs a docstring or description=")
    hints = get_type_hints(fn)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"tool {tool_name!r}: *args/**kwargs cannot be described to an LLM")
        if param.name not in hints:
            raise TypeError(f"tool {tool_name!r}: parameter {param.name!r} needs a type annotation")
        if param.default is inspect.Parameter.empty:
            fields.append((param.name, hints[param.name]))
        else:
            fields.append((param.name, hints[param.name], dataclasses.field(default=param.default)))
    class_name = "".join(part.capitalize() for part in re.split(r"[_-]", tool_name)) + "Input"
    input_type = dataclasses.make_dataclass(class_name, fields, frozen=True, kw_only=True, module=__name__)

    def adapter(params: Any) -> Any:
        # Shallow on purpose: nested dataclass arguments stay dataclasses.
        return fn(**{f.name: getattr(params, f.name) for f in dataclasses.fields(params)})

    adapter.__name__ = adapter.__qualname__ = tool_name
    adapter.__annotations__ = {"params": input_type, "return": hints.get("return", Any)}
    return get_local_tool(tool(tool_name, tool_description)(adapter))


async def create_tool_registry(*tools: ToolLike) -> ToolRegistry:
    """A ``ToolRegistry`` (caller closes it); prefer the ``tool_registry`` context manager."""
    sources: list[Any] = [t if isinstance(t, LocalToolGroup | McpToolGroup) else as_local_tool(t) for t in tools]
    return await ToolRegistry.create(sources)


@contextlib.asynccontextmanager
async def tool_registry(*tools: ToolLike) -> AsyncIterator[ToolRegistry]:
    """``async with tool_registry(get_weather, add) as registry:`` - built and closed like in flowra."""
    async with await create_tool_registry(*tools) as registry:
        yield registry


def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"Sunny, 21 C in {city}"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class ToolFailureError(RuntimeError):
    """What ``fail_tool`` raises; flowra's registry turns it into ``is_error`` "Error: <message>"."""


def fail_tool(reason: str = "boom") -> str:
    """A tool that always fails."""
    raise ToolFailureError(reason)


async def slow_tool(label: str = "slow", seconds: float = 0.05) -> str:
    """Wait for the given number of seconds, then report."""
    # The delay is part of the (scripted) tool input, so one registry serves fast and slow calls.
    await asyncio.sleep(seconds)
    return f"{label} done after {seconds}s"


def make_slow_tool(seconds: float, *, name: str = "slow_tool") -> LocalTool:
    """A slow tool whose delay is fixed by the test instead of by the LLM's tool input."""

    async def fixed_slow_tool(label: str = "slow") -> str:
        await asyncio.sleep(seconds)
        return f"{label} done after {seconds}s"

    return as_local_tool(fixed_slow_tool, name=name, description=f"Wait {seconds}s, then report.")


# ---------------------------------------------------------------------------------------------
# Configs and runtimes
# ---------------------------------------------------------------------------------------------

type HooksArg = HookRegistry | HookProvider | Iterable[HookProvider] | None
"""Hooks for a runtime: a registry to use as is, or provider(s) (e.g. the OTel plugin) to add."""


def make_hook_registry(hooks: HooksArg = None) -> HookRegistry:
    """The ``HookRegistry`` service every agent of the runtime emits its events on."""
    if isinstance(hooks, HookRegistry):
        return hooks
    registry = HookRegistry()
    if hooks is None:
        return registry
    providers = [cast("HookProvider", hooks)] if hasattr(hooks, "register_hooks") else list(cast("Any", hooks))
    for provider in providers:
        registry.add(provider)
    return registry


def _llm_config(
    model: str, temperature: float | None, max_tokens: int | None, stop_sequences: list[str] | None
) -> LLMConfig:
    return LLMConfig(model=model, temperature=temperature, max_tokens=max_tokens, stop_sequences=stop_sequences)


def _system_messages(system_prompt: str | None) -> list[Message]:
    return [] if system_prompt is None else [SystemMessage(blocks=[TextBlock(text=system_prompt)])]


def _resolved_llm_config(config: ToolLoopConfig | ChatConfig) -> LLMConfig:
    """The plain ``LLMConfig`` inside a config built here (``ConfigValue`` may be a callable)."""
    value = config.llm_config
    if not isinstance(value, LLMConfig):
        raise TypeError(f"expected a plain LLMConfig, got {value!r}")
    return value


def tool_loop_config(
    *,
    model: str = DEFAULT_MODEL,
    max_llm_calls: int = 10,
    system_prompt: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    stop_sequences: list[str] | None = None,
) -> ToolLoopConfig:
    """A ``ToolLoopConfig``; ``max_llm_calls`` lands in ``max_iterations`` on flowra < 0.0.6."""
    return ToolLoopConfig(
        llm_config=_llm_config(model, temperature, max_tokens, stop_sequences),
        session_messages=_system_messages(system_prompt),
        **_loop_budget(max_llm_calls),
    )


def chat_config(
    *,
    model: str = DEFAULT_MODEL,
    max_llm_calls: int = 10,
    system_prompt: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    stop_sequences: list[str] | None = None,
) -> ChatConfig:
    """A ``ChatConfig``; ``max_llm_calls`` lands in ``max_iterations`` on flowra < 0.0.6."""
    return ChatConfig(
        llm_config=_llm_config(model, temperature, max_tokens, stop_sequences),
        system_messages=_system_messages(system_prompt),
        **_loop_budget(max_llm_calls),
    )


def _runtime(
    agents: dict[str, AgentDefinitionRef],
    services: dict[type, Any],
    *,
    hooks: HooksArg,
    extra_agents: Mapping[str, AgentDefinitionRef] | None,
    extra_services: Mapping[type, object] | None,
    researcher: "ResearcherSetup | None",
    storage: SessionStorage | None,
) -> AgentRuntime:
    """The part all builders share: hooks, the optional researcher, and caller additions last."""
    services[HookRegistry] = make_hook_registry(hooks)
    if researcher is not None:
        agents["research"] = ResearcherAgent
        services[ResearcherSetup] = researcher
    agents.update(extra_agents or {})
    services.update(extra_services or {})
    return AgentRuntime(agents=agents, storage=storage, services=services)


def tool_loop_runtime(
    provider: LLMProvider,
    registry: ToolRegistry,
    hooks: HooksArg = None,
    *,
    model: str = DEFAULT_MODEL,
    max_llm_calls: int = 10,
    system_prompt: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    stop_sequences: list[str] | None = None,
    extra_agents: Mapping[str, AgentDefinitionRef] | None = None,
    extra_services: Mapping[type, object] | None = None,
    researcher: "ResearcherSetup | None" = None,
    storage: SessionStorage | None = None,
) -> AgentRuntime:
    """An ``AgentRuntime`` with flowra's ``ToolLoopAgent`` registered as ``"assistant"``.

    Services: ``LLMProvider``, ``ToolRegistry``, ``ToolLoopConfig``, ``LLMConfig`` (for custom
    agents such as ``SummarizerAgent``) and ``HookRegistry`` (from ``hooks``).  ``researcher``
    registers ``ResearcherAgent`` as ``"research"`` with its own provider/tools, for the
    ``research_tool()`` agent-as-tool; ``extra_agents`` / ``extra_services`` add anything else.
    """
    config = tool_loop_config(
        model=model,
        max_llm_calls=max_llm_calls,
        system_prompt=system_prompt,
        temperature=temperature,
        max_tokens=max_tokens,
        stop_sequences=stop_sequences,
    )
    services: dict[type, Any] = {
        LLMProvider: provider,
        ToolRegistry: registry,
        ToolLoopConfig: config,
        LLMConfig: _resolved_llm_config(config),
    }
    return _runtime(
        {"assistant": ToolLoopAgent},
        services,
        hooks=hooks,
        extra_agents=extra_agents,
        extra_services=extra_services,
        researcher=researcher,
        storage=storage,
    )


def chat_runtime(
    provider: LLMProvider,
    registry: ToolRegistry,
    hooks: HooksArg = None,
    *,
    model: str = DEFAULT_MODEL,
    max_llm_calls: int = 10,
    system_prompt: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    stop_sequences: list[str] | None = None,
    extra_agents: Mapping[str, AgentDefinitionRef] | None = None,
    extra_services: Mapping[type, object] | None = None,
    researcher: "ResearcherSetup | None" = None,
    storage: SessionStorage | None = None,
) -> AgentRuntime:
    """An ``AgentRuntime`` with flowra's ``ChatAgent`` registered as ``"chat"``.

    ``ChatAgent`` builds the ``ToolLoopConfig`` for its ``chat/tool_loop`` sub-agent itself
    (from ``ChatConfig`` plus the session history), so no ``ToolLoopConfig`` service is given.
    Pass ``storage`` and the same ``storage_key`` to ``run_chat`` for multi-turn sessions.
    """
    config = chat_config(
        model=model,
        max_llm_calls=max_llm_calls,
        system_prompt=system_prompt,
        temperature=temperature,
        max_tokens=max_tokens,
        stop_sequences=stop_sequences,
    )
    services: dict[type, Any] = {
        LLMProvider: provider,
        ToolRegistry: registry,
        ChatConfig: config,
        LLMConfig: _resolved_llm_config(config),
    }
    return _runtime(
        {"chat": ChatAgent},
        services,
        hooks=hooks,
        extra_agents=extra_agents,
        extra_services=extra_services,
        researcher=researcher,
        storage=storage,
    )


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------


def _entry_step_of(agent: type[AbstractAgent], spec: object) -> str:
    """On flowra < 0.0.5 (no entry steps), the step of ``agent`` that takes ``type(spec)``."""
    steps: Mapping[str, Any] = agent.__agent_definition__.steps
    tags = [tag for tag, meta in steps.items() if getattr(meta, "step_spec", None) is type(spec)]
    if len(tags) != 1:
        raise TypeError(f"cannot infer the entry step of {agent.__name__} for {type(spec).__name__}: pass step=")
    return tags[0]


async def run_agent(
    runtime: AgentRuntime,
    agent: str | type[AbstractAgent],
    spec: object,
    *,
    step: str | None = None,
    storage_key: str | None = None,
) -> object:
    """``runtime.run`` with the signature of the installed flowra; returns the raw root result.

    ``step`` is only used where ``run`` needs one (flowra < 0.0.5); it is inferred from the
    spec type when ``agent`` is a class.  An interrupted run returns ``Interrupted()`` (flowra >=
    0.0.8) or ``None`` (0.0.7), see ``is_interrupted``.
    """
    if not RUN_TAKES_STEP:
        return cast("object", await runtime.run(agent=agent, spec=spec, storage_key=storage_key))
    if step is None:
        if isinstance(agent, str):
            raise TypeError(f"flowra {FLOWRA_VERSION} needs the entry step of agent {agent!r}: pass step=")
        step = _entry_step_of(agent, spec)
    legacy_run = cast("Callable[..., Awaitable[object]]", runtime.run)
    return await legacy_run(agent=agent, step=step, spec=spec, storage_key=storage_key)


async def run_tool_loop(
    runtime: AgentRuntime,
    user_message: str,
    *,
    metadata: dict[str, Any] | None = None,
    agent: str = "assistant",
    storage_key: str | None = None,
) -> ToolLoopResult:
    """Run the tool loop registered as ``agent`` for one user message; its ``ToolLoopResult``.

    Raises ``AssertionError`` for any other root result (e.g. an interrupted run on flowra >= 0.0.7);
    use ``run_agent`` + ``is_interrupted`` for interrupt scenarios.  Concurrent runs on one
    runtime need distinct ``storage_key``s (flowra refuses a second live ``"root"``).
    """
    spec = ToolLoopSpec(user_message=user_message, metadata=metadata)
    result = await run_agent(runtime, agent, spec, step="start", storage_key=storage_key)
    if not isinstance(result, ToolLoopResult):
        raise AssertionError(f"expected a ToolLoopResult from {agent!r}, got {result!r}")
    return result


async def run_chat(
    runtime: AgentRuntime,
    user_message: str,
    *,
    metadata: dict[str, Any] | None = None,
    agent: str = "chat",
    storage_key: str | None = None,
) -> ChatResult:
    """Run one chat turn of the ChatAgent registered as ``agent``; its ``ChatResult``."""
    spec = ChatSpec(user_message=user_message, metadata=metadata)
    result = await run_agent(runtime, agent, spec, step="process_message", storage_key=storage_key)
    if not isinstance(result, ChatResult):
        raise AssertionError(f"expected a ChatResult from {agent!r}, got {result!r}")
    return result


def is_interrupted(result: object) -> bool:
    """Whether a run result means "interrupted", in either version's shape.

    flowra < 0.0.7: the tool loop returns ``ToolLoopResult(status=INTERRUPTED)``;
    flowra 0.0.7: the agent raises the ``Interrupted`` exception and the engine ends the whole
    run with ``None`` (no agent we run returns ``None`` otherwise);
    flowra >= 0.0.8: the agent raises and the engine makes ``Interrupted()`` the node's result.
    Not detectable for a ``ChatAgent`` on flowra < 0.0.7: it wraps the interrupted loop's
    result into an ordinary ``ChatResult(response=None)``.
    """
    if INTERRUPT_RAISES:
        return result is None
    if HAS_INTERRUPTED_RESULT and isinstance(result, cast("type", _INTERRUPTED)):
        return True
    return isinstance(result, ToolLoopResult) and result.status == ToolLoopStatus.INTERRUPTED


def final_text(result: ToolLoopResult | ChatResult) -> str | None:
    """The final answer's text (text blocks joined by newlines, as ``ChatAgent`` does)."""
    if isinstance(result, ChatResult):
        return result.response
    if result.result_message is None:
        return None
    texts = [b.text for b in result.result_message.blocks if isinstance(b, TextBlock)]
    return "\n".join(texts) if texts else None


def tool_uses(result: ToolLoopResult) -> list[ToolUseBlock]:
    """All tool calls the assistant requested during the run, in order."""
    return [
        block
        for message in result.messages
        if isinstance(message, AssistantMessage)
        for block in message.blocks
        if isinstance(block, ToolUseBlock)
    ]


def tool_results(result: ToolLoopResult) -> list[ToolResultBlock]:
    """All tool results fed back to the model during the run, in order."""
    return [
        block
        for message in result.messages
        if isinstance(message, UserMessage)
        for block in message.blocks
        if isinstance(block, ToolResultBlock)
    ]


# ---------------------------------------------------------------------------------------------
# Agent as tool: a researcher sub-agent running its own tool loop
# ---------------------------------------------------------------------------------------------

RESEARCHER_SYSTEM_PROMPT = "You are a researcher. Use your tools to answer the query, then reply briefly."


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearchSpec(_SpecBase):
    """Input of ``ResearcherAgent``; ``make_agent_tool`` turns it into the tool's input schema."""

    query: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearchResult(_ResultBase):
    """Output of ``ResearcherAgent``; the parent's tool result is its JSON (``{"answer": ...}``)."""

    answer: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResearcherSetup:
    """What the researcher's own tool loop uses instead of the parent's services.

    A sub-agent inherits every service of the node that spawned it (the parent's provider,
    tools and ``ToolLoopConfig``).  To give the child its own script, tools and prompt,
    ``ResearcherAgent.__init__`` re-provides them from this service for its subtree only.
    Sharing one keyed ``ScriptedProvider`` between parent and child works too.
    """

    provider: LLMProvider
    registry: ToolRegistry
    model: str = DEFAULT_MODEL
    max_llm_calls: int = 5
    system_prompt: str | None = RESEARCHER_SYSTEM_PROMPT

    def tool_loop_config(self) -> ToolLoopConfig:
        """The child loop's config (its own system prompt and budget)."""
        return tool_loop_config(model=self.model, max_llm_calls=self.max_llm_calls, system_prompt=self.system_prompt)


# An if-block, not a ternary: mypy accepts only a plain alias as a base class.
if TYPE_CHECKING or _GENERIC_AGENT:  # noqa: SIM108
    _ResearcherBase = Agent[ResearchSpec, ResearchResult]
else:
    _ResearcherBase = Agent


class ResearcherAgent(_ResearcherBase):
    """A custom agent whose work is a full ``ToolLoopAgent`` run (its ``research/tool_loop`` child).

    Exposed to a parent loop with ``research_tool()`` (flowra >= 0.0.6).  This is the
    realistic multi-agent shape flowra-otel must trace: parent loop -> tool call -> agent ->
    child loop -> child tool calls, all in one engine tree.  Without a ``ResearcherSetup``
    service it falls back to the inherited provider, tools and ``ToolLoopConfig``.
    """

    __slots__ = ()
    __subagents__: ClassVar[dict[str, AgentDefinitionRef]] = {"tool_loop": ToolLoopAgent}

    def __init__(self, services: ServiceLocator, setup: ResearcherSetup | None = None) -> None:
        if setup is not None:
            config = setup.tool_loop_config()
            # Untyped view of ``provide``: mypy rejects the abstract ``LLMProvider`` as ``type[T]``.
            provide: Callable[[type, object], None] = services.provide
            provide(LLMProvider, setup.provider)
            provide(ToolRegistry, setup.registry)
            provide(ToolLoopConfig, config)
            provide(LLMConfig, _resolved_llm_config(config))

    @_entry_step("research")
    async def research(self, spec: ResearchSpec) -> Spawn:
        """Run the child tool loop with the query as its user message."""
        child = _spawn_child(ToolLoopAgent, ToolLoopSpec(user_message=spec.query), entry_step="start")
        return Spawn(children=[child], then=self.collect)

    @flowra_step("collect")
    async def collect(self, result: ToolLoopResult) -> ResearchResult:
        """The child loop's final text becomes the answer."""
        return ResearchResult(answer=final_text(result))


def research_tool(*, name: str = "research", description: str | None = None) -> LocalTool:
    """``ResearcherAgent`` as a parent's tool (``make_agent_tool``); needs ``HAS_AGENT_TOOLS``.

    Register the agent with ``researcher=ResearcherSetup(...)`` on the runtime builder.
    """
    if not HAS_AGENT_TOOLS:
        raise RuntimeError(f"agents as tools need flowra >= 0.0.6, installed: {FLOWRA_VERSION}")
    make_agent_tool = cast("Callable[..., LocalTool]", flowra.lib.tool_loop.make_agent_tool)
    return make_agent_tool(
        ResearcherAgent,
        name=name,
        description=description or "Research a query with a dedicated sub-agent that has its own tools.",
    )


# ---------------------------------------------------------------------------------------------
# Custom agent calling LLMProvider.call directly (not a tool loop)
# ---------------------------------------------------------------------------------------------

SUMMARIZER_SYSTEM_PROMPT = "Summarize the user's text in one sentence."


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SummarizeSpec(_SpecBase):
    """Input of ``SummarizerAgent``."""

    text: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SummarizeResult(_ResultBase):
    """Output of ``SummarizerAgent``."""

    summary: str


# An if-block, not a ternary: mypy accepts only a plain alias as a base class.
if TYPE_CHECKING or _GENERIC_AGENT:  # noqa: SIM108
    _SummarizerBase = Agent[SummarizeSpec, SummarizeResult]
else:
    _SummarizerBase = Agent


class SummarizerAgent(_SummarizerBase):
    """A one-step agent that calls ``LLMProvider.call`` itself, like flowra's ``_SpecialistAgent``.

    Instrumentation must not assume LLM calls only come from ``ToolLoopAgent``: here there is
    no tool loop, no tool-loop hook events, just an agent step and a provider call.
    Needs the ``LLMProvider`` and ``LLMConfig`` services (all runtime builders provide both).
    """

    __slots__ = ("_llm_config", "_provider")

    def __init__(self, provider: LLMProvider, llm_config: LLMConfig) -> None:
        self._provider = provider
        self._llm_config = llm_config

    @_entry_step("summarize")
    async def summarize(self, spec: SummarizeSpec) -> SummarizeResult:
        """One direct LLM call with a fixed system prompt."""
        response = await self._provider.call(
            LLMRequest(
                model=self._llm_config.model,
                messages=[
                    SystemMessage(blocks=[TextBlock(text=SUMMARIZER_SYSTEM_PROMPT)]),
                    UserMessage(blocks=[TextBlock(text=spec.text)]),
                ],
                temperature=self._llm_config.temperature,
                max_tokens=self._llm_config.max_tokens,
            )
        )
        text = "".join(b.text for b in response.message.blocks if isinstance(b, TextBlock))
        return SummarizeResult(summary=text)


def specialist_runtime(
    provider: LLMProvider,
    hooks: HooksArg = None,
    *,
    model: str = DEFAULT_MODEL,
    storage: SessionStorage | None = None,
) -> AgentRuntime:
    """An ``AgentRuntime`` with only ``SummarizerAgent`` (as ``"summarizer"``); run it with
    ``run_agent(runtime, SummarizerAgent, SummarizeSpec(text=...))``."""
    services: dict[type, Any] = {LLMProvider: provider, LLMConfig: LLMConfig(model=model)}
    return _runtime(
        {"summarizer": SummarizerAgent},
        services,
        hooks=hooks,
        extra_agents=None,
        extra_services=None,
        researcher=None,
        storage=storage,
    )


def summarize_tool(*, name: str = "summarize") -> LocalTool:
    """``SummarizerAgent`` as a tool (flowra >= 0.0.6); register it with
    ``extra_agents={"summarizer": SummarizerAgent}``."""
    if not HAS_AGENT_TOOLS:
        raise RuntimeError(f"agents as tools need flowra >= 0.0.6, installed: {FLOWRA_VERSION}")
    make_agent_tool = cast("Callable[..., LocalTool]", flowra.lib.tool_loop.make_agent_tool)
    return make_agent_tool(SummarizerAgent, name=name, description="Summarize a text in one sentence.")
