"""``mcp_servers`` admits a server by the parts of its URL, never by a string prefix: each bypass
a prefix match let through is tried against the real ``mcp`` SDK server (its own process,
tests/mcp_tool_server.py), which records what ``params._meta`` carried. A server the list does
not name starts a trace of its own and gets no ``traceparent``; a listed one, however its URL
spells the host (case, trailing dot, an IPv6 address in brackets), continues the agent's trace.

The matching rules themselves, case by case and with generated URLs, are in
tests/test_mcp_allow_list_rules.py (no server needed); this file proves them on the wire.
Needs ``FLOWRA_OTEL_MCP_PYTHON`` and a flowra whose MCP client sends ``_meta`` (0.0.79+).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests import mcp_server_process
from tests.mcp_server_process import mcp_server
from tests.otlp_receiver import OtlpReceiver, SpanRecord
from tests.runtime_hooks import mcp_workload

pytestmark = pytest.mark.skipif(not mcp_workload.CONTEXT_SENT, reason="this flowra's MCP client sends no _meta")


def _port_of(url: str) -> str:
    return url.rsplit(":", 1)[1].split("/", 1)[0]


# name -> (bind address, the entry for the server's URL, the URL the agent connects to)
Case = tuple[str, Callable[[str], str], Callable[[str], str]]
BYPASSES: Final[dict[str, Case]] = {
    # the entry's host as the URL's user info: the server is 127.0.0.1
    "user-info": ("127.0.0.1", lambda url: "http://mcp.internal", lambda url: url.replace("://", "://mcp.internal@")),
    # the entry's port is a prefix of the server's (4496 of 44965)
    "port-prefix": ("127.0.0.1", lambda url: url.rsplit(":", 1)[0] + ":" + _port_of(url)[:-1], lambda url: url),
    # the entry's host is a prefix of the server's (127.0.0.1 of 127.0.0.12)
    "host-prefix": ("127.0.0.12", lambda url: "http://127.0.0.1", lambda url: url),
    # the entry's path, left again by a dot segment
    "dot-segment": (
        "127.0.0.1",
        lambda url: url.replace("/mcp", "/team-a/"),
        lambda url: url.replace("/mcp", "/team-a/../mcp"),
    ),
}
LISTED: Final[dict[str, Case]] = {
    "host-case-and-trailing-dot": (
        "127.0.0.1",
        lambda url: "LOCALHOST.",
        lambda url: url.replace("127.0.0.1", "localhost"),
    ),
    "url-prefix": ("127.0.0.1", lambda url: url.removesuffix("mcp"), lambda url: url),
    "ipv6-in-brackets": ("::1", lambda url: f"[::1]:{_port_of(url)}", lambda url: url),
    "default-port-explicit": ("127.0.0.1", lambda url: f"127.0.0.1:{_port_of(url)}", lambda url: url),
}


def _wait_for(rx: OtlpReceiver, name: str, kind: str) -> SpanRecord:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = [s for s in rx.spans() if s.name == name and s.kind == kind]
        if found:
            return found[0]
        time.sleep(0.05)
    pytest.fail(f"no {kind} span {name!r} arrived; got {sorted({s.name for s in rx.spans()})}")


def _run(case: Case) -> tuple[SpanRecord, SpanRecord, ReadableSpan, str]:
    """One agent run against a server bound as ``case`` says: (the server's ``tools/call`` span,
    its tool's span, the agent's ``execute_tool`` span, the URL the agent connected to)."""
    host, entry_for, url_for = case
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    python = mcp_server_process.mcp_python()
    with OtlpReceiver() as rx, mcp_server(python, "stateless", rx.http_traces_endpoint, host) as url:
        connect_to = url_for(url)
        asyncio.run(mcp_workload.mcp_tool_run(provider, connect_to, conversation_id="c", mcp_servers=[entry_for(url)]))
        server_span = _wait_for(rx, "tools/call forecast", "SERVER")
        tool_span = _wait_for(rx, "lookup_forecast", "INTERNAL")
    (execute,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool forecast"]
    return server_span, tool_span, execute, connect_to


@pytest.mark.parametrize("name", list(BYPASSES))
def test_a_server_the_list_does_not_name_gets_no_context(name: str) -> None:
    server_span, tool_span, _, connected_to = _run(BYPASSES[name])
    sent = set(tool_span.attributes["request.meta.keys"])  # type: ignore[arg-type]
    assert "traceparent" not in sent and "baggage" not in sent, f"{connected_to} got the context ({name})"
    assert server_span.is_root  # a trace of its own


@pytest.mark.parametrize("name", list(LISTED))
def test_a_listed_server_gets_the_context_however_its_url_spells_it(name: str) -> None:
    server_span, tool_span, execute, connected_to = _run(LISTED[name])
    sent = set(tool_span.attributes["request.meta.keys"])  # type: ignore[arg-type]
    assert "traceparent" in sent, f"{connected_to} got no context ({name})"
    assert execute.context is not None
    assert server_span.trace_id == f"{execute.context.trace_id:032x}"
    assert server_span.parent_span_id == f"{execute.context.span_id:016x}"
