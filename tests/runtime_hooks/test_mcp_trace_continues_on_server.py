"""One trace from the agent to a real MCP server: flowra's own MCP client sends the
``execute_tool`` span's W3C context in ``params._meta``, and the ``mcp`` SDK's server (its own
process and venv, tests/mcp_tool_server.py) continues it: ``invoke_agent`` -> ``execute_tool``
(with the MCP attributes, as the conventions' MCP page asks of an outer GenAI instrumentation) ->
the server's SERVER span ``tools/call forecast`` -> the tool's own ``lookup_forecast`` span, all
read back from a real OTLP export. Both protocol eras: the stateless ``2026-07-28`` one and the
handshake one (``Mcp-Session-Id``). Also the failure paths, each classified per the MCP page (a
JSON-RPC error by its code, an HTTP 500 by its status, a tool error as ``tool_error``, a server
that went down, a cancelled call): every span ends and the agent's result is what it would be
untraced. ``mcp.client.session.duration`` for handshake-era sessions. On the releases whose client
sends no ``_meta`` (0.0.56 - 0.0.78) the attributes and metrics are there and the server starts
a trace of its own; those releases' client speaks only the handshake era up to 0.0.76.

Needs ``FLOWRA_OTEL_MCP_PYTHON`` (the python of the ``backend-mcp`` venv, built by ``./dev test`` from
requirements/mcp.lock); skipped without it on a developer machine, failed in CI on a home release.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any, Final

import pytest
from flowra.lib.turn import TurnAgent, TurnSpec
from flowra.tools import mcp_connection
from opentelemetry import baggage
from opentelemetry import context as otel_context

from flowra_otel.adapters.runtime_hooks import mcp_client
from tests import mcp_server_process
from tests.mcp_server_process import mcp_server
from tests.otlp_receiver import OtlpReceiver, SpanRecord
from tests.runtime_hooks.mcp_agent_side import Telemetry, connected, mcp_runtime, wait_for_named
from tests.runtime_hooks.support import (
    ScriptedProvider,
    run_turn,
    text_response,
    tool_calls_response,
)

needs_meta = pytest.mark.skipif(not mcp_client.CALL_TAKES_META, reason="this flowra's MCP client sends no _meta")

STATELESS_CLIENT: Final = hasattr(mcp_connection, "McpSession")
"""flowra's client speaks the stateless 2026-07-28 era too (0.0.77 and later)."""
ERAS: Final = ["stateless", "handshake"] if STATELESS_CLIENT else ["handshake"]
DEFAULT_ERA: Final = ERAS[0]
REFUSED_CODE: Final = "-32050"
"""tests/mcp_tool_server.py's JSON-RPC error code for ``refused``."""

SECRET: Final = "Oslo-4711-secret"
"""A tool argument: it must reach the server as the argument and nowhere else."""


@pytest.fixture
def mcp_python() -> str:
    return mcp_server_process.mcp_python()


def forecast_script(tool: str = "forecast") -> ScriptedProvider:
    return ScriptedProvider(tool_calls_response(("call-1", tool, {"city": SECRET})), text_response("It is sunny."))


async def run_agent(url: str, telemetry: Telemetry | None, tool: str = "forecast", **options: Any) -> Any:
    # the OtelHooks first: the patch is in place when the connection's session starts
    hooks = telemetry.hooks(**options) if telemetry is not None else None
    async with connected(url) as connection:
        runtime = mcp_runtime(forecast_script(tool), connection)
        if hooks is not None:
            hooks.install(runtime)
        return await run_turn(runtime, "What is the weather?")


