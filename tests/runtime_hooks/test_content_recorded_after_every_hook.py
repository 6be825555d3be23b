"""Content is recorded as the model is given it, after every hook (flowra 0.0.86+).

On this flowra line the adapter's subscription is a global one (``runtime.hooks``), and global
handlers run before agent-scoped ones, in registration order: a handler of ours would see a tool
result before a hook registered after ``install``, or by an agent, redacts it; and flowra changes
the result again after every hook (``max_consecutive_errors``, ``AfterToolCallEvent.additional_blocks``).
Two mechanisms make the recorded value the model's:

* ``emit_patch``: the adapter acts on a content event once *every* handler ran (the redaction
  ledger, the tool calls a ``BeforeToolCallEvent`` hook rewrote, calls a hook answered);
* ``AgentScope.settle``: a tool span's result is written only when the value the model is given
  appears (the agent's next LLM request, or the turn's messages).

A third, ``emit_patch.IN_HOOKS``, keeps the content of an agent run a hook starts (a small model
scrubbing a value it is given raw) out of the trace, whichever event's hook starts it (one the
adapter acts on or not) and also from a task the hook starts. ``redact=`` / ``redact_secrets=`` scrub what
is recorded after all of this, the model's own output included. Agent-scoped hooks are registered
the way an application does it: by a ``ChatAgent`` subclass, in its ``__init__``.

Each test pairs "the secret is nowhere" with "exactly the value the model received is recorded"
(``ScriptedProvider.requests``), so a trace without content cannot pass; each mechanism has a
paired negative that removes it and shows the leak or the mismatch appear.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import hashlib
import hmac
import inspect
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import Token
from typing import Any, ClassVar, cast

import pytest
from flowra.agent import AgentRuntime, AgentStore, Event, Hooks, InterruptToken, ServiceLocator
from flowra.lib.chat import ChatAgent, ChatConfig, ChatResult
from flowra.lib.turn import TurnAgent, TurnConfig
from flowra.lib.turn.hook_events import AfterToolCallEvent, BeforeToolCallEvent, TextReasoningEvent
from flowra.llm import (
    AssistantMessage,
    LLMRequest,
    LLMResponse,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from flowra.tools import ToolResult, tool
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import emit_patch, frames
from flowra_otel.adapters.runtime_hooks._flowra import DELTA_EVENTS, LEDGER_FIELDS, context_of, handlers_of
from flowra_otel.adapters.runtime_hooks.tracing import RuntimeTracing
from flowra_otel.core import semconv
from flowra_otel.core.field_tracker import FieldTracker
from flowra_otel.core.instruments import FLOWRA_REDACTIONS
from flowra_otel.testing import assert_no_leak, find_leaks
from tests import span_tree
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced, wrapped_result
from tests.runtime_hooks.support import (
    CALL_STACK_SCOPES,
    CARD,
    HAS_CALLS_EVENT,
    HAS_RESULT_BLOCKS,
    INPUT_EVENT,
    SSN,
    CityParams,
    ResearcherAgent,
    ResearcherSetup,
    ScriptedProvider,
    ToolFailureError,
    chat_runtime,
    chat_spec,
    explode,
    get_weather,
    llm_config,
    lookup_customer,
    provider_services,
    replace_result_text,
    requires,
    research_tool,
    result_text,
    system,
    text_response,
    tool_calls_response,
    turn_spec,
)

MakeHooks = Callable[..., OtelHooks]

RECORD = f"Ada: SSN {SSN}, card {CARD}"
"""What ``lookup_customer`` returns for Ada: both secrets."""
PIN = 'pin-7731-"Ünï\\q'
"""In a tool's exception text (quote, backslash and non-ASCII: escaped inside JSON attributes)."""
PASSPORT = "passport X-7788-\tQ"
"""In the user's message."""
MASKS = {SSN: "[SSN]", CARD: "[CARD]", PIN: "[PIN]", PASSPORT: "[PASSPORT]"}
MASKED_RECORD = "Ada: SSN [SSN], card [CARD]"
HMAC_KEY = b"runtime-hooks-ledger-key-0123456"
SMALL_MODEL = "openai/gpt-4o-mini"

CONTENT_KEYS = frozenset(
    {
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.GEN_AI_TOOL_DEFINITIONS,
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
        semconv.GEN_AI_TOOL_CALL_RESULT,
    }
)
LEDGER_PREFIX = "flowra.redaction."


@tool("unlock")
async def unlock(params: CityParams) -> str:
    """Opens the vault of a city's branch (always refused, with the PIN in the error)."""
    raise ToolFailureError(f"vault of {params.city} refused {PIN}")


# ------------------------------------------------------------------------------------ redaction hooks
def mask(text: str, *secrets: str) -> str:
    for secret in secrets:
        text = text.replace(secret, MASKS[secret])
    return text


def masked(result: ToolResultBlock, *secrets: str) -> ToolResultBlock:
    """``result`` with each secret masked in its text blocks (a new block, as a hook makes it)."""
    return replace_result_text(result, lambda text: mask(text, *secrets))  # type: ignore[no-any-return]


def scrubbed_call(tool_use: ToolUseBlock) -> ToolUseBlock:
    """``tool_use`` with the card number masked in its string arguments (itself when there is none)."""
    if not isinstance(tool_use.input, dict):
        return tool_use
    arguments = {k: mask(v, CARD) if isinstance(v, str) else v for k, v in tool_use.input.items()}
    return tool_use if arguments == tool_use.input else dataclasses.replace(tool_use, input=arguments)


def scrubbed_input(messages: list[Any]) -> list[Any]:
    """The turn's input with the passport number masked in its text blocks."""
    return [
        dataclasses.replace(
            m,
            blocks=[
                dataclasses.replace(b, text=mask(b.text, PASSPORT)) if isinstance(b, TextBlock) else b for b in m.blocks
            ],
        )
        for m in messages
    ]


def mask_record(event: Event[AfterToolCallEvent]) -> None:
    event.data.result = masked(event.data.result, SSN, CARD, PIN)


def mask_ssn(event: Event[AfterToolCallEvent]) -> None:
    event.data.result = masked(event.data.result, SSN)


def scrub_arguments(event: Event[BeforeToolCallEvent]) -> None:
    event.data.tool_use = scrubbed_call(event.data.tool_use)


def redact_input(event: Event[Any]) -> None:
    event.data.messages = scrubbed_input(event.data.messages)


class RedactingChat(ChatAgent):
    """A chat whose own ``__init__`` registers redaction hooks: agent-scoped subscriptions, which
    fire for the events of its strict descendants (its ``TurnAgent`` child), after every global one."""

    masks: ClassVar[tuple[str, ...]] = (SSN, CARD, PIN)

    def __init__(
        self, store: AgentStore, services: ServiceLocator, config: ChatConfig, hooks: Hooks, interrupt: InterruptToken
    ) -> None:
        super().__init__(store, services, config, hooks, interrupt)
        hooks.on(INPUT_EVENT, self.redact_input)
        hooks.on(BeforeToolCallEvent, self.scrub_arguments)
        hooks.on(AfterToolCallEvent, self.mask_result)

    def redact_input(self, event: Event[Any]) -> None:
        event.data.messages = scrubbed_input(event.data.messages)

    def scrub_arguments(self, event: Event[BeforeToolCallEvent]) -> None:
        event.data.tool_use = scrubbed_call(event.data.tool_use)

    def mask_result(self, event: Event[AfterToolCallEvent]) -> None:
        event.data.result = masked(event.data.result, *self.masks)


