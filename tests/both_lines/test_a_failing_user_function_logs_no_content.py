"""When a function the user gave the plugin raises, its log line names the failure, never the value.

``redact=`` is called on content, and an exception raised there routinely echoes what it was given
(``int("4111 1111 1111 1111")`` raises ``invalid literal for int() with base 10: '4111 1111 1111
1111'``). The value is withheld from the span (``REDACTION_FAILED``), and the plugin's own log
record says which exception type was raised, in which file, line and function: never its message,
never a traceback (whose last line repeats the message), since logs travel further than traces.
The same holds for the other callables that see user values: ``conversation_id=`` (given the
spec's metadata) and ``agent_name=`` / ``provider_name=`` (given a path or model).

The paired negative logs as the plugin did (``exc_info`` on the record) and shows the card
number in the formatted log line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import content, semconv, tool_invocation
from flowra_otel.core.bounded_json import REDACTION_FAILED
from flowra_otel.testing import assert_no_leak
from tests.both_lines.line import MakeHooks, S
from tests.conftest import SpanLedger, secrets_in_logs

CARD = S.CARD

EMAIL = "ada.lovelace@example.com"


def strict_redact(text: str) -> str:
    """A redactor with a bug: it parses every leaf that looks numeric (and raises on a card number)."""
    if any(ch.isdigit() for ch in text):
        return str(int(text))
    return text


def tenant_of(metadata: Mapping[str, Any]) -> str:
    """A conversation-id function with a bug: it raises with the metadata in its message."""
    raise KeyError(f"no tenant in {dict(metadata)}")


def path_name(path: str) -> str:
    raise ValueError(f"no display name for {path!r} (owner {EMAIL})")


async def run(otel: OtelHooks, **metadata: Any) -> None:
    """``card_on_file`` (its result holds a card number) called once, then the answer."""
    assert await S.card_run(otel, **metadata) == "Ok."


def plugin_errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    errors = [r for r in caplog.get_records("call") if r.name.startswith("flowra_otel") and r.levelno >= logging.ERROR]
    caplog.flowra_otel_expected_errors = len(errors)  # type: ignore[attr-defined]  # logged on purpose
    return errors


def formatted(record: logging.LogRecord) -> str:
    """The record as any handler would write it (message, and traceback when it carries one)."""
    return logging.Formatter().format(record)


async def test_a_raising_redactor_is_logged_by_type_and_place_only(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await run(make_otel_hooks(capture_content=True, redact=strict_redact))
    S.assert_all_ended(ledger, span_exporter)
    # The span withholds what the redactor failed on.
    (tool,) = [s for s in span_exporter.get_finished_spans() if s.name == "execute_tool card_on_file"]
    assert REDACTION_FAILED in str((tool.attributes or {})[semconv.GEN_AI_TOOL_CALL_RESULT])
    assert_no_leak(span_exporter.get_finished_spans(), [CARD])

    errors = plugin_errors(caplog)
    assert errors, "a failing redactor must be reported"
    place = f"ValueError at {__file__}:"
    for record in errors:
        line = formatted(record)
        assert record.exc_info is None
        assert place in line and " in strict_redact " in line, line
        assert CARD not in line and "invalid literal" not in line, line


async def test_a_raising_conversation_id_or_name_function_is_logged_by_type_and_place_only(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The metadata a ``conversation_id=`` function is given, and the path an ``agent_name=``
    function is given, stay out of the log; the run is traced without a conversation id and with
    the default agent name."""
    otel = make_otel_hooks(capture_content=False, conversation_id=tenant_of, agent_name=path_name)
    await run(otel, customer_email=EMAIL)
    S.assert_all_ended(ledger, span_exporter)
    spans = span_exporter.get_finished_spans()
    assert all(semconv.GEN_AI_CONVERSATION_ID not in (s.attributes or {}) for s in spans)
    assert {s.name for s in spans if s.name.startswith("invoke_agent")} == {"invoke_agent assistant"}

    lines = [formatted(r) for r in plugin_errors(caplog)]
    assert any(f"KeyError at {__file__}:" in line and " in tenant_of" in line for line in lines), lines
    assert any(f"ValueError at {__file__}:" in line and " in path_name" in line for line in lines), lines
    assert not [line for line in lines if EMAIL in line or "no tenant" in line or "display name" in line]


async def test_logging_the_exception_itself_would_put_the_card_in_the_log(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paired negative: ``content._report`` logging the exception with the record (as it did)."""

    def report_with_exception(failure: BaseException | None, what: str) -> None:
        if failure is not None:
            content.logger.error("flowra_otel: redact= raised on %s", what, exc_info=failure)

    monkeypatch.setattr(content, "_report", report_with_exception)
    await run(make_otel_hooks(capture_content=True, redact=strict_redact))
    lines = [formatted(r) for r in plugin_errors(caplog)]
    assert any("invalid literal for int()" in line and CARD in line for line in lines)
    # The suite's own check (conftest, after every test) sees it too; here it is logged on purpose.
    assert secrets_in_logs(caplog.get_records("call"))
    caplog.flowra_otel_secrets_logged_on_purpose = True  # type: ignore[attr-defined]


def _a_bug_that_echoes_the_result(self: Any, result: Any, *, is_error: bool, error_kind: str | None = None) -> None:
    """A bug inside the plugin whose message echoes the value it was handling (as ``KeyError``,
    ``TypeError`` and friends do)."""
    raise ValueError(f"cannot record {result!r}")


async def test_an_internal_error_is_logged_by_type_and_frames_only(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plugin's own failure (here: recording a tool result) is logged with the exception's
    type and the frames it went through; never its message, which holds the card. The span still
    ends and the agent's answer is unchanged (``run`` checks it)."""
    monkeypatch.setattr(tool_invocation.ToolInvocation, "_apply_result", _a_bug_that_echoes_the_result)
    await run(make_otel_hooks(capture_content=True))
    errors = plugin_errors(caplog)
    assert len(errors) == 1
    line = formatted(errors[0])
    assert errors[0].exc_info is None
    assert "could not record a tool result" in line and "(ValueError <- " in line
    assert f"{tool_invocation.__file__}:" in line and " in _a_bug_that_echoes_the_result" in line
    assert CARD not in line and "cannot record" not in line
    S.assert_all_ended(ledger, span_exporter)


async def test_logging_an_internal_error_with_its_traceback_would_put_the_card_in_the_log(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paired negative: the same failure logged the usual way (``logger.exception``)."""
    monkeypatch.setattr(tool_invocation.ToolInvocation, "_apply_result", _a_bug_that_echoes_the_result)
    monkeypatch.setattr(tool_invocation, "internal_error", tool_invocation.logger.exception)
    await run(make_otel_hooks(capture_content=True))
    assert any(CARD in formatted(r) for r in plugin_errors(caplog))
    assert secrets_in_logs(caplog.get_records("call"))
    caplog.flowra_otel_secrets_logged_on_purpose = True  # type: ignore[attr-defined]
