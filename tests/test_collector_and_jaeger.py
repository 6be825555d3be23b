"""The road to Jaeger, run for real: the shipped collector configs on a built OpenTelemetry
Collector (``otelcol-flowra`` v0.161.0) in front of a built Jaeger v2, fed by real flowra agents.

* Every YAML the repository ships that a collector (or Jaeger) runs passes ``validate``.
* agent -> ``collector-config.yaml`` -> Jaeger: multi-agent runs with content capture on are read
  back from ``GET /api/v3/traces/{id}`` and compared span by span with what the app exported
  (a second, in-memory exporter on the same tracer provider): ids and parents, kinds, status,
  every attribute (every ``gen_ai.*`` one), events, links, resource -- minus exactly the content
  attributes the config's ``attributes/redaction`` guard deletes. The paired negative runs the
  same config without the guard and finds the content in Jaeger.
* The two-tier gateway: ``collector-gateway.yaml`` (static resolver, two loopback samplers) in
  front of two ``collector-config.yaml`` samplers, then Jaeger. Many concurrent runs, some
  failing (a provider error that fails the run, or a tool that raises): every failed run's trace
  arrives whole (each span of each agent), successful runs are kept at the configured ratio
  (within a 99.9% binomial interval), and no trace is split (the samplers together saw each
  trace id once). The paired negative sends round-robin to the two samplers without the gateway
  and sees traces split and failed runs lost.
* Jaeger down, then up: the sampler's sending queue holds what it got and delivers all of it
  when Jaeger is back; the app's runs and flush do not wait. The paired negative turns the
  exporter's retries off and loses the traces.

The configs run with the least change (``tests/jaeger_stack.py``): loopback endpoints and ports,
a temporary audit file, no Tempo exporter (no Tempo here), shorter ``decision_wait`` and batch
timeouts (and, for the outage, retry intervals), and the collector's own metrics on a port of
its own. Needs ``FLOWRA_OTEL_OTELCOL`` and ``FLOWRA_OTEL_JAEGER`` (``./dev test`` builds both):
skipped without them on a developer machine, failed in CI (``tests/backend_env.py``). Runs on
both flowra lines (``tests/collector_workload.py``; the old line needs flowra >= 0.0.6).
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests import collector_workload
from tests.backend_env import require_executable
from tests.collector_workload import GUARDED_KEYS, Workload
from tests.jaeger_stack import (
    COLLECTOR_CONFIG,
    GATEWAY_CONFIG,
    JAEGER_CONFIG,
    JAEGER_ENV,
    OTELCOL_ENV,
    REPO,
    SHIPPED_COLLECTOR_CONFIGS,
    Collector,
    CollectorPorts,
    Jaeger,
    component_type,
    exported_records,
    rss_kib,
    running,
    sampler_config,
    two_tier_stack,
    validate,
)
from tests.otlp_receiver import SpanRecord

SERVICE: Final = "flowra-otel-e2e"
JAEGER_EXPORTER: Final = "otlp_grpc/jaeger"
REDACTION_PROCESSOR: Final = "attributes/redaction"
RUNS: Final = 120
"""Concurrent runs through the gateway; a quarter of them fail (``failing``)."""
OUTAGE_RUNS: Final = 12
WAIT_S: Final = 30.0
SHORT_RETRY: Final = {"initial_interval": "200ms", "max_interval": "500ms"}


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def otelcol() -> str:
    return require_executable(OTELCOL_ENV, "the OpenTelemetry Collector built from infra/otelcol/manifest.yaml")


@pytest.fixture(scope="module")
def jaeger_binary() -> str:
    return require_executable(JAEGER_ENV, "Jaeger v2 built from infra/jaeger/go.mod")


@pytest.fixture(scope="module")
def workload() -> Workload:
    loaded = collector_workload.load()
    if loaded.LINE == "hook_registry":
        from tests.hook_registry.flowra_support import HAS_AGENT_TOOLS  # this line only

        if not HAS_AGENT_TOOLS:
            pytest.skip("the runs use an agent as a tool: flowra >= 0.0.6")
    return loaded


@dataclass
class App:
    """The app's tracer provider: every span to the collector (OTLP) and to ``exported`` (memory)."""

    tracer_provider: TracerProvider
    exported: InMemorySpanExporter

    def flush(self) -> float:
        began = time.monotonic()
        assert self.tracer_provider.force_flush(10_000)
        return time.monotonic() - began

    def traces(self) -> dict[str, list[ReadableSpan]]:
        by_trace: dict[str, list[ReadableSpan]] = defaultdict(list)
        for span in self.exported.get_finished_spans():
            assert span.context is not None
            by_trace[f"{span.context.trace_id:032x}"].append(span)
        return dict(by_trace)