class CardRedactingChat(RedactingChat):
    """The same scoped hooks, masking the card number only in results (a global hook masks the SSN)."""

    masks = (CARD,)


GLOBAL = "global_hook_after_install"
SCOPED = "agent_scoped_hook"
BOTH = "global_and_scoped_hooks"
REGISTRATIONS = (GLOBAL, SCOPED, BOTH)
RESULT_HANDLERS = {
    GLOBAL: [f"{__name__}.mask_record"],
    SCOPED: [f"{__name__}.RedactingChat.mask_result"],
    BOTH: [f"{__name__}.mask_ssn", f"{__name__}.RedactingChat.mask_result"],
}
ARGUMENT_HANDLERS = {
    GLOBAL: [f"{__name__}.scrub_arguments"],
    SCOPED: [f"{__name__}.RedactingChat.scrub_arguments"],
}


# ------------------------------------------------------------------------------------ runs
def redacting_runtime(
    registration: str, make_otel_hooks: MakeHooks, provider: ScriptedProvider, *tools: Any, **options: Any
) -> tuple[AgentRuntime, type[ChatAgent]]:
    """A chat traced with ``options``, its redaction hooks registered as ``registration`` says:
    global ones on ``runtime.hooks`` after ``install``, scoped ones by the chat agent itself."""
    chat: type[ChatAgent] = {GLOBAL: ChatAgent, SCOPED: RedactingChat, BOTH: CardRedactingChat}[registration]
    runtime = traced(make_otel_hooks, chat_runtime(provider, *tools, agents={"assistant": chat}), **options)
    if registration == GLOBAL:
        runtime.hooks.on(INPUT_EVENT, redact_input)
        runtime.hooks.on(BeforeToolCallEvent, scrub_arguments)
        runtime.hooks.on(AfterToolCallEvent, mask_record)
    elif registration == BOTH:
        runtime.hooks.on(AfterToolCallEvent, mask_ssn)
    return runtime, chat


async def run_as(runtime: AgentRuntime, chat: type[ChatAgent], text: str = "Look up Ada") -> ChatResult:
    result = await runtime.run(agent=chat, spec=chat_spec(text))
    assert isinstance(result, ChatResult), result
    return result


def given(request: LLMRequest, call_id: str) -> ToolResultBlock:
    """The result of ``call_id`` in ``request``: the value the model was given."""
    (block,) = [
        b
        for m in request.messages
        if isinstance(m, UserMessage)
        for b in m.blocks
        if isinstance(b, ToolResultBlock) and b.tool_use_id == call_id
    ]
    return block


def echo(call_id: str) -> Callable[[LLMRequest], LLMResponse]:
    """A model answer quoting the result it was given for ``call_id`` (so the run's output carries it)."""
    return lambda request: text_response(f"On file: {result_text(given(request, call_id))}")


def customer_script() -> ScriptedProvider:
    return ScriptedProvider(tool_calls_response(("c1", "lookup_customer", {"name": "Ada"})), echo("c1"))


# ------------------------------------------------------------------------------------ reading spans
def spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return sorted(exporter.get_finished_spans(), key=lambda s: (s.start_time or 0, s.name))


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans(exporter) if s.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()}


def json_attr(span: ReadableSpan, key: str) -> Any:
    value = attrs(span)[key]
    assert isinstance(value, str)
    return json.loads(value)


def parts(messages: Any, part_type: str) -> list[dict[str, Any]]:
    return [p for m in messages for p in m["parts"] if p["type"] == part_type]


def ledger_of(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in attrs(span).items() if k.startswith(LEDGER_PREFIX)}


def answer(text: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "parts": [{"type": "text", "content": text}]}]  # no finish_reason (#363)


def leak_places(exporter: InMemorySpanExporter, secrets: Sequence[str]) -> set[tuple[str, str]]:
    return {(leak.span_name, leak.where) for leak in find_leaks(spans(exporter), secrets)}


def redaction_points(reader: InMemoryMetricReader) -> list[tuple[dict[str, Any], int]]:
    points: list[tuple[dict[str, Any], int]] = []
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data is not None else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == FLOWRA_REDACTIONS:
                    points += [(dict(p.attributes or {}), int(p.value)) for p in cast("Any", metric.data).data_points]
    return points


