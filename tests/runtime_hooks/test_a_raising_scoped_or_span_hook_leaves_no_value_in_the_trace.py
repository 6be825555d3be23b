"""flowra 0.0.47+: the hooks only this line has, raising with the value they were given.

* An agent-scoped ``AfterToolCallEvent`` hook (``scope=ChatAgent``; on 0.0.47 - 0.0.55 it reaches
  ``emit`` inside flowra's own wrapper) that gives up quoting the result: both spans the run fails
  withhold the message and stack trace, and name the app's hook, not flowra's wrapper
  (``tests/both_lines/test_a_raising_hook_leaves_no_value_in_the_trace.py`` has the global hooks).
* A span hook (``on_span(AgentSpan, ...)``, its enter handler and its exit handler) raising with the
  run's input in its message: flowra catches and logs what a span handler raises, so no span fails
  and the run answers; its message reaches no span either (with capture on the input is recorded
  where content goes, and nowhere else).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from flowra.agent import AgentSpan
from flowra.lib.chat import ChatAgent
from flowra.lib.turn import hook_events as turn_events
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from flowra_otel.testing import assert_no_leak, find_leaks
from tests.both_lines.line import MakeHooks
from tests.both_lines.test_a_raising_hook_leaves_no_value_in_the_trace import ScrubError, assert_failed_in_hook
from tests.conftest import SpanLedger
from tests.runtime_hooks.conftest import assert_all_ended
from tests.runtime_hooks.support import (
    CARD,
    SSN,
    ScriptedProvider,
    chat_runtime,
    get_weather,
    lookup_customer,
    replace_result_text,
    run_chat,
    scoped_hook,
    text_response,
    tool_calls_response,
)

SECRETS = (SSN, CARD)
CONTENT = ("attribute gen_ai.input.messages",)
"""Where the run's input (the card) belongs with capture on: the chat's request."""


def scrub_or_give_up(event: Any) -> None:
    """The app's agent-scoped redaction hook: it gives up on a result with a card number in it."""

    def scrub(text: str) -> str:
        if CARD in text:
            raise ScrubError(f"cannot scrub {text}")
        return text

    event.data.result = replace_result_text(event.data.result, scrub)


def audit_input(event: Any) -> Any:
    """The app's span hook: it raises on entering the run's root agent, and on leaving any other
    agent, quoting the agent's spec (which holds the input)."""
    spec = event.data.spec

    def leaving(error: BaseException | None = None) -> None:
        raise ScrubError(f"cannot audit {spec}")

    if len(event.context.stack) == 1:
        raise ScrubError(f"cannot audit {spec}")
    return leaving


@pytest.mark.parametrize("capture", [True, False], ids=["content_on", "content_off"])
async def test_an_agent_scoped_after_tool_call_hook_raising_with_the_result_in_its_message(
    capture: bool, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider(tool_calls_response(("c1", "lookup_customer", {"name": "Ada"})), text_response("no"))
    runtime = chat_runtime(provider, lookup_customer)
    make_otel_hooks(capture_content=capture).install(runtime)
    scoped_hook(runtime, turn_events.AfterToolCallEvent, scrub_or_give_up, ChatAgent)
    with pytest.raises(ScrubError, match="cannot scrub"):
        await run_chat(runtime, "Look up Ada")

    assert_all_ended(ledger, span_exporter)
    spans = span_exporter.get_finished_spans()
    assert find_leaks(spans, SECRETS) == []
    error_type = f"{ScrubError.__module__}.ScrubError"
    assert_failed_in_hook(spans, error_type, f"{__name__}.scrub_or_give_up", tool="lookup_customer")


@pytest.mark.parametrize("capture", [True, False], ids=["content_on", "content_off"])
async def test_a_span_hook_raising_with_the_input_in_its_message_fails_no_span(
    capture: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = ScriptedProvider(text_response("Sunny."))
    runtime = chat_runtime(provider, get_weather)
    make_otel_hooks(capture_content=capture).install(runtime)
    runtime.hooks.on_span(AgentSpan, audit_input)
    result = await run_chat(runtime, f"Weather? Bill card {CARD}")
    assert result.response == "Sunny."
    # flowra's own log (not the plugin's): both handlers raised, quoting the input
    logged = [r for r in caplog.records if r.name.startswith("flowra.") and r.exc_info]
    assert {r.getMessage() for r in logged} == {"Span enter handler failed", "Span exit handler failed"}
    assert {r.getMessage() for r in logged if CARD in logging.Formatter().format(r)} == {
        "Span enter handler failed",
        "Span exit handler failed",
    }

    assert_all_ended(ledger, span_exporter)
    spans = span_exporter.get_finished_spans()
    assert [s.name for s in spans if s.status.status_code is StatusCode.ERROR or s.events] == []
    if capture:
        assert_no_leak(spans, SECRETS, allowed=CONTENT)
        assert find_leaks(spans, SECRETS), "the input is recorded where content goes"
    else:
        assert find_leaks(spans, SECRETS) == []
