"""An agent's MCP tool call in Jaeger: the server's work inside the agent's trace, read back
from Jaeger's query API after the shipped collector configs, the way a user at scale runs them.

The agent (``tests/runtime_hooks/mcp_workload.py``: a ``TurnAgent`` whose ``forecast`` tool is
served by the real ``mcp`` SDK server, tests/mcp_tool_server.py, in its own process) and the MCP
server (a second service, ``mcp-tool-server``) both export to the gateway
(``collector-gateway.yaml``), which routes by trace id to two samplers (``collector-config.yaml``:
tail sampling, the content guard), then Jaeger. Read back with ``GET /api/v3/traces/{id}``:

* one trace holding both services, the tree ``invoke_agent assistant`` > ``execute_tool forecast``
  > ``tools/call forecast`` (SERVER, the server's) > ``lookup_forecast``, the MCP attributes on
  ``execute_tool`` as Jaeger stores them, span kinds as Jaeger gives them;
* nothing of the tool's secret argument anywhere in Jaeger's answer (content capture was on: the
  guard deleted the content attributes, and the server records no argument);
* the gateway works for a trace made by two processes: each trace was met by one sampler only
  (its audit file), both services' spans in it, one decision for the whole trace. The paired
  negative sends each service to its own sampler (no trace-id routing) and loses the server's half.

Needs flowra's MCP client with ``params._meta`` (flowra 0.0.79+; the 0.0.3 - 0.0.8 line has no MCP
client: skipped there, saying so), ``FLOWRA_OTEL_OTELCOL``, ``FLOWRA_OTEL_JAEGER`` and
``FLOWRA_OTEL_MCP_PYTHON`` (``./dev test`` builds them; skipped without them on a developer machine,
failed in CI, ``tests/backend_env.py``).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.adapters import flowra_version
from tests import collector_workload, mcp_server_process
from tests.backend_env import require_executable
from tests.collector_workload import GUARDED_KEYS
from tests.jaeger_stack import (
    JAEGER_ENV,
    OTELCOL_ENV,
    Collector,
    Jaeger,
    decode_api_v3,
    exported_records,
    two_tier_stack,
)
from tests.otlp_receiver import SpanRecord

AGENT_SERVICE: Final = "flowra-otel-mcp-e2e"
RUNS: Final = 4
"""Runs (one trace each) through the gateway: enough for the trace-id routing to use both samplers
in most runs of the suite, few enough to stay a few seconds."""
JAEGER_EXPORTER: Final = "otlp_grpc/jaeger"
WAIT_S: Final = 30.0
MCP_ATTRIBUTES: Final = ("mcp.method.name", "mcp.protocol.version", "gen_ai.tool.name", "server.address")


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def workload() -> ModuleType:
    """The modern line's MCP run; skipped where flowra has no MCP client that sends ``_meta``."""
    if collector_workload.line() != "runtime_hooks":
        pytest.skip(
            f"flowra {flowra_version()} (the 0.0.3 - 0.0.8 line) has no MCP client (flowra.tools.McpConnection)"
        )
    module = importlib.import_module("tests.runtime_hooks.mcp_workload")
    if not module.CONTEXT_SENT:
        pytest.skip(f"flowra {flowra_version()}'s MCP client sends no params._meta (0.0.79+): no trace to continue")
    return module


@dataclass
class Stack:
    jaeger: Jaeger
    samplers: list[Collector]
    gateway: Collector
    workdir: Path


@pytest.fixture(scope="module")
def stack(workload: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Jaeger, two samplers (``collector-config.yaml``) and the gateway (``collector-gateway.yaml``
    naming both), all running for the module; stopped by PID whatever happens."""
    otelcol = require_executable(OTELCOL_ENV, "the OpenTelemetry Collector built from infra/otelcol/manifest.yaml")
    jaeger_binary = require_executable(JAEGER_ENV, "Jaeger v2 built from infra/jaeger/go.mod")
    mcp_server_process.mcp_python()  # skip or fail before anything starts
    workdir = tmp_path_factory.mktemp("mcp-jaeger")
    with two_tier_stack(otelcol, jaeger_binary, workdir) as two_tier:
        yield Stack(two_tier.jaeger, two_tier.samplers, two_tier.gateway, workdir)


@dataclass
class Sent:
    """The runs as the agent exported them, and the traces Jaeger holds for them."""

    exported: dict[str, list[SpanRecord]]
    """The agent's own spans per trace id (what it sent; the server's are only in Jaeger)."""
    stored: dict[str, list[SpanRecord]]
    raw: dict[str, str]
    """Jaeger's JSON answer per trace, as text."""
    audits: list[str]
    """Each sampler's audit file (what it kept, after the guard)."""


