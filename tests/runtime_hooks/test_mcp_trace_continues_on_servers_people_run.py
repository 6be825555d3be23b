"""One trace from the agent through MCP servers as people run them: FastMCP 4.x with its native
telemetry, and FastMCP and the ``mcp`` SDK's server under ``opentelemetry-instrument`` (the route
FastMCP's docs recommend for HTTP servers: the Starlette / ASGI instrumentation makes a ``POST /mcp``
SERVER span from the request's HTTP headers before any MCP code runs). Each a real process in its own
venv (tests/mcp_server_process.py), exporting OTLP to the test's receiver, in both protocol eras.

What makes it work: flowra's MCP client sends the ``execute_tool`` span's W3C context in the HTTP
headers too, not only in ``params._meta``. Without the header the ``POST /mcp`` span is a root, and
FastMCP, which reads ``_meta`` only when no span is current, puts ``tools/call`` in that new trace.
Read back here: the server's spans sit under ``execute_tool`` (through ``POST /mcp`` where there is
one: FastMCP's ``tools/call`` under it; the SDK parents its ``tools/call`` on ``_meta`` itself, so it
is a sibling of ``POST /mcp`` under ``execute_tool``), the request carried exactly one
``traceparent`` header, and with opentelemetry-instrumentation-httpx active on the agent side its
CLIENT span is that header's span and the server's HTTP parent. With propagation off, or the server
off the allow-list (one decision for ``_meta`` and headers), or a flowra whose client sends no
context (0.0.56 - 0.0.78), the server keeps a trace of its own.

Needs ``FLOWRA_OTEL_FASTMCP_PYTHON`` (the ``backend-fastmcp`` venv, requirements/fastmcp.lock, built by
``./dev test``; it also runs the SDK's server, whose mcp release it shares); skipped without it on a
developer machine, failed in CI.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from flowra.tools import mcp_connection
from google.protobuf import json_format  # type: ignore[import-untyped]
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

from flowra_otel.adapters.runtime_hooks import mcp_client
from flowra_otel.core import audit
from tests import mcp_server_process
from tests.otlp_receiver import OtlpReceiver, SpanRecord
from tests.runtime_hooks.mcp_agent_side import Telemetry, connected, mcp_runtime, wait_for_spans
from tests.runtime_hooks.support import ScriptedProvider, run_turn, text_response, tool_calls_response

needs_context = pytest.mark.skipif(
    not mcp_client.CALL_TAKES_META, reason="this flowra's MCP client sends no trace context (0.0.79+ does)"
)
ERAS: Final = ["stateless", "handshake"] if hasattr(mcp_connection, "McpSession") else ["handshake"]
"""flowra's client speaks the stateless 2026-07-28 era from 0.0.77; the handshake one on every release."""


@dataclasses.dataclass(frozen=True)
class ServerKind:
    python: Callable[[], str]
    script: Path
    instrument: bool
    http_span: bool
    """``opentelemetry-instrument`` makes a ``POST /mcp`` SERVER span per request."""
    call_under_http_span: bool
    """The server's ``tools/call`` span is a child of ``POST /mcp`` (FastMCP: ``_meta`` is read only
    when no span is current), not of ``execute_tool`` through ``_meta`` (the SDK's middleware)."""


FASTMCP: Final = mcp_server_process.FASTMCP_SERVER_SCRIPT
SDK: Final = mcp_server_process.SERVER_SCRIPT
KINDS: Final = {
    "fastmcp-native": ServerKind(mcp_server_process.fastmcp_python, FASTMCP, False, False, False),
    "fastmcp-instrumented": ServerKind(mcp_server_process.fastmcp_python, FASTMCP, True, True, True),
    "sdk-instrumented": ServerKind(mcp_server_process.fastmcp_python, SDK, True, True, False),
}


@dataclasses.dataclass(frozen=True)
class RunningServer:
    kind: ServerKind
    url: str
    rx: OtlpReceiver


@pytest.fixture(scope="module", params=[(k, e) for k in KINDS for e in ERAS], ids=lambda p: f"{p[0]}-{p[1]}")
def server(request: pytest.FixtureRequest) -> Iterator[RunningServer]:
    """One server process (and the receiver of both sides' spans) for every test of its kind and era."""
    kind = KINDS[request.param[0]]
    python = kind.python()
    with (
        OtlpReceiver() as rx,
        mcp_server_process.mcp_server(
            python, request.param[1], rx.http_traces_endpoint, script=kind.script, instrument=kind.instrument
        ) as url,
    ):
        yield RunningServer(kind, url, rx)