@pytest.fixture
def make_app() -> Iterator[Callable[..., App]]:
    """``make_app(exporter)``: a tracer provider exporting through a batch processor to
    ``exporter`` (or through the given span processor) and to memory; shut down after the test."""
    providers: list[TracerProvider] = []

    def make(exporter: SpanExporter | None = None, processor: SpanProcessor | None = None) -> App:
        provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        if processor is None:
            assert exporter is not None
            # Spans leave at the flush (after the runs): a whole run reaches the collector well
            # within the test copies' decision_wait, as the shipped 60 s wait means in production.
            processor = BatchSpanProcessor(exporter, schedule_delay_millis=60_000, max_queue_size=65_536)
        provider.add_span_processor(processor)
        providers.append(provider)
        return App(provider, memory)

    yield make
    for provider in providers:
        provider.shutdown()


def grpc_exporter(endpoint: str) -> SpanExporter:
    return GrpcSpanExporter(endpoint=endpoint, insecure=True)


def http_exporter(base: str) -> SpanExporter:
    return HttpSpanExporter(endpoint=f"{base}/v1/traces")


# ------------------------------------------------------------------------------------ helpers
def wait_until(predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if predicate():
            return time.monotonic() - began
        time.sleep(0.1)
    raise TimeoutError(f"not within {timeout:.0f} s: {what}")


def decisions(*samplers: Collector) -> int:
    """Traces the samplers decided on (sampled or not)."""
    return int(sum(s.metric("otelcol_processor_tail_sampling_global_count_traces_sampled") for s in samplers))


def sampled_on(sampler: Collector) -> int:
    return int(sampler.metric("otelcol_processor_tail_sampling_global_count_traces_sampled", sampled="true"))


def traces_seen(sampler: Collector) -> int:
    """Trace ids new to this sampler: a trace whose spans reached two samplers counts on both."""
    return int(sampler.metric("otelcol_processor_tail_sampling_new_trace_id_received"))


def sent_to_jaeger(*samplers: Collector) -> int:
    return int(sum(s.metric("otelcol_exporter_sent_spans", exporter=JAEGER_EXPORTER) for s in samplers))


def settle(samplers: Sequence[Collector], expected_decisions: int) -> None:
    """Until every trace was decided and what was kept has left the samplers for Jaeger."""
    wait_until(lambda: decisions(*samplers) >= expected_decisions, f"{expected_decisions} sampling decisions")

    def drained() -> bool:
        queued = sum(s.metric("otelcol_exporter_queue_size", exporter=JAEGER_EXPORTER) for s in samplers)
        before = sent_to_jaeger(*samplers)
        time.sleep(0.6)  # three batch timeouts of the test copies
        return queued == 0 and sent_to_jaeger(*samplers) == before

    wait_until(drained, "the samplers' export to Jaeger to go quiet")


def agents_of(records: Sequence[SpanRecord]) -> set[Any]:
    return {r.attributes.get("gen_ai.agent.name") for r in records} - {None}


def binomial_interval(n: int, p: float, confidence: float = 0.999) -> tuple[int, int]:
    """The smallest [lo, hi] with P(X < lo) and P(X > hi) each at most (1 - confidence) / 2."""
    tail = (1 - confidence) / 2
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    lo = 0
    while sum(pmf[: lo + 1]) <= tail:
        lo += 1
    hi = n
    while sum(pmf[hi:]) <= tail:
        hi -= 1
    return lo, hi


def shipped_sampling_ratio() -> float:
    policies = yaml.safe_load(COLLECTOR_CONFIG.read_text(encoding="utf-8"))["processors"]["tail_sampling"]["policies"]
    (rest,) = [p for p in policies if p["type"] == "probabilistic"]
    return float(rest["probabilistic"]["sampling_percentage"]) / 100


def run_outcome_runs(app: App, workload: Workload, runs: int, fail: Callable[[int], bool]) -> list[bool]:
    """``runs`` concurrent runs (one event loop); which of them raised."""

    async def all_runs() -> list[bool]:
        return list(
            await asyncio.gather(*(workload.outcome_run(app.tracer_provider, i, fail=fail(i)) for i in range(runs)))
        )

    return asyncio.run(all_runs())


# ------------------------------------------------------------------------------------ 1. validate
def repository_yaml_files() -> list[Path]:
    """Every ``*.yaml`` / ``*.yml`` of the repository (not in hidden folders such as the venvs)."""
    found: list[Path] = []
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d != "__pycache__"]
        found += [Path(folder, f) for f in files if f.endswith((".yaml", ".yml"))]
    return sorted(found)


