"""The MCP options (``mcp_propagation``, ``mcp_servers``): refused at construction when bad, and
what they let through; ``_meta`` keys and HTTP headers flowra or the app set are never replaced, and
the one decision per request (``trace_fields``) feeds both."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider

from flowra_otel import OtelHooks
from flowra_otel.core.mcp_invocation import McpPropagation, headers_with, meta_with, trace_fields


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"mcp_propagation": "yes"}, TypeError),
        ({"mcp_propagation": None}, TypeError),
        ({"mcp_servers": "tools.example.com"}, TypeError),
        ({"mcp_servers": 3}, TypeError),
        ({"mcp_servers": ["tools.example.com", ""]}, ValueError),
        ({"mcp_servers": [None]}, ValueError),
    ],
)
def test_bad_mcp_options_are_refused_at_construction(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match="mcp_"):
        OtelHooks(tracer_provider=TracerProvider(), **options)


def test_the_allow_list_matches_host_host_port_and_url_prefix() -> None:
    by_host = McpPropagation.build(True, ["Tools.Example.com"])
    assert by_host.allows("https://tools.example.com/mcp")
    assert not by_host.allows("https://evil.example.org/mcp")
    by_port = McpPropagation.build(True, ["127.0.0.1:8931"])
    assert by_port.allows("http://127.0.0.1:8931/mcp")
    assert not by_port.allows("http://127.0.0.1:8932/mcp")
    by_prefix = McpPropagation.build(True, ["https://tools.example.com/team-a/"])
    assert by_prefix.allows("https://tools.example.com/team-a/mcp")
    assert not by_prefix.allows("https://tools.example.com/team-b/mcp")
    assert McpPropagation.build(True, None).allows("http://anything:1/mcp")
    assert not McpPropagation.build(False, None).allows("http://anything:1/mcp")
    assert OtelHooks(tracer_provider=TracerProvider()).options.mcp == McpPropagation(True, None)


def test_keys_already_in_meta_are_never_replaced_and_baggage_is_the_apps() -> None:
    tracer = TracerProvider().get_tracer("t")
    token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        with tracer.start_as_current_span("execute_tool x") as span:
            fields = trace_fields(span, McpPropagation(), "http://h:1/mcp")
            off = trace_fields(span, McpPropagation(False, None), "http://h:1/mcp")
            elsewhere = trace_fields(span, McpPropagation(True, ("tools.example.com",)), "http://h:1/mcp")
    finally:
        otel_context.detach(token)
    mine = "00-11111111111111111111111111111111-2222222222222222-01"
    meta = meta_with({"traceparent": mine, "app.key": 1}, fields)
    assert meta["traceparent"] == mine and meta["app.key"] == 1
    assert meta["baggage"] == "tenant=acme"
    fresh = meta_with({}, fields)
    assert fresh["traceparent"].split("-")[2] == format(span.get_span_context().span_id, "016x")
    assert set(fresh) <= {"traceparent", "tracestate", "baggage"}
    # one decision for both places: off, or a server off the allow-list, sends nothing anywhere
    assert off == elsewhere == {}
    assert meta_with({"app.key": 1}, off) == {"app.key": 1}
    assert headers_with({"X-App": "1"}, off) == {"X-App": "1"}


def test_headers_carry_the_same_fields_once_and_never_replace_the_apps() -> None:
    fields = {"traceparent": "00-11111111111111111111111111111111-2222222222222222-01", "baggage": "tenant=acme"}
    assert headers_with({}, fields) == fields
    # an app's own header wins, whatever its case: one traceparent per request, never two
    mine = {"TraceParent": "00-33333333333333333333333333333333-4444444444444444-01"}
    assert headers_with(mine, fields) == {**mine, "baggage": "tenant=acme"}
    # a field the transport owns or HTTP cannot carry is left out (the request is never refused for it)
    odd = {"Mcp-Session-Id": "x", "Content-Type": "text/plain", "bad name": "v", "baggage": "caf\u00e9"}
    assert headers_with({}, odd) == {}
    # nor does a propagator ever write into the protocol's own _meta keys
    assert meta_with({}, {"io.modelcontextprotocol/protocolVersion": "x", "traceparent": "t"}) == {"traceparent": "t"}
