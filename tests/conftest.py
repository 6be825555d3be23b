"""Shared fixtures and span assertions: the real OpenTelemetry SDK with in-memory exporter and
metric reader, and a span ledger that sees every span start and end (each flowra line's own
helpers are in its folder's conftest: ``hook_registry/``, ``runtime_hooks/``). Tests written once
for both lines live in ``both_lines/``: they run the installed line's ``scenarios`` module
(``both_lines/line.py``).

Function-scoped, so every test sees only its own spans and data points. The autouse
``no_internal_errors`` fixture turns any error the plugin logs (and swallows, by design, in
production) into a test failure, so a bug cannot hide behind the never-break-the-host rule; it
also fails a test on an ERROR from ``opentelemetry.context`` ("Failed to detach context"), which
only a plugin that attaches and detaches in different tasks causes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters import flowra_version, line_of
from flowra_otel.core.secret_scan import scan_text
from tests.semconv_conformance import check_metrics, check_spans

pytest_plugins = ("pytester",)  # tests/test_pytest_plugin.py runs a user's test session

# The installed flowra decides which adapter's tests run: each line's tests import its API
# (both_lines/ always runs, on the installed line's scenarios).
_LINE = line_of(flowra_version() or "")
collect_ignore = [name for name in ("hook_registry", "runtime_hooks") if name != _LINE]


@pytest.fixture
def span_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(span_exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
def metric_reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def meter_provider(metric_reader: InMemoryMetricReader) -> Iterator[MeterProvider]:
    provider = MeterProvider(metric_readers=[metric_reader])
    yield provider
    provider.shutdown()


@pytest.fixture
def make_otel_hooks(tracer_provider: TracerProvider, meter_provider: MeterProvider) -> Callable[..., OtelHooks]:
    """``OtelHooks`` wired to this test's SDK providers; keyword options pass through."""

    def make(**options: Any) -> OtelHooks:
        return OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider, **options)

    return make


@pytest.fixture
def otel_hooks(make_otel_hooks: Callable[..., OtelHooks]) -> OtelHooks:
    return make_otel_hooks()


SENTINEL_SECRETS: tuple[str, ...] = (
    "123-45-6789",  # runtime_hooks.support.SSN
    "4111 1111 1111 1111",  # runtime_hooks.support.CARD (and the old line's)
    "4111111111111111",
    'tok-ARG-4f9e"q\\z',  # hook_registry.test_content_recorded_after_every_hook.SECRETS
    'pw-RESULT-81c2"ü',
    "exc-EXC-5d07ab",
    "usr-USER-e3b1\tk9",
    'pin-7731-"Ünï\\q',  # runtime_hooks.test_content_recorded_after_every_hook
    "passport X-7788-\tQ",
    "passport X-7788-SECRET",
    "iban-DE89-3704-SECRET-0044",
    "sk-live-0123456789abcdefSECRET",
    "sk-live-ÄÖ-9f8e7d6c5b4a",
    "sk-live-" + "4f9aQ" * 6,
    "sk-proj-AbCdEf0123456789XyZ",
    "alice.smith@example.com",
    "ada.lovelace@example.com",
    "AKIAIOSFODNN7EXAMPLE",
    'hunter2"\\pässword',
    "-----BEGIN PRIVATE KEY-----",
)
"""Secrets the tests put in tool results, arguments, messages, exceptions and metadata: none may
ever appear in a log record the plugin emits (``no_internal_errors`` checks every test)."""


def secrets_in_logs(records: Iterable[logging.LogRecord]) -> list[tuple[str, str, str]]:
    """(logger, level, which sentinel) for every sentinel secret in the plugin's log records."""
    return [
        (r.name, r.levelname, f"SENTINEL_SECRETS[{finding.index}]")
        for r in records
        if r.name.startswith("flowra_otel")
        for finding in scan_text(_logged_text(r), secrets=SENTINEL_SECRETS)
    ]