def is_collector_config(path: Path) -> bool:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return isinstance(document, dict) and {"receivers", "exporters", "service"} <= set(document)


JAEGER_VALIDATE_ENV: Final = {
    "JAEGER_OTLP_GRPC_PORT": "4317",
    "JAEGER_OTLP_HTTP_PORT": "4318",
    "JAEGER_QUERY_PORT": "16686",
    "JAEGER_QUERY_GRPC_PORT": "16685",
    "JAEGER_HEALTH_PORT": "13133",
}


def test_every_collector_config_the_repository_ships_validates(otelcol: str, jaeger_binary: str) -> None:
    configs = [path for path in repository_yaml_files() if is_collector_config(path)]
    assert set(configs) == {*SHIPPED_COLLECTOR_CONFIGS, JAEGER_CONFIG}, "a new collector config: validate it here"
    checks: list[tuple[str, Path, dict[str, str]]] = [(otelcol, path, {}) for path in SHIPPED_COLLECTOR_CONFIGS] + [
        (jaeger_binary, JAEGER_CONFIG, JAEGER_VALIDATE_ENV)
    ]
    with ThreadPoolExecutor(len(checks)) as pool:  # a few seconds each: at once
        results = list(pool.map(lambda check: validate(*check), checks))
    for (_, path, _), result in zip(checks, results, strict=True):
        assert result.returncode == 0, f"{path.name}: {result.stdout}{result.stderr}"
    # Nothing in them the built collector calls deprecated (an alias it may drop next).
    for path in SHIPPED_COLLECTOR_CONFIGS:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        types = {component_type(e) for e in document["exporters"]}
        assert not types & {"otlp", "otlphttp", "loadbalancing", "logging"}, (path.name, types)


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        ("dns-port-as-number", "expected type 'string'"),
        ("old-exporter-name-typo", "unknown type"),
    ],
)
def test_validate_rejects_a_broken_copy(otelcol: str, tmp_path: Path, mistake: str, message: str) -> None:
    """The paired negative of the validation: the same check fails on a broken copy."""
    if mistake == "dns-port-as-number":
        document = yaml.safe_load(GATEWAY_CONFIG.read_text(encoding="utf-8"))
        document["exporters"]["load_balancing"]["resolver"]["dns"]["port"] = 4317
    else:
        document = yaml.safe_load(COLLECTOR_CONFIG.read_text(encoding="utf-8"))
        document["exporters"]["otlp_grcp/jaeger"] = document["exporters"].pop(JAEGER_EXPORTER)
        for pipeline in document["service"]["pipelines"].values():
            pipeline["exporters"] = ["otlp_grcp/jaeger" if e == JAEGER_EXPORTER else e for e in pipeline["exporters"]]
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(document), encoding="utf-8")
    result = validate(otelcol, broken)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr


# ------------------------------------------------------------------------------------ 2. one collector
@dataclass
class Delivered:
    """One trace as the app exported it and as Jaeger returned it."""

    trace_id: str
    exported: list[SpanRecord]
    stored: list[SpanRecord]
    raw: str
    """Jaeger's JSON answer, as text."""