def canonical_result(content: Sequence[Any] | str) -> str:
    """The ledger's canonical form of a result (``flowra_otel.core.redaction``): its text before
    0.0.86, else the JSON of its content blocks' fields, keys sorted, compact, non-ASCII kept."""
    if isinstance(content, str):
        return content
    blocks: list[Any] = list(content)
    if not HAS_RESULT_BLOCKS:
        return "\n\n".join(b.text for b in blocks)
    return json.dumps(
        [dataclasses.asdict(b) for b in blocks], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def canonical_arguments(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def mac(text: str) -> str:
    return hmac.new(HMAC_KEY, text.encode(), hashlib.sha256).hexdigest()


# ------------------------------------------------------------------------------------ mechanisms removed
async def _emit_at_the_marker(hooks: Any, data: Any, original: Callable[..., Any]) -> Any:
    """``emit_patch._emit_watched`` as a plain subscriber would behave: the tracing acts where its
    own handler stands among the event's handlers (the first global one when the hooks were
    registered after ``install``), before the handlers after it ran."""
    cls = type(data)
    if cls in DELTA_EVENTS:
        return await original(hooks, data)
    event = Event(data=data, context=context_of(hooks))
    field = LEDGER_FIELDS.get(cls)
    for handler in handlers_of(hooks, cls):
        tracing = getattr(handler, "__self__", None)
        if getattr(handler, "__func__", None) in emit_patch.MARKERS and isinstance(tracing, RuntimeTracing):
            tracker = FieldTracker(field, getattr(data, field)) if field is not None else None
            tracing.event_done(event, tracker, time.time_ns(), None)
            continue
        result = handler(event)
        if inspect.isawaitable(result):
            await result
    return event.data


EARLY_EMIT = "tracing_acts_at_its_own_handler"
BLIND_SETTLE = "settle_ignores_the_request"


@pytest.fixture
def remove(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Removes the named mechanisms for the rest of the test (the paired negatives)."""

    def remove_(*mechanisms: str) -> None:
        if EARLY_EMIT in mechanisms:
            monkeypatch.setattr(emit_patch, "_emit_watched", _emit_at_the_marker)
        if BLIND_SETTLE in mechanisms:
            monkeypatch.setattr(frames, "results_by_id", lambda messages, wanted: {})

    return remove_


# ==================================================================================== tool results
@pytest.mark.parametrize("registration", REGISTRATIONS)
async def test_a_redacted_tool_result_is_recorded_as_the_model_got_it(
    registration: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = customer_script()
    runtime, chat = redacting_runtime(registration, make_otel_hooks, provider, lookup_customer, capture_content=True)
    result = await run_as(runtime, chat)
    sent = result_text(given(provider.requests[1], "c1"))
    assert sent == MASKED_RECORD  # the hooks really redacted what the model got
    assert result.response == f"On file: {sent}"

    tree = span_tree.build(span_exporter.get_finished_spans())
    assert span_tree.shape(tree) == [
        (
            "invoke_agent assistant",
            [("chat sonnet-4-5", []), ("execute_tool lookup_customer", []), ("chat sonnet-4-5", [])],
        )
    ]
    agent = tree[0]
    _, tool, chat2 = agent.children
    assert tool.attrs[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(sent)
    assert tool.attrs["flowra.redaction.result.handlers"] == RESULT_HANDLERS[registration]
    assert json.loads(chat2.attrs[semconv.GEN_AI_INPUT_MESSAGES])[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": sent}],
    }
    assert json.loads(chat2.attrs[semconv.GEN_AI_OUTPUT_MESSAGES]) == answer(f"On file: {sent}")
    assert json.loads(agent.attrs[semconv.GEN_AI_OUTPUT_MESSAGES]) == answer(f"On file: {sent}")
    assert_no_leak(spans(span_exporter), [SSN, CARD])
    assert_all_ended(ledger, span_exporter)


@pytest.mark.parametrize(
    "removed",
    [(EARLY_EMIT,), (BLIND_SETTLE,), (EARLY_EMIT, BLIND_SETTLE)],
    ids=["without_emit_patch", "without_settle", "without_both"],
)
async def test_each_mechanism_removed_shows_what_it_guards(
    removed: tuple[str, ...],
    remove: Callable[..., None],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
) -> None:
    """Paired negative of the test above (global and scoped hooks): the result stays clean while
    either mechanism works (each alone records the value after every hook); without ``emit_patch``
    the ledger is lost; without both, the tool span carries the raw record, and only it."""
    remove(*removed)
    provider = customer_script()
    runtime, chat = redacting_runtime(BOTH, make_otel_hooks, provider, lookup_customer, capture_content=True)
    await run_as(runtime, chat)
    assert result_text(given(provider.requests[1], "c1")) == MASKED_RECORD  # flowra itself is unaffected
    (tool,) = named(span_exporter, "execute_tool lookup_customer")
    if EARLY_EMIT in removed:
        assert ledger_of(tool) == {}
    else:
        assert ledger_of(tool)[f"{LEDGER_PREFIX}result.handlers"] == RESULT_HANDLERS[BOTH]
    if removed == (EARLY_EMIT, BLIND_SETTLE):
        assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(RECORD)
        assert leak_places(span_exporter, [SSN, CARD]) == {
            ("execute_tool lookup_customer", f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}")
        }
    else:
        assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(MASKED_RECORD)
        assert_no_leak(spans(span_exporter), [SSN, CARD])


@pytest.mark.parametrize("registration", [GLOBAL, SCOPED])
async def test_a_redacted_exception_text_is_recorded_as_the_model_got_it(
    registration: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """A raising tool's error text (flowra's ``Error: ...`` result) is content too: it goes in the
    span's status description, as the hooks left it."""
    provider = ScriptedProvider(tool_calls_response(("c1", "unlock", {"city": "Oslo"})), echo("c1"))
    runtime, chat = redacting_runtime(registration, make_otel_hooks, provider, unlock, capture_content=True)
    await run_as(runtime, chat)
    sent = given(provider.requests[1], "c1")
    assert (result_text(sent), sent.is_error) == ("Error: vault of Oslo refused [PIN]", True)

    (tool,) = named(span_exporter, "execute_tool unlock")
    assert (tool.status.status_code, tool.status.description) == (StatusCode.ERROR, result_text(sent))
    assert attrs(tool)[semconv.FLOWRA_TOOL_IS_ERROR] is True
    assert attrs(tool)[semconv.FLOWRA_TOOL_ERROR_KIND] == "execution"
    assert semconv.GEN_AI_TOOL_CALL_RESULT not in attrs(tool)  # an error's text goes in the status
    (_, chat2) = named(span_exporter, "chat sonnet-4-5")
    assert parts(json_attr(chat2, semconv.GEN_AI_INPUT_MESSAGES), "tool_call_response") == [
        {"type": "tool_call_response", "id": "c1", "response": result_text(sent)}
    ]
    assert_no_leak(spans(span_exporter), [PIN])


@pytest.mark.parametrize("registration", [GLOBAL, SCOPED])
@pytest.mark.parametrize("emit", [True, False], ids=["after_every_hook", "without_emit_patch"])
async def test_a_redacted_user_input_is_recorded_on_the_agent_and_the_chat(
    registration: str,
    emit: bool,
    remove: Callable[..., None],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
) -> None:
    """An ``INPUT_EVENT`` hook (``StartTurnEvent``; 0.0.47: ``UserMessageEvent``) rewrites the
    turn's input: the agent's ``gen_ai.input.messages`` (recorded when every handler of that event
    ran) and the chat's have the rewritten text."""
    if not emit:
        remove(EARLY_EMIT)
    provider = ScriptedProvider(text_response("noted"))
    runtime, chat = redacting_runtime(registration, make_otel_hooks, provider, capture_content=True)
    await run_as(runtime, chat, f"my {PASSPORT}, please note it")
    (user,) = provider.requests[0].messages
    assert isinstance(user, UserMessage) and user.blocks == [TextBlock(text="my [PASSPORT], please note it")]

    expected = [{"role": "user", "parts": [{"type": "text", "content": "my [PASSPORT], please note it"}]}]
    (agent,) = named(span_exporter, "invoke_agent assistant")
    (chat_span,) = named(span_exporter, "chat sonnet-4-5")
    assert json_attr(chat_span, semconv.GEN_AI_INPUT_MESSAGES) == expected
    if emit:
        assert json_attr(agent, semconv.GEN_AI_INPUT_MESSAGES) == expected
        assert_no_leak(spans(span_exporter), [PASSPORT])
    else:  # the negative: the run's input as it was before the hook
        assert leak_places(span_exporter, [PASSPORT]) == {
            ("invoke_agent assistant", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}")
        }


def every_channel_script() -> ScriptedProvider:
    """Parallel calls carrying a secret in each channel: the arguments (card), a result (SSN and
    card), an exception text (PIN); the user's message carries the passport number."""
    return ScriptedProvider(
        tool_calls_response(
            ("w", "get_weather", {"city": f"Oslo, card {CARD}"}),
            ("l", "lookup_customer", {"name": "Ada"}),
            ("u", "unlock", {"city": "Oslo"}),
        ),
        text_response("All done."),
    )


async def test_every_channel_redacted_at_once_by_scoped_hooks(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = every_channel_script()
    runtime, chat = redacting_runtime(
        SCOPED, make_otel_hooks, provider, get_weather, lookup_customer, unlock, capture_content=True
    )
    await run_as(runtime, chat, f"my {PASSPORT}; weather, record and vault please")
    finished = spans(span_exporter)
    assert_no_leak(finished, list(MASKS))
    everything = json.dumps([[attrs(s), s.status.description] for s in finished], ensure_ascii=False)
    for value in MASKS.values():  # every redacted value is recorded: the trace is not merely empty
        assert value in everything
    assert_all_ended(ledger, span_exporter)


async def test_a_chats_scoped_hook_reaches_an_agent_it_runs_as_a_tool_as_flowra_says_and_the_trace_follows(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """The chat's own ``AfterToolCallEvent`` hook (registered by the chat agent, scoped to it) and
    the ``research`` agent it runs as a tool, whose own tool returns the record. From 0.0.56 scopes
    follow the call stack: the hook masks the researcher's result too. Before, they follow
    registry paths (``researcher/turn`` is not under ``assistant``): the hook never sees that
    result and the researcher's model is given the raw record. Either way the trace shows what the
    model really got, never more: the tool span's result is exactly what the researcher's next
    request carried, a ledger only where a hook changed it, and a secret only where the model had it."""
    main = ScriptedProvider(tool_calls_response(("r1", "research", {"question": "Who is Ada?"})), text_response("ok"))
    researcher = ScriptedProvider(
        tool_calls_response(("c1", "lookup_customer", {"name": "Ada"})), text_response("Ada is a customer.")
    )
    setup = ResearcherSetup(provider=researcher, tools=(lookup_customer,))
    agents: dict[str, Any] = {"assistant": RedactingChat, "researcher": ResearcherAgent}
    runtime = chat_runtime(main, research_tool, agents=agents, services={ResearcherSetup: setup})
    await run_as(traced(make_otel_hooks, runtime, capture_content=True), RedactingChat, "Research Ada")

    given = [
        result_text(b) for m in researcher.requests[-1].messages for b in m.blocks if isinstance(b, ToolResultBlock)
    ]
    assert given == ([MASKED_RECORD] if CALL_STACK_SCOPES else [RECORD])
    (lookup,) = named(span_exporter, "execute_tool lookup_customer")
    assert attrs(lookup)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(given[0])
    if CALL_STACK_SCOPES:
        assert ledger_of(lookup)["flowra.redaction.result.handlers"] == [f"{__name__}.RedactingChat.mask_result"]
        assert_no_leak(spans(span_exporter), [SSN, CARD])
    else:
        assert ledger_of(lookup) == {}  # no hook changed it: no redaction is claimed
        chats = named(span_exporter, "chat sonnet-4-5")
        researcher_chats = [s for s in chats if str(attrs(s)[semconv.GEN_AI_AGENT_NAME]).startswith("researcher")]
        assert len(researcher_chats) == 2
        result, inputs = f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"
        assert leak_places(span_exporter, [SSN, CARD]) == {
            ("execute_tool lookup_customer", result),  # what the tool gave the researcher's model
            ("chat sonnet-4-5", inputs),  # the researcher's second call, which carried it
        }
        (carrying,) = [s for s in researcher_chats if SSN in str(attrs(s).get(semconv.GEN_AI_INPUT_MESSAGES))]
        assert carrying is researcher_chats[-1]
    assert_all_ended(ledger, span_exporter)


async def test_without_redaction_hooks_every_secret_is_found_where_it_was_recorded(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """The leak finder's paired positive: the same run without hooks records each secret, in the
    places the test above shows clean."""
    provider = every_channel_script()
    runtime = traced(
        make_otel_hooks, chat_runtime(provider, get_weather, lookup_customer, unlock), capture_content=True
    )
    await run_as(runtime, ChatAgent, f"my {PASSPORT}; weather, record and vault please")
    secrets = list(MASKS)
    found = {
        (secrets[leak.secret_index], leak.span_name, leak.where) for leak in find_leaks(spans(span_exporter), secrets)
    }
    inputs, outputs = f"attribute {semconv.GEN_AI_INPUT_MESSAGES}", f"attribute {semconv.GEN_AI_OUTPUT_MESSAGES}"
    assert found == {
        (PASSPORT, "invoke_agent assistant", inputs),
        (PASSPORT, "chat sonnet-4-5", inputs),
        (CARD, "chat sonnet-4-5", outputs),  # the first chat's tool call
        (CARD, "chat sonnet-4-5", inputs),  # the second chat's history: the call and two results
        (CARD, "execute_tool get_weather", f"attribute {semconv.GEN_AI_TOOL_CALL_ARGUMENTS}"),
        (CARD, "execute_tool get_weather", f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}"),
        (CARD, "execute_tool lookup_customer", f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}"),
        (SSN, "execute_tool lookup_customer", f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}"),
        (SSN, "chat sonnet-4-5", inputs),
        (PIN, "execute_tool unlock", "status description"),
        (PIN, "chat sonnet-4-5", inputs),
    }


# ==================================================================================== flowra's own changes
def note_seen(seen: list[str]) -> Callable[[Event[AfterToolCallEvent]], None]:
    def note(event: Event[AfterToolCallEvent]) -> None:
        seen.append(result_text(event.data.result))

    return note


def add_policy_note(event: Event[AfterToolCallEvent]) -> None:
    event.data.additional_blocks.append(TextBlock(text="(checked by policy)"))


@pytest.mark.parametrize("settle", [True, False], ids=["settled", "without_settle"])
async def test_max_consecutive_errors_replacement_is_what_is_recorded(
    settle: bool, remove: Callable[..., None], make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """flowra replaces a failing result after every hook (``max_consecutive_errors``): the span
    records the replacement the model got, not the error every hook saw."""
    if not settle:
        remove(BLIND_SETTLE)
    seen: list[str] = []
    provider = ScriptedProvider(tool_calls_response(("c1", "explode", {"city": "Oslo"})), text_response("ok"))
    runtime = traced(make_otel_hooks, chat_runtime(provider, explode, max_consecutive_errors=1), capture_content=True)
    runtime.hooks.on(AfterToolCallEvent, note_seen(seen))
    await run_as(runtime, ChatAgent)
    sent = given(provider.requests[1], "c1")
    assert (
        sent.is_error
        and result_text(sent) == "Tool explode has failed 1 times consecutively. Please try a different approach."
    )
    (hooked,) = seen
    assert "boom in Oslo" in hooked and hooked != result_text(sent)

    (tool,) = named(span_exporter, "execute_tool explode")
    (_, chat2) = named(span_exporter, "chat sonnet-4-5")
    assert parts(json_attr(chat2, semconv.GEN_AI_INPUT_MESSAGES), "tool_call_response") == [
        {"type": "tool_call_response", "id": "c1", "response": result_text(sent)}
    ]
    assert tool.status.status_code == StatusCode.ERROR
    assert attrs(tool)[semconv.FLOWRA_TOOL_IS_ERROR] is True
    if settle:
        assert tool.status.description == result_text(sent)
        assert_no_leak(spans(span_exporter), ["boom in Oslo"])
    else:  # the negative: the error the hooks saw, which the model never got
        assert tool.status.description == hooked
        assert leak_places(span_exporter, ["boom in Oslo"]) == {("execute_tool explode", "status description")}


@requires(
    HAS_RESULT_BLOCKS, "additional blocks join the tool result's content from flowra 0.0.86 (before, they follow it)"
)
@pytest.mark.parametrize("settle", [True, False], ids=["settled", "without_settle"])
async def test_additional_blocks_are_part_of_the_recorded_result(
    settle: bool, remove: Callable[..., None], make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """Blocks a hook adds through ``AfterToolCallEvent.additional_blocks`` are appended by flowra
    after every hook: the recorded result has them, as the model's does."""
    if not settle:
        remove(BLIND_SETTLE)
    provider = ScriptedProvider(tool_calls_response(("c1", "get_weather", {"city": "Oslo"})), echo("c1"))
    runtime = traced(make_otel_hooks, chat_runtime(provider, get_weather), capture_content=True)
    runtime.hooks.on(AfterToolCallEvent, add_policy_note)
    await run_as(runtime, ChatAgent)
    sent = given(provider.requests[1], "c1")
    assert [b.text for b in sent.content if isinstance(b, TextBlock)] == ["Sunny in Oslo", "(checked by policy)"]

    (tool,) = named(span_exporter, "execute_tool get_weather")
    (_, chat2) = named(span_exporter, "chat sonnet-4-5")
    assert parts(json_attr(chat2, semconv.GEN_AI_INPUT_MESSAGES), "tool_call_response") == [
        {"type": "tool_call_response", "id": "c1", "response": result_text(sent)}
    ]
    recorded = attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT]
    if settle:
        assert recorded == wrapped_result(result_text(sent)) == wrapped_result("Sunny in Oslo\n\n(checked by policy)")
    else:  # the negative: the result without the block the model got
        assert recorded == wrapped_result("Sunny in Oslo")


# ==================================================================================== tool arguments
@pytest.mark.parametrize("registration", [GLOBAL, SCOPED])
@pytest.mark.parametrize("emit", [True, False], ids=["after_every_hook", "without_emit_patch"])
async def test_rewritten_arguments_are_recorded_on_the_tool_and_the_chat(
    registration: str,
    emit: bool,
    remove: Callable[..., None],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    if not emit:
        remove(EARLY_EMIT)
    asked = {"city": f"Oslo, card {CARD}"}
    final = {"city": "Oslo, card [CARD]"}
    provider = ScriptedProvider(tool_calls_response(("c1", "get_weather", asked)), echo("c1"))
    runtime, chat = redacting_runtime(
        registration, make_otel_hooks, provider, get_weather, capture_content=True, redaction_hmac_key=HMAC_KEY
    )
    await run_as(runtime, chat, "Weather for my card's city?")
    # flowra ran the rewritten call and sent it back to the model as the call it made.
    (call,) = [b for b in provider.requests[1].messages[-2].blocks if isinstance(b, ToolUseBlock)]
    assert call.input == final
    assert result_text(given(provider.requests[1], "c1")) == "Sunny in Oslo, card [CARD]"

    (tool,) = named(span_exporter, "execute_tool get_weather")
    chat1, chat2 = named(span_exporter, "chat sonnet-4-5")
    tool_call = {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": final}
    assert json_attr(tool, semconv.GEN_AI_TOOL_CALL_ARGUMENTS) == final
    assert parts(json_attr(chat2, semconv.GEN_AI_INPUT_MESSAGES), "tool_call") == [tool_call]
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("Sunny in Oslo, card [CARD]")
    assert_all_ended(ledger, span_exporter)
    if emit:
        assert parts(json_attr(chat1, semconv.GEN_AI_OUTPUT_MESSAGES), "tool_call") == [tool_call]
        assert ledger_of(tool) == {
            "flowra.redaction.applied": True,
            "flowra.redaction.fields": ["arguments"],
            "flowra.redaction.arguments.handlers": ARGUMENT_HANDLERS[registration],
            "flowra.redaction.arguments.original_length": len(canonical_arguments(asked)),
            "flowra.redaction.arguments.final_length": len(canonical_arguments(final)),
            "flowra.redaction.arguments.original_hmac_sha256": mac(canonical_arguments(asked)),
        }
        assert_no_leak(spans(span_exporter), [CARD])
    else:  # the negative: the chat's output shows the call as the model made it, and no ledger
        assert parts(json_attr(chat1, semconv.GEN_AI_OUTPUT_MESSAGES), "tool_call") == [
            {**tool_call, "arguments": asked}
        ]
        assert ledger_of(tool) == {}
        assert leak_places(span_exporter, [CARD]) == {
            ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_OUTPUT_MESSAGES}")
        }


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ConnectParams:
    account: str
    token: str
    options: dict[str, str]


@tool("connect")
async def connect(params: ConnectParams) -> str:
    """Connects to an account with an access token."""
    return f"connected to {params.account}"


TOKEN = "sk-live-ÄÖ-9f8e7d6c5b4a"
MODEL_ARGUMENTS: dict[str, Any] = {"account": "acme", "token": TOKEN, "options": {"region": "eu", "pin": TOKEN}}
SCRUBBED_ARGUMENTS: dict[str, Any] = {
    "account": "acme",
    "token": "[REDACTED]",
    "options": {"region": "eu", "pin": "[REDACTED]"},
}


def shallow_redact(event: Event[BeforeToolCallEvent]) -> None:
    """A shallow copy with the token redacted: the nested ``options`` dict is the model's own."""
    tool_use = event.data.tool_use
    assert isinstance(tool_use.input, dict)
    event.data.tool_use = dataclasses.replace(tool_use, input={**tool_use.input, "token": "[REDACTED]"})


def scrub_in_place(event: Event[BeforeToolCallEvent]) -> None:
    """Edits the (possibly shared) dicts of the current call in place; replaces nothing."""
    arguments = event.data.tool_use.input
    assert isinstance(arguments, dict)
    arguments["token"] = "[REDACTED]"
    arguments["options"]["pin"] = "[REDACTED]"


@pytest.mark.parametrize(
    "hooks",
    [(scrub_in_place,), (shallow_redact, scrub_in_place)],
    ids=["in_place_alone", "shallow_copy_then_in_place"],
)
async def test_arguments_edited_in_place_are_recorded_and_the_ledger_describes_the_model_original(
    hooks: tuple[Callable[[Event[BeforeToolCallEvent]], None], ...],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    """A hook that edits the arguments in place (the model's own dict, or one a previous hook's
    shallow copy shares with it) is a redaction: the arguments are recorded after it, and the
    ledger's length and HMAC are those of the model's original, taken before any hook ran."""
    provider = ScriptedProvider(
        tool_calls_response(("c1", "connect", copy.deepcopy(MODEL_ARGUMENTS))), text_response("ok")
    )
    runtime = traced(
        make_otel_hooks, chat_runtime(provider, connect), capture_content=True, redaction_hmac_key=HMAC_KEY
    )
    for hook in hooks:
        runtime.hooks.on(BeforeToolCallEvent, hook)
    await run_as(runtime, ChatAgent, "connect acme")
    (call,) = [b for b in provider.requests[1].messages[-2].blocks if isinstance(b, ToolUseBlock)]
    assert call.input == SCRUBBED_ARGUMENTS
    assert_all_ended(ledger, span_exporter)

    (tool,) = named(span_exporter, "execute_tool connect")
    original, final = canonical_arguments(MODEL_ARGUMENTS), canonical_arguments(SCRUBBED_ARGUMENTS)
    assert ledger_of(tool) == {
        "flowra.redaction.applied": True,
        "flowra.redaction.fields": ["arguments"],
        "flowra.redaction.arguments.handlers": [f"{__name__}.{hook.__name__}" for hook in hooks],
        "flowra.redaction.arguments.original_length": len(original),
        "flowra.redaction.arguments.final_length": len(final),
        "flowra.redaction.arguments.original_hmac_sha256": mac(original),
    }
    assert mac(original) != mac(final)  # computed from the shared object at the end, it would be this
    assert json_attr(tool, semconv.GEN_AI_TOOL_CALL_ARGUMENTS) == SCRUBBED_ARGUMENTS
    (chat1, _) = named(span_exporter, "chat sonnet-4-5")
    (output_call,) = parts(json_attr(chat1, semconv.GEN_AI_OUTPUT_MESSAGES), "tool_call")
    assert output_call["arguments"] == SCRUBBED_ARGUMENTS
    assert_no_leak(spans(span_exporter), [TOKEN])


def redirect_to_the_weather(event: Event[BeforeToolCallEvent]) -> None:
    tool_use = event.data.tool_use
    if tool_use.name == "lookup_customer":
        event.data.tool_use = dataclasses.replace(tool_use, name="get_weather", input={"city": "Oslo"})


async def test_a_hook_redirecting_the_call_names_the_tool_that_ran(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    provider = ScriptedProvider(tool_calls_response(("c1", "lookup_customer", {"name": "Ada"})), text_response("ok"))
    runtime = traced(make_otel_hooks, chat_runtime(provider, lookup_customer, get_weather), capture_content=True)
    runtime.hooks.on(BeforeToolCallEvent, redirect_to_the_weather)
    await run_as(runtime, ChatAgent)
    assert result_text(given(provider.requests[1], "c1")) == "Sunny in Oslo"

    assert_no_leak(spans(span_exporter), [SSN, CARD])  # lookup_customer never ran
    (tool,) = [s for s in spans(span_exporter) if s.name.startswith("execute_tool ")]
    assert tool.name == "execute_tool get_weather"
    assert attrs(tool)[semconv.GEN_AI_TOOL_NAME] == "get_weather"
    assert json_attr(tool, semconv.GEN_AI_TOOL_CALL_ARGUMENTS) == {"city": "Oslo"}
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("Sunny in Oslo")
    (chat1, _) = named(span_exporter, "chat sonnet-4-5")
    (call,) = parts(json_attr(chat1, semconv.GEN_AI_OUTPUT_MESSAGES), "tool_call")
    assert (call["name"], call["arguments"]) == ("get_weather", {"city": "Oslo"})


# ==================================================================================== the redaction ledger
def note_reviewed(event: Event[AfterToolCallEvent]) -> None:
    result = event.data.result
    if HAS_RESULT_BLOCKS:
        event.data.result = dataclasses.replace(result, content=[*result.content, TextBlock(text="(reviewed)")])
    else:  # the result's content is text before flowra 0.0.86
        event.data.result = replace_result_text(result, lambda text: f"{text}\n\n(reviewed)")


@pytest.mark.parametrize("capture", [True, False], ids=["capture_on", "capture_off"])
async def test_ledger_names_global_and_scoped_handlers_in_order_whatever_the_capture(
    capture: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    """A global hook registered before ``install``, one after it, and an agent-scoped one each
    change the result: the ledger names all three in the order they ran, describes the original
    by length and HMAC (recomputed here over the documented canonical form), and is kept with
    content capture off, when nothing else of the content is."""
    provider = customer_script()
    runtime = chat_runtime(provider, lookup_customer, agents={"assistant": CardRedactingChat})
    runtime.hooks.on(AfterToolCallEvent, mask_ssn)
    traced(make_otel_hooks, runtime, capture_content=capture, redaction_hmac_key=HMAC_KEY)
    runtime.hooks.on(AfterToolCallEvent, note_reviewed)
    await run_as(runtime, CardRedactingChat)
    sent = given(provider.requests[1], "c1")
    assert result_text(sent) == f"{MASKED_RECORD}\n\n(reviewed)"

    (tool,) = named(span_exporter, "execute_tool lookup_customer")
    original = canonical_result([TextBlock(text=RECORD)])
    assert ledger_of(tool) == {
        "flowra.redaction.applied": True,
        "flowra.redaction.fields": ["result"],
        "flowra.redaction.result.handlers": [
            f"{__name__}.mask_ssn",
            f"{__name__}.note_reviewed",
            f"{__name__}.RedactingChat.mask_result",
        ],
        "flowra.redaction.result.original_length": len(original),
        "flowra.redaction.result.final_length": len(canonical_result(sent.content)),
        "flowra.redaction.result.original_hmac_sha256": mac(original),
    }
    assert redaction_points(metric_reader) == [
        ({semconv.GEN_AI_TOOL_NAME: "lookup_customer", "flowra.redaction.field": "result"}, 1)
    ]
    assert_all_ended(ledger, span_exporter)
    finished = spans(span_exporter)
    if capture:
        assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(result_text(sent))
        assert_no_leak(finished, [SSN, CARD])
    else:  # no content at all: neither the secrets, nor the redacted values, nor the run's text
        for span in finished:
            assert not CONTENT_KEYS & set(attrs(span)), span.name
            assert span.status.description is None, span.name
        assert_no_leak(finished, [SSN, CARD, MASKED_RECORD, "(reviewed)", "Look up Ada", "On file"])


async def test_no_ledger_and_no_redaction_point_without_a_changing_hook(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    """Paired negative of the ledger: the same run whose hooks change nothing (the scoped one
    masks a card that is not there) has no ledger and counts no redaction, and records the raw
    record, so the ledger above is the hooks' doing."""
    provider = ScriptedProvider(tool_calls_response(("c1", "get_weather", {"city": "Oslo"})), text_response("ok"))
    runtime = chat_runtime(provider, get_weather, agents={"assistant": RedactingChat})
    traced(make_otel_hooks, runtime, capture_content=True, redaction_hmac_key=HMAC_KEY)
    runtime.hooks.on(AfterToolCallEvent, mask_ssn)
    await run_as(runtime, RedactingChat)
    (tool,) = named(span_exporter, "execute_tool get_weather")
    assert ledger_of(tool) == {}
    assert redaction_points(metric_reader) == []
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("Sunny in Oslo")


# ==================================================================================== a run started by a hook
class ModelScrubber:
    """A redaction hook that asks a small flowra agent (another ``AgentRuntime``, traced too) to
    clean a tool result: the small model is given the raw result, secrets included."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime

    async def scrub(self, event: Event[AfterToolCallEvent]) -> None:
        raw = event.data.result
        result = await self.runtime.run(agent=TurnAgent, spec=turn_spec(f"Remove identifiers: {result_text(raw)}"))
        message = getattr(result, "result_message", None)
        assert isinstance(message, AssistantMessage)
        text = "".join(b.text for b in message.blocks if isinstance(b, TextBlock))
        event.data.result = replace_result_text(raw, lambda _: text)


def scrubber_runtime(provider: ScriptedProvider) -> AgentRuntime:
    config = TurnConfig(
        llm_config=llm_config(provider, SMALL_MODEL), system=system("You remove identifiers."), history=[]
    )
    return AgentRuntime(agents={"scrubber": TurnAgent}, services={TurnConfig: config, **provider_services(provider)})


class _NeverInHooks:
    """Stands for ``emit_patch.IN_HOOKS`` in the negative: set and reset as usual, never seen set."""

    def set(self, value: bool) -> Token[bool] | None:
        return None

    def reset(self, token: Token[bool] | None) -> None:
        return None

    def get(self) -> bool:
        return False


@pytest.mark.parametrize("in_hooks", [True, False], ids=["in_hooks_marked", "without_in_hooks"])
async def test_an_agent_run_started_by_a_hook_records_no_content(
    in_hooks: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not in_hooks:
        monkeypatch.setattr(emit_patch, "IN_HOOKS", _NeverInHooks())
    small = ScriptedProvider(text_response(MASKED_RECORD))
    scrubber = traced(make_otel_hooks, scrubber_runtime(small), capture_content=True)
    provider = customer_script()
    runtime = traced(make_otel_hooks, chat_runtime(provider, lookup_customer), capture_content=True)
    runtime.hooks.on(AfterToolCallEvent, ModelScrubber(scrubber).scrub)
    await run_as(runtime, ChatAgent)
    assert SSN in repr(small.requests[0].messages)  # the small model really got the raw record
    sent = result_text(given(provider.requests[1], "c1"))
    assert sent == MASKED_RECORD

    tree = span_tree.build(span_exporter.get_finished_spans())
    assert span_tree.shape(tree) == [
        (
            "invoke_agent assistant",
            [
                ("chat sonnet-4-5", []),
                ("execute_tool lookup_customer", []),
                ("invoke_agent scrubber", [("chat gpt-4o-mini", [])]),
                ("chat sonnet-4-5", []),
            ],
        )
    ]
    nested = tree[0].children[2]
    nested_spans = [nested, *nested.children]
    # The hook's own run is traced (an agent, a model call with its tokens) in both cases.
    assert nested.children[0].attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    tool = tree[0].children[1]
    assert tool.attrs[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(sent)
    assert tool.attrs["flowra.redaction.result.handlers"] == [f"{__name__}.ModelScrubber.scrub"]
    assert_all_ended(ledger, span_exporter)
    if in_hooks:
        for node in nested_spans:
            assert not CONTENT_KEYS & set(node.attrs), node.name
        # The outer run keeps its content (with the scrubbed record).
        assert json.loads(tree[0].attrs[semconv.GEN_AI_OUTPUT_MESSAGES]) == answer(f"On file: {sent}")
        assert_no_leak(spans(span_exporter), [SSN, CARD])
    else:  # the negative: the nested run records the raw record it was given
        assert leak_places(span_exporter, [SSN, CARD]) == {
            ("invoke_agent scrubber", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
            ("chat gpt-4o-mini", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
        }


class EventScrubber(ModelScrubber):
    """The same small agent, asked from a hook of an event the adapter does not act on
    (``TextReasoningEvent``: the model's text beside its tool calls), or from a task a
    ``AfterToolCallEvent`` hook starts and awaits."""

    async def check_reasoning(self, event: Event[TextReasoningEvent]) -> None:
        if SSN in event.data.text.text:  # the text beside the tool call; not the final answer
            await self.runtime.run(agent=TurnAgent, spec=turn_spec(f"Check: {event.data.text.text}"))

    async def scrub_in_a_task(self, event: Event[AfterToolCallEvent]) -> None:
        await asyncio.ensure_future(self.scrub(event))


@pytest.mark.parametrize("in_hooks", [True, False], ids=["in_hooks_marked", "without_in_hooks"])
@pytest.mark.parametrize("on", ["reasoning", "task"])
async def test_an_agent_run_started_by_any_hook_or_its_task_records_no_content(
    on: str,
    in_hooks: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not in_hooks:
        monkeypatch.setattr(emit_patch, "IN_HOOKS", _NeverInHooks())
    small = ScriptedProvider(text_response(MASKED_RECORD))
    scrubber = EventScrubber(traced(make_otel_hooks, scrubber_runtime(small), capture_content=True))
    first = tool_calls_response(("c1", "lookup_customer", {"name": "Ada"}), text=f"Ada's SSN is {SSN}, checking.")
    provider = ScriptedProvider(first, text_response("Ada is on file."))
    runtime = traced(make_otel_hooks, chat_runtime(provider, lookup_customer), capture_content=True)
    if on == "reasoning":
        runtime.hooks.on(TextReasoningEvent, scrubber.check_reasoning)
    else:
        runtime.hooks.on(AfterToolCallEvent, scrubber.scrub_in_a_task)
    await run_as(runtime, ChatAgent)
    assert SSN in repr(small.requests[0].messages)  # the small model really got the raw value

    tree = span_tree.build(span_exporter.get_finished_spans())
    calls: list[Any] = [("chat sonnet-4-5", []), ("execute_tool lookup_customer", []), ("chat sonnet-4-5", [])]
    calls.insert(1 if on == "reasoning" else 2, ("invoke_agent scrubber", [("chat gpt-4o-mini", [])]))
    assert span_tree.shape(tree) == [("invoke_agent assistant", calls)]
    nested = tree[0].children[1 if on == "reasoning" else 2]
    assert nested.children[0].attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10  # traced all the same
    assert_all_ended(ledger, span_exporter)
    inner = {
        (leak.span_name, leak.where)
        for leak in find_leaks(spans(span_exporter), [SSN])
        if leak.span_name in ("invoke_agent scrubber", "chat gpt-4o-mini")
    }
    if in_hooks:
        for node in (nested, *nested.children):
            assert not CONTENT_KEYS & set(node.attrs), node.name
        assert inner == set()
        # The outer run keeps its content.
        assert semconv.GEN_AI_INPUT_MESSAGES in tree[0].children[-1].attrs
    else:  # the negative: the nested run records the raw value it was given
        assert inner == {
            ("invoke_agent scrubber", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
            ("chat gpt-4o-mini", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
        }


# ==================================================================================== redact= / redact_secrets=
def mask_ssn_text(text: str) -> str:
    return text.replace(SSN, "[SSN]")


@pytest.mark.parametrize("scrubbing", [True, False], ids=["scrubbed", "without_options"])
async def test_redact_and_redact_secrets_apply_to_provider_output_and_inputs(
    scrubbing: bool, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """No hook at all: the user's input carries the SSN, the model's answer the card number; the
    ``redact`` function and the built-in card pattern scrub both wherever they are recorded."""
    options: dict[str, Any] = {"redact": mask_ssn_text, "redact_secrets": True} if scrubbing else {}
    provider = ScriptedProvider(text_response(f"The card on file is {CARD}."))
    runtime = traced(make_otel_hooks, chat_runtime(provider), capture_content=True, **options)
    await run_as(runtime, ChatAgent, f"My SSN is {SSN}; which card is on file?")
    assert SSN in repr(provider.requests[0].messages)  # the options scrub the trace, not the model's input

    (agent,) = named(span_exporter, "invoke_agent assistant")
    (chat,) = named(span_exporter, "chat sonnet-4-5")
    if scrubbing:
        user_text = "My SSN is [SSN]; which card is on file?"
        output = answer("The card on file is [REDACTED:card_number].")
        for span in (agent, chat):
            assert json_attr(span, semconv.GEN_AI_INPUT_MESSAGES) == [
                {"role": "user", "parts": [{"type": "text", "content": user_text}]}
            ]
            assert json_attr(span, semconv.GEN_AI_OUTPUT_MESSAGES) == output
        assert_no_leak(spans(span_exporter), [SSN, CARD])
    else:  # the negative: each secret is where the options would have scrubbed it
        assert leak_places(span_exporter, [SSN, CARD]) == {
            (span.name, f"attribute {key}")
            for span in (agent, chat)
            for key in (semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES)
        }


async def test_redact_applies_to_tool_results_and_arguments_after_the_hooks(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """The options are a second line after the hooks: a global hook masks the SSN in the result,
    ``redact_secrets`` the card number the model put in a tool's arguments and the result."""
    provider = ScriptedProvider(tool_calls_response(("c1", "lookup_customer", {"name": f"Ada {CARD}"})), echo("c1"))
    runtime = traced(
        make_otel_hooks, chat_runtime(provider, lookup_customer), capture_content=True, redact_secrets=True
    )
    runtime.hooks.on(AfterToolCallEvent, mask_ssn)
    await run_as(runtime, ChatAgent)
    sent = result_text(given(provider.requests[1], "c1"))
    assert sent == f"Ada {CARD}: SSN [SSN], card {CARD}"  # the model got the card (no hook masks it)

    (tool,) = named(span_exporter, "execute_tool lookup_customer")
    scrubbed = sent.replace(CARD, "[REDACTED:card_number]")
    assert json_attr(tool, semconv.GEN_AI_TOOL_CALL_ARGUMENTS) == {"name": "Ada [REDACTED:card_number]"}
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(scrubbed)
    (_, chat2) = named(span_exporter, "chat sonnet-4-5")
    assert parts(json_attr(chat2, semconv.GEN_AI_INPUT_MESSAGES), "tool_call_response") == [
        {"type": "tool_call_response", "id": "c1", "response": scrubbed}
    ]
    assert_no_leak(spans(span_exporter), [SSN, CARD])


# ==================================================================================== prefilled and cut-off calls
CUT_OFF_TEXT = (
    "Your response hit the output token limit before this tool call was complete. "
    "The arguments arrived incomplete, so the tool was not run. "
    "Retry the call with more compact arguments, or split the work into smaller calls."
)


def answer_from_cache(event: Event[Any]) -> None:
    """A ``BeforeToolCallsEvent`` hook: answers the customer lookup from a cache (the raw record)."""
    for tool_use in event.data.tool_uses:
        if tool_use.name == "lookup_customer":
            event.data.results[tool_use.id] = ToolResult(content=f"cached: {RECORD}")


@pytest.fixture
def calls_event() -> Iterator[type[Any]]:
    if not HAS_CALLS_EVENT:
        pytest.skip("BeforeToolCallsEvent is flowra 0.0.92+")
    from flowra.lib.turn.hook_events import BeforeToolCallsEvent

    yield BeforeToolCallsEvent


@pytest.mark.parametrize("mechanisms", [True, False], ids=["after_every_hook", "without_emit_patch_and_settle"])
async def test_prefilled_and_cut_off_calls_carry_the_result_the_model_got(
    mechanisms: bool,
    calls_event: type[Any],
    remove: Callable[..., None],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    """One message, three calls: one answered by a ``BeforeToolCallsEvent`` hook (redacted by an
    ``AfterToolCallEvent`` hook like any result), one that runs, and one cut off by the token limit
    (answered by flowra with an error, no hook sees it). None of the first and last gets a
    ``ToolCallSpan`` from flowra; each still gets an ``execute_tool`` span with its result."""
    if not mechanisms:
        remove(EARLY_EMIT, BLIND_SETTLE)
    provider = ScriptedProvider(
        tool_calls_response(
            ("c1", "lookup_customer", {"name": "Ada"}),
            ("c2", "get_weather", {"city": "Oslo"}),
            ("c3", "get_weather", {"city": "Ber"}),
            stop_reason=StopReason.MAX_TOKENS,
        ),
        text_response("ok"),
    )
    runtime = traced(make_otel_hooks, chat_runtime(provider, lookup_customer, get_weather), capture_content=True)
    runtime.hooks.on(calls_event, answer_from_cache)
    runtime.hooks.on(AfterToolCallEvent, mask_record)
    await run_as(runtime, ChatAgent)
    request = provider.requests[1]
    prefilled, ran, cut_off = (given(request, c) for c in ("c1", "c2", "c3"))
    assert result_text(prefilled) == f"cached: {MASKED_RECORD}"
    assert (result_text(ran), result_text(cut_off), cut_off.is_error) == ("Sunny in Oslo", CUT_OFF_TEXT, True)
    assert_all_ended(ledger, span_exporter)

    tools = {
        attrs(s)[semconv.GEN_AI_TOOL_CALL_ID]: s for s in spans(span_exporter) if s.name.startswith("execute_tool")
    }
    assert sorted(tools) == ["c1", "c2", "c3"]
    base = {
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_TYPE: "function",
        semconv.GEN_AI_AGENT_NAME: "assistant",
    }
    weather = {
        **base,
        semconv.GEN_AI_TOOL_NAME: "get_weather",
        semconv.GEN_AI_TOOL_DESCRIPTION: "Current weather for a city.",
    }
    # Neither call passes a BeforeToolCallEvent: their arguments are the model's (as the history keeps them).
    cut_off_attrs = {
        **weather,
        semconv.GEN_AI_TOOL_CALL_ID: "c3",
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS: '{"city":"Ber"}',
        semconv.FLOWRA_TOOL_CUT_OFF: True,
        semconv.FLOWRA_TOOL_IS_ERROR: True,
        semconv.ERROR_TYPE: semconv.ERROR_TYPE_TOOL,
    }
    prefilled_attrs = {
        **base,
        semconv.GEN_AI_TOOL_NAME: "lookup_customer",
        semconv.GEN_AI_TOOL_DESCRIPTION: "A customer's record (it holds secrets).",
        semconv.GEN_AI_TOOL_CALL_ID: "c1",
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS: '{"name":"Ada"}',
        semconv.FLOWRA_TOOL_PREFILLED: True,
    }
    assert attrs(tools["c2"])[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(result_text(ran))
    if mechanisms:
        assert attrs(tools["c1"]) == {
            **prefilled_attrs,
            semconv.GEN_AI_TOOL_CALL_RESULT: wrapped_result(result_text(prefilled)),
            "flowra.redaction.applied": True,
            "flowra.redaction.fields": ["result"],
            "flowra.redaction.result.handlers": [f"{__name__}.mask_record"],
            "flowra.redaction.result.original_length": len(canonical_result([TextBlock(text=f"cached: {RECORD}")])),
            "flowra.redaction.result.final_length": len(canonical_result(prefilled.content)),
        }
        assert attrs(tools["c3"]) == cut_off_attrs
        status = tools["c3"].status
        assert (status.status_code, status.description) == (StatusCode.ERROR, result_text(cut_off))
        assert_no_leak(spans(span_exporter), [SSN, CARD])
    else:  # the negative: the prefilled span carries the raw cached record, the cut-off one no error
        assert attrs(tools["c1"]) == {
            **prefilled_attrs,
            semconv.GEN_AI_TOOL_CALL_RESULT: wrapped_result(f"cached: {RECORD}"),
        }
        assert tools["c3"].status.status_code != StatusCode.ERROR
        assert leak_places(span_exporter, [SSN, CARD]) == {
            ("execute_tool lookup_customer", f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}")
        }