def _logged_text(record: logging.LogRecord) -> str:
    """A record as a handler would write it: its message, and the traceback it carries."""
    try:
        return logging.Formatter().format(record)
    except Exception:  # a record whose arguments do not format: its parts, as they are
        return f"{record.msg!r} {record.args!r} {record.exc_info!r}"


@pytest.fixture(autouse=True)
def no_internal_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No internal error logged by the plugin (unless a test says how many it logs on purpose:
    ``caplog.flowra_otel_expected_errors``), none by ``opentelemetry.context``, and no sentinel
    secret in any record the plugin logs, at any level (unless the test logs one on purpose, as a
    paired negative: ``caplog.flowra_otel_secrets_logged_on_purpose = True``)."""
    caplog.set_level(logging.DEBUG, logger="flowra_otel")
    yield
    # The teardown phase has its own records: look at what setup and the test itself logged.
    records = caplog.get_records("setup") + caplog.get_records("call")
    errors = [r for r in records if r.name.startswith("flowra_otel") and r.levelno >= logging.ERROR]
    expected = getattr(caplog, "flowra_otel_expected_errors", 0)
    if len(errors) != expected:
        pytest.fail(f"flowra_otel logged {len(errors)} internal error(s), expected {expected}: {errors}")
    detach = [r for r in records if r.name == "opentelemetry.context" and r.levelno >= logging.ERROR]
    if detach:
        pytest.fail(f"opentelemetry.context logged {len(detach)} error(s): {detach}")
    if not getattr(caplog, "flowra_otel_secrets_logged_on_purpose", False):
        leaked = secrets_in_logs(records)
        if leaked:
            pytest.fail(f"flowra_otel logged a test secret (logger, level, which): {leaked}")


class SpanLedger(SpanProcessor):
    """Sees every span of the tracer provider start and end (exporters only see the end)."""

    def __init__(self) -> None:
        self.started: dict[int, str] = {}
        self.ended: dict[int, str] = {}

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        self.started[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.ended[span.context.span_id] = span.name

    def open_spans(self) -> list[str]:
        return sorted(name for sid, name in self.started.items() if sid not in self.ended)


@pytest.fixture
def ledger(tracer_provider: TracerProvider, caplog: pytest.LogCaptureFixture) -> Iterator[SpanLedger]:
    """A ``SpanLedger`` on the test's tracer provider; fails the test if a span was touched after its end."""
    processor = SpanLedger()
    tracer_provider.add_span_processor(processor)
    yield processor
    # The SDK ignores a second end() or a late attribute (on_end cannot see them) and warns instead.
    twice = [r for r in caplog.records if r.name.startswith("opentelemetry") and "ended span" in r.getMessage()]
    assert twice == []


def wrapped_result(text: str) -> str:
    """``gen_ai.tool.call.result`` of a tool that returned plain text: ``{"content": text}``."""
    return json.dumps({"content": text}, ensure_ascii=False, separators=(",", ":"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "semconv_exempt: the test plants GenAI semconv violations on purpose")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Every span and metric a test produced conforms to the GenAI conventions we target
    (tests/semconv_conformance.py over the vendored model): checked after the test body, before
    the fixtures tear down, so no test can pass while the plugin drifts from the conventions."""
    result = yield  # re-raises if the test failed: nothing more to say then
    if item.get_closest_marker("semconv_exempt") is None:
        funcargs = getattr(item, "funcargs", {})
        exporter = funcargs.get("span_exporter")
        problems = check_spans(exporter.get_finished_spans()) if exporter is not None else []
        if "meter_provider" in funcargs:  # a reader never attached to a provider cannot collect
            problems += check_metrics(funcargs["metric_reader"].get_metrics_data())
        if problems:
            pytest.fail("GenAI semconv violations:\n" + "\n".join(sorted(set(problems))), pytrace=False)
    return result