def through_one_collector(
    otelcol: str,
    jaeger_binary: str,
    tmp_path: Path,
    make_app: Callable[..., App],
    workload: Workload,
    *,
    guard: bool = True,
) -> tuple[list[Delivered], Path]:
    """The workload's content-capturing runs through one ``collector-config.yaml`` collector
    (OTLP/HTTP in) to Jaeger; ``guard=False`` removes the redaction guard from its pipeline."""
    jaeger = Jaeger(jaeger_binary, tmp_path)
    ports = CollectorPorts.free()
    config = sampler_config(ports=ports, jaeger_grpc=jaeger.otlp_grpc, workdir=tmp_path)
    if not guard:
        traces = config["service"]["pipelines"]["traces"]
        traces["processors"] = [p for p in traces["processors"] if p != REDACTION_PROCESSOR]
        del config["processors"][REDACTION_PROCESSOR]
    collector = Collector(otelcol, "collector", config, ports, tmp_path)
    with running(jaeger, collector):
        jaeger.up()
        collector.up()
        app = make_app(http_exporter(ports.http_endpoint))

        async def runs() -> None:
            await workload.multi_agent_run(app.tracer_provider, "conv-jaeger", openinference=True)
            # A failed run: the error (and its exception event) keeps it; and it is kept whole.
            assert await workload.outcome_run(app.tracer_provider, 0, fail=True)
            if workload.HAS_LINKS:
                await workload.linked_run(app.tracer_provider, tmp_path / "durable")

        asyncio.run(runs())
        app.flush()
        delivered = []
        for trace_id, spans in app.traces().items():
            stored = jaeger.wait_for_trace(trace_id, len(spans))
            raw = json.dumps(jaeger.trace_json(trace_id), ensure_ascii=False)
            delivered.append(Delivered(trace_id, exported_records(spans), stored, raw))
    return delivered, tmp_path / "audit" / "traces.json"


def by_span_id(records: Sequence[SpanRecord]) -> dict[str, SpanRecord]:
    out = {r.span_id: r for r in records}
    assert len(out) == len(records), "a span id twice"
    return out


def test_a_multi_agent_run_reaches_jaeger_whole_through_the_collector_without_its_content(
    otelcol: str, jaeger_binary: str, tmp_path: Path, make_app: Callable[..., App], workload: Workload
) -> None:
    delivered, audit_file = through_one_collector(otelcol, jaeger_binary, tmp_path, make_app, workload)
    assert len(delivered) == (3 if workload.HAS_LINKS else 2)
    (multi,) = [d for d in delivered if len(d.exported) == workload.MULTI_AGENT_SPANS]

    compared = Counter[str]()
    for trace in delivered:
        exported, stored = by_span_id(trace.exported), by_span_id(trace.stored)
        assert set(stored) == set(exported), "every span of the run, nothing else"
        for span_id, sent in exported.items():
            got = stored[span_id]
            # The tree, kinds, status, timing, events, links, resource and scope: as sent.
            assert (got.trace_id, got.parent_span_id, got.name, got.kind) == (
                sent.trace_id,
                sent.parent_span_id,
                sent.name,
                sent.kind,
            )
            assert (got.status_code, got.status_message) == (sent.status_code, sent.status_message)
            assert (got.start_time_unix_nano, got.end_time_unix_nano) == (
                sent.start_time_unix_nano,
                sent.end_time_unix_nano,
            )
            assert got.events == sent.events
            assert got.links == sent.links
            assert got.resource_attributes == sent.resource_attributes
            assert (got.scope_name, got.scope_version) == (sent.scope_name, sent.scope_version)
            # Every attribute, every gen_ai.* one, with its type (ints stay ints, arrays arrays),
            # except exactly the content attributes the guard deletes.
            assert got.attributes == {k: v for k, v in sent.attributes.items() if k not in GUARDED_KEYS}, sent.name
            compared["spans"] += 1
            compared["attributes"] += len(got.attributes)
            compared["gen_ai attributes"] += sum(k.startswith("gen_ai.") for k in got.attributes)
            compared["content attributes removed"] += len(set(sent.attributes) & GUARDED_KEYS)
            compared["events"] += len(got.events)
            compared["links"] += len(got.links)
        for marker in workload.CONTENT_MARKERS:
            assert marker not in trace.raw, f"content {marker!r} reached Jaeger"
        for secret in workload.SECRETS:
            assert secret not in trace.raw

    # What was compared is what matters: content was captured (and removed), errors carry
    # exception events, the resumed run its link.
    sent_keys = {k for d in delivered for r in d.exported for k in r.attributes}
    assert sent_keys >= GUARDED_KEYS, "capture (and openinference) was on: every content attribute was exported"
    exported_text = json.dumps([r.attributes for r in multi.exported], ensure_ascii=False)
    assert all(marker in exported_text for marker in workload.CONTENT_MARKERS)
    assert compared["events"] >= 1
    assert compared["links"] == (1 if workload.HAS_LINKS else 0)

    # The tree as a Jaeger user sees it: one root, an agent run nested under the tool that
    # called it, model calls as CLIENT spans, and the redaction and the failure visible.
    tree = multi.stored
    (root,) = [r for r in tree if r.parent_span_id is None]
    assert root.name.startswith("invoke_agent ") and root.attributes["gen_ai.conversation.id"] == "conv-jaeger"
    by_id = by_span_id(tree)
    nested = [r for r in tree if r.name.startswith("invoke_agent ") and r.parent_span_id is not None]
    assert nested and all(
        by_id[r.parent_span_id].name.startswith(("execute_tool ", "invoke_agent ")) for r in nested if r.parent_span_id
    )
    assert any(by_id[r.parent_span_id].name.startswith("execute_tool ") for r in nested if r.parent_span_id)
    assert len(agents_of(tree)) >= 2, "spans of both agents"
    kinds = {(r.name.split()[0], r.kind) for r in tree}
    assert kinds == {("invoke_agent", "INTERNAL"), ("chat", "CLIENT"), ("execute_tool", "INTERNAL")}
    assert any(r.attributes.get("flowra.redaction.applied") is True for r in tree)
    assert any(r.status_code == "ERROR" and r.name.startswith("execute_tool ") for r in tree)
    assert all(isinstance(r.attributes.get("gen_ai.usage.input_tokens", 0), int) for r in tree)

    # The audit file the sampler writes (after the guard) holds the same traces, content-free.
    audit = audit_file.read_text(encoding="utf-8")
    assert all(d.trace_id in audit or _b64_trace(d.trace_id) in audit for d in delivered)
    for marker in (*workload.CONTENT_MARKERS, *workload.SECRETS):
        assert marker not in audit
    print(f"\ncompared in Jaeger: {dict(compared)}")


