"""Property: whatever a seeded random run does on flowra 0.0.86+, every span ends, the trees are
well formed, the run's result is the untraced run's, and no secret reaches a span.

Each seed plans one to three concurrent runs (each on its own runtime, one ``OtelHooks``) from a
random script: tool calls, parallel calls, tools that fail, provider errors (one whose ``__str__``
raises), hooks that raise, interrupts, calls a hook answers itself (prefilled), calls the token
limit cut off, an agent used as a tool (with tools of its own), token counts beyond int64, a
``HooksImpl`` subclass as the runtime's hooks (plain, or wrapping every handler it is given),
redaction hooks registered at a random point (a global hook before ``install``, one after it, an
agent-scoped one, or a global and a scoped one together), and (``TrustPlan``) a model that
prefixes tool names with ``functions.`` with a hook that strips it, a name nobody offered, a hook
that attaches a credential to the arguments as ``bytes``, and a hook that has every result
checked by a small agent of its own (a nested run, given the raw value). Every random choice is made when the
plan is built, never while it runs, so the same plan runs identically twice: first untraced
(flowra's own ``emit``), then traced. After each seed:

* every span started ended, was exported, and nothing the adapter attached is still current;
* one trace per run, one root each (``invoke_agent``), every parent in its trace, parent kinds as
  the conventions nest them (``chat`` and ``execute_tool`` under an agent, a nested agent under a
  tool call or an agent), children inside their parent's time span, the run's conversation id on
  every span of its trace;
* each run's outcome (result or exception) and each request the models received are the
  untraced run's;
* every int a span carries fits int64 (what OTLP can encode);
* with content capture on, neither secret a tool returns appears on any span, nor the credential
  a hook attached as bytes (``redact_secrets=["api_key"]``); a run a hook started records no
  content; an invented name (prefixed or not) is never a span name nor a ``gen_ai.tool.name``;
* neither flowra_otel, ``opentelemetry.context`` (autouse fixtures) nor flowra's span machinery
  (``flowra_span_handlers_never_fail``) logged an error.

A second property: a durable run stopped at a random LLM call (its task cancelled; the chat's or
a researcher's, used as a tool) and resumed on a fresh runtime continues as one trace, its root
linked to the stopped run's and stamped with its conversation id (0.0.49+; before, flowra keeps no
ephemeral state: a trace of its own, no conversation id), every span ended.

A third (the fourth trust round, ``tests/round_four.py``): content on spans, in the details events
or both; ``FlowraInstrumentor`` instrumented and uninstrumented at random before and after the app
installs its own ``OtelHooks``; a tool that runs another conversation on the same runtime; a tool
result (and arguments) holding an integer beyond int64 and a value nested 30 deep; and a private
key of 100 - 5 000 characters placed around the cut of a random budget. Every span ends, the
nested run keeps its own conversation id, the app's tool results survive the instrumentor, no key
material is recorded on any span or event, and every event's messages survive the OTLP round trip.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import logging
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flowra.agent import (
    AgentRuntime,
    AgentStore,
    Event,
    Hooks,
    InMemorySessionStorage,
    InterruptToken,
    ServiceLocator,
)
from flowra.agent.flow.hooks import HooksImpl, HookSubscription
from flowra.lib.chat import ChatAgent, ChatConfig
from flowra.lib.turn.hook_events import AfterToolCallEvent, BeforeToolCallEvent
from flowra.llm import (
    AssistantMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from flowra.tools import ToolResult, tool
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import emit_patch
from flowra_otel.core import semconv
from flowra_otel.instrumentor import FlowraInstrumentor
from flowra_otel.testing import find_leaks
from tests.round_four import RoundFour, check, memory_logs, missing_features, redact_keys, round_four
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended
from tests.runtime_hooks.support import (
    CALL_STACK_SCOPES,
    CALLS_EVENT,
    CARD,
    CUT_OFF_ANSWERED,
    EPHEMERAL_STATE,
    HAS_CALLS_EVENT,
    PARALLEL_SAME_AGENT,
    SSN,
    UNIQUE_CHILD_IDS,
    CityParams,
    CustomerParams,
    ResearcherAgent,
    ResearcherSetup,
    ResearchSpec,
    SleepParams,
    chat_runtime,
    chat_spec,
    explode,
    get_weather,
    lookup_customer,
    replace_result_text,
    research_tool,
    slow,
    text_response,
    tool_calls_response,
    usage,
)

SEEDS = 64
BIG = 2**64 - 1
SECRETS = (SSN, CARD)
MASK = "[MASKED]"
CUT_OFF = (StopReason.MAX_TOKENS, StopReason.STOP_SEQUENCE, StopReason.OTHER)


@pytest.fixture(autouse=True)
def flowra_span_handlers_never_fail(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """flowra logs (and swallows) what a span handler raises: an adapter bug there must fail too."""
    caplog.set_level(logging.ERROR, logger="flowra.agent.flow.hooks")
    yield
    failed = [r for r in caplog.get_records("call") if r.name == "flowra.agent.flow.hooks" and r.levelno >= 40]
    assert failed == [], [r.getMessage() for r in failed]


# ------------------------------------------------------------------------------------ hostile pieces
class UnprintableError(RuntimeError):
    """A provider error whose ``__str__`` raises."""

    def __str__(self) -> str:
        raise ValueError("no message")


class HookBoomError(RuntimeError):
    """What a hook raises (flowra does not guard event handlers: the run fails)."""


class RunHandle:
    """A service: the runtime the ``interrupter`` tool stops (a plain class: a dataclass parameter
    would be taken for the tool's input)."""

    def __init__(self) -> None:
        self.runtime: AgentRuntime | None = None


@tool("interrupter")
async def interrupter(params: CityParams, handle: RunHandle) -> str:
    """Stops the run."""
    assert handle.runtime is not None
    handle.runtime.interrupt()
    return "stopping"


def scrub(text: str) -> str:
    for secret in SECRETS:
        text = text.replace(secret, MASK)
    return text


def masked(result: Any) -> Any:
    return replace_result_text(result, scrub)


@dataclasses.dataclass(frozen=True)
class HookPlan:
    """What the app's hooks do, decided up front (by call id, never by timing)."""

    raise_for: frozenset[str] = frozenset()
    """``AfterToolCallEvent`` of these calls raises."""
    prefill: frozenset[str] = frozenset()
    """``BeforeToolCallsEvent`` answers these calls itself (a secret in the answer)."""

    def mask_result(self, event: Event[AfterToolCallEvent]) -> None:
        if event.data.tool_use.id in self.raise_for:
            raise HookBoomError(f"hook failed on {event.data.tool_use.id}")
        event.data.result = masked(event.data.result)

    @staticmethod
    def scrub_arguments(event: Event[BeforeToolCallEvent]) -> None:
        use = event.data.tool_use
        if isinstance(use.input, dict) and any(isinstance(v, str) and CARD in v for v in use.input.values()):
            event.data.tool_use = dataclasses.replace(
                use, input={k: scrub(v) if isinstance(v, str) else v for k, v in use.input.items()}
            )

    def answer(self, event: Event[Any]) -> None:
        for use in event.data.tool_uses:
            if use.id in self.prefill:
                event.data.results[use.id] = ToolResult(content=f"cached: {use.name} says SSN {SSN}")


class ScopedRedaction(ChatAgent):
    """A chat whose own hooks redact (agent-scoped: they run after every global handler)."""

    def __init__(
        self,
        store: AgentStore,
        services: ServiceLocator,
        config: ChatConfig,
        hooks: Hooks,
        interrupt: InterruptToken,
        plan: HookPlan,
    ) -> None:
        super().__init__(store, services, config, hooks, interrupt)
        hooks.on(BeforeToolCallEvent, plan.scrub_arguments)
        hooks.on(AfterToolCallEvent, plan.mask_result)


class ByQuestion(LLMProvider):
    """The researcher's model: answers by the question it is asked (parallel researchers ask in
    any order), each question from its own list; records every request."""

    def __init__(self, scripts: dict[str, list[Any]]) -> None:
        self.scripts = {question: list(steps) for question, steps in scripts.items()}
        self.requests: list[LLMRequest] = []

    async def call(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        first = request.messages[0]
        question = next(b.text for b in first.blocks if isinstance(b, TextBlock))
        step = self.scripts[question].pop(0)
        if isinstance(step, BaseException):
            raise step
        return step  # type: ignore[no-any-return]


class Scripted(LLMProvider):
    """The chat's model: answers in order; records every request."""

    def __init__(self, steps: list[Any]) -> None:
        self.steps = list(steps)
        self.requests: list[LLMRequest] = []

    async def call(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        step = self.steps.pop(0) if self.steps else text_response("out of script")
        if isinstance(step, BaseException):
            raise step
        return step


class WrappingHooks(HooksImpl):
    """The runtime's hooks, a subclass wrapping every handler it is given."""

    __slots__ = ()

    def on(self, event_type: Any, handler: Any, **kw: Any) -> None:
        super().on(event_type, self._wrap(handler), **kw)

    def on_span(self, span_type: Any, handler: Any, **kw: Any) -> None:
        super().on_span(span_type, self._wrap(handler), **kw)

    @staticmethod
    def _wrap(handler: Any) -> Any:
        @functools.wraps(handler)
        def wrapped(event: Any) -> Any:
            return handler(event)

        return wrapped


class PlainHooks(HooksImpl):
    __slots__ = ()


HOOKS_CLASSES: tuple[type[HooksImpl] | None, ...] = (None, None, PlainHooks, WrappingHooks)
"""None: flowra makes its own ``HooksImpl``."""


# ------------------------------------------------------------------------------------ the third round's inputs
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
INVENTED = "wire_money_q7"
CHECKER_MODEL = "openai/gpt-4o-mini"


@dataclasses.dataclass(frozen=True)
class TrustPlan:
    """Inputs of issue 19's content items, decided up front from their own random stream (so
    the other choices of a seed stay as they were)."""

    prefix: bool = False
    """The model prefixes every tool name with ``functions.``; a hook strips it."""
    invent: bool = False
    """The first batch of calls has one more, to a name nobody offered (prefixed too, if so)."""
    attach_bytes: bool = False
    """A hook attaches the customer's AWS credential to ``lookup_customer``'s arguments, as bytes."""
    check_results: bool = False
    """A hook has every tool result checked by a small agent on a runtime of its own (traced by
    the same ``OtelHooks``), given the raw result."""

    @staticmethod
    def strip_prefix(event: Event[BeforeToolCallEvent]) -> None:
        use = event.data.tool_use
        if use.name.startswith("functions."):
            event.data.tool_use = dataclasses.replace(use, name=use.name.removeprefix("functions."))

    @staticmethod
    def attach_credential(event: Event[BeforeToolCallEvent]) -> None:
        use = event.data.tool_use
        if use.name == "lookup_customer" and isinstance(use.input, dict):
            credential = f"aws_access_key_id={AWS_KEY}".encode()
            event.data.tool_use = dataclasses.replace(use, input={**use.input, "auth": credential})

    def edit(self, steps: list[Any], run: int) -> None:
        """The model's side of the plan: an invented call, prefixed names."""
        batches = [s for s in steps if isinstance(s, LLMResponse) and s.stop_reason == StopReason.TOOL_USE]
        if self.invent and batches:
            first: Any = batches[0].messages[0]
            first.blocks.insert(0, ToolUseBlock(id=f"r{run}inv", name=INVENTED, input={"amount": 100}))
        if self.prefix:
            for step in batches:
                message: Any = step.messages[0]
                for index, block in enumerate(message.blocks):
                    if isinstance(block, ToolUseBlock):
                        message.blocks[index] = dataclasses.replace(block, name=f"functions.{block.name}")


class ResultChecker:
    """The ``check_results`` hook: a small agent is given each raw result (a nested run)."""

    def __init__(self, otel: OtelHooks | None, run: int) -> None:
        self.otel = otel
        self.run = run

    async def check(self, event: Event[AfterToolCallEvent]) -> None:
        provider = Scripted([text_response("fine")])
        checker = chat_runtime(provider, model=CHECKER_MODEL)
        if self.otel is not None:
            self.otel.install(checker)
        text = "".join(b.text for b in event.data.result.content if isinstance(b, TextBlock))
        spec = chat_spec(f"Check: {text}", {"conversation_id": f"conv-{self.run}"})
        await checker.run(agent=ChatAgent, spec=spec)


def _trust(rng: random.Random) -> TrustPlan:
    return TrustPlan(
        prefix=rng.random() < 0.25,
        invent=rng.random() < 0.25,
        attach_bytes=rng.random() < 0.25,
        check_results=rng.random() < 0.2,
    )


# ------------------------------------------------------------------------------------ plans
GLOBAL_BEFORE = "global hooks before install"
GLOBAL_AFTER = "global hooks after install"
SCOPED = "agent-scoped hooks"
BOTH = "global (before install) and agent-scoped hooks"
REGISTRATIONS = (GLOBAL_BEFORE, GLOBAL_AFTER, SCOPED, BOTH)


@dataclasses.dataclass
class Plan:
    """One run, fully decided."""

    run: int
    steps: list[Any]
    research: dict[str, list[Any]]
    hooks: HookPlan
    registration: str
    hooks_class: type[HooksImpl] | None = None
    trust: TrustPlan = TrustPlan()

    @property
    def card_given_unscrubbed(self) -> bool:
        """A call with the card in its arguments that no ``BeforeToolCallEvent`` sees (answered by
        a hook, or cut off): the scrubber never runs on it, so the model's own message keeps the
        card, and the next request gives it back to the model. The card is then part of the
        conversation, not a leak."""
        for step in self.steps:
            if isinstance(step, BaseException):
                continue
            uses = [b for b in step.messages[0].blocks if isinstance(b, ToolUseBlock)]
            # the call it ends on, answered with an error (0.0.77+); before, none of them runs
            cut = (uses[-1:] if CUT_OFF_ANSWERED else uses) if step.stop_reason in CUT_OFF else []
            if any(CARD in repr(u.input) for u in uses if u.id in self.hooks.prefill or u in cut):
                return True
        return False

    def fresh(self) -> tuple[Scripted, ByQuestion]:
        """New providers over copies of the scripts (the plan runs twice)."""
        return Scripted(self.steps), ByQuestion(self.research)


def _call(rng: random.Random, slot: str, research: dict[str, list[Any]]) -> tuple[str, str, dict[str, Any]]:
    """One tool call; ``slot`` names it uniquely (its id may be shared: models repeat ids, or send "")."""
    ident = rng.choice([slot] * 2 + ["dup", ""])
    kind = rng.choice(["get_weather", "lookup_customer", "lookup_customer", "slow", "explode", "research"])
    if kind == "lookup_customer":
        # a card number in the arguments too: the argument scrubber's job
        return ident, kind, {"name": rng.choice(["Ann", f"Bob {CARD}"])}
    if kind == "slow":
        return ident, kind, {"seconds": rng.choice([0.0, 0.002, 0.005])}
    if kind == "research":
        question = f"question {slot}"
        research[question] = rng.choice(
            [
                [text_response(f"answer to {slot}")],
                [text_response(f"answer to {slot}")],
                [RuntimeError("researcher model down")],
                [
                    LLMResponse(
                        messages=[
                            AssistantMessage(
                                blocks=[ToolUseBlock(id=f"{ident}-r", name="lookup_customer", input={"name": "Cy"})]
                            )
                        ],
                        stop_reason=StopReason.TOOL_USE,
                        usage=usage(),
                    ),
                    text_response(f"researched {slot}"),
                ],
            ]
        )
        return ident, kind, {"question": question}
    return ident, kind, {"city": rng.choice(["Oslo", "Lima"])}


def _plan(rng: random.Random, run: int) -> Plan:
    steps: list[Any] = []
    research: dict[str, list[Any]] = {}
    raise_for: set[str] = set()
    prefill: set[str] = set()
    for iteration in range(rng.randint(0, 3)):
        calls = [_call(rng, f"r{run}i{iteration}c{k}", research) for k in range(rng.choice([1, 1, 2, 3]))]
        ids = [c[0] for c in calls]
        if rng.random() < 0.08:
            raise_for.add(rng.choice(ids))
        if HAS_CALLS_EVENT and rng.random() < 0.25:
            prefill.add(rng.choice(ids))
        if rng.random() < 0.1:
            calls.append((f"r{run}i{iteration}stop", "interrupter", {"city": "Oslo"}))
        blocks: list[Any] = [ToolUseBlock(id=i, name=n, input=a) for i, n, a in calls]
        stop = StopReason.TOOL_USE
        if rng.random() < 0.15:  # the token limit cut the last call off
            stop = rng.choice(CUT_OFF)
        tokens = usage(BIG, BIG, cache_read_input_tokens=BIG) if rng.random() < 0.1 else usage()
        steps.append(LLMResponse(messages=[AssistantMessage(blocks=blocks)], stop_reason=stop, usage=tokens))
        if rng.random() < 0.06:
            steps.append(rng.choice([RuntimeError("provider down"), UnprintableError()]))
            break
    steps.append(text_response(f"done {run}", tokens=(rng.randint(0, 50), rng.randint(0, 50))))
    hook_plan = HookPlan(frozenset(raise_for), frozenset(prefill))
    plan = Plan(run, steps, research, hook_plan, rng.choice(REGISTRATIONS), rng.choice(HOOKS_CLASSES))
    plan.trust = _trust(random.Random(rng.random()))  # a stream of its own: the choices above stay
    plan.trust.edit(plan.steps, run)
    return plan


# ------------------------------------------------------------------------------------ running a plan
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _normalised(text: str) -> str:
    return _ADDRESS.sub(" at 0x?", text)


def _register_global(runtime: AgentRuntime, plan: HookPlan) -> None:
    runtime.hooks.on(BeforeToolCallEvent, plan.scrub_arguments)
    runtime.hooks.on(AfterToolCallEvent, plan.mask_result)


async def run_plan(plan: Plan, otel: OtelHooks | None) -> tuple[str, str]:
    """(outcome, every request the two models received), as comparable text."""
    provider, researcher = plan.fresh()
    handle = RunHandle()
    chat: type[ChatAgent] = ScopedRedaction if plan.registration in (SCOPED, BOTH) else ChatAgent
    # Before 0.0.56 the chat's scoped hooks do not reach the researcher (scopes follow registry
    # paths): an app that wants its results redacted there has the researcher register them too.
    researcher_hooks: tuple[tuple[type, Callable[..., Any]], ...] = (
        ((BeforeToolCallEvent, plan.hooks.scrub_arguments), (AfterToolCallEvent, plan.hooks.mask_result))
        if plan.registration == SCOPED and not CALL_STACK_SCOPES
        else ()
    )
    runtime = chat_runtime(
        provider,
        get_weather,
        lookup_customer,
        slow,
        explode,
        interrupter,
        research_tool,
        agents={"assistant": chat, "researcher": ResearcherAgent},
        services={
            ResearcherSetup: ResearcherSetup(provider=researcher, tools=(lookup_customer,), hooks=researcher_hooks),
            RunHandle: handle,
            HookPlan: plan.hooks,
            **({HookSubscription: plan.hooks_class()} if plan.hooks_class is not None else {}),
        },
    )
    handle.runtime = runtime
    if plan.trust.prefix:
        runtime.hooks.on(BeforeToolCallEvent, plan.trust.strip_prefix)
    if plan.trust.attach_bytes:
        runtime.hooks.on(BeforeToolCallEvent, plan.trust.attach_credential)
    if plan.trust.check_results:
        runtime.hooks.on(AfterToolCallEvent, ResultChecker(otel, plan.run).check)
    if plan.registration in (GLOBAL_BEFORE, BOTH):
        _register_global(runtime, plan.hooks)
    if HAS_CALLS_EVENT:
        runtime.hooks.on(CALLS_EVENT, plan.hooks.answer)
    if otel is not None:
        otel.install(runtime)
    if plan.registration == GLOBAL_AFTER:
        _register_global(runtime, plan.hooks)
    spec = chat_spec(f"run {plan.run}", {"conversation_id": f"conv-{plan.run}"})
    try:
        result = await runtime.run(agent=chat, spec=spec)
        outcome = f"returned {result!r}"
    except Exception as exc:
        outcome = f"raised {type(exc).__qualname__}: {exc!r}"
    return _normalised(outcome), _normalised(repr([provider.requests, researcher.requests]))


# ------------------------------------------------------------------------------------ the checks
def assert_well_formed(spans: tuple[ReadableSpan, ...], runs: int) -> None:
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        assert span.context is not None
        by_trace[span.context.trace_id].append(span)
    assert len(by_trace) == runs, "one trace per run"
    for trace_spans in by_trace.values():
        ids = {s.context.span_id: s for s in trace_spans if s.context is not None}
        roots = [s for s in trace_spans if s.parent is None]
        assert [r.name for r in roots] == ["invoke_agent assistant"], [r.name for r in roots]
        conversations = {(s.attributes or {}).get(semconv.GEN_AI_CONVERSATION_ID) for s in trace_spans}
        assert len(conversations) == 1 and None not in conversations, conversations
        for span in trace_spans:
            if span.parent is None:
                continue
            parent = ids.get(span.parent.span_id)
            assert parent is not None, f"{span.name}: parent not in its trace"
            allowed = {"invoke_agent", "execute_tool"} if span.name.startswith("invoke_agent") else {"invoke_agent"}
            assert parent.name.split(" ")[0] in allowed, (span.name, parent.name)
            assert parent.start_time is not None and parent.end_time is not None
            assert span.start_time is not None and span.end_time is not None
            assert parent.start_time <= span.start_time <= span.end_time <= parent.end_time, (span.name, parent.name)
    for span in spans:
        for key, value in (span.attributes or {}).items():
            for item in value if isinstance(value, tuple) else (value,):
                if type(item) is int:
                    assert -(2**63) <= item < 2**63, (span.name, key, item)


def _conversation(span: ReadableSpan) -> Any:
    return (span.attributes or {}).get(semconv.GEN_AI_CONVERSATION_ID)


@pytest.mark.parametrize("seed", range(SEEDS))
async def test_random_runs_end_every_span_in_a_well_formed_tree(
    seed: int, make_otel_hooks: Callable[..., OtelHooks], span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    rng = random.Random(seed)
    capture = rng.random() < 0.75
    plans = [_plan(random.Random(seed * 1000 + i), i) for i in range(rng.randint(1, 3))]

    emit_patch.uninstall()  # the untraced runs: flowra's own emit, no tracing anywhere
    bare = await asyncio.gather(*(run_plan(plan, None) for plan in plans))
    otel = make_otel_hooks(capture_content=capture, redact_secrets=["api_key"])
    traced = await asyncio.gather(*(run_plan(plan, otel) for plan in plans))

    assert_all_ended(ledger, span_exporter)
    spans = span_exporter.get_finished_spans()
    assert_well_formed(spans, len(plans))
    for plan, (outcome, requests), (bare_outcome, bare_requests) in zip(plans, traced, bare, strict=True):
        assert outcome == bare_outcome, f"run {plan.run} ({plan.registration}): outcome changed under tracing"
        assert requests == bare_requests, f"run {plan.run} ({plan.registration}): the models were given other input"
    for plan, (outcome, _) in zip(plans, traced, strict=True):
        if outcome.startswith("returned ChatResult(status=<TurnStatus.COMPLETED"):
            # a run that completed ended every span itself: none was closed by the run's end
            run_spans = [s for s in spans if _conversation(s) == f"conv-{plan.run}"]
            cut_short = [s.name for s in run_spans if semconv.FLOWRA_END_REASON in (s.attributes or {})]
            assert cut_short == [], f"run {plan.run}: {cut_short}"
    if capture:
        for plan in plans:
            run_spans = [s for s in spans if _conversation(s) == f"conv-{plan.run}"]
            secrets = (SSN,) if plan.card_given_unscrubbed else SECRETS
            leaks = find_leaks(run_spans, secrets)
            assert leaks == [], [str(leak) for leak in leaks]
    assert_trusted(spans)


def assert_trusted(spans: tuple[ReadableSpan, ...]) -> None:
    """The third round's properties: no credential a hook attached as bytes (capture on or off),
    no content on a run a hook started, no invented or prefixed name as a tool's name."""
    leaks = find_leaks(spans, [AWS_KEY, base64.b64encode(f"aws_access_key_id={AWS_KEY}".encode()).decode()])
    assert leaks == [], [str(leak) for leak in leaks]
    content = {
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.GEN_AI_TOOL_DEFINITIONS,
    }
    for span in spans:
        attributes = span.attributes or {}
        # The checker's run (a root agent named as the app's, nested under it) and its model call.
        if span.name == "chat gpt-4o-mini" or (span.name == "invoke_agent assistant" and span.parent is not None):
            assert not content & set(attributes), span.name
        name = str(attributes.get(semconv.GEN_AI_TOOL_NAME, ""))
        assert INVENTED not in span.name and INVENTED not in name, span.name
        assert "functions." not in span.name and "functions." not in name, span.name


def test_the_plans_cover_every_feature() -> None:
    """The seeds above exercise every hostile piece at least once (a generator change that drops
    one would silently weaken the property)."""
    seen: set[str] = set()
    for seed in range(SEEDS):
        rng = random.Random(seed)
        rng.random()
        for i in range(rng.randint(1, 3)):
            plan = _plan(random.Random(seed * 1000 + i), i)
            seen.add(plan.registration)
            seen.add(f"hooks {plan.hooks_class.__name__ if plan.hooks_class else 'HooksImpl'}")
            seen.update(f"raise:{bool(plan.hooks.raise_for)}" for _ in (0,))
            if plan.hooks.prefill:
                seen.add("prefilled")
            seen.update(f"trust {k}" for k, v in dataclasses.asdict(plan.trust).items() if v)
            for step in plan.steps:
                if isinstance(step, BaseException):
                    seen.add(f"provider error {type(step).__name__}")
                    continue
                blocks = step.messages[0].blocks
                uses = [b for b in blocks if isinstance(b, ToolUseBlock)]
                if step.stop_reason in CUT_OFF and uses:
                    seen.add("cut off")
                if len(uses) > 1:
                    seen.add("parallel")
                if step.usage is not None and step.usage.input_tokens == BIG:
                    seen.add("tokens beyond int64")
                ids = [u.id for u in uses]
                if len(set(ids)) < len(ids):
                    seen.add("calls sharing an id")
                seen.update(f"tool {u.name}" for u in uses)
            if any(isinstance(s, BaseException) for steps in plan.research.values() for s in steps):
                seen.add("researcher error")
            if any(len(steps) > 1 for steps in plan.research.values()):
                seen.add("researcher tool call")
    # A hook answering calls itself needs BeforeToolCallsEvent (flowra 0.0.92+): no plan has one before.
    prefilled = {"prefilled"} if HAS_CALLS_EVENT else set()
    assert HAS_CALLS_EVENT or "prefilled" not in seen
    expected = {
        *REGISTRATIONS,
        "raise:True",
        *prefilled,
        "cut off",
        "parallel",
        "calls sharing an id",
        "provider error RuntimeError",
        "provider error UnprintableError",
        "researcher error",
        "researcher tool call",
        "tokens beyond int64",
        "hooks HooksImpl",
        "hooks PlainHooks",
        "hooks WrappingHooks",
        *(f"trust {field.name}" for field in dataclasses.fields(TrustPlan)),
        *(f"tool {n}" for n in ("get_weather", "lookup_customer", "slow", "explode", "research", "interrupter")),
    }
    assert expected <= seen, expected - seen


# Unused names kept for readers: the parameter types the tools above take.
_ = (CustomerParams, SleepParams, ResearchSpec, ToolResultBlock, UserMessage)


# ------------------------------------------------------------------------------------ stopped and resumed
class Hang:
    """A scripted LLM call that never answers: the run is stopped there (its task cancelled),
    after flowra saved the cycle before it."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()


class Durable(LLMProvider):
    """Answers in order, by the first user text (the chat's, each researcher's question); a
    ``Hang`` step blocks until the run is cancelled. Shared by the stopped and the resumed run."""

    def __init__(self, scripts: dict[str, list[Any]]) -> None:
        self.scripts = scripts

    async def call(self, request: LLMRequest) -> LLMResponse:
        first = request.messages[0] if request.messages[0].role == "user" else request.messages[1]
        key = next(b.text for b in first.blocks if isinstance(b, TextBlock))
        step = self.scripts[key].pop(0)
        if isinstance(step, Hang):
            step.reached.set()
            await asyncio.sleep(3600)
            raise AssertionError("never answered")
        return step  # type: ignore[no-any-return]

    def exhausted(self) -> bool:
        return not any(self.scripts.values())


def _durable_scripts(rng: random.Random) -> tuple[dict[str, list[Any]], Hang]:
    """The chat's script and each researcher's (by question), and a hang before a random LLM call
    of any (the real answer follows, for the resumed call). At most one researcher per batch: a
    sibling's LLM call in the cycle that never completed would run again on resume (flowra's own
    at-least-once), which a fixed script cannot know. One batch of calls before 0.0.52: a second
    spawn there reuses the first one's node ids (``UNIQUE_CHILD_IDS``), and a resumed run may run
    a finished researcher again and take another course (untraced too)."""
    main: list[Any] = []
    scripts: dict[str, list[Any]] = {"Do the work": main}
    batches = rng.randint(1, 2)
    for it in range(batches if UNIQUE_CHILD_IDS else 1):
        calls: list[Any] = []
        for k in range(rng.randint(1, 2)):
            if rng.random() < 0.6 and not any(c.name == "research" for c in calls):
                question = f"question {it}{k}"
                steps: list[Any] = [text_response(f"answer {it}{k}")]
                if rng.random() < 0.5:
                    use = ToolUseBlock(id=f"w{it}{k}", name="get_weather", input={"city": "Oslo"})
                    steps.insert(
                        0,
                        LLMResponse(
                            messages=[AssistantMessage(blocks=[use])], stop_reason=StopReason.TOOL_USE, usage=usage()
                        ),
                    )
                scripts[question] = steps
                calls.append(ToolUseBlock(id=f"r{it}{k}", name="research", input={"question": question}))
            else:
                calls.append(ToolUseBlock(id=f"g{it}{k}", name="get_weather", input={"city": "Lima"}))
        main.append(
            LLMResponse(messages=[AssistantMessage(blocks=calls)], stop_reason=StopReason.TOOL_USE, usage=usage())
        )
    main.append(text_response("done"))
    hang = Hang()
    where = rng.choice(list(scripts))
    scripts[where].insert(rng.randrange(len(scripts[where])), hang)
    return scripts, hang


@pytest.mark.parametrize("seed", range(12))
async def test_a_run_stopped_at_a_random_llm_call_resumes_as_one_linked_trace(
    seed: int, make_otel_hooks: Callable[..., OtelHooks], span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    rng = random.Random(seed)
    otel = make_otel_hooks(capture_content=rng.random() < 0.5)
    scripts, hang = _durable_scripts(rng)
    provider = Durable(scripts)
    storage = InMemorySessionStorage()

    def runtime() -> AgentRuntime:
        hooks_class = rng.choice(HOOKS_CLASSES)
        built = chat_runtime(
            provider,
            get_weather,
            research_tool,
            agents={"researcher": ResearcherAgent},
            services={
                ResearcherSetup: ResearcherSetup(provider=provider, tools=(get_weather,)),
                **({HookSubscription: hooks_class()} if hooks_class is not None else {}),
            },
            storage=storage,
        )
        otel.install(built)
        return built

    first = runtime()
    spec = chat_spec("Do the work", {"conversation_id": f"conv-{seed}"})
    task = asyncio.ensure_future(first.run(agent=ChatAgent, spec=spec))
    await asyncio.wait_for(hang.reached.wait(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert await first.has_pending_execution()
    stopped = {s.context.span_id: s for s in span_exporter.get_finished_spans() if s.context is not None}
    (stopped_root,) = [s for s in stopped.values() if s.parent is None]

    result = await runtime().resume()
    assert "done" in repr(result)
    assert provider.exhausted()

    assert_all_ended(ledger, span_exporter)
    finished = span_exporter.get_finished_spans()
    resumed = [s for s in finished if s.context is not None and s.context.span_id not in stopped]
    assert len({s.context.trace_id for s in resumed if s.context is not None}) == 1, "one trace"
    (root,) = [s for s in resumed if s.parent is None]
    assert root.name == "invoke_agent assistant"
    assert root.context is not None and stopped_root.context is not None
    assert root.context.trace_id != stopped_root.context.trace_id
    # linked to the stopped run where flowra keeps ephemeral state (0.0.49+), a trace of its own before
    linked = [(stopped_root.context.trace_id, stopped_root.context.span_id)] if EPHEMERAL_STATE else []
    assert [(link.context.trace_id, link.context.span_id) for link in root.links] == linked
    ids = {s.context.span_id for s in resumed if s.context is not None}
    assert all(s.parent is None or s.parent.span_id in ids for s in resumed), "every parent in the trace"
    # the conversation id comes back with the link; flowra gives the spec's metadata only as a run starts
    assert {_conversation(s) for s in resumed} == {f"conv-{seed}" if EPHEMERAL_STATE else None}


# ------------------------------------------------------------------------------------ the fourth round
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NameParams:
    name: str
    size: int | None = None
    deep: dict[str, Any] | None = None


class RoundFourState:
    """What the fourth round's tools reach: the seed's plan and the runtime they run on."""

    plan: RoundFour | None = None
    runtime: AgentRuntime | None = None


@tool("keyed_file")
async def keyed_file(params: NameParams, state: RoundFourState) -> str:
    """Reads a file (it holds a private key around the content budget's cut)."""
    assert state.plan is not None
    return state.plan.result_text(f"end of {params.name}")


@tool("ask_again")
async def ask_again(params: NameParams, state: RoundFourState) -> str:
    """Asks the same assistant again: another conversation, on the runtime running this tool."""
    assert state.runtime is not None
    metadata = {"conversation_id": "inner", "user_id": "u-inner"}
    result = await state.runtime.run(agent=ChatAgent, spec=chat_spec(params.name, metadata))
    return str(result.response)


def _instrumentor(ops: tuple[str, ...], tracer_provider: Any, meter_provider: Any) -> None:
    instrumentor = FlowraInstrumentor()
    for op in ops:
        if op == "instrument" and not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
        elif op == "uninstrument" and instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()


@pytest.fixture
def instrumentor_off() -> Iterator[None]:
    yield
    instrumentor = FlowraInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


@pytest.mark.parametrize("seed", range(48))
async def test_the_fourth_rounds_random_runs(
    seed: int,
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    instrumentor_off: None,
) -> None:
    """Content modes with events, instrument/uninstrument interleaved around the app's own
    ``OtelHooks``, a nested run on the same runtime and a private key of 100 - 5 000 characters
    placed around the cut of a random budget: every span ends, the nested run is a conversation
    of its own, the app's tool result and events survive the instrumentor, no key material is
    recorded anywhere, and every event's messages reach the wire."""
    plan = round_four(random.Random(seed))
    if plan.nested and not PARALLEL_SAME_AGENT:
        # before flowra 0.0.76 the engine refuses a second live instance of the assistant
        # ("Duplicate persistent key"): the nested run cannot happen there (its own test skips, saying so)
        plan = dataclasses.replace(plan, nested=False)
    logger_provider, log_exporter = memory_logs()
    state = RoundFourState()
    state.plan = plan
    calls = [("k1", "keyed_file", {"name": "id_rsa", **plan.arguments_extra()})]
    script: list[Any] = []
    if plan.nested:
        calls.append(("n1", "ask_again", {"name": "Who else?"}))
        script.append(text_response("inner answer"))
    provider = Scripted([tool_calls_response(*calls), *script, text_response("outer answer")])
    _instrumentor(plan.before_install, tracer_provider, meter_provider)
    runtime = chat_runtime(provider, keyed_file, ask_again, services={RoundFourState: state})
    state.runtime = runtime
    otel = OtelHooks(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        capture_content=plan.mode,
        max_content_length=plan.budget,
        redact=redact_keys,
    )
    otel.install(runtime)
    _instrumentor(plan.after_install, tracer_provider, meter_provider)
    metadata = {"conversation_id": "outer", "user_id": "u-outer"}
    result = await runtime.run(agent=ChatAgent, spec=chat_spec("Read id_rsa", metadata))
    assert result.response == "outer answer"

    assert_all_ended(ledger, span_exporter)
    spans = span_exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans if s.context}) == 1
    inner = [s.name for s in spans if _conversation(s) == "inner"]
    assert sorted(inner) == (["chat sonnet-4-5", "invoke_agent assistant"] if plan.nested else [])
    assert {_conversation(s) for s in spans} == ({"outer", "inner"} if plan.nested else {"outer"})
    check(plan, spans, log_exporter.get_finished_logs(), chats=3 if plan.nested else 2)


def test_the_fourth_rounds_plans_cover_every_feature() -> None:
    assert missing_features(range(48)) == set()