def agent_provider(endpoint: str, memory: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": AGENT_SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    # Spans leave at the flush after each run (the server's left during it): the two halves of a
    # trace reach the collector from two processes, at different times.
    provider.add_span_processor(
        BatchSpanProcessor(GrpcSpanExporter(endpoint=endpoint, insecure=True), schedule_delay_millis=60_000)
    )
    return provider


def run_and_read_back(
    workload: ModuleType, stack: Stack, *, agent_to: Collector, server_to: Collector, runs: int, **options: Any
) -> Sent:
    """``runs`` runs, the agent exporting (OTLP/gRPC) to ``agent_to`` and the MCP server (OTLP/HTTP)
    to ``server_to``; every trace read back once the samplers decided and Jaeger stored."""
    memory = InMemorySpanExporter()
    provider = agent_provider(agent_to.ports.grpc_endpoint, memory)
    try:
        server_endpoint = f"{server_to.ports.http_endpoint}/v1/traces"
        with mcp_server_process.mcp_server(mcp_server_process.mcp_python(), "stateless", server_endpoint) as url:

            async def all_runs() -> None:
                for index in range(runs):
                    result = await workload.mcp_tool_run(provider, url, conversation_id=f"mcp-{index}", **options)
                    assert workload.ANSWER in repr(result)
                    # the agent's half leaves now, after the server's (well within decision_wait)
                    assert provider.force_flush(10_000)

            asyncio.run(all_runs())
    finally:
        provider.shutdown()
    exported: dict[str, list[SpanRecord]] = {}
    for record in exported_records(memory.get_finished_spans()):
        exported.setdefault(record.trace_id, []).append(record)
    assert len(exported) == runs, "one trace per run"
    settle(stack.samplers)
    stored = {t: stack.jaeger.trace(t) for t in exported}
    raw = {t: json.dumps(stack.jaeger.trace_json(t), ensure_ascii=False) for t in exported}
    audits = []
    for index in range(len(stack.samplers)):
        audit = stack.workdir / f"sampler{index}" / "audit" / "traces.json"
        audits.append(audit.read_text(encoding="utf-8") if audit.exists() else "")
    return Sent(exported, stored, raw, audits)


def metric(samplers: list[Collector], name: str, **labels: str) -> int:
    return int(sum(s.metric(name, **labels) for s in samplers))


def settle(samplers: list[Collector]) -> None:
    """Until every trace the samplers met was decided and what they kept has left for Jaeger."""

    def decided() -> bool:
        seen = metric(samplers, "otelcol_processor_tail_sampling_new_trace_id_received")
        return seen > 0 and metric(samplers, "otelcol_processor_tail_sampling_global_count_traces_sampled") >= seen

    wait_until(decided, "a sampling decision for every trace")

    def drained() -> bool:
        queued = metric(samplers, "otelcol_exporter_queue_size", exporter=JAEGER_EXPORTER)
        before = metric(samplers, "otelcol_exporter_sent_spans", exporter=JAEGER_EXPORTER)
        time.sleep(0.6)  # three batch timeouts of the test copies
        return queued == 0 and metric(samplers, "otelcol_exporter_sent_spans", exporter=JAEGER_EXPORTER) == before

    wait_until(drained, "the samplers' export to Jaeger to go quiet")


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if predicate():
            return
        time.sleep(0.1)
    raise TimeoutError(f"not within {timeout:.0f} s: {what}")


def audited_spans(audit: str) -> list[SpanRecord]:
    """A sampler's audit file (OTLP JSON lines, hex ids) as ``SpanRecord``s."""
    return [r for line in audit.splitlines() if line.strip() for r in decode_api_v3({"result": json.loads(line)})]


_SENT: dict[str, Sent] = {}


@pytest.fixture
def through_the_gateway(workload: ModuleType, stack: Stack) -> Sent:
    """The runs through the gateway, made once for the module's tests."""
    if "gateway" not in _SENT:
        _SENT["gateway"] = run_and_read_back(
            workload, stack, agent_to=stack.gateway, server_to=stack.gateway, runs=RUNS
        )
    return _SENT["gateway"]


def service(record: SpanRecord) -> Any:
    return record.resource_attributes.get("service.name")


def by_id(records: list[SpanRecord]) -> dict[str, SpanRecord]:
    return {r.span_id: r for r in records}


# ------------------------------------------------------------------------------------ tests
def test_the_server_s_work_is_inside_the_agent_s_trace_in_jaeger(
    workload: ModuleType, through_the_gateway: Sent
) -> None:
    for trace_id, stored in through_the_gateway.stored.items():
        assert {service(r) for r in stored} == {AGENT_SERVICE, workload.SERVER_SERVICE}, trace_id
        assert len(stored) == workload.AGENT_SPANS + workload.SERVER_SPANS, sorted(r.name for r in stored)
        (root,) = [r for r in stored if r.parent_span_id is None]
        assert (root.name, service(root)) == ("invoke_agent assistant", AGENT_SERVICE)
        (execute,) = [r for r in stored if r.name == "execute_tool forecast"]
        (server,) = [r for r in stored if r.name == "tools/call forecast"]
        (tool,) = [r for r in stored if r.name == "lookup_forecast"]
        # the tree: root > execute_tool > the server's span > the tool's own span
        assert execute.parent_span_id == root.span_id
        assert server.parent_span_id == execute.span_id
        assert tool.parent_span_id == server.span_id
        assert (service(server), service(tool)) == (workload.SERVER_SERVICE,) * 2
        chats = [r for r in stored if r.name.startswith("chat ")]
        assert len(chats) == 2 and all(r.parent_span_id == root.span_id for r in chats)
        # span kinds as Jaeger gives them: the server's span is SERVER, the agent's tool span INTERNAL
        kinds = {r.name.split()[0]: r.kind for r in stored}
        assert kinds == {
            "invoke_agent": "INTERNAL",
            "chat": "CLIENT",
            "execute_tool": "INTERNAL",
            "tools/call": "SERVER",
            "lookup_forecast": "INTERNAL",
        }
        # the MCP attributes on execute_tool, as Jaeger stores them (typed), and the server's
        assert {k: execute.attributes.get(k) for k in MCP_ATTRIBUTES} == {
            "mcp.method.name": "tools/call",
            "mcp.protocol.version": server.attributes["mcp.protocol.version"],
            "gen_ai.tool.name": "forecast",
            "server.address": "127.0.0.1",
        }
        assert isinstance(execute.attributes["server.port"], int)
        assert execute.attributes["gen_ai.tool.call.id"] == workload.CALL_ID
        assert (server.attributes["mcp.method.name"], server.attributes["gen_ai.tool.name"]) == (
            "tools/call",
            "forecast",
        )
        assert "error.type" not in execute.attributes and server.status_code != "ERROR"
        # the app's redaction shows (and is what kept the run through the tail sampler)
        assert execute.attributes["flowra.redaction.applied"] is True


def test_jaeger_holds_what_the_agent_exported_minus_the_content(
    workload: ModuleType, through_the_gateway: Sent
) -> None:
    for trace_id, exported in through_the_gateway.exported.items():
        stored = by_id(through_the_gateway.stored[trace_id])
        for sent in exported:
            got = stored[sent.span_id]
            assert (got.parent_span_id, got.name, got.kind, got.status_code) == (
                sent.parent_span_id,
                sent.name,
                sent.kind,
                sent.status_code,
            )
            assert got.attributes == {k: v for k, v in sent.attributes.items() if k not in GUARDED_KEYS}, sent.name


def test_the_secret_argument_is_nowhere_in_jaeger(workload: ModuleType, through_the_gateway: Sent) -> None:
    # Capture was on: the agent exported the argument (and the model's call) in content attributes.
    exported_text = json.dumps([r.attributes for t in through_the_gateway.exported.values() for r in t])
    assert workload.SECRET in exported_text
    for trace_id, raw in through_the_gateway.raw.items():
        assert workload.SECRET not in raw, trace_id  # the guard deleted them; the server records none
        assert workload.SECRET.encode().hex() not in raw
    for audit in through_the_gateway.audits:
        assert workload.SECRET not in audit


def test_each_two_process_trace_met_one_sampler_and_was_kept_whole(
    workload: ModuleType, through_the_gateway: Sent
) -> None:
    """The trace-id routing with spans from two processes: every span of a trace (the agent's,
    sent at its flush, and the server's, sent during the run) reached the same sampler."""
    kept_by = [{r.trace_id for r in audited_spans(audit)} for audit in through_the_gateway.audits]
    for trace_id in through_the_gateway.exported:
        holders = [i for i, kept in enumerate(kept_by) if trace_id in kept]
        assert len(holders) == 1, (trace_id, holders)
        (holder,) = holders
        audited = [r for r in audited_spans(through_the_gateway.audits[holder]) if r.trace_id == trace_id]
        assert {service(r) for r in audited} == {AGENT_SERVICE, workload.SERVER_SERVICE}
        assert len(audited) == workload.AGENT_SPANS + workload.SERVER_SPANS
    print(
        f"\n{RUNS} two-process traces through the gateway: samplers kept "
        f"{[len(k & set(through_the_gateway.exported)) for k in kept_by]} of them, each whole"
    )


def test_without_trace_id_routing_the_server_s_half_is_lost(workload: ModuleType, stack: Stack) -> None:
    """The paired negative: the agent to one sampler, the server to the other (each service its
    own collector, no gateway). The agent's half is kept (its redaction), the server's half is a
    trace of its own on the other sampler, decided alone (10% kept): Jaeger misses it."""
    sent = run_and_read_back(workload, stack, agent_to=stack.samplers[0], server_to=stack.samplers[1], runs=RUNS)
    missing = [t for t, stored in sent.stored.items() if workload.SERVER_SERVICE not in {service(r) for r in stored}]
    assert missing, "some trace lost the server's spans"
    for trace_id in sent.exported:
        assert {service(r) for r in sent.stored[trace_id]} >= {AGENT_SERVICE}
