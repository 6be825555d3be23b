"""Issue "Redaction-safe content": adversarial tests on real flowra runs.

Every channel that can carry a secret into a trace gets its own distinct secret: the LLM's
tool-call input (``SECRET_ARG``), a tool's output (``SECRET_RESULT``), a tool's exception text
(``SECRET_EXC``) and the user's message (``SECRET_USER``). A redaction hook replaces each one,
registered in each of the four ways a flowra user can register it relative to ``OtelHooks``, and
every test pairs "the secret is nowhere" (``flowra_otel.testing.assert_no_leak``) with "the
redacted replacement *is* recorded", so a trace with no content at all cannot pass.

The secrets contain characters JSON escapes (``"``, ``\\``, tab, non-ASCII), so they appear
escaped inside ``gen_ai.*.messages``; the leak finder decodes JSON to still see them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from collections.abc import Callable, Sequence
from typing import Any, cast

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import (
    AfterLLMCallEvent,
    AfterToolCallEvent,
    BeforeLLMCallEvent,
    BeforeToolCallEvent,
    MessageAcceptedEvent,
    ResultMessageEvent,
    StartIterationEvent,
    TextReasoningEvent,
    ThinkingEvent,
    UserMessageEvent,
)
from flowra.llm import LLMResponse, TextBlock
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

from flowra_otel import OtelHooks
from flowra_otel.core import errors, semconv
from flowra_otel.core.bounded_json import OMITTED_KEY, OVER_BUDGET
from flowra_otel.core.content import MESSAGE_OMITTED, TRUNCATION_MARKER
from flowra_otel.core.environment_variables import OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
from flowra_otel.core.instruments import FLOWRA_REDACTIONS
from flowra_otel.testing import Leak, assert_no_leak, find_leaks
from tests.hook_registry.conftest import wrapped_result
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    ToolFailureError,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)
from tests.hook_registry.flowra_support import run_tool_loop as _run_tool_loop
from tests.hook_registry.test_content_pipeline import HISTORY_FLOOR, valid

MakeHooks = Callable[..., OtelHooks]

# ------------------------------------------------------------------------------------ secrets
SECRET_ARG = 'tok-ARG-4f9e"q\\z'
"""In the LLM's tool-call input; quote and backslash are escaped inside JSON attributes."""
SECRET_RESULT = 'pw-RESULT-81c2"ü'
"""In a tool's output."""
SECRET_EXC = "exc-EXC-5d07ab"
"""In a tool's exception message (flowra turns it into an ``Error: ...`` error result)."""
SECRET_USER = "usr-USER-e3b1\tk9"
"""In the user's message."""
SECRETS = (SECRET_ARG, SECRET_RESULT, SECRET_EXC, SECRET_USER)

REDACTED_ARG = "[REDACTED-ARG]"
REDACTED_RESULT = "[REDACTED-RESULT]"
REDACTED_EXC = "[REDACTED-EXC]"
REDACTED_USER = "[REDACTED-USER]"
REDACTED = (REDACTED_ARG, REDACTED_RESULT, REDACTED_EXC, REDACTED_USER)

USER_TEXT = f"my password is {SECRET_USER}"
HMAC_KEY = b"0123456789abcdef-ledger-key"

CONTENT_KEYS = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
    semconv.GEN_AI_TOOL_DEFINITIONS,
    semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
    semconv.GEN_AI_TOOL_CALL_RESULT,
)
LEDGER_PREFIX = "flowra.redaction."


# ------------------------------------------------------------------------------------ tools
def lookup_account(token: str, region: str = "eu") -> str:
    """Look up an account by its access token."""
    return f"account in {region} found"


def fetch_record(record_id: str, note: str = "") -> str:
    """Fetch a stored record."""
    return f"record {record_id}: owner password is {SECRET_RESULT}"


def explode(reason: str = "") -> str:
    """Log in to the database (always fails)."""
    raise ToolFailureError(f"login failed for {SECRET_EXC}")


TOOLS = (lookup_account, fetch_record, explode)


# ------------------------------------------------------------------------------------ redaction hooks
def redact_arguments(event: Event[BeforeToolCallEvent]) -> None:
    tool_use = event.data.tool_use
    scrubbed = {k: v.replace(SECRET_ARG, REDACTED_ARG) if isinstance(v, str) else v for k, v in tool_use.input.items()}
    if scrubbed != tool_use.input:
        event.data.tool_use = dataclasses.replace(tool_use, input=scrubbed)


def redact_result(event: Event[AfterToolCallEvent]) -> None:
    result = event.data.result
    content = result.content.replace(SECRET_RESULT, REDACTED_RESULT).replace(SECRET_EXC, REDACTED_EXC)
    if content != result.content:
        event.data.result = dataclasses.replace(result, content=content)


def mark_reviewed(event: Event[AfterToolCallEvent]) -> None:
    result = event.data.result
    event.data.result = dataclasses.replace(result, content=result.content + " (reviewed)")


def redact_user(event: Event[UserMessageEvent]) -> None:
    event.data.messages = [
        dataclasses.replace(
            message,
            blocks=[
                dataclasses.replace(b, text=b.text.replace(SECRET_USER, REDACTED_USER))
                if isinstance(b, TextBlock)
                else b
                for b in message.blocks
            ],
        )
        for message in event.data.messages
    ]


class HookFailureError(RuntimeError):
    """Raised by a hook (e.g. a redaction service that is down)."""


def failing_hook(event: Event[Any]) -> None:
    raise HookFailureError("redaction service unavailable")


def equal_result(event: Event[AfterToolCallEvent]) -> None:
    event.data.result = dataclasses.replace(event.data.result)  # a new object, equal to the old one


def equal_arguments(event: Event[BeforeToolCallEvent]) -> None:
    tool_use = event.data.tool_use
    event.data.tool_use = dataclasses.replace(tool_use, input=dict(tool_use.input))