def hex_id(value: int, width: int) -> str:
    return format(value, f"0{width}x")


@dataclasses.dataclass
class Call:
    """One agent run that called ``forecast`` for a city of its own, and what both sides exported."""

    execute: SpanRecord
    """The agent's ``execute_tool forecast``."""
    agent: list[SpanRecord]
    """The agent's spans of its run's trace (with httpx instrumented: its CLIENT spans too)."""
    tool: SpanRecord
    """The tool's own ``lookup_forecast`` span on the server."""
    server: list[SpanRecord]
    """The server's spans of the tool span's trace (the agent's, or one of the server's own)."""

    def named(self, name: str, spans: list[SpanRecord] | None = None) -> list[SpanRecord]:
        return [s for s in (self.server if spans is None else spans) if s.name == name]

    def parent_of(self, span: SpanRecord) -> SpanRecord | None:
        return next((s for s in self.agent + self.server if s.span_id == span.parent_span_id), None)

    def path_up(self, span: SpanRecord) -> list[str]:
        """``span`` and its ancestors' names, up to the root (or a parent that is not here)."""
        names = [span.name]
        parent = self.parent_of(span)
        while parent is not None:
            names.append(parent.name)
            parent = self.parent_of(parent)
        return names


async def call_forecast(server: RunningServer, *, httpx: bool = False, **options: Any) -> Call:
    """One traced run (``options`` for ``OtelHooks``) with opentelemetry-instrumentation-httpx active
    on the agent side when ``httpx``; the run's spans, both sides', once they all arrived."""
    city = f"Tromso-{uuid.uuid4().hex[:8]}-secret"
    telemetry = Telemetry(server.rx)
    instrumentor = HTTPXClientInstrumentor()
    try:
        if httpx:
            instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
        hooks = telemetry.hooks(**options)
        async with connected(server.url) as connection:
            provider = ScriptedProvider(
                tool_calls_response(("call-1", "forecast", {"city": city})), text_response("It is sunny.")
            )
            runtime = mcp_runtime(provider, connection)
            hooks.install(runtime)
            await run_turn(runtime, "What is the weather?")
        telemetry.flush()
        (execute_sdk,) = [s for s in telemetry.memory.get_finished_spans() if s.name == "execute_tool forecast"]
    finally:
        if httpx:
            instrumentor.uninstrument()
        telemetry.shutdown()
    assert execute_sdk.context is not None
    agent_trace = hex_id(execute_sdk.context.trace_id, 32)
    digest = hashlib.sha256(city.encode()).hexdigest()
    (tool,) = wait_for_spans(
        server.rx,
        lambda s: s.name == "lookup_forecast" and s.attributes.get("request.city.sha256") == digest,
        what="lookup_forecast of this call",
    )
    if server.kind.http_span:  # the request's own POST /mcp ends after the tool's span: wait for it too
        wait_for_spans(
            server.rx,
            lambda s: s.name == "POST /mcp" and s.kind == "SERVER" and s.trace_id == tool.trace_id,
            what="POST /mcp of this call",
        )
    spans = server.rx.spans()
    agent = [s for s in spans if s.trace_id == agent_trace and s.resource_attributes.get("service.name") == "agent"]
    (execute,) = [s for s in agent if s.name == "execute_tool forecast"]
    theirs = [s for s in spans if s.trace_id == tool.trace_id and s.resource_attributes.get("service.name") != "agent"]
    return Call(execute, agent, tool, theirs)


def the_tools_call(call: Call) -> SpanRecord:
    (span,) = [
        s for s in call.named("tools/call forecast") if s.kind == "SERVER" and s.span_id == call.tool.parent_span_id
    ]
    return span


