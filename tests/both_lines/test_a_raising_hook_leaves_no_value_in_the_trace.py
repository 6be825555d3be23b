"""An exception raised in one of the app's hooks reaches the trace without its message or stack trace.

A redaction hook that gives up says so with the value it was given: ``ValueError(f"cannot scrub
{text}")``, or Python's own ``int("4111 ...")`` (``invalid literal for int() with base 10: '...
4111 1111 1111 1111'``), or a ``RuntimeError`` raised ``from`` either (the cause's text is in the
stack trace). That value is one no hook finished with: unredacted content, which capture on or off
must not reach the trace. So the ``execute_tool`` and ``invoke_agent`` spans such an exception
fails keep ``error.type`` (its class), the ERROR status with a fixed description
(``errors.HOOK_RAISED``), and an ``exception`` event with ``exception.type``, the hook's name and
where it raised; never ``exception.message`` or ``exception.stacktrace``. Checked on the spans
(``find_leaks``: every encoded form of the SSN and card number), on the OTLP/HTTP requests a real
receiver got, and on the duration metrics (``error.type`` only). The exception itself reaches the
app unchanged.

The hooks: an ``AfterToolCallEvent`` hook rewriting the tool's result (``customer_run``'s
``mask``), and a ``BeforeToolCallEvent`` hook given arguments that hold the card (registered
after the plugin, and on 0.0.3 - 0.0.8 before it too). A span hook (0.0.47+ ``on_span``) never
fails a span: flowra catches and logs what it raises.

The paired negative treats every exception as the tool's own (no hook boundary found): the card
number and SSN are then on both spans, in the message, the stack trace and the status.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, cast

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from flowra_otel.core import errors, semconv
from flowra_otel.core.testing import secret_forms
from flowra_otel.testing import find_leaks
from tests.both_lines.line import MakeHooks, S
from tests.conftest import SpanLedger
from tests.otlp_receiver import OtlpReceiver

SSN, CARD = S.SSN, S.CARD
SECRETS = (SSN, CARD)
CITY = f"Oslo, billed to card {CARD}"
"""The weather call's argument: the card, for the BeforeToolCallEvent hook to fail on."""


# --------------------------------------------------------------------------- the hooks' failures
class ScrubError(Exception):
    """What the app's scrubber raises when it gives up (with the value in its message)."""


def says_the_value(text: str) -> str:
    raise ScrubError(f"cannot scrub {text}")


def parses_the_value(text: str) -> str:
    """Python's own error echoes the value: ``invalid literal for int() with base 10: '...'``."""
    return str(int(text))


def wraps_the_failure(text: str) -> str:
    """A fixed message of its own, the value in the cause (in the stack trace)."""
    try:
        return str(int(text))
    except ValueError as exc:
        raise RuntimeError("scrubber failed") from exc


FAILURES: dict[str, tuple[Callable[[str], str], str]] = {
    "its_message": (says_the_value, f"{__name__}.ScrubError"),
    "pythons_message": (parses_the_value, "ValueError"),
    "its_cause": (wraps_the_failure, "RuntimeError"),
}


def refuse_arguments(event: Any) -> None:
    """The app's BeforeToolCallEvent hook: it refuses arguments it cannot scrub, quoting them."""
    raise ScrubError(f"cannot scrub the arguments {event.data.tool_use.input}")


# --------------------------------------------------------------------------------- plumbing
@pytest.fixture
def receiver(tracer_provider: TracerProvider) -> Iterator[OtlpReceiver]:
    """The test's spans also go over OTLP/HTTP to a real receiver."""
    with OtlpReceiver() as rx:
        tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=rx.http_traces_endpoint)))
        yield rx


def wire_leaks(receiver: OtlpReceiver, count: int) -> list[str]:
    """The secrets (any encoded form) in the OTLP requests the receiver got, once all ``count`` spans came."""
    assert len(receiver.wait_for_spans(count)) == count
    sent = b"".join(r.request.SerializeToString() for r in receiver.trace_requests)
    return [s for s in SECRETS if any(form.encode() in sent for form in secret_forms(s))]


