"""The MCP options (``mcp_propagation``, ``mcp_servers``): refused at construction when bad, and
what they let through; ``_meta`` keys flowra or the app set are never replaced."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider

from flowra_otel import OtelHooks
from flowra_otel.core.mcp_invocation import McpPropagation, trace_meta


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
            mine = "00-11111111111111111111111111111111-2222222222222222-01"
            meta = trace_meta(span, {"traceparent": mine, "app.key": 1}, McpPropagation(), "http://h:1/mcp")
            fresh = trace_meta(span, {}, McpPropagation(), "http://h:1/mcp")
            off = trace_meta(span, {"app.key": 1}, McpPropagation(False, None), "http://h:1/mcp")
    finally:
        otel_context.detach(token)
    assert meta["traceparent"] == mine and meta["app.key"] == 1
    assert meta["baggage"] == "tenant=acme"
    assert fresh["traceparent"].split("-")[2] == format(span.get_span_context().span_id, "016x")
    assert set(fresh) <= {"traceparent", "tracestate", "baggage"}
    assert off == {"app.key": 1}