@needs_context
@pytest.mark.parametrize("httpx", [False, True], ids=["plain-client", "httpx-instrumented-client"])
async def test_the_server_continues_the_agents_trace(server: RunningServer, httpx: bool) -> None:
    """The server's spans are in the agent's trace, under ``execute_tool`` (through ``POST /mcp``
    where the server has one), and the request carried one ``traceparent`` header: the
    ``execute_tool`` span's, or, with httpx instrumented, its CLIENT span's, which is then the
    server's HTTP parent."""
    call = await call_forecast(server, httpx=httpx)
    assert call.tool.trace_id == call.execute.trace_id
    tools_call = the_tools_call(call)
    (header,) = tuple(call.tool.attributes["request.header.traceparent"])  # type: ignore[arg-type]
    header_parent = str(header).split("-")[2]
    clients = [s for s in call.agent if s.kind == "CLIENT" and s.parent_span_id == call.execute.span_id]
    if httpx:
        (client,) = clients  # the tools/call request's HTTP span, under execute_tool
        assert header_parent == client.span_id
        http_parent = client
    else:
        assert clients == []
        assert header_parent == call.execute.span_id
        http_parent = call.execute
    if server.kind.http_span:
        (post,) = [s for s in call.named("POST /mcp") if s.kind == "SERVER"]
        assert post.parent_span_id == http_parent.span_id
    if server.kind.call_under_http_span:
        assert tools_call.parent_span_id == post.span_id
    else:  # its parent comes from params._meta: the execute_tool span itself
        assert tools_call.parent_span_id == call.execute.span_id
    assert call.path_up(call.tool)[-2:] == ["execute_tool forecast", "invoke_agent assistant"]
    for span in call.server:  # every span the server made for this request is in the agent's trace
        assert span.trace_id == call.execute.trace_id
    # _meta carried the same context (FastMCP does not read it once a span is current: the header did it)
    assert "traceparent" in call.tool.attributes["request.meta.keys"]  # type: ignore[operator]


@pytest.mark.parametrize(
    "options",
    [{"mcp_propagation": False}, {"mcp_servers": ["tools.example.com"]}] if mcp_client.CALL_TAKES_META else [{}],
    ids=["propagation-off", "not-on-the-allow-list"] if mcp_client.CALL_TAKES_META else ["no-context-sent"],
)
async def test_without_context_the_server_keeps_a_trace_of_its_own(
    server: RunningServer, options: dict[str, Any]
) -> None:
    """Propagation off, a server off the allow-list (one decision for ``_meta`` and the headers), or
    a flowra whose client sends no context: no ``traceparent`` in either place, and the server's
    first span (``POST /mcp`` under opentelemetry-instrument, else ``tools/call``) is a root."""
    call = await call_forecast(server, **options)
    assert call.tool.trace_id != call.execute.trace_id
    assert call.tool.attributes["request.header.traceparent"] == ()
    assert "traceparent" not in call.tool.attributes["request.meta.keys"]  # type: ignore[operator]
    first = call.named("POST /mcp")[0] if server.kind.http_span else the_tools_call(call)
    assert first.is_root
    assert call.path_up(call.tool)[-1] == first.name


def traces_file(server: RunningServer, call: Call, path: Path) -> Path:
    """What the receiver got of ``call``'s traces (the agent's and the server's), as the Collector's
    file exporter writes it: one OTLP JSON ``ExportTraceServiceRequest`` per line."""
    wanted = {call.execute.trace_id, call.tool.trace_id}
    with path.open("w", encoding="utf-8") as out:
        for received in server.rx.trace_requests:
            document = json_format.MessageToDict(received.request)
            for resource in document.get("resourceSpans", []):
                for scope in resource.get("scopeSpans", []):
                    scope["spans"] = [s for s in scope.get("spans", []) if base64_hex(s["traceId"]) in wanted]
            out.write(json.dumps(document) + "\n")
    return path


def base64_hex(value: str) -> str:
    return base64.b64decode(value).hex()


@pytest.mark.parametrize("httpx", [False, True], ids=["plain-client", "httpx-instrumented-client"])
async def test_the_audit_counts_one_tool_call_per_mcp_call(server: RunningServer, httpx: bool, tmp_path: Path) -> None:
    """``flowra-otel audit`` over both sides' spans: one MCP call is one tool call (the agent's
    ``execute_tool``); the server's ``tools/call`` span is reported apart, with the tool call it
    continues (none where no context reached the server)."""
    call = await call_forecast(server, httpx=httpx)
    path = traces_file(server, call, tmp_path / "spans.jsonl")
    report = audit.audit_file(path, builtin_patterns=False)
    assert [c.tool_name for c in report.tool_calls] == ["forecast"]
    assert report.tool_calls[0].span_id == call.execute.span_id
    (served,) = report.mcp_server_calls
    assert served.tool_name == "forecast"
    assert served.span_id == the_tools_call(call).span_id
    # on a flowra whose client sends no context, the httpx instrumentation's own header still reaches
    # a server whose HTTP span comes first (and its MCP span under it)
    joined = mcp_client.CALL_TAKES_META or (httpx and server.kind.http_span)
    assert served.continues == (call.execute.span_id if joined else None)
    text = audit.render_text(report)
    assert "tool calls: 1\n" in text and "MCP server spans: 1 " in text
    assert json.loads(audit.render_json(report))["mcp_server_calls"][0]["continues"] == served.continues