@needs_meta
@pytest.mark.parametrize(("era", "version"), [("stateless", "2026-07-28"), ("handshake", None)])
async def test_one_trace_from_the_agent_through_the_mcp_server(mcp_python: str, era: str, version: str | None) -> None:
    with OtlpReceiver() as rx, mcp_server(mcp_python, era, rx.http_traces_endpoint) as url:
        telemetry = Telemetry(rx)
        try:
            token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
            try:
                result = await run_agent(url, telemetry)
            finally:
                otel_context.detach(token)
            telemetry.flush()
            (tool_span,) = wait_for_named(rx, "lookup_forecast")
            (server_span,) = [s for s in wait_for_named(rx, "tools/call forecast") if s.kind == "SERVER"]
            points = rx.wait_for_metric_points("mcp.client.operation.duration")
            assert telemetry.conformance_problems() == []
        finally:
            telemetry.shutdown()
    agent_spans = [s for s in rx.spans() if s.resource_attributes.get("service.name") == "agent"]
    (invoke,) = [s for s in agent_spans if s.name.startswith("invoke_agent")]
    (execute,) = [s for s in agent_spans if s.name == "execute_tool forecast"]
    # one trace, with the right parents, across the process boundary
    assert invoke.is_root
    assert execute.trace_id == invoke.trace_id == server_span.trace_id == tool_span.trace_id
    assert server_span.parent_span_id == execute.span_id
    assert tool_span.parent_span_id == server_span.span_id
    # what _meta carried: the W3C keys (flowra's own protocol keys in the stateless era), the
    # app's baggage and nothing else: no argument, no content
    sent = set(tool_span.attributes["request.meta.keys"])  # type: ignore[arg-type]
    assert {"traceparent", "baggage"} <= sent
    assert sent - {"traceparent", "tracestate", "baggage"} <= {
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientInfo",
        "io.modelcontextprotocol/clientCapabilities",
        "progressToken",
    }
    assert tool_span.attributes["request.meta.baggage"] == "tenant=acme"
    # and the same context in the HTTP headers, once (for servers whose HTTP span comes first)
    (header,) = tuple(tool_span.attributes["request.header.traceparent"])  # type: ignore[arg-type]
    assert str(header).split("-")[1:3] == [execute.trace_id, execute.span_id]
    assert SECRET not in repr(tool_span.attributes)
    assert execute.parent_span_id is not None
    # the MCP attributes, on execute_tool (the page: no separate client span under an outer one)
    assert execute.attributes["mcp.method.name"] == "tools/call"
    assert execute.attributes["gen_ai.tool.name"] == "forecast"
    assert execute.attributes["server.address"] == "127.0.0.1"
    assert execute.attributes["network.transport"] == "tcp"
    assert "error.type" not in execute.attributes
    assert server_span.attributes["gen_ai.tool.name"] == "forecast"
    negotiated = execute.attributes["mcp.protocol.version"]
    assert negotiated == server_span.attributes["mcp.protocol.version"]
    if version is not None:
        assert negotiated == version
        assert "mcp.session.id" not in execute.attributes
    else:
        assert negotiated != "2026-07-28"
        assert execute.attributes["mcp.session.id"]
    # nothing of the call's content travelled anywhere but as the tool's argument
    for span in (server_span, tool_span):
        assert SECRET not in repr(span.attributes)
    (point,) = [p for p in points if p.attributes.get("gen_ai.tool.name") == "forecast"]
    assert point.attributes["mcp.method.name"] == "tools/call"
    assert point.attributes["mcp.protocol.version"] == negotiated
    assert "mcp.session.id" not in point.attributes
    assert result.text == "It is sunny." if hasattr(result, "text") else result


@needs_meta
async def test_propagation_off_starts_a_new_trace_on_the_server(mcp_python: str) -> None:
    """``mcp_propagation=False``: the server's span is the root of a trace of its own (and the
    attributes and metric stay). The paired check: the test above shows the same server joining
    the agent's trace when it is on."""
    with OtlpReceiver() as rx, mcp_server(mcp_python, "stateless", rx.http_traces_endpoint) as url:
        telemetry = Telemetry(rx)
        try:
            await run_agent(url, telemetry, mcp_propagation=False)
            telemetry.flush()
            (server_span,) = [s for s in wait_for_named(rx, "tools/call forecast") if s.kind == "SERVER"]
        finally:
            telemetry.shutdown()
    (execute,) = [s for s in rx.spans() if s.name == "execute_tool forecast"]
    assert execute.attributes["mcp.method.name"] == "tools/call"
    assert server_span.trace_id != execute.trace_id
    assert server_span.is_root


@needs_meta
async def test_a_server_not_on_the_allow_list_gets_no_context(mcp_python: str) -> None:
    with OtlpReceiver() as rx, mcp_server(mcp_python, "stateless", rx.http_traces_endpoint) as url:
        telemetry = Telemetry(rx)
        try:
            await run_agent(url, telemetry, mcp_servers=["tools.example.com"])
            telemetry.flush()
            (server_span,) = [s for s in wait_for_named(rx, "tools/call forecast") if s.kind == "SERVER"]
        finally:
            telemetry.shutdown()
    assert server_span.is_root


