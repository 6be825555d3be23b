"""End to end over the real wire: ``configure_telemetry`` + ``OtelHooks`` -> OTLP -> a receiver.

Nothing is mocked between the agent and the bytes: the environment picks the exporters
(``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``_PROTOCOL`` / ``OTEL_SERVICE_NAME``, both protocols), a real
flowra run produces the spans and metrics, and the in-process ``OtlpReceiver`` decodes what
arrived. The helpers at the top also write what arrived as the OpenTelemetry Collector's file
exporter would (one ``ExportTraceServiceRequest`` as OTLP JSON per line); the audit CLI tests
read those files.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import AfterToolCallEvent, ToolLoopStatus
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from flowra_otel import OtelHooks
from flowra_otel.core import instruments, redaction, semconv
from flowra_otel.export import configure_telemetry
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    ScriptStep,
    get_weather,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
    usage,
)
from tests.otlp_receiver import MetricPoint, OtlpReceiver, SpanRecord

Protocol = Literal["grpc", "http/protobuf"]
PROTOCOLS: tuple[Protocol, ...] = ("grpc", "http/protobuf")
Scenario = Literal["weather", "redacted", "leak"]

MODEL = "sonnet-4-5"
SECRET_KEY = "sk-live-" + "4f9aQ" * 6
"""What ``lookup_account`` returns: an API-key-shaped secret the built-in ``api_key`` pattern finds."""
REDACTED = "[redacted-key]"


# ------------------------------------------------------------------------------------ the app
def lookup_account(user: str) -> str:
    """Look up a customer's account."""
    return f"account of {user}: plan=pro, api key {SECRET_KEY}"


def redact_api_keys(event: Event[AfterToolCallEvent]) -> None:
    """The user's redaction hook: no API key leaves a tool result."""
    result = event.data.result
    if SECRET_KEY in result.content:
        event.data.result = dataclasses.replace(result, content=result.content.replace(SECRET_KEY, REDACTED))


REDACTION_HANDLER = f"{__name__}.redact_api_keys"


class RedactionHooks:
    def register_hooks(self, registry: HookRegistry) -> None:
        registry.on(AfterToolCallEvent, redact_api_keys)


def _script(scenario: Scenario) -> list[ScriptStep]:
    if scenario == "weather":
        return [
            tool_calls_response(
                [("call_w", "get_weather", {"city": "Paris"})], usage=usage(10, 5, cache_read=3, cost_usd=0.1)
            ),
            text_response("Sunny in Paris.", usage=usage(20, 7)),
        ]
    return [
        tool_calls_response([("call_a", "lookup_account", {"user": "alice"})], usage=usage(8, 4)),
        text_response("Alice is on the pro plan.", usage=usage(30, 6)),
    ]


@dataclasses.dataclass(frozen=True)
class ExportedRun:
    """What one scripted run sent over OTLP, as the receiver decoded it."""

    protocol: Protocol
    service_name: str
    spans: list[SpanRecord]
    metric_points: list[MetricPoint]
    trace_requests: list[ExportTraceServiceRequest]

    def span(self, name: str) -> SpanRecord:
        (span,) = [s for s in self.spans if s.name == name]
        return span

    def points(self, metric: str) -> list[MetricPoint]:
        return [p for p in self.metric_points if p.name == metric]


def clear_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


