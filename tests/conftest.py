"""Shared fixtures: the real OpenTelemetry SDK with in-memory exporter and metric reader.

Function-scoped, so every test sees only its own spans and data points. The autouse
``no_internal_errors`` fixture turns any error the plugin logs (and swallows, by design, in
production) into a test failure, so a bug cannot hide behind the never-break-the-host rule.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks


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


@pytest.fixture(autouse=True)
def no_internal_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.WARNING, logger="flowra_otel")
    yield
    # The teardown phase has its own records: look at what setup and the test itself logged.
    records = caplog.get_records("setup") + caplog.get_records("call")
    errors = [r for r in records if r.name.startswith("flowra_otel") and r.levelno >= logging.ERROR]
    expected = getattr(caplog, "flowra_otel_expected_errors", 0)
    if len(errors) != expected:
        pytest.fail(f"flowra_otel logged {len(errors)} internal error(s), expected {expected}: {errors}")