def _b64_trace(trace_id: str) -> str:
    return base64.b64encode(bytes.fromhex(trace_id)).decode()


def test_without_the_guard_the_content_reaches_jaeger(
    otelcol: str, jaeger_binary: str, tmp_path: Path, make_app: Callable[..., App], workload: Workload
) -> None:
    """The paired negative: the same config minus ``attributes/redaction`` stores the content."""
    delivered, _ = through_one_collector(otelcol, jaeger_binary, tmp_path, make_app, workload, guard=False)
    (multi,) = [d for d in delivered if len(d.exported) == workload.MULTI_AGENT_SPANS]
    stored_keys = {k for r in multi.stored for k in r.attributes}
    assert stored_keys >= GUARDED_KEYS
    assert all(marker in multi.raw for marker in workload.CONTENT_MARKERS)
    for secret in workload.SECRETS:  # the app's own redaction hook still held
        assert secret not in multi.raw


def test_the_guard_deletes_exactly_the_content_attributes_and_the_sampler_keys_on_what_we_emit(
    workload: Workload, make_app: Callable[..., App]
) -> None:
    """No backend needed: the shipped config's guard list and sampling keys against the spans
    this line's adapter really emits (a typo in a key would silently never match)."""
    config = yaml.safe_load(COLLECTOR_CONFIG.read_text(encoding="utf-8"))
    assert {a["key"] for a in config["processors"][REDACTION_PROCESSOR]["actions"]} == GUARDED_KEYS
    app = make_app(processor=SimpleSpanProcessor(InMemorySpanExporter()))

    async def runs() -> list[bool]:
        await workload.multi_agent_run(app.tracer_provider, "conv-keys", openinference=True)
        return [
            await workload.outcome_run(app.tracer_provider, 0, fail=True),
            await workload.outcome_run(app.tracer_provider, 1, fail=True),
            await workload.outcome_run(app.tracer_provider, 2, fail=False),
        ]

    assert asyncio.run(runs()) == [True, False, False]
    traces = list(app.traces().values())
    emitted = [exported_records(spans) for spans in traces]

    def leaves(policy: dict[str, Any]) -> list[dict[str, Any]]:
        if policy["type"] == "and":
            return [leaf for sub in policy["and"]["and_sub_policy"] for leaf in leaves(sub)]
        return [policy]

    def matches(leaf: dict[str, Any], records: list[SpanRecord]) -> bool:
        if leaf["type"] == "string_attribute":
            key, values = leaf["string_attribute"]["key"], leaf["string_attribute"]["values"]
            return any(r.attributes.get(key) in values for r in records)
        if leaf["type"] == "boolean_attribute":
            key, value = leaf["boolean_attribute"]["key"], leaf["boolean_attribute"]["value"]
            return any(r.attributes.get(key) is value for r in records)
        if leaf["type"] == "status_code":
            return any(r.status_code in leaf["status_code"]["status_codes"] for r in records)
        return True  # latency, probabilistic: no key

    policies = {p["name"]: p for p in config["processors"]["tail_sampling"]["policies"]}
    kept_by = {name: [all(matches(leaf, r) for leaf in leaves(p)) for r in emitted] for name, p in policies.items()}
    # The multi-agent run (redacted, a tool failed), the run that failed, the run whose tool
    # failed, the run that went fine, in the order they ran.
    order = sorted(range(len(traces)), key=lambda i: min(s.start_time or 0 for s in traces[i]))
    assert [kept_by["agent-runs-with-an-error"][i] for i in order] == [True, True, True, False]
    assert [kept_by["agent-runs-with-a-redaction"][i] for i in order] == [True, False, False, False]


