"""An MCP server's URL and the app's headers may hold credentials (a user and password or a token
in the URL's user info, an ``api-key`` in its query, an ``Authorization`` header on the
connection): none of them reaches anything the package writes for an MCP call, on a call that
works and on one whose server has gone. Checked with the real ``mcp`` SDK server
(tests/mcp_tool_server.py) and flowra's own MCP client: every attribute, event and status of every
span, every metric point's attributes, and every log record of the package's and OpenTelemetry's
loggers (at DEBUG) are searched for each credential in every form it can take
(``flowra_otel.testing.secret_forms``). The call is traced as usual meanwhile (``server.address``
is the host alone). flowra's own log lines are flowra's, not searched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Final

import pytest
from flowra.tools import mcp_connection
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.testing import secret_forms
from tests import mcp_server_process
from tests.otlp_receiver import OtlpReceiver
from tests.runtime_hooks.mcp_agent_side import mcp_runtime
from tests.runtime_hooks.support import ScriptedProvider, run_turn, text_response, tool_calls_response

ERA: Final = "stateless" if hasattr(mcp_connection, "McpSession") else "handshake"
"""The newest era this flowra's client speaks (stateless from 0.0.77)."""
CREDENTIALS: Final = {
    "user": "mcpuser-Ab12",
    "password": "mcppass-Cd34Ef56",
    "query key": "mcpqkey-Gh78Ij90",
    "header": "mcphdr-Kl12Mn34",
}


def _texts(spans: tuple[ReadableSpan, ...], metrics: InMemoryMetricReader, logs: list[logging.LogRecord]) -> str:
    parts: list[str] = []
    for span in spans:
        parts += [span.name, repr(dict(span.attributes or {})), repr(span.status.description)]
        parts += [f"{e.name} {dict(e.attributes or {})!r}" for e in span.events]
    data = metrics.get_metrics_data()
    for resource_metrics in data.resource_metrics if data is not None else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                parts += [repr(dict(point.attributes or {})) for point in metric.data.data_points]
    parts += [record.getMessage() + repr(record.exc_info) for record in logs]
    return "\n".join(parts)


@pytest.fixture
def package_logs() -> Iterator[list[logging.LogRecord]]:
    """Every record of the package's and OpenTelemetry's loggers, at DEBUG."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.DEBUG)
    loggers = [logging.getLogger(name) for name in ("flowra_otel", "opentelemetry")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


async def _call_forecast(url: str, hooks: OtelHooks, *, stop_server: Callable[[], None]) -> None:
    from flowra.tools import McpConnection

    connection = await McpConnection.connect(url, headers={"Authorization": f"Bearer {CREDENTIALS['header']}"})
    try:
        provider = ScriptedProvider(
            tool_calls_response(("call-1", "forecast", {"city": "Oslo"})),
            text_response("done"),
            tool_calls_response(("call-2", "forecast", {"city": "Bergen"})),
            text_response("done"),
        )
        runtime = mcp_runtime(provider, connection)
        hooks.install(runtime)
        await run_turn(runtime, "weather?", conversation_id="c")
        stop_server()  # the server goes: the next call fails
        with contextlib.suppress(Exception):  # how flowra reports a lost server is its own affair
            await run_turn(runtime, "and now?", conversation_id="c")
    finally:
        await connection.close()


def test_mcp_server_credentials_reach_no_span_metric_or_log(package_logs: list[logging.LogRecord]) -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    metrics = InMemoryMetricReader()
    hooks = OtelHooks(
        tracer_provider=tracer_provider,
        meter_provider=MeterProvider(metric_readers=[metrics]),
        capture_content=True,
        mcp_servers=["127.0.0.1"],
    )
    python = mcp_server_process.mcp_python()
    with OtlpReceiver() as rx, contextlib.ExitStack() as server:
        plain = server.enter_context(mcp_server_process.mcp_server(python, ERA, rx.http_traces_endpoint))
        user_info = f"{CREDENTIALS['user']}:{CREDENTIALS['password']}@"
        credentialed = plain.replace("://", f"://{user_info}") + f"?api-key={CREDENTIALS['query key']}"
        asyncio.run(_call_forecast(credentialed, hooks, stop_server=server.close))
    spans = tuple(exporter.get_finished_spans())
    calls = [s for s in spans if s.name == "execute_tool forecast"]
    written = _texts(spans, metrics, package_logs)
    found = {name: form for name, secret in CREDENTIALS.items() for form in secret_forms(secret) if form in written}
    assert not found, f"credentials written: {found}"
    assert len(calls) == 2 and all((s.attributes or {}).get("server.address") == "127.0.0.1" for s in calls)