async def export_run(
    monkeypatch: pytest.MonkeyPatch, *, scenario: Scenario = "weather", protocol: Protocol = "grpc"
) -> ExportedRun:
    """Run one scripted agent with telemetry configured from the environment; what arrived."""
    clear_otel_env(monkeypatch)
    service_name = f"e2e-{scenario}-{protocol.replace('/', '-')}"
    with OtlpReceiver() as rx:
        endpoint = rx.grpc_endpoint if protocol == "grpc" else rx.http_endpoint
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        monkeypatch.setenv("OTEL_SERVICE_NAME", service_name)
        handles = configure_telemetry(set_global=False, register_atexit=False)
        try:
            assert handles.span_exporters and handles.metric_exporters, "the endpoint must select OTLP export"
            hooks = OtelHooks(
                tracer_provider=handles.tracer_provider,
                meter_provider=handles.meter_provider,
                capture_content=scenario != "weather",
            )
            registry = HookRegistry()
            registry.add(hooks)
            if scenario == "redacted":
                registry.add(RedactionHooks())
            provider = ScriptedProvider(_script(scenario))
            tool = get_weather if scenario == "weather" else lookup_account
            async with tool_registry(tool) as tools:
                result = await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Help me, please.")
            assert result.status == ToolLoopStatus.COMPLETED
            assert handles.force_flush(10_000)
            spans = rx.wait_for_spans(4)
            rx.wait_for_metric_points(instruments.GEN_AI_CLIENT_TOKEN_USAGE, 2)
        finally:
            handles.shutdown()
        return ExportedRun(
            protocol=protocol,
            service_name=service_name,
            spans=spans,
            metric_points=rx.metric_points(),
            trace_requests=[r.request for r in rx.trace_requests],
        )


# ------------------------------------------------------------------------------------ OTLP JSON files
def _b64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def _hex_ids(obj: dict[str, Any]) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        if obj.get(key):
            obj[key] = _b64_to_hex(obj[key])


def collector_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """One request as the Collector's file exporter writes it: OTLP JSON with camelCase keys,
    hex trace and span ids (the protobuf JSON mapping would give base64) and integer enums."""
    data: dict[str, Any] = MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in data.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                _hex_ids(span)
                for link in span.get("links", []):
                    _hex_ids(link)
    return data