# ------------------------------------------------------------------------------------ 3. two tiers
@dataclass
class TwoTier:
    jaeger: Jaeger
    samplers: list[Collector]
    gateway: Collector | None


@pytest.fixture
def two_tier(otelcol: str, jaeger_binary: str, tmp_path: Path) -> Iterator[TwoTier]:
    """Jaeger, two samplers (``collector-config.yaml``) and the gateway (``collector-gateway.yaml``,
    its static resolver naming both samplers), all running."""
    with two_tier_stack(otelcol, jaeger_binary, tmp_path) as stack:
        yield TwoTier(stack.jaeger, stack.samplers, stack.gateway)


def failing(index: int) -> bool:
    """Two runs in every eight fail: an even index by a provider error (the run fails), an odd one
    by a tool that raises (the run goes on; its tool span is an error)."""
    return index % 8 in (0, 1)


def test_the_gateway_keeps_every_failed_run_whole_and_samples_the_rest_at_the_ratio(
    two_tier: TwoTier, make_app: Callable[..., App], workload: Workload
) -> None:
    gateway = two_tier.gateway
    assert gateway is not None
    app = make_app(grpc_exporter(gateway.ports.grpc_endpoint))
    began = time.monotonic()
    raised = run_outcome_runs(app, workload, RUNS, failing)
    run_s = time.monotonic() - began
    flush_s = app.flush()
    traces = app.traces()
    assert len(traces) == RUNS, "one trace per run"
    assert sum(raised) == len([i for i in range(RUNS) if failing(i) and i % 2 == 0]), "the provider errors failed runs"

    def outcome(spans: list[ReadableSpan]) -> bool:
        return any(s.status.status_code.name == "ERROR" for s in spans)

    failed = {t for t, spans in traces.items() if outcome(spans)}
    succeeded = set(traces) - failed
    assert len(failed) == len([i for i in range(RUNS) if failing(i)])

    samplers = two_tier.samplers
    settle(samplers, RUNS)
    arrived = {t: two_tier.jaeger.trace(t) for t in traces}
    kept = {t for t, spans in arrived.items() if spans}

    # Zero split: the samplers together met each trace id once, and both had a share.
    seen = [traces_seen(s) for s in samplers]
    assert sum(seen) == RUNS and min(seen) > 0, seen
    accepted = sum(s.metric("otelcol_receiver_accepted_spans") for s in samplers)
    assert accepted == sum(len(spans) for spans in traces.values())
    # Every failed run, whole: every span of every agent.
    for trace_id in failed:
        exported = exported_records(traces[trace_id])
        assert len(arrived[trace_id]) == len(exported), trace_id
        assert {r.span_id for r in arrived[trace_id]} == {r.span_id for r in exported}
        assert agents_of(arrived[trace_id]) == agents_of(exported) and len(agents_of(exported)) >= 2
    # Every sampled successful run whole as well, and nothing but our traces' spans sent.
    for trace_id in kept & succeeded:
        assert len(arrived[trace_id]) == len(traces[trace_id]), trace_id
    assert sent_to_jaeger(*samplers) == sum(len(arrived[t]) for t in kept)
    assert sum(sampled_on(s) for s in samplers) == len(kept)
    # Successful runs at the configured ratio.
    ratio = shipped_sampling_ratio()
    low, high = binomial_interval(len(succeeded), ratio)
    sampled_successes = len(kept & succeeded)
    assert low <= sampled_successes <= high, (sampled_successes, (low, high))

    rss = {p.name: rss_kib(p.pid) for p in (*samplers, gateway)}
    print(
        f"\n{len(failed)} failed runs kept whole ({len(failed) - sum(raised)} by a raising tool, {sum(raised)} "
        f"by a provider error); {sampled_successes} of {len(succeeded)} successful runs sampled at {ratio:.0%} "
        f"(99.9% interval {low}-{high}); split traces: {sum(seen) - RUNS} (samplers saw {seen} traces); "
        f"runs {run_s:.2f} s, flush {flush_s:.2f} s; RSS KiB {rss}"
    )