@needs_meta
async def test_a_tool_error_is_classified_and_the_result_unchanged(mcp_python: str) -> None:
    with OtlpReceiver() as rx, mcp_server(mcp_python, "stateless", rx.http_traces_endpoint) as url:
        untraced = await run_agent(url, None, tool="broken")
        telemetry = Telemetry(rx)
        try:
            traced = await run_agent(url, telemetry, tool="broken")
            telemetry.flush()
            server_spans = [s for s in wait_for_named(rx, "tools/call broken") if s.kind == "SERVER"]
        finally:
            telemetry.shutdown()
    (execute,) = [s for s in rx.spans() if s.name == "execute_tool broken"]
    assert execute.attributes["error.type"] == "tool_error"
    (server_span,) = [s for s in server_spans if s.trace_id == execute.trace_id]
    assert server_span.parent_span_id == execute.span_id
    assert server_span.attributes["error.type"] == "tool_error"
    assert repr(traced) == repr(untraced)


def agent_spans(rx: OtlpReceiver) -> list[SpanRecord]:
    return [s for s in rx.spans() if s.resource_attributes.get("service.name") == "agent"]


def children_of(spans: list[SpanRecord], parent: SpanRecord) -> list[SpanRecord]:
    return sorted((s for s in spans if s.parent_span_id == parent.span_id), key=lambda s: s.start_time_unix_nano)


async def test_without_meta_the_server_starts_a_trace_of_its_own(mcp_python: str) -> None:
    """Every release: the MCP attributes and the metric; on one whose client sends no ``_meta``
    (0.0.56 - 0.0.78) the server's span is the root of its own trace (no context went), on the
    others it joins the agent's (the paired check). The agent's result is the untraced one."""
    with OtlpReceiver() as rx, mcp_server(mcp_python, "handshake", rx.http_traces_endpoint) as url:
        untraced = await run_agent(url, None)
        telemetry = Telemetry(rx)
        try:
            traced = await run_agent(url, telemetry)
            telemetry.flush()
            points = rx.wait_for_metric_points("mcp.client.operation.duration")
            (execute,) = wait_for_named(rx, "execute_tool forecast")
            server_spans = [s for s in wait_for_named(rx, "tools/call forecast", 15) if s.kind == "SERVER"]
            assert telemetry.conformance_problems() == []
        finally:
            telemetry.shutdown()
    assert repr(traced) == repr(untraced)
    assert execute.attributes["mcp.method.name"] == "tools/call"
    assert execute.attributes["gen_ai.tool.name"] == "forecast"
    assert execute.attributes["mcp.session.id"]
    assert str(execute.attributes["mcp.protocol.version"]).startswith("2025-")
    assert execute.attributes["jsonrpc.request.id"]
    assert "error.type" not in execute.attributes
    (point,) = [p for p in points if p.attributes.get("gen_ai.tool.name") == "forecast"]
    assert point.attributes["mcp.method.name"] == "tools/call"
    assert "error.type" not in point.attributes
    assert len(server_spans) == 2  # the untraced run's and the traced run's
    (joined,) = [s for s in server_spans if s.attributes.get("jsonrpc.request.id") == execute.attributes[
        "jsonrpc.request.id"]]  # fmt: skip
    if mcp_client.CALL_TAKES_META:
        assert joined.trace_id == execute.trace_id and joined.parent_span_id == execute.span_id
    else:
        assert joined.is_root and joined.trace_id != execute.trace_id


