"""``mcp_servers`` admits a server by the parts of its URL, never by a string prefix: each bypass
a prefix match let through is tried against real servers (their own processes): the ``mcp`` SDK's
server run plainly (tests/mcp_tool_server.py), the same server and FastMCP's
(tests/fastmcp_tool_server.py) under ``opentelemetry-instrument``, whose ASGI span is made from the
HTTP headers. Each records what the request carried, in ``params._meta`` and in its ``traceparent``
and ``baggage`` headers. A server the list does not name gets neither (one decision covers both:
``trace_fields``) and its spans make a trace of their own; a listed one, however its URL spells the
host (case, trailing dot, an IPv6 address in brackets), gets both and continues the agent's trace.

The matching rules themselves, case by case and with generated URLs, are in
tests/test_mcp_allow_list_rules.py (no server needed); this file proves them on the wire.
Needs ``FLOWRA_OTEL_MCP_PYTHON`` and ``FLOWRA_OTEL_FASTMCP_PYTHON``, and a flowra whose MCP client
sends ``_meta`` and headers (0.0.79+).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest
from opentelemetry import baggage
from opentelemetry import context as otel_context
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
# name -> (the server venv's python, the server script, under opentelemetry-instrument)
Server = tuple[Callable[[], str], Path, bool]
SERVERS: Final[dict[str, Server]] = {
    "sdk": (mcp_server_process.mcp_python, mcp_server_process.SERVER_SCRIPT, False),
    "sdk-instrumented": (mcp_server_process.fastmcp_python, mcp_server_process.SERVER_SCRIPT, True),
    "fastmcp-instrumented": (mcp_server_process.fastmcp_python, mcp_server_process.FASTMCP_SERVER_SCRIPT, True),
}
APP_BAGGAGE: Final = "tenant=acme"
TRACE_KEYS: Final = frozenset({"traceparent", "tracestate", "baggage"})


def _wait_for(rx: OtlpReceiver, name: str) -> SpanRecord:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = [s for s in rx.spans() if s.name == name]
        if found:
            return found[0]
        time.sleep(0.05)
    pytest.fail(f"no span {name!r} arrived; got {sorted({s.name for s in rx.spans()})}")


def _run(case: Case, server: Server) -> tuple[SpanRecord, ReadableSpan, str]:
    """One agent run (the app's baggage set) against ``server`` bound as ``case`` says: (its
    tool's span, which records what the request carried; the agent's ``execute_tool`` span; the
    URL the agent connected to)."""
    host, entry_for, url_for = case
    python, script, instrument = server
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with (
        OtlpReceiver() as rx,
        mcp_server(python(), "stateless", rx.http_traces_endpoint, host, script=script, instrument=instrument) as url,
    ):
        connect_to = url_for(url)
        token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
        try:
            asyncio.run(
                mcp_workload.mcp_tool_run(provider, connect_to, conversation_id="c", mcp_servers=[entry_for(url)])
            )
        finally:
            otel_context.detach(token)
        tool_span = _wait_for(rx, "lookup_forecast")
    (execute,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool forecast"]
    return tool_span, execute, connect_to


def _sent(tool_span: SpanRecord) -> dict[str, object]:
    """What the request carried: the trace keys of ``_meta`` (beside the protocol's own) and its
    baggage, the two headers."""
    return {
        "meta.keys": TRACE_KEYS & set(tool_span.attributes["request.meta.keys"]),  # type: ignore[arg-type]
        "meta.baggage": tool_span.attributes["request.meta.baggage"],
        "header.traceparent": list(tool_span.attributes["request.header.traceparent"]),  # type: ignore[arg-type]
        "header.baggage": list(tool_span.attributes["request.header.baggage"]),  # type: ignore[arg-type]
    }


@pytest.mark.parametrize("server", list(SERVERS))
@pytest.mark.parametrize("name", list(BYPASSES))
def test_a_server_the_list_does_not_name_gets_no_context(name: str, server: str) -> None:
    tool_span, execute, connected_to = _run(BYPASSES[name], SERVERS[server])
    sent = _sent(tool_span)
    assert sent == {"meta.keys": set(), "meta.baggage": "", "header.traceparent": [], "header.baggage": []}, (
        f"{connected_to} got the context ({name}, {server}): {sent}"
    )
    assert execute.context is not None
    assert tool_span.trace_id != f"{execute.context.trace_id:032x}"  # a trace of its own


@pytest.mark.parametrize("server", list(SERVERS))
@pytest.mark.parametrize("name", list(LISTED))
def test_a_listed_server_gets_the_context_however_its_url_spells_it(name: str, server: str) -> None:
    tool_span, execute, connected_to = _run(LISTED[name], SERVERS[server])
    sent = _sent(tool_span)
    assert execute.context is not None
    traceparent = f"00-{execute.context.trace_id:032x}-{execute.context.span_id:016x}-{execute.context.trace_flags:02x}"
    assert sent == {
        "meta.keys": {"traceparent", "baggage"},
        "meta.baggage": APP_BAGGAGE,
        "header.traceparent": [traceparent],
        "header.baggage": [APP_BAGGAGE],
    }, f"{connected_to} did not get the context in both places ({name}, {server}): {sent}"
    assert tool_span.trace_id == f"{execute.context.trace_id:032x}"  # the agent's trace continues