def test_without_the_gateway_round_robin_splits_traces_and_loses_failed_runs(
    otelcol: str, jaeger_binary: str, tmp_path: Path, make_app: Callable[..., App], workload: Workload
) -> None:
    """The paired negative: the same two samplers behind a plain round-robin (each export
    request to the next sampler) instead of the trace-id load balancer."""
    jaeger = Jaeger(jaeger_binary, tmp_path)
    samplers = []
    for index in range(2):
        ports = CollectorPorts.free()
        config = sampler_config(ports=ports, jaeger_grpc=jaeger.otlp_grpc, workdir=tmp_path / f"sampler{index}")
        samplers.append(Collector(otelcol, f"sampler{index}", config, ports, tmp_path))
    with running(jaeger, *samplers):
        jaeger.up()
        for sampler in samplers:
            sampler.up()
        exporters = [grpc_exporter(s.ports.grpc_endpoint) for s in samplers]
        app = make_app(processor=RoundRobin(exporters))
        runs = 16
        run_outcome_runs(app, workload, runs, failing)
        app.flush()
        traces = app.traces()
        seen = sum(traces_seen(s) for s in samplers)
        settle(samplers, seen)
        assert seen > runs, "some trace reached both samplers"
        failed = [t for t, spans in traces.items() if any(s.status.status_code.name == "ERROR" for s in spans)]
        incomplete = [t for t in failed if len(jaeger.trace(t)) < len(traces[t])]
        assert incomplete, "a failed run lost the half that went to the other sampler"


class RoundRobin(SpanProcessor):
    """Each ended span to the next exporter in turn (what a plain load balancer does per request)."""

    def __init__(self, exporters: Sequence[SpanExporter]) -> None:
        self._exporters = list(exporters)
        self._turn = 0

    def on_end(self, span: ReadableSpan) -> None:
        exporter = self._exporters[self._turn % len(self._exporters)]
        self._turn += 1
        exporter.export([span])

    def shutdown(self) -> None:
        for exporter in self._exporters:
            exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


# ------------------------------------------------------------------------------------ 4. outage
@dataclass
class Outage:
    run_s: float
    flush_s: float
    """The app's runs, and its flush, while Jaeger was down."""
    queued_batches: float
    queue_capacity: float
    down_s: float
    recovered_s: float
    """From Jaeger's start to the last span delivered."""
    delivered: dict[str, int]
    exported: dict[str, int]
    log: str