@pytest.mark.parametrize("era", ERAS)
async def test_a_jsonrpc_error_is_classified_by_its_code_and_its_message_stays_out(mcp_python: str, era: str) -> None:
    """The server answers ``tools/call`` with a JSON-RPC error whose message carries the argument:
    ``error.type`` and ``rpc.response.status_code`` are the code, the message is nowhere in the
    trace or the metrics (content capture is off), and the agent gets flowra's answer unchanged."""
    with OtlpReceiver() as rx, mcp_server(mcp_python, era, rx.http_traces_endpoint) as url:
        untraced = await run_agent(url, None, tool="refused")
        telemetry = Telemetry(rx)
        try:
            traced = await run_agent(url, telemetry, tool="refused")
            telemetry.flush()
            points = rx.wait_for_metric_points("mcp.client.operation.duration")
            tool_points = rx.wait_for_metric_points("gen_ai.execute_tool.duration")
            assert telemetry.conformance_problems() == []
            assert telemetry.ledger.open_spans() == []
        finally:
            telemetry.shutdown()
    assert repr(traced) == repr(untraced)
    assert SECRET in repr(traced)  # the message reached the agent (so its absence below means something)
    (execute,) = [s for s in agent_spans(rx) if s.name == "execute_tool refused"]
    assert execute.attributes["error.type"] == REFUSED_CODE
    assert execute.attributes["rpc.response.status_code"] == REFUSED_CODE
    assert execute.attributes["jsonrpc.request.id"]
    assert execute.status_code == "ERROR"
    assert SECRET not in execute.status_message
    (point,) = [p for p in points if p.attributes.get("gen_ai.tool.name") == "refused"]
    assert point.attributes["error.type"] == REFUSED_CODE
    assert point.attributes["rpc.response.status_code"] == REFUSED_CODE
    (tool_point,) = [p for p in tool_points if p.attributes.get("gen_ai.tool.name") == "refused"]
    assert tool_point.attributes["error.type"] == REFUSED_CODE
    for span in agent_spans(rx):
        assert SECRET not in repr(span.attributes) + span.status_message + repr(span.events)
    assert SECRET not in repr(rx.metric_points())


@pytest.mark.parametrize("era", ERAS)
async def test_an_http_500_is_classified_and_the_reconnect_is_traced(
    mcp_python: str, era: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server answers ``tools/call`` with HTTP 500 (no JSON-RPC error): flowra reconnects and
    retries once. ``error.type`` is ``500``; ``jsonrpc.request.id`` is the retry's (the request
    whose answer the agent got); the reconnect's requests are CLIENT spans under ``execute_tool``
    with their own durations. In the handshake era the reconnect replaced the session: its
    ``mcp.client.session.duration`` says ``500``, the new session's (closed) says nothing."""
    monkeypatch.setenv("MCP_TEST_MARKER_DIR", str(tmp_path))
    with OtlpReceiver() as rx, mcp_server(mcp_python, era, rx.http_traces_endpoint) as url:
        untraced = await run_agent(url, None, tool="outage")
        telemetry = Telemetry(rx)
        try:
            hooks = telemetry.hooks()  # patched before the session starts, so its start is known
            async with connected(url) as connection:
                runtime = mcp_runtime(forecast_script("outage"), connection)
                hooks.install(runtime)
                traced = await run_turn(runtime, "What is the weather?")
            telemetry.flush()
            methods = ["tools/list"]
            if era == "handshake":
                methods = ["initialize", "notifications/initialized", "tools/list"]
            points = rx.wait_for_metric_points("mcp.client.operation.duration", n=1 + len(methods))
            sessions = rx.wait_for_metric_points("mcp.client.session.duration") if era == "handshake" else []
            assert telemetry.conformance_problems() == []
            assert telemetry.ledger.open_spans() == []
        finally:
            telemetry.shutdown()
    assert repr(traced) == repr(untraced)
    sent_ids = (tmp_path / "outage-ids").read_text().split()
    assert len(sent_ids) == 4  # two attempts each, untraced and traced
    spans = agent_spans(rx)
    (execute,) = [s for s in spans if s.name == "execute_tool outage"]
    assert execute.attributes["error.type"] == "500"
    assert "rpc.response.status_code" not in execute.attributes
    assert execute.attributes["jsonrpc.request.id"] == sent_ids[-1]  # the retry's, not the first's
    reconnect = children_of(spans, execute)
    assert [s.name for s in reconnect] == methods
    for span in reconnect:
        assert span.kind == "CLIENT"
        assert span.attributes["mcp.method.name"] == span.name
        assert span.attributes["server.address"] == "127.0.0.1"
        assert "error.type" not in span.attributes
        assert "gen_ai.operation.name" not in span.attributes
        assert ("jsonrpc.request.id" in span.attributes) == (not span.name.startswith("notifications/"))
        assert execute.start_time_unix_nano <= span.start_time_unix_nano <= span.end_time_unix_nano
        assert span.end_time_unix_nano <= execute.end_time_unix_nano
    (call_point,) = [p for p in points if p.attributes.get("gen_ai.tool.name") == "outage"]
    assert call_point.attributes["error.type"] == "500"
    assert {str(p.attributes["mcp.method.name"]) for p in points} >= {"tools/call", *methods}
    if era == "handshake":
        assert sorted(str(p.attributes.get("error.type")) for p in sessions) == ["500", "None"]
        for point in sessions:
            assert "mcp.session.id" not in point.attributes
            assert point.count == 1