def metric_error_types(reader: InMemoryMetricReader) -> set[str]:
    data = reader.get_metrics_data()
    return {
        str(point.attributes[semconv.ERROR_TYPE])
        for rm in (data.resource_metrics if data is not None else ())
        for sm in rm.scope_metrics
        for metric in sm.metrics
        for point in getattr(metric.data, "data_points", ())
        if point.attributes and semconv.ERROR_TYPE in point.attributes
    }


def assert_failed_in_hook(spans: tuple[ReadableSpan, ...], error_type: str, hook: str, *, tool: str | None) -> None:
    """Every failed span says what failed and in which hook, never what the exception said."""
    failed = {s.name: s for s in spans if s.status.status_code is StatusCode.ERROR}
    expected = {"invoke_agent assistant", *([f"execute_tool {tool}"] if tool else [])}
    assert expected <= set(failed), sorted(failed)
    for span in failed.values():
        assert span.status.description == errors.HOOK_RAISED, span.name
        assert (span.attributes or {})[semconv.ERROR_TYPE] == error_type, span.name
        (event,) = [e for e in span.events if e.name == "exception"]
        attrs = dict(event.attributes or {})
        where = str(attrs.pop(errors.EXCEPTION_LOCATION))
        assert ".py:" in where and " in " in where, where
        assert attrs == {"exception.type": error_type, errors.EXCEPTION_HOOK: hook}, span.name


# ------------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("capture", [True, False], ids=["content_on", "content_off"])
async def test_an_after_tool_call_hook_raising_with_the_result_in_its_message(
    failure: str,
    capture: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
    receiver: OtlpReceiver,
) -> None:
    mask, error_type = FAILURES[failure]
    with pytest.raises(Exception) as raised:
        await S.customer_run(make_otel_hooks(capture_content=capture), S.answer("never"), mask=mask)
    assert CARD in "".join(str(e) for e in (raised.value, raised.value.__cause__) if e)  # the app's, unchanged

    S.assert_all_ended(ledger, span_exporter)
    spans = span_exporter.get_finished_spans()
    assert find_leaks(spans, SECRETS) == []
    assert wire_leaks(receiver, len(spans)) == []
    hook = f"{cast(ModuleType, S).__name__}.customer_run.<locals>.masked_result"  # the line's scenarios
    assert_failed_in_hook(spans, error_type, hook, tool="lookup_customer")
    assert metric_error_types(metric_reader) == {error_type}


@pytest.mark.parametrize("handlers_first", S.HOOK_ORDERS, ids=lambda first: "before" if first else "after")
@pytest.mark.parametrize("capture", [True, False], ids=["content_on", "content_off"])
async def test_a_before_tool_call_hook_raising_with_the_arguments_in_its_message(
    handlers_first: bool,
    capture: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    receiver: OtlpReceiver,
) -> None:
    """Registered after the plugin, and (0.0.3 - 0.0.8) before it: no value of the arguments the
    hook refused, neither on the spans it failed nor on the chat whose response asked for them."""
    otel = make_otel_hooks(capture_content=capture)
    with pytest.raises(ScrubError, match="cannot scrub the arguments"):
        await S.tool_hook_run(
            otel, ("c1", "get_weather", {"city": CITY}), handlers=[refuse_arguments], handlers_first=handlers_first
        )

    S.assert_all_ended(ledger, span_exporter)
    spans = span_exporter.get_finished_spans()
    assert find_leaks(spans, SECRETS) == []
    assert wire_leaks(receiver, len(spans)) == []
    assert_failed_in_hook(spans, f"{__name__}.ScrubError", f"{__name__}.refuse_arguments", tool=None)


async def test_treated_as_the_tools_own_the_exception_puts_the_value_on_both_spans(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paired negative: no exception is taken as raised in a hook; with content on, its message,
    stack trace and status description carry the card number and SSN on both spans."""
    monkeypatch.setattr(errors, "_raised_in_hook", lambda exc: None)
    with pytest.raises(ScrubError):
        await S.customer_run(make_otel_hooks(capture_content=True), S.answer("never"), mask=says_the_value)
    places = {(leak.span_name, leak.where) for leak in find_leaks(span_exporter.get_finished_spans(), SECRETS)}
    for span in ("invoke_agent assistant", "execute_tool lookup_customer"):
        assert {
            (span, "status description"),
            (span, "event exception attribute exception.message"),
            (span, "event exception attribute exception.stacktrace"),
        } <= places, sorted(places)
