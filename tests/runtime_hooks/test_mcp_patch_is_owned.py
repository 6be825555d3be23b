"""The MCP client patch (``mcp_client``) is owned like the ``emit`` patch: held by every adapter
that needs it (the app's ``OtelHooks``, the zero-code instrumentor's), put back when the last
live owner lets go. So ``FlowraInstrumentor().uninstrument()`` never switches off the MCP tracing
of an ``OtelHooks`` the app installed itself, and flowra's own functions come back exactly when
no tracing needs them. No MCP server needed: what is checked is which functions the class holds.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import emit_patch, mcp_client
from flowra_otel.instrumentor import FlowraInstrumentor

pytestmark = pytest.mark.skipif(not mcp_client.HAS_MCP_CLIENT, reason="this flowra has no MCP client")

PATCHED = ("call_tool", "_McpConnection__jsonrpc_post", "_McpConnection__jsonrpc_notify", "close")


def flowra_functions() -> dict[str, Any]:
    from flowra.tools.mcp_connection import McpConnection

    return {name: McpConnection.__dict__[name] for name in PATCHED}


def unwrapped(members: dict[str, Any]) -> dict[str, Any]:
    """The functions themselves (a classmethod compared by the function it holds)."""
    return {name: getattr(member, "__func__", member) for name, member in members.items()}


@pytest.fixture
def own_functions() -> Iterator[dict[str, Any]]:
    """flowra's own functions (earlier tests' OtelHooks patched them: undo that first), and the
    process left patched again afterwards, as the tests after these expect."""
    was = emit_patch.installed(), mcp_client.installed()
    mcp_client.uninstall()
    assert not mcp_client.installed()
    yield unwrapped(flowra_functions())
    if was[0]:
        emit_patch.install()
    if was[1]:
        mcp_client.install()


def test_uninstrument_keeps_the_apps_own_mcp_tracing(
    own_functions: dict[str, Any], tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> None:
    """The paired negative of the round trip below: with an app's OtelHooks alive, the
    instrumentor's ``uninstrument()`` leaves the patch in place (an unowned patch would have put
    flowra's functions back and silently ended the app's MCP tracing)."""
    instrumentor = FlowraInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    app_hooks = OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider)
    assert mcp_client.installed()
    instrumentor.uninstrument()
    assert mcp_client.installed()
    patched = unwrapped(flowra_functions())
    expected = PATCHED if mcp_client.REQUESTS_OBSERVABLE else ("call_tool",)
    assert all(patched[name] is not own_functions[name] for name in expected)
    del app_hooks


def test_the_last_owner_puts_flowras_own_functions_back(
    own_functions: dict[str, Any], tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> None:
    instrumentor = FlowraInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    app_hooks = OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider)
    OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider)  # dropped at once
    del app_hooks
    gc.collect()  # the app dropped its OtelHooks: only the instrumentor's adapter holds the patch
    assert mcp_client.installed()
    instrumentor.uninstrument()
    assert not mcp_client.installed()
    assert unwrapped(flowra_functions()) == own_functions
    # and a new OtelHooks patches again, once
    again = OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider)
    first = unwrapped(flowra_functions())
    OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider)
    assert unwrapped(flowra_functions()) == first != own_functions
    del again
