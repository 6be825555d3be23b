"""The agent side of the end-to-end MCP tests (tests/runtime_hooks/test_mcp_*.py): the agent's real
SDK and OTLP/HTTP exporters to the test's receiver (``Telemetry``), flowra's own MCP client
(``connected``), a ``TurnAgent`` whose tools are the server's (``mcp_runtime``), and waiting for a
span by name. Flowra 0.0.56+ (the MCP client); the servers are tests/mcp_server_process.py's.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from flowra.agent import AgentRuntime
from flowra.lib.turn import TurnAgent, TurnConfig
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from tests.conftest import SpanLedger
from tests.otlp_receiver import OtlpReceiver, SpanRecord
from tests.runtime_hooks.support import ScriptedProvider, llm_config, provider_services, system
from tests.semconv_conformance import check_metrics, check_spans


class Telemetry:
    """The agent side's real SDK and OTLP/HTTP exporters, to the test's receiver."""

    def __init__(self, rx: OtlpReceiver) -> None:
        self.tracer_provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=rx.http_traces_endpoint)))
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=rx.http_metrics_endpoint), export_interval_millis=3_600_000
        )
        self.memory = InMemorySpanExporter()  # the same spans, for the conformance checker
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.ledger = SpanLedger()  # every span that started, ended or not
        self.tracer_provider.add_span_processor(self.ledger)
        self.metrics = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[reader, self.metrics])

    def conformance_problems(self) -> list[str]:
        return check_spans(self.memory.get_finished_spans()) + check_metrics(self.metrics.get_metrics_data())

    def hooks(self, **options: Any) -> OtelHooks:
        return OtelHooks(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options)

    def flush(self) -> None:
        assert self.tracer_provider.force_flush(10_000)
        assert self.meter_provider.force_flush(10_000)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@contextlib.asynccontextmanager
async def connected(url: str) -> AsyncIterator[Any]:
    from flowra.tools import McpConnection

    connection = await McpConnection.connect(url)
    try:
        yield connection
    finally:
        await connection.close()


def mcp_runtime(provider: ScriptedProvider, connection: Any) -> AgentRuntime:
    """A ``TurnAgent`` whose tools are the MCP server's (flowra's ``snapshot()`` registry)."""
    turn = TurnConfig(llm_config=llm_config(provider), system=system(), history=[], tools=connection.snapshot())
    return AgentRuntime(agents={"assistant": TurnAgent}, services={TurnConfig: turn, **provider_services(provider)})


def wait_for_spans(
    rx: OtlpReceiver, wanted: Callable[[SpanRecord], bool], *, what: str = "", timeout: float = 15.0
) -> list[SpanRecord]:
    """The spans ``rx`` received that are ``wanted``, once there is one (fails after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [s for s in rx.spans() if wanted(s)]
        if found:
            return found
        time.sleep(0.05)
    pytest.fail(f"no span {what or 'wanted'} arrived; got {sorted({s.name for s in rx.spans()})}")


def wait_for_named(rx: OtlpReceiver, name: str, timeout: float = 15.0) -> list[SpanRecord]:
    return wait_for_spans(rx, lambda s: s.name == name, what=repr(name), timeout=timeout)


__all__ = ["Telemetry", "connected", "mcp_runtime", "wait_for_named", "wait_for_spans"]