@pytest.mark.parametrize("era", ERAS)
async def test_the_session_duration_of_a_handshake_era_session(mcp_python: str, era: str) -> None:
    """A handshake-era session (``Mcp-Session-Id``) is measured from its ``initialize`` to
    ``close()``, by the meter of the OtelHooks that used it, without the session id; the
    stateless era has no session, so no point (the paired check)."""
    with OtlpReceiver() as rx, mcp_server(mcp_python, era, rx.http_traces_endpoint) as url:
        telemetry = Telemetry(rx)
        try:
            hooks = telemetry.hooks()  # patched before the session starts, so its start is known
            started = time.perf_counter()
            async with connected(url) as connection:
                runtime = mcp_runtime(forecast_script(), connection)
                hooks.install(runtime)
                await run_turn(runtime, "What is the weather?")
                await asyncio.sleep(0.2)
            lasted = time.perf_counter() - started
            telemetry.flush()
            rx.wait_for_metric_points("mcp.client.operation.duration")
            sessions = [p for p in rx.metric_points() if p.name == "mcp.client.session.duration"]
            assert telemetry.conformance_problems() == []
        finally:
            telemetry.shutdown()
    (execute,) = [s for s in agent_spans(rx) if s.name == "execute_tool forecast"]
    if era == "stateless":
        assert sessions == []
        return
    (point,) = sessions
    assert point.unit == "s" and point.count == 1
    assert point.sum is not None and 0.2 <= point.sum <= lasted
    assert point.attributes == {
        "mcp.protocol.version": execute.attributes["mcp.protocol.version"],
        "network.protocol.name": "http",
        "server.address": "127.0.0.1",
        "server.port": execute.attributes["server.port"],
    }


@pytest.mark.parametrize("era", ERAS)
async def test_a_server_that_went_down_ends_every_span(mcp_python: str, era: str) -> None:
    """The server dies after the connection is made: flowra's client fails, tries to reconnect,
    fails again, and answers with an error result. ``error.type`` is the transport failure's
    class, the failed reconnect is a CLIENT span under ``execute_tool``, every span ends, and
    the result is what flowra answers untraced."""

    async def run_with_server_gone(telemetry: Telemetry | None) -> Any:
        with mcp_server(mcp_python, era, rx.http_traces_endpoint) as url:
            connection_cm = connected(url)
            connection = await connection_cm.__aenter__()
        try:
            runtime = mcp_runtime(forecast_script(), connection)
            if telemetry is not None:
                telemetry.hooks().install(runtime)
            return await run_turn(runtime, "What is the weather?")
        finally:
            await connection_cm.__aexit__(None, None, None)

    with OtlpReceiver() as rx:
        untraced = await run_with_server_gone(None)
        telemetry = Telemetry(rx)
        try:
            traced = await run_with_server_gone(telemetry)
            telemetry.flush()
            assert telemetry.conformance_problems() == []
            assert telemetry.ledger.open_spans() == []
        finally:
            telemetry.shutdown()
    assert repr(traced) == repr(untraced)
    spans = agent_spans(rx)
    (execute,) = [s for s in spans if s.name == "execute_tool forecast"]
    assert execute.attributes["mcp.method.name"] == "tools/call"
    assert execute.attributes["error.type"] == "httpx.ConnectError"
    assert execute.attributes["jsonrpc.request.id"]
    (reconnect,) = children_of(spans, execute)  # the first request of the reconnect, which failed
    assert reconnect.name == ("tools/list" if era == "stateless" else "initialize")
    assert reconnect.kind == "CLIENT"
    assert reconnect.attributes["error.type"] == "httpx.ConnectError"
    assert reconnect.status_code == "ERROR"