def jaeger_outage(
    otelcol: str,
    jaeger_binary: str,
    tmp_path: Path,
    make_app: Callable[..., App],
    workload: Workload,
    retry: dict[str, Any],
) -> Outage:
    """Failed runs (all kept) sent while the sampler's Jaeger is down; Jaeger started later."""
    jaeger = Jaeger(jaeger_binary, tmp_path)
    ports = CollectorPorts.free()
    config = sampler_config(ports=ports, jaeger_grpc=jaeger.otlp_grpc, workdir=tmp_path, retry=retry)
    sampler = Collector(otelcol, "sampler", config, ports, tmp_path)
    with running(jaeger, sampler):
        sampler.up()
        app = make_app(grpc_exporter(ports.grpc_endpoint))
        began = time.monotonic()
        run_outcome_runs(app, workload, OUTAGE_RUNS, lambda _: True)
        run_s = time.monotonic() - began
        flush_s = app.flush()
        traces = app.traces()
        spans = sum(len(s) for s in traces.values())
        wait_until(lambda: decisions(sampler) >= OUTAGE_RUNS, "sampling decisions")
        retries = retry.get("enabled", True)
        if retries:
            wait_until(lambda: sampler.metric("otelcol_exporter_queue_size", exporter=JAEGER_EXPORTER) > 0, "a queue")
            time.sleep(1.5)  # Jaeger stays down through several retries
        else:  # without retries the first failure is final
            wait_until(
                lambda: sampler.metric("otelcol_exporter_send_failed_spans", exporter=JAEGER_EXPORTER) >= spans,
                "the exporter to give up",
            )
        queued = sampler.metric("otelcol_exporter_queue_size", exporter=JAEGER_EXPORTER)
        capacity = sampler.metric("otelcol_exporter_queue_capacity", exporter=JAEGER_EXPORTER)
        down_s = time.monotonic() - began
        restarted = time.monotonic()
        jaeger.up()
        delivered: dict[str, int] = {}
        deadline = time.monotonic() + (15 if retries else 1.5)
        while time.monotonic() < deadline:
            delivered = {t: len(jaeger.trace(t)) for t in traces}
            if all(delivered[t] == len(traces[t]) for t in traces):
                break
            time.sleep(0.2)
        return Outage(
            run_s,
            flush_s,
            queued,
            capacity,
            down_s,
            time.monotonic() - restarted,
            delivered,
            {t: len(s) for t, s in traces.items()},
            sampler.log_text(),
        )


def test_jaeger_down_then_up_the_queue_delivers_everything_and_the_agents_never_wait(
    otelcol: str, jaeger_binary: str, tmp_path: Path, make_app: Callable[..., App], workload: Workload
) -> None:
    outage = jaeger_outage(otelcol, jaeger_binary, tmp_path, make_app, workload, SHORT_RETRY)
    assert outage.delivered == outage.exported, "every span of every run arrived once Jaeger was back"
    # Held in the sending queue meanwhile, well within its documented size (collector-config.yaml).
    shipped = yaml.safe_load(COLLECTOR_CONFIG.read_text(encoding="utf-8"))["exporters"][JAEGER_EXPORTER]
    assert outage.queue_capacity == shipped["sending_queue"]["queue_size"]
    assert 0 < outage.queued_batches < outage.queue_capacity
    assert "Exporting failed. Will retry the request after interval." in outage.log
    # The agents did not wait on Jaeger: the collector answered the app's flush at once (an app
    # exporting straight to a dead Jaeger would retry for seconds).
    assert outage.flush_s < 2.0, outage.flush_s
    print(
        f"\nJaeger down {outage.down_s:.1f} s: {len(outage.exported)} runs ({sum(outage.exported.values())} spans) "
        f"ran in {outage.run_s:.2f} s and flushed in {outage.flush_s:.2f} s, {outage.queued_batches:.0f} batch(es) "
        "queued "
        f"(capacity {outage.queue_capacity:.0f}), all delivered {outage.recovered_s:.1f} s after Jaeger started"
    )


def test_without_retries_an_outage_loses_the_traces(
    otelcol: str, jaeger_binary: str, tmp_path: Path, make_app: Callable[..., App], workload: Workload
) -> None:
    """The paired negative: with the exporter's retries off, what arrived during the outage is gone."""
    outage = jaeger_outage(otelcol, jaeger_binary, tmp_path, make_app, workload, {"enabled": False})
    assert outage.queued_batches == 0
    assert sum(outage.delivered.values()) == 0, outage.delivered


def test_the_stack_processes_are_gone_after_a_test(otelcol: str, jaeger_binary: str, tmp_path: Path) -> None:
    """Processes end with their context even when the block fails: no stray collector holds a port."""
    jaeger = Jaeger(jaeger_binary, tmp_path)
    with pytest.raises(RuntimeError, match="inside"), running(jaeger):
        jaeger.up()
        pid = jaeger.pid
        raise RuntimeError("inside")
    assert not jaeger.running()
    assert subprocess.run(["kill", "-0", str(pid)], capture_output=True, check=False).returncode != 0