def tag_result(event: Event[AfterToolCallEvent]) -> None:
    event.data.result = dataclasses.replace(event.data.result, content=event.data.result.content + " [tmp]")


def untag_result(event: Event[AfterToolCallEvent]) -> None:
    content = event.data.result.content.removesuffix(" [tmp]")
    event.data.result = dataclasses.replace(event.data.result, content=content)


type Handlers = Sequence[tuple[type[Any], Callable[[Event[Any]], Any]]]

ARG_HOOKS: Handlers = [(BeforeToolCallEvent, redact_arguments)]
RESULT_HOOKS: Handlers = [(AfterToolCallEvent, redact_result)]
USER_HOOKS: Handlers = [(UserMessageEvent, redact_user)]
ALL_HOOKS: Handlers = [*USER_HOOKS, *ARG_HOOKS, *RESULT_HOOKS]

# ------------------------------------------------------------------------------------ registrations
FORWARDED: list[type] = [
    UserMessageEvent,
    MessageAcceptedEvent,
    StartIterationEvent,
    BeforeLLMCallEvent,
    AfterLLMCallEvent,
    TextReasoningEvent,
    ThinkingEvent,
    ResultMessageEvent,
    BeforeToolCallEvent,
    AfterToolCallEvent,
]
"""What the child registries forward: every tool-loop event but the streaming deltas (a delta
handler, forwarder included, would switch the agent to streaming)."""

AFTER_PLUGIN = "hook_after_plugin"
PREPEND = "hook_prepended_before_plugin"
CHILD_INTO_PLUGIN = "hook_on_child_forwarding_to_plugin_registry"
PARENT_OF_PLUGIN = "hook_on_parent_of_plugin_child"
REGISTRATIONS = (AFTER_PLUGIN, PREPEND, CHILD_INTO_PLUGIN, PARENT_OF_PLUGIN)


def wire(registration: str, otel: OtelHooks, handlers: Handlers) -> HookRegistry:
    """The registry the agent uses, with ``handlers`` (run in the given order) and ``otel``.

    * ``AFTER_PLUGIN``: one registry; the plugin sees each event before the redaction hooks.
    * ``PREPEND``: one registry; the hooks are added after the plugin, with ``prepend=True``.
    * ``CHILD_INTO_PLUGIN``: the plugin is on the parent; the agent's child registry forwards to
      it with ``propagate_to`` *before* its own redaction hooks run (forwarder registered first).
    * ``PARENT_OF_PLUGIN``: the plugin is on the agent's child registry, which forwards to the
      parent where the redaction hooks are.
    """
    if registration == AFTER_PLUGIN:
        registry = HookRegistry()
        registry.add(otel)
        for event_type, handler in handlers:
            registry.on(event_type, handler)
        return registry
    if registration == PREPEND:
        registry = HookRegistry()
        registry.add(otel)
        for event_type, handler in reversed(handlers):
            registry.on(event_type, handler, prepend=True)
        return registry
    if registration == CHILD_INTO_PLUGIN:
        parent = HookRegistry()
        parent.add(otel)
        child = HookRegistry()
        child.propagate_to(parent, only=FORWARDED)
        for event_type, handler in handlers:
            child.on(event_type, handler)
        return child
    if registration == PARENT_OF_PLUGIN:
        parent = HookRegistry()
        for event_type, handler in handlers:
            parent.on(event_type, handler)
        child = HookRegistry()
        child.add(otel)
        child.propagate_to(parent, only=FORWARDED)
        return child
    raise AssertionError(registration)


# ------------------------------------------------------------------------------------ helpers
async def run(
    script: Sequence[LLMResponse | BaseException], hooks: HookRegistry, user_text: str = "hi"
) -> ScriptedProvider:
    provider = ScriptedProvider(script)
    async with tool_registry(*TOOLS) as tools:
        await _run_tool_loop(tool_loop_runtime(provider, tools, hooks), user_text)
    provider.assert_exhausted()
    return provider


def spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return sorted(exporter.get_finished_spans(), key=lambda s: (s.start_time or 0, s.name))


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in spans(exporter) if s.name.startswith(prefix)]


def tool_span(exporter: InMemorySpanExporter, tool: str) -> ReadableSpan:
    (span,) = named(exporter, f"execute_tool {tool}")
    return span


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()}


def json_attr(span: ReadableSpan, key: str) -> Any:
    value = attrs(span)[key]
    assert isinstance(value, str)
    return json.loads(value)


def parts(messages: Any, part_type: str) -> list[dict[str, Any]]:
    return [p for m in messages for p in m["parts"] if p["type"] == part_type]


def ledger(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in attrs(span).items() if k.startswith(LEDGER_PREFIX)}