async def test_a_cancelled_call_ends_every_span(
    mcp_python: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent is cancelled exactly while the request is in flight (the server's ``slow`` tool
    has started: its marker file): the call's span ends, says it was cancelled, and the caller
    sees the ``CancelledError`` it would see untraced."""
    monkeypatch.setenv("MCP_TEST_MARKER_DIR", str(tmp_path))
    marker = tmp_path / "slow-started"

    async def cancelled_in_flight(url: str, telemetry: Telemetry | None) -> BaseException:
        marker.unlink(missing_ok=True)
        async with connected(url) as connection:
            runtime = mcp_runtime(forecast_script("slow"), connection)
            if telemetry is not None:
                telemetry.hooks().install(runtime)
            task = asyncio.ensure_future(run_turn(runtime, "What is the weather?"))
            deadline = time.monotonic() + 30
            while not marker.exists():
                assert not task.done(), task
                assert time.monotonic() < deadline, "the slow tool never started"
                await asyncio.sleep(0.01)
            task.cancel()
            try:
                await task
            except BaseException as exc:  # what the caller sees, compared below
                return exc
        pytest.fail("the cancelled run returned")

    with OtlpReceiver() as rx, mcp_server(mcp_python, DEFAULT_ERA, rx.http_traces_endpoint) as url:
        untraced = await cancelled_in_flight(url, None)
        telemetry = Telemetry(rx)
        try:
            traced = await cancelled_in_flight(url, telemetry)
            telemetry.flush()
            assert telemetry.ledger.open_spans() == []
            assert telemetry.conformance_problems() == []
        finally:
            telemetry.shutdown()
    assert type(traced) is type(untraced) is asyncio.CancelledError
    spans = agent_spans(rx)
    assert all(s.end_time_unix_nano >= s.start_time_unix_nano > 0 for s in spans)
    (execute,) = [s for s in spans if s.name == "execute_tool slow"]
    assert execute.attributes["mcp.method.name"] == "tools/call"
    assert execute.attributes["error.type"] == "asyncio.exceptions.CancelledError"
    assert execute.status_code == "ERROR"
    (invoke,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert invoke.end_time_unix_nano >= execute.end_time_unix_nano


def test_the_server_script_is_not_imported_by_the_suite() -> None:
    assert "mcp" not in sys.modules or not hasattr(sys.modules["mcp"], "server")


async def test_a_runtime_timeout_in_a_call_is_the_timeout(mcp_python: str, tmp_path: Any, monkeypatch: Any) -> None:
    """The run's own timeout expires while the server runs the ``slow`` tool: the caller gets
    ``TimeoutError``, and the call's span and its ``mcp.client.operation.duration`` say
    ``TimeoutError`` too, not the cancellation by which flowra stops the run (the paired check:
    the test above cancels the run itself, and that reads as a cancellation)."""
    monkeypatch.setenv("MCP_TEST_MARKER_DIR", str(tmp_path))
    with OtlpReceiver() as rx, mcp_server(mcp_python, DEFAULT_ERA, rx.http_traces_endpoint) as url:
        telemetry = Telemetry(rx)
        try:
            async with connected(url) as connection:
                runtime = mcp_runtime(forecast_script("slow"), connection)
                telemetry.hooks().install(runtime)
                with pytest.raises(TimeoutError):
                    await runtime.run(agent=TurnAgent, spec=TurnSpec.text("What is the weather?"), timeout=2.0)
            telemetry.flush()
            points = rx.wait_for_metric_points("mcp.client.operation.duration")
            assert telemetry.ledger.open_spans() == []
        finally:
            telemetry.shutdown()
    spans = agent_spans(rx)
    (execute,) = [s for s in spans if s.name == "execute_tool slow"]
    assert execute.attributes["error.type"] == "TimeoutError"
    assert execute.attributes["flowra.end_reason"] == "timed_out"
    (invoke,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert invoke.attributes["error.type"] == "TimeoutError"
    (point,) = [p for p in points if p.attributes.get("gen_ai.tool.name") == "slow"]
    assert point.attributes["error.type"] == "TimeoutError"