def write_otlp_json(requests: Iterable[ExportTraceServiceRequest], path: Path, *, collector_style: bool = True) -> Path:
    """JSON lines, one ``ExportTraceServiceRequest`` each; ``collector_style=False`` writes the plain
    protobuf JSON mapping (base64 ids, enum names) instead."""
    lines = []
    for request in requests:
        data = collector_json(request) if collector_style else MessageToDict(request)
        lines.append(json.dumps(data, separators=(",", ":")))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_spans_arrive_as_one_tree_with_the_service_name(
    monkeypatch: pytest.MonkeyPatch, protocol: Protocol, tmp_path: Path
) -> None:
    run = await export_run(monkeypatch, protocol=protocol)
    assert {s.protocol for s in run.spans} == {"http" if protocol == "http/protobuf" else "grpc"}
    assert sorted(s.name for s in run.spans) == [
        f"chat {MODEL}",
        f"chat {MODEL}",
        "execute_tool get_weather",
        "invoke_agent assistant",
    ]
    agent = run.span("invoke_agent assistant")
    assert agent.is_root
    assert {s.trace_id for s in run.spans} == {agent.trace_id}
    children = sorted((s for s in run.spans if s is not agent), key=lambda s: s.start_time_unix_nano)
    assert [s.parent_span_id for s in children] == [agent.span_id] * 3
    assert [s.name for s in children] == [f"chat {MODEL}", "execute_tool get_weather", f"chat {MODEL}"]
    assert [s.kind for s in children] == ["CLIENT", "INTERNAL", "CLIENT"]
    for span in run.spans:
        assert span.resource_attributes["service.name"] == run.service_name
        assert span.scope_name == semconv.INSTRUMENTATION_NAME
        assert span.status_code == "UNSET"

    chat1, tool, chat2 = children
    assert agent.attributes[semconv.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert agent.attributes[semconv.GEN_AI_AGENT_NAME] == "assistant"
    assert agent.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 13 + 20
    assert chat1.attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert chat1.attributes[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert chat1.attributes[semconv.GEN_AI_REQUEST_MODEL] == MODEL
    assert chat1.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 13
    assert chat1.attributes[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 3
    assert chat1.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_call",)
    assert chat1.attributes[semconv.FLOWRA_USAGE_COST_USD] == pytest.approx(0.1)
    assert chat2.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert chat2.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert tool.attributes[semconv.GEN_AI_TOOL_NAME] == "get_weather"
    assert tool.attributes[semconv.GEN_AI_TOOL_CALL_ID] == "call_w"
    # Content capture was off: no message, argument or result went over the wire.
    for span in run.spans:
        assert not {semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_TOOL_CALL_ARGUMENTS} & set(span.attributes)

    # The same spans, as the Collector's file exporter would keep them.
    path = write_otlp_json(run.trace_requests, tmp_path / "traces.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(run.trace_requests) >= 1
    written = [
        s for line in lines for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
    ]
    assert sorted((s["spanId"], s.get("parentSpanId", "")) for s in written) == sorted(
        (s.span_id, s.parent_span_id or "") for s in run.spans
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_metrics_arrive_with_the_service_name(monkeypatch: pytest.MonkeyPatch, protocol: Protocol) -> None:
    run = await export_run(monkeypatch, protocol=protocol)
    chat_base = {
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "anthropic",
        semconv.GEN_AI_REQUEST_MODEL: MODEL,
        semconv.GEN_AI_AGENT_NAME: "assistant",
    }

    # Cumulative temporality and a final collection at shutdown: take each series' last point.
    def last(metric: str, attributes: dict[str, Any]) -> MetricPoint:
        points = [p for p in run.points(metric) if p.attributes == attributes]
        assert points, f"no {metric} point with {attributes}: {[p.attributes for p in run.points(metric)]}"
        return max(points, key=lambda p: p.time_unix_nano)

    tokens_in = last(instruments.GEN_AI_CLIENT_TOKEN_USAGE, {**chat_base, semconv.GEN_AI_TOKEN_TYPE: "input"})
    tokens_out = last(instruments.GEN_AI_CLIENT_TOKEN_USAGE, {**chat_base, semconv.GEN_AI_TOKEN_TYPE: "output"})
    assert (tokens_in.count, tokens_in.sum) == (2, 13 + 20)
    assert (tokens_out.count, tokens_out.sum) == (2, 12)
    assert (tokens_in.unit, tokens_in.type, tokens_in.temporality) == ("{token}", "histogram", "CUMULATIVE")
    assert tokens_in.explicit_bounds == tuple(instruments.TOKEN_BUCKETS)

    duration = last(instruments.GEN_AI_CLIENT_OPERATION_DURATION, chat_base)
    assert (duration.count, duration.unit) == (2, "s")
    assert duration.explicit_bounds == tuple(instruments.DURATION_BUCKETS)
    agent = last(
        instruments.GEN_AI_INVOKE_AGENT_DURATION,
        {semconv.GEN_AI_AGENT_NAME: "assistant", semconv.GEN_AI_REQUEST_MODEL: MODEL},
    )
    assert agent.count == 1
    assert agent.sum is not None and duration.sum is not None and agent.sum >= duration.sum
    tool = last(
        instruments.GEN_AI_EXECUTE_TOOL_DURATION,
        {
            semconv.GEN_AI_TOOL_NAME: "get_weather",
            semconv.GEN_AI_TOOL_TYPE: "function",
            semconv.GEN_AI_AGENT_NAME: "assistant",
        },
    )
    assert tool.count == 1
    cost = last(instruments.FLOWRA_COST, chat_base)
    assert (cost.type, cost.is_monotonic) == ("sum", True)
    assert cost.value == pytest.approx(0.1)
    for point in run.metric_points:
        assert point.resource_attributes["service.name"] == run.service_name
        assert point.scope_name == semconv.INSTRUMENTATION_NAME


async def test_redaction_ledger_and_captured_content_go_over_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    run = await export_run(monkeypatch, scenario="redacted", protocol="http/protobuf")
    tool = run.span("execute_tool lookup_account")
    assert tool.attributes[redaction.APPLIED] is True
    assert tool.attributes[redaction.FIELDS] == ("result",)
    assert tool.attributes[redaction.key("result", "handlers")] == (REDACTION_HANDLER,)
    original = f"account of alice: plan=pro, api key {SECRET_KEY}"
    assert tool.attributes[redaction.key("result", "original_length")] == len(original)
    assert tool.attributes[redaction.key("result", "final_length")] == len(original.replace(SECRET_KEY, REDACTED))
    assert REDACTED in str(tool.attributes[semconv.GEN_AI_TOOL_CALL_RESULT])
    for span in run.spans:
        assert SECRET_KEY not in json.dumps({k: str(v) for k, v in span.attributes.items()})