def canonical_arguments(tool_input: dict[str, Any]) -> str:
    """The ledger's canonical form of arguments, as the ``flowra_otel.redaction`` docstring states it."""
    return json.dumps(tool_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def redaction_points(reader: InMemoryMetricReader) -> dict[tuple[str, str], int]:
    points: dict[tuple[str, str], int] = {}
    data = reader.get_metrics_data()
    if data is None:
        return points
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name != FLOWRA_REDACTIONS:
                    continue
                for point in cast("Any", metric.data).data_points:
                    key = (str(point.attributes["gen_ai.tool.name"]), str(point.attributes["flowra.redaction.field"]))
                    points[key] = int(point.value)
    return points


def all_channels_script() -> list[LLMResponse | BaseException]:
    return [
        tool_calls_response(
            [
                ("a", "lookup_account", {"token": SECRET_ARG}),
                ("b", "fetch_record", {"record_id": "r-1"}),
                ("c", "explode", {"reason": "x"}),
            ]
        ),
        text_response("all done"),
    ]


# ==================================================================================== the channels
@pytest.mark.parametrize("registration", REGISTRATIONS)
async def test_tool_arguments_are_recorded_after_redaction(
    registration: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    hooks = wire(registration, make_otel_hooks(capture_content=True), ARG_HOOKS)
    script = [tool_calls_response([("c1", "lookup_account", {"token": SECRET_ARG})]), text_response("found it")]
    provider = await run(script, hooks)
    sent = repr(provider.requests[1].messages)  # flowra itself sent the redacted call back to the model
    assert REDACTED_ARG in sent
    assert SECRET_ARG.split('"', maxsplit=1)[0] not in sent

    assert_no_leak(spans(span_exporter), [SECRET_ARG])
    # Paired positive: the redacted value is what is recorded, on the tool span and in both chats.
    tool = tool_span(span_exporter, "lookup_account")
    assert json_attr(tool, semconv.GEN_AI_TOOL_CALL_ARGUMENTS) == {"token": REDACTED_ARG}
    chat1, chat2 = named(span_exporter, "chat ")
    (output_call,) = parts(json_attr(chat1, semconv.GEN_AI_OUTPUT_MESSAGES), "tool_call")
    assert output_call["arguments"] == {"token": REDACTED_ARG}
    (input_call,) = parts(json_attr(chat2, semconv.GEN_AI_INPUT_MESSAGES), "tool_call")
    assert input_call["arguments"] == {"token": REDACTED_ARG}
    # The ledger names the hook itself, not a propagate_to forwarder.
    assert ledger(tool)[f"{LEDGER_PREFIX}arguments.handlers"] == [
        "tests.hook_registry.test_content_recorded_after_every_hook.redact_arguments"
    ]


@pytest.mark.parametrize("registration", REGISTRATIONS)
async def test_tool_result_is_recorded_after_redaction(
    registration: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    hooks = wire(registration, make_otel_hooks(capture_content=True), RESULT_HOOKS)
    script = [tool_calls_response([("c1", "fetch_record", {"record_id": "r-1"})]), text_response("done")]
    await run(script, hooks)

    assert_no_leak(spans(span_exporter), [SECRET_RESULT])
    expected = f"record r-1: owner password is {REDACTED_RESULT}"
    tool = tool_span(span_exporter, "fetch_record")
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(expected)
    _, chat2 = named(span_exporter, "chat ")
    (response,) = parts(json_attr(chat2, semconv.GEN_AI_INPUT_MESSAGES), "tool_call_response")
    assert response["response"] == expected
    assert ledger(tool)[f"{LEDGER_PREFIX}result.handlers"] == [
        "tests.hook_registry.test_content_recorded_after_every_hook.redact_result"
    ]


@pytest.mark.parametrize("registration", REGISTRATIONS)
async def test_exception_text_is_recorded_after_redaction(
    registration: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    hooks = wire(registration, make_otel_hooks(capture_content=True), RESULT_HOOKS)
    script = [tool_calls_response([("c1", "explode", {"reason": "x"})]), text_response("could not log in")]
    await run(script, hooks)

    assert_no_leak(spans(span_exporter), [SECRET_EXC])
    expected = f"Error: login failed for {REDACTED_EXC}"
    tool = tool_span(span_exporter, "explode")
    assert tool.status.status_code == StatusCode.ERROR
    assert tool.status.description == expected
    assert attrs(tool)[semconv.FLOWRA_TOOL_IS_ERROR] is True
    assert semconv.GEN_AI_TOOL_CALL_RESULT not in attrs(tool)  # an error's text goes in the status
    _, chat2 = named(span_exporter, "chat ")
    (response,) = parts(json_attr(chat2, semconv.GEN_AI_INPUT_MESSAGES), "tool_call_response")
    assert response["response"] == expected


@pytest.mark.parametrize("registration", REGISTRATIONS)
async def test_user_message_is_recorded_after_redaction(
    registration: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    hooks = wire(registration, make_otel_hooks(capture_content=True), USER_HOOKS)
    await run([text_response("noted")], hooks, user_text=USER_TEXT)

    assert_no_leak(spans(span_exporter), [SECRET_USER])
    (chat,) = named(span_exporter, "chat ")
    (text,) = parts(json_attr(chat, semconv.GEN_AI_INPUT_MESSAGES), "text")
    assert text["content"] == f"my password is {REDACTED_USER}"


@pytest.mark.parametrize("registration", REGISTRATIONS)
async def test_all_channels_at_once(
    registration: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """Parallel tool calls, every channel redacted in one run: nothing leaks, everything redacted shows."""
    await run(all_channels_script(), wire(registration, make_otel_hooks(capture_content=True), ALL_HOOKS), USER_TEXT)
    finished = spans(span_exporter)
    assert_no_leak(finished, SECRETS)
    everything = json.dumps([[attrs(s), s.status.description] for s in finished], ensure_ascii=False)
    for value in REDACTED:
        assert value in everything


async def test_without_redaction_hooks_every_secret_is_found(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """The detector's paired positive: the same run without hooks leaks each secret where expected."""
    await run(all_channels_script(), wire(AFTER_PLUGIN, make_otel_hooks(capture_content=True), []), USER_TEXT)
    found = {
        (SECRETS[leak.secret_index], leak.span_name, leak.where) for leak in find_leaks(spans(span_exporter), SECRETS)
    }
    assert {
        (SECRET_ARG, "execute_tool lookup_account", "attribute gen_ai.tool.call.arguments"),
        (SECRET_ARG, "chat sonnet-4-5", "attribute gen_ai.output.messages"),
        (SECRET_ARG, "chat sonnet-4-5", "attribute gen_ai.input.messages"),
        (SECRET_RESULT, "execute_tool fetch_record", "attribute gen_ai.tool.call.result"),
        (SECRET_RESULT, "chat sonnet-4-5", "attribute gen_ai.input.messages"),
        (SECRET_EXC, "execute_tool explode", "status description"),
        (SECRET_EXC, "chat sonnet-4-5", "attribute gen_ai.input.messages"),
        (SECRET_USER, "chat sonnet-4-5", "attribute gen_ai.input.messages"),
        (SECRET_USER, "invoke_agent assistant", "attribute gen_ai.input.messages"),  # the run's input
    } == found
    with pytest.raises(AssertionError, match="secret leak"):
        assert_no_leak(spans(span_exporter), SECRETS)


def redirect_to_safe_lookup(event: Event[BeforeToolCallEvent]) -> None:
    tool_use = event.data.tool_use
    if tool_use.name == "fetch_record":
        event.data.tool_use = dataclasses.replace(tool_use, name="lookup_account", input={"token": REDACTED_ARG})


async def test_a_hook_redirecting_the_call_names_the_tool_that_ran(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    hooks = wire(AFTER_PLUGIN, make_otel_hooks(capture_content=True), [(BeforeToolCallEvent, redirect_to_safe_lookup)])
    await run([tool_calls_response([("c1", "fetch_record", {"record_id": SECRET_ARG})]), text_response("ok")], hooks)

    assert_no_leak(spans(span_exporter), [SECRET_ARG, SECRET_RESULT])  # fetch_record never ran
    (tool,) = named(span_exporter, "execute_tool ")
    assert tool.name == "execute_tool lookup_account"
    assert attrs(tool)[semconv.GEN_AI_TOOL_NAME] == "lookup_account"
    assert json_attr(tool, semconv.GEN_AI_TOOL_CALL_ARGUMENTS) == {"token": REDACTED_ARG}
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("account in eu found")
    chat1, _ = named(span_exporter, "chat ")
    (call,) = parts(json_attr(chat1, semconv.GEN_AI_OUTPUT_MESSAGES), "tool_call")
    assert (call["name"], call["arguments"]) == ("lookup_account", {"token": REDACTED_ARG})


def redact_arguments_in_place(event: Event[BeforeToolCallEvent]) -> None:
    event.data.tool_use.input["token"] = REDACTED_ARG  # mutates the dict; the block stays the same object


@pytest.mark.parametrize("registration", REGISTRATIONS)
async def test_in_place_redaction_of_the_arguments_does_not_leak(
    registration: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """A hook that edits ``tool_use.input`` in place instead of replacing ``tool_use``: values are
    still recorded after it (the ledger, which compares objects, cannot see such an edit)."""
    hooks = wire(
        registration, make_otel_hooks(capture_content=True), [(BeforeToolCallEvent, redact_arguments_in_place)]
    )
    await run([tool_calls_response([("c1", "lookup_account", {"token": SECRET_ARG})]), text_response("ok")], hooks)
    assert_no_leak(spans(span_exporter), [SECRET_ARG])
    assert json_attr(tool_span(span_exporter, "lookup_account"), semconv.GEN_AI_TOOL_CALL_ARGUMENTS) == {
        "token": REDACTED_ARG
    }
    _, chat2 = named(span_exporter, "chat ")
    (call,) = parts(json_attr(chat2, semconv.GEN_AI_INPUT_MESSAGES), "tool_call")
    assert call["arguments"] == {"token": REDACTED_ARG}


# ==================================================================================== raising hooks
@pytest.mark.parametrize("registration", REGISTRATIONS)
@pytest.mark.parametrize("redacted_first", [False, True], ids=["alone", "after_a_redaction"])
async def test_raising_before_tool_hook_records_no_arguments(
    registration: str, redacted_first: bool, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    handlers: Handlers = [*(ARG_HOOKS if redacted_first else []), (BeforeToolCallEvent, failing_hook)]
    hooks = wire(registration, make_otel_hooks(capture_content=True), handlers)
    script = [tool_calls_response([("c1", "lookup_account", {"token": SECRET_ARG})])]
    with pytest.raises(HookFailureError, match="redaction service unavailable"):
        await run(script, hooks)

    finished = spans(span_exporter)
    assert_no_leak(finished, [SECRET_ARG])
    for span in finished:  # neither the secret nor a half-redacted value, nor a ledger
        assert semconv.GEN_AI_TOOL_CALL_ARGUMENTS not in attrs(span)
        assert ledger(span) == {}
    if registration == PREPEND:
        # The hook raised before the plugin's handler ran: the tool call was refused before it
        # was ever announced, so there is no execute_tool span (the tool never ran).
        assert named(span_exporter, "execute_tool ") == []
    else:
        tool = tool_span(span_exporter, "lookup_account")
        assert tool.status.status_code == StatusCode.ERROR
        assert attrs(tool)[semconv.ERROR_TYPE] == f"{__name__}.HookFailureError"
    (chat,) = named(span_exporter, "chat ")
    assert semconv.GEN_AI_OUTPUT_MESSAGES not in attrs(chat)  # the un-hooked tool call stays out too
    (agent,) = named(span_exporter, "invoke_agent ")
    assert agent.status.status_code == StatusCode.ERROR


@pytest.mark.parametrize("registration", REGISTRATIONS)
@pytest.mark.parametrize("redacted_first", [False, True], ids=["alone", "after_a_redaction"])
async def test_raising_after_tool_hook_records_no_result(
    registration: str, redacted_first: bool, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    handlers: Handlers = [*(RESULT_HOOKS if redacted_first else []), (AfterToolCallEvent, failing_hook)]
    hooks = wire(registration, make_otel_hooks(capture_content=True), handlers)
    script = [tool_calls_response([("c1", "fetch_record", {"record_id": "r-1"})])]
    with pytest.raises(HookFailureError, match="redaction service unavailable"):
        await run(script, hooks)

    assert_no_leak(spans(span_exporter), [SECRET_RESULT])
    tool = tool_span(span_exporter, "fetch_record")
    assert semconv.GEN_AI_TOOL_CALL_RESULT not in attrs(tool)
    assert ledger(tool) == {}
    assert tool.status.status_code == StatusCode.ERROR
    assert attrs(tool)[semconv.ERROR_TYPE] == f"{__name__}.HookFailureError"
    (agent,) = named(span_exporter, "invoke_agent ")
    assert agent.status.status_code == StatusCode.ERROR


# ==================================================================================== capture switch
def _assert_no_content(finished: Sequence[ReadableSpan]) -> None:
    for span in finished:
        assert not set(CONTENT_KEYS) & set(attrs(span)), span.name
        # none, or the fixed one of an exception raised in a hook (never what it said)
        assert span.status.description in (None, errors.HOOK_RAISED), span.name


@pytest.mark.parametrize(
    "env",
    [None, "NO_CONTENT", "false", "EVENT_ONLY", "maybe"],
    ids=["unset", "NO_CONTENT", "false", "EVENT_ONLY", "unknown_value"],
)
async def test_capture_off_records_neither_secrets_nor_redacted_values(
    env: str | None, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is None:
        monkeypatch.delenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, raising=False)
    else:
        monkeypatch.setenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, env)
    otel = make_otel_hooks()  # capture_content=None: the environment decides
    assert otel.options.capture_content is False
    await run(all_channels_script(), wire(AFTER_PLUGIN, otel, ALL_HOOKS), USER_TEXT)

    finished = spans(span_exporter)
    assert_no_leak(finished, [*SECRETS, *REDACTED])
    _assert_no_content(finished)
    assert tool_span(span_exporter, "explode").status.status_code == StatusCode.ERROR  # still says it failed
    # The ledger holds no content and is kept with capture off.
    assert ledger(tool_span(span_exporter, "lookup_account"))[f"{LEDGER_PREFIX}fields"] == ["arguments"]
    assert ledger(tool_span(span_exporter, "fetch_record"))[f"{LEDGER_PREFIX}fields"] == ["result"]
    assert ledger(tool_span(span_exporter, "explode"))[f"{LEDGER_PREFIX}fields"] == ["result"]


async def test_capture_false_wins_over_the_environment(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, "true")
    await run(all_channels_script(), wire(AFTER_PLUGIN, make_otel_hooks(capture_content=False), ALL_HOOKS), USER_TEXT)
    finished = spans(span_exporter)
    assert_no_leak(finished, [*SECRETS, *REDACTED])
    _assert_no_content(finished)


async def test_capture_off_keeps_exception_text_out_of_a_raising_hooks_span(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    def leaky_validator(event: Event[BeforeToolCallEvent]) -> None:
        raise HookFailureError(f"refusing token {event.data.tool_use.input['token']}")

    hooks = wire(AFTER_PLUGIN, make_otel_hooks(capture_content=False), [(BeforeToolCallEvent, leaky_validator)])
    with pytest.raises(HookFailureError, match="refusing token"):
        await run([tool_calls_response([("c1", "lookup_account", {"token": SECRET_ARG})])], hooks)
    finished = spans(span_exporter)
    assert_no_leak(finished, [SECRET_ARG])
    _assert_no_content(finished)
    for span in finished:  # the exception event says what type and where, never what it said
        for event in span.events:
            assert "exception.message" not in (event.attributes or {})
            assert "exception.stacktrace" not in (event.attributes or {})


@pytest.mark.parametrize("env", ["SPAN_ONLY", "true", "span_and_event"])
async def test_capture_on_from_the_environment(
    env: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, env)
    otel = make_otel_hooks()
    assert otel.options.capture_content is True
    await run(all_channels_script(), wire(AFTER_PLUGIN, otel, ALL_HOOKS), USER_TEXT)
    assert_no_leak(spans(span_exporter), SECRETS)
    assert json_attr(tool_span(span_exporter, "lookup_account"), semconv.GEN_AI_TOOL_CALL_ARGUMENTS) == {
        "token": REDACTED_ARG
    }


# ==================================================================================== traced once
@pytest.mark.parametrize("same_instance", [True, False], ids=["same_instance", "two_instances"])
async def test_an_event_forwarded_between_two_traced_registries_is_traced_once(
    same_instance: bool, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    child_otel = make_otel_hooks(capture_content=True)
    parent_otel = child_otel if same_instance else make_otel_hooks(capture_content=True)
    parent = HookRegistry()
    parent.add(parent_otel)
    parent.on(AfterToolCallEvent, redact_result)
    child = HookRegistry()
    child.add(child_otel)
    child.propagate_to(parent, only=FORWARDED)
    child.on(BeforeToolCallEvent, redact_arguments)
    script = [
        tool_calls_response([("c1", "fetch_record", {"record_id": SECRET_ARG})]),
        text_response("done"),
    ]
    await run(script, child)

    finished = spans(span_exporter)
    assert [s.name for s in finished] == [
        "invoke_agent assistant",
        "chat sonnet-4-5",
        "execute_tool fetch_record",
        "chat sonnet-4-5",
    ]
    assert_no_leak(finished, [SECRET_ARG, SECRET_RESULT])
    tool = tool_span(span_exporter, "fetch_record")
    assert ledger(tool)[f"{LEDGER_PREFIX}fields"] == ["arguments", "result"]
    assert ledger(tool)[f"{LEDGER_PREFIX}arguments.handlers"] == [
        "tests.hook_registry.test_content_recorded_after_every_hook.redact_arguments"
    ]
    assert ledger(tool)[f"{LEDGER_PREFIX}result.handlers"] == [
        "tests.hook_registry.test_content_recorded_after_every_hook.redact_result"
    ]


# ==================================================================================== ledger
@pytest.mark.parametrize("key", [None, HMAC_KEY, HMAC_KEY.decode()], ids=["no_key", "bytes_key", "str_key"])
async def test_ledger_exact_attributes(
    key: bytes | str | None, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    original_input = {"record_id": SECRET_ARG, "note": "für Ärger"}
    final_input = {"record_id": REDACTED_ARG, "note": "für Ärger"}
    # The tool receives the redacted id; its output carries the result secret.
    original_result = f"record {REDACTED_ARG}: owner password is {SECRET_RESULT}"
    final_result = f"record {REDACTED_ARG}: owner password is {REDACTED_RESULT}"
    hooks = wire(AFTER_PLUGIN, make_otel_hooks(capture_content=True, redaction_hmac_key=key), ALL_HOOKS)
    await run([tool_calls_response([("c1", "fetch_record", original_input)]), text_response("ok")], hooks)

    tool = tool_span(span_exporter, "fetch_record")
    args_canonical = canonical_arguments(original_input)
    # Sorted keys, compact separators, non-ASCII kept, JSON escapes inside the secret:
    assert args_canonical == '{"note":"für Ärger","record_id":"tok-ARG-4f9e\\"q\\\\z"}'
    expected: dict[str, Any] = {
        "flowra.redaction.applied": True,
        "flowra.redaction.fields": ["arguments", "result"],
        "flowra.redaction.arguments.handlers": [
            "tests.hook_registry.test_content_recorded_after_every_hook.redact_arguments"
        ],
        "flowra.redaction.arguments.original_length": len(args_canonical),
        "flowra.redaction.arguments.final_length": len(canonical_arguments(final_input)),
        "flowra.redaction.result.handlers": [
            "tests.hook_registry.test_content_recorded_after_every_hook.redact_result"
        ],
        "flowra.redaction.result.original_length": len(original_result),
        "flowra.redaction.result.final_length": len(final_result),
    }
    if key is not None:
        key_bytes = key.encode() if isinstance(key, str) else key
        expected["flowra.redaction.arguments.original_hmac_sha256"] = hmac.new(
            key_bytes, args_canonical.encode(), hashlib.sha256
        ).hexdigest()
        expected["flowra.redaction.result.original_hmac_sha256"] = hmac.new(
            key_bytes, original_result.encode(), hashlib.sha256
        ).hexdigest()
    assert ledger(tool) == expected
    assert_no_leak(spans(span_exporter), [SECRET_ARG, SECRET_RESULT])


@pytest.mark.parametrize("registration", REGISTRATIONS)
async def test_ledger_names_every_changing_handler_in_order(
    registration: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    hooks = wire(
        registration,
        make_otel_hooks(capture_content=True),
        [(AfterToolCallEvent, redact_result), (AfterToolCallEvent, equal_result), (AfterToolCallEvent, mark_reviewed)],
    )
    await run([tool_calls_response([("c1", "fetch_record", {"record_id": "r-1"})]), text_response("ok")], hooks)
    tool = tool_span(span_exporter, "fetch_record")
    # equal_result replaced the value with an equal one: not a change, not named.
    assert ledger(tool)[f"{LEDGER_PREFIX}result.handlers"] == [
        "tests.hook_registry.test_content_recorded_after_every_hook.redact_result",
        "tests.hook_registry.test_content_recorded_after_every_hook.mark_reviewed",
    ]
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(
        f"record r-1: owner password is {REDACTED_RESULT} (reviewed)"
    )


@pytest.mark.parametrize(
    "handlers",
    [
        [(AfterToolCallEvent, equal_result)],
        [(BeforeToolCallEvent, equal_arguments)],
        [(AfterToolCallEvent, tag_result), (AfterToolCallEvent, untag_result)],
    ],
    ids=["equal_result", "equal_arguments", "changed_then_restored"],
)
async def test_no_ledger_when_the_value_ends_up_equal(
    handlers: Handlers,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    hooks = wire(AFTER_PLUGIN, make_otel_hooks(capture_content=True), handlers)
    await run([tool_calls_response([("c1", "lookup_account", {"token": "t-1"})]), text_response("ok")], hooks)
    tool = tool_span(span_exporter, "lookup_account")
    assert ledger(tool) == {}
    assert redaction_points(metric_reader) == {}
    # Paired positive: the values themselves are recorded, unchanged.
    assert json_attr(tool, semconv.GEN_AI_TOOL_CALL_ARGUMENTS) == {"token": "t-1"}
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("account in eu found")


@pytest.mark.parametrize("capture", [True, False], ids=["capture_on", "capture_off"])
async def test_redactions_metric_counts_by_tool_and_field(
    capture: bool, make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    hooks = wire(AFTER_PLUGIN, make_otel_hooks(capture_content=capture), ALL_HOOKS)
    script = [
        tool_calls_response(
            [
                ("c1", "fetch_record", {"record_id": SECRET_ARG}),
                ("c2", "fetch_record", {"record_id": SECRET_ARG}),
                ("c3", "lookup_account", {"token": SECRET_ARG}),
                ("c4", "lookup_account", {"token": "harmless"}),
            ]
        ),
        text_response("ok"),
    ]
    await run(script, hooks)
    assert redaction_points(metric_reader) == {
        ("fetch_record", "arguments"): 2,
        ("fetch_record", "result"): 2,
        ("lookup_account", "arguments"): 1,
    }


# ==================================================================================== scrubbing
def scrub_city(text: str) -> str:
    return text.replace("Atlantis", "A***s")


async def test_redact_callable_applies_to_every_content_attribute(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    def weather(city: str) -> str:
        """Weather for a city."""
        return f"Sunny in {city}"

    def fail(city: str) -> str:
        """Always fails."""
        raise ToolFailureError(f"no data for {city}")

    otel = make_otel_hooks(capture_content=True, redact=scrub_city)
    provider = ScriptedProvider(
        [
            tool_calls_response([("w", "weather", {"city": "Atlantis"}), ("f", "fail", {"city": "Atlantis"})]),
            text_response("Atlantis is sunny"),
        ]
    )
    async with tool_registry(weather, fail) as tools:
        runtime = tool_loop_runtime(provider, tools, wire(AFTER_PLUGIN, otel, []), system_prompt="You know Atlantis.")
        await _run_tool_loop(runtime, "Weather in Atlantis?")

    finished = spans(span_exporter)
    assert_no_leak(finished, ["Atlantis"])
    chat1, chat2 = named(span_exporter, "chat ")
    scrubbed = {
        "system instructions": attrs(chat1)[semconv.GEN_AI_SYSTEM_INSTRUCTIONS],
        "input messages": attrs(chat1)[semconv.GEN_AI_INPUT_MESSAGES],
        "output messages (tool calls)": attrs(chat1)[semconv.GEN_AI_OUTPUT_MESSAGES],
        "input messages (results)": attrs(chat2)[semconv.GEN_AI_INPUT_MESSAGES],
        "output messages (text)": attrs(chat2)[semconv.GEN_AI_OUTPUT_MESSAGES],
        "tool arguments": attrs(tool_span(span_exporter, "weather"))[semconv.GEN_AI_TOOL_CALL_ARGUMENTS],
        "tool result": attrs(tool_span(span_exporter, "weather"))[semconv.GEN_AI_TOOL_CALL_RESULT],
        "error status": tool_span(span_exporter, "fail").status.description,
    }
    assert {where: "A***s" in str(value) for where, value in scrubbed.items()} == dict.fromkeys(scrubbed, True)


API_KEY = "sk-proj-AbCdEf0123456789XyZ"
EMAIL = "alice.smith@example.com"


def leaky_tool() -> str:
    """Return account details."""
    return f"key {API_KEY} owner {EMAIL}"


@pytest.mark.parametrize(
    ("redact_secrets", "expected"),
    [
        (True, "key [REDACTED:api_key] owner [REDACTED:email]"),
        (["email"], f"key {API_KEY} owner [REDACTED:email]"),
        (("api_key",), f"key [REDACTED:api_key] owner {EMAIL}"),
    ],
    ids=["all", "email_only", "api_key_only"],
)
async def test_redact_secrets_scrubs_api_keys_and_emails(
    redact_secrets: bool | Sequence[str],
    expected: str,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
) -> None:
    otel = make_otel_hooks(capture_content=True, redact_secrets=redact_secrets)
    provider = ScriptedProvider([tool_calls_response([("c1", "leaky_tool", {})]), text_response("ok")])
    async with tool_registry(leaky_tool) as tools:
        await _run_tool_loop(tool_loop_runtime(provider, tools, wire(AFTER_PLUGIN, otel, [])), "details?")
    assert attrs(tool_span(span_exporter, "leaky_tool"))[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(expected)
    _, chat2 = named(span_exporter, "chat ")
    (response,) = parts(json_attr(chat2, semconv.GEN_AI_INPUT_MESSAGES), "tool_call_response")
    assert response["response"] == expected
    scrubbed = [s for s, kept in ((API_KEY, API_KEY in expected), (EMAIL, EMAIL in expected)) if not kept]
    assert_no_leak(spans(span_exporter), scrubbed)


CONTENT_SCHEMAS = dict(
    zip(
        CONTENT_KEYS,
        [
            "input-messages",
            "output-messages",
            "system-instructions",
            "tool-definitions",
            "tool-call-arguments",
            "tool-call-result",
        ],
        strict=True,
    )
)


@pytest.mark.parametrize("limit", [400, 50], ids=["cut_inside", "nothing_fits"])
async def test_max_content_length_truncates_a_huge_tool_output(
    limit: int, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    size = 10_000_000

    def dump() -> str:
        """Return a 10 MB blob."""
        return "x" * size

    otel = make_otel_hooks(capture_content=True, max_content_length=limit)
    provider = ScriptedProvider([tool_calls_response([("c1", "dump", {})]), text_response("ok")])
    async with tool_registry(dump) as tools:
        await _run_tool_loop(tool_loop_runtime(provider, tools, wire(AFTER_PLUGIN, otel, [])), "dump it")

    result = valid("tool-call-result", attrs(tool_span(span_exporter, "dump"))[semconv.GEN_AI_TOOL_CALL_RESULT])
    _, chat2 = named(span_exporter, "chat ")
    (response,) = valid("input-messages", attrs(chat2)[semconv.GEN_AI_INPUT_MESSAGES])[-1]["parts"]
    if limit == 400:  # the text is cut inside {"content": ...} with the marker, in the tool message too
        kept = result["content"].split("…", 1)[0]
        assert kept and set(kept) == {"x"}
        assert result["content"] == kept + TRUNCATION_MARKER.format(dropped=size - len(kept), total=size)
        assert response["type"] == "tool_call_response"
        assert response["response"].startswith("xxx") and response["response"].endswith(f" of {size} chars]")
    else:  # not even the marker fits: a marker object, and the tool message is a marker
        assert result == {OMITTED_KEY: OVER_BUDGET}
        assert response == {"type": "text", "content": MESSAGE_OMITTED}
    # Every content attribute of the run is valid JSON within the limit, the markers included (a
    # limit too tiny for any valid value records markers only, at most HISTORY_FLOOR characters).
    bound = max(limit, HISTORY_FLOOR)
    for span in spans(span_exporter):
        for key in CONTENT_KEYS:
            value = attrs(span).get(key)
            if value is not None:
                assert len(value) <= bound, (span.name, key, len(value))
                valid(CONTENT_SCHEMAS[key], value)


# ==================================================================================== invalid options
@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"redact": "not callable"}, TypeError),
        ({"redact_secrets": "email"}, TypeError),
        ({"redact_secrets": 1}, TypeError),
        ({"redact_secrets": ["ssn"]}, ValueError),
        ({"redact_secrets": ["email", "passport"]}, ValueError),
        ({"max_content_length": 0}, ValueError),
        ({"max_content_length": -5}, ValueError),
        ({"max_content_length": "10"}, TypeError),
        ({"max_content_length": True}, TypeError),
        ({"redaction_hmac_key": b"short"}, ValueError),
        ({"redaction_hmac_key": "short"}, ValueError),
        ({"redaction_hmac_key": 1234567890123456789}, TypeError),
        ({"redaction_hmac_key": bytearray(32)}, TypeError),
        ({"capture_content": "yes"}, ValueError),  # not one of the content modes
        ({"capture_content": 1}, TypeError),
    ],
    ids=lambda v: repr(v) if isinstance(v, dict) else v.__name__,
)
def test_invalid_options_fail_at_construction(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        OtelHooks(**options)


# ==================================================================================== flowra_otel.testing
@pytest.fixture
def own_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def _provider(exporter: InMemorySpanExporter, resource: dict[str, str] | None = None) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create(resource or {}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def test_find_leaks_searches_every_place_a_span_carries_text(own_exporter: InMemorySpanExporter) -> None:
    s = "S3cr3t-value"
    provider = _provider(own_exporter, {"service.name": f"svc-{s}"})
    tracer = provider.get_tracer(f"t-{s}")
    with tracer.start_as_current_span("other") as other:
        other_context = other.get_span_context()
    links = [Link(other_context, {"why": "clean"}), Link(other_context, {"why": f"because {s}"})]
    with tracer.start_as_current_span(f"name {s}", links=links) as span:
        span.set_attribute("plain", f"a {s} b")
        span.set_attribute("array", ["clean", f"x{s}", f"y{s}"])
        span.set_attribute("number", 42)
        span.set_attribute("account", 7358114902)  # a secret number set as an int
        span.set_attribute("flags", [False, True])
        span.set_attribute(f"key.{s}", 1)
        span.add_event(f"event {s}", {"detail": f"has {s}"})
        span.set_status(Status(StatusCode.ERROR, f"failed: {s}"))
    provider.shutdown()

    (target,) = [x for x in own_exporter.get_finished_spans() if x.name != "other"]
    leaks = find_leaks([target], [s])
    assert [leak.where for leak in leaks] == [
        "span name",
        "attribute plain",
        "attribute array",  # once, although two items contain it
        "attribute key",  # a key holds it (its value, 1, does not)
        f"event event {s} name",
        f"event event {s} attribute detail",
        "link 1 attribute why",
        "status description",
        "resource attribute service.name",
        "instrumentation scope name",
    ]
    assert {(leak.span_name, leak.secret_index, leak.decoded) for leak in leaks} == {(f"name {s}", 0, False)}
    assert find_leaks([target], ["not-there"]) == []
    # Numbers and booleans are read as the text a secret would be.
    assert [leak.where for leak in find_leaks([target], ["7358114902", "true"])] == [
        "attribute account",
        "attribute flags",
    ]


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"k": 'quo"te\\d'}),  # escaped quote and backslash
        json.dumps({"k": 'quo"te\\d'}, ensure_ascii=True),
        json.dumps([{"parts": [{"response": json.dumps({"pw": 'quo"te\\d'})}]}]),  # JSON inside JSON
        json.dumps({'quo"te\\d': 1}),  # as a key
        json.dumps('quo"te\\d'),  # a JSON string
    ],
    ids=["escaped", "ascii_escaped", "nested", "key", "bare_string"],
)
def test_find_leaks_sees_secrets_through_json_escaping(text: str, own_exporter: InMemorySpanExporter) -> None:
    secret = 'quo"te\\d'
    assert secret not in text  # only decoding can find it
    provider = _provider(own_exporter)
    with provider.get_tracer("t").start_as_current_span("s") as span:
        span.set_attribute("gen_ai.tool.call.result", text)
    provider.shutdown()
    (leak,) = find_leaks(own_exporter.get_finished_spans(), [secret])
    assert (leak.where, leak.decoded) == ("attribute gen_ai.tool.call.result", True)


def test_find_leaks_sees_non_ascii_secrets_escaped_as_unicode(own_exporter: InMemorySpanExporter) -> None:
    secret = "pässwörd-ü"
    provider = _provider(own_exporter)
    with provider.get_tracer("t").start_as_current_span("s") as span:
        span.set_attribute("a", json.dumps({"x": secret}))  # ensure_ascii: \u00e4...
        span.set_attribute("b", '{"not json": ')  # does not parse: raw text only, no error
    provider.shutdown()
    assert [leak.where for leak in find_leaks(own_exporter.get_finished_spans(), secret)] == ["attribute a"]


def test_assert_no_leak_reports_span_place_and_secret_without_printing_it(own_exporter: InMemorySpanExporter) -> None:
    provider = _provider(own_exporter)
    with provider.get_tracer("t").start_as_current_span("execute_tool lookup") as span:
        span.set_attribute("gen_ai.tool.call.result", "the token is tok-0123456789")
        span.set_attribute("app.debug.dump", "tok-0123456789")
    provider.shutdown()
    finished = own_exporter.get_finished_spans()

    with pytest.raises(AssertionError) as info:
        assert_no_leak(finished, ["harmless-value", "tok-0123456789"])
    message = str(info.value)
    assert "2 secret leak(s)" in message
    assert "span 'execute_tool lookup'" in message
    assert "attribute gen_ai.tool.call.result" in message
    assert "secret #1 ('tok-…', 14 chars)" in message
    assert "tok-0123456789" not in message

    assert_no_leak(finished, ["tok-0123456789"], allowed=["attribute gen_ai.tool.call.result", "attribute app.debug.*"])
    with pytest.raises(AssertionError, match=r"app\.debug\.dump"):
        assert_no_leak(finished, ["tok-0123456789"], allowed=["attribute gen_ai.*"])


def test_assert_no_leak_refuses_to_pass_on_nothing() -> None:
    with pytest.raises(AssertionError, match="no spans"):
        assert_no_leak([], ["x"])


@pytest.mark.parametrize(("secrets", "error"), [([""], ValueError), ([b"bytes"], TypeError)])
def test_find_leaks_rejects_bad_secrets(secrets: list[Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        find_leaks([], secrets)


def test_leak_repr_hides_the_secret() -> None:
    leak = Leak("s", "00", "span name", 0, "very-secret-value")
    assert "very-secret-value" not in repr(leak)
    assert "very-secret-value" not in str(leak)
