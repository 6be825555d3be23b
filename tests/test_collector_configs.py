"""The OpenTelemetry Collector configs we ship are internally consistent and wired together.

``collector-config.yaml`` is the collector (and, scaled out, the sampling tier);
``collector-gateway.yaml`` the load-balancing tier in front of several of them. No collector
binary runs here (none is packaged in a registry this project reaches; the one Python wheel
that bundles an ``otelcol-contrib`` carries only a handful of components, without the OTLP
receiver, tail sampling or load balancing), so this checks what the collector would reject or
silently mis-wire: pipelines naming undefined components, defined components no pipeline uses,
processor order, listen addresses, that the redaction guard covers exactly the GenAI content
keys, that tail sampling keeps what the docs promise, and that the gateway routes by trace id to
the samplers' port. The YAML snippets of docs/export.md are parsed too, so the documented stacks
stay loadable.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowra_otel.core import semconv

ROOT = Path(__file__).resolve().parent.parent
CONFIG_PATH = ROOT / "collector-config.yaml"
GATEWAY_PATH = ROOT / "collector-gateway.yaml"
DOCS_PATH = ROOT / "docs" / "export.md"

KINDS = ("receivers", "processors", "exporters")
CONTENT_KEYS = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
)
OPENINFERENCE_CONTENT_KEYS = frozenset({"input.value", "output.value"})
"""OpenInference's copies of content (``openinference=True`` writes them)."""
REDACTION_PROCESSOR = "attributes/redaction"
OTLP_GRPC_EXPORTER_TYPES = frozenset({"otlp_grpc", "otlp"})  # `otlp` is the pre-v0.144 (now deprecated) name


def component_type(component_id: str) -> str:
    """``otlp_grpc/jaeger`` -> ``otlp_grpc``: the part before the first slash names the component type."""
    return component_id.split("/", 1)[0]


def load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return load(CONFIG_PATH)


@pytest.fixture(scope="module")
def gateway() -> dict[str, Any]:
    return load(GATEWAY_PATH)


@pytest.fixture(scope="module", params=[CONFIG_PATH.name, GATEWAY_PATH.name])
def any_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Each shipped config, for the checks every collector config must pass."""
    return load(ROOT / request.param)


@pytest.fixture(scope="module")
def pipelines(config: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    result = config["service"]["pipelines"]
    assert isinstance(result, dict) and result
    return result


def pipelines_of_signal(pipelines: dict[str, dict[str, list[str]]], signal: str) -> list[dict[str, list[str]]]:
    """``traces`` and ``traces/anything`` are both traces pipelines."""
    return [p for name, p in pipelines.items() if component_type(name) == signal]


def test_top_level_sections(any_config: dict[str, Any]) -> None:
    assert set(any_config) <= {"extensions", "receivers", "processors", "exporters", "connectors", "service"}
    for kind in KINDS:
        assert isinstance(any_config[kind], dict) and any_config[kind], kind


def test_pipelines_reference_only_defined_components(any_config: dict[str, Any]) -> None:
    config = any_config
    pipelines: dict[str, dict[str, list[str]]] = config["service"]["pipelines"]
    for name, pipeline in pipelines.items():
        assert set(pipeline) <= set(KINDS), name
        assert pipeline.get("receivers") and pipeline.get("exporters"), f"{name} needs receivers and exporters"
        for kind in KINDS:
            ids = pipeline.get(kind, [])
            assert len(ids) == len(set(ids)), f"{name}: duplicate {kind}"
            undefined = set(ids) - set(config[kind])
            assert not undefined, f"pipeline {name} uses undefined {kind}: {sorted(undefined)}"


def test_every_defined_component_is_used(any_config: dict[str, Any]) -> None:
    config = any_config
    pipelines: dict[str, dict[str, list[str]]] = config["service"]["pipelines"]
    for kind in KINDS:
        used = {component for pipeline in pipelines.values() for component in pipeline.get(kind, [])}
        unused = set(config[kind]) - used
        assert not unused, f"{kind} defined but in no pipeline: {sorted(unused)}"
    assert set(config.get("extensions") or {}) == set(config["service"].get("extensions") or [])


def test_otlp_receiver_listens_on_all_interfaces(any_config: dict[str, Any]) -> None:
    protocols = any_config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"


def test_memory_limiter_first_and_batch_last(any_config: dict[str, Any]) -> None:
    config = any_config
    pipelines: dict[str, dict[str, list[str]]] = config["service"]["pipelines"]
    for name, pipeline in pipelines.items():
        processors = pipeline.get("processors", [])
        assert processors, f"{name} has no processors"
        assert component_type(processors[0]) == "memory_limiter", f"{name}: {processors}"
        assert component_type(processors[-1]) == "batch", f"{name}: {processors}"
    limiter = config["processors"]["memory_limiter"]
    assert set(limiter) >= {"check_interval", "limit_mib", "spike_limit_mib"}
    assert 0 < limiter["spike_limit_mib"] < limiter["limit_mib"]


def test_redaction_processor_covers_exactly_the_content_keys(
    config: dict[str, Any], pipelines: dict[str, dict[str, list[str]]]
) -> None:
    actions = config["processors"][REDACTION_PROCESSOR]["actions"]
    keys = [action["key"] for action in actions]
    assert len(keys) == len(set(keys)), f"duplicate keys: {keys}"
    assert set(keys) == CONTENT_KEYS | OPENINFERENCE_CONTENT_KEYS
    for action in actions:
        assert action["action"] in {"delete", "hash"}, action
        assert set(action) == {"key", "action"}, f"no include/exclude/pattern: {action}"
    # On in every traces pipeline, before batching; never needed for metrics (they carry no content).
    for pipeline in pipelines_of_signal(pipelines, "traces"):
        assert REDACTION_PROCESSOR in pipeline["processors"]
    for pipeline in pipelines_of_signal(pipelines, "metrics"):
        assert REDACTION_PROCESSOR not in pipeline["processors"]


def test_content_keys_are_the_semconv_content_attributes() -> None:
    """The keys flowra_otel.semconv takes from the semantic-conventions package (a rename there shows here)."""
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g

    assert {
        g.GEN_AI_INPUT_MESSAGES,
        g.GEN_AI_OUTPUT_MESSAGES,
        g.GEN_AI_SYSTEM_INSTRUCTIONS,
        g.GEN_AI_TOOL_CALL_ARGUMENTS,
        g.GEN_AI_TOOL_CALL_RESULT,
    } == CONTENT_KEYS
    assert {semconv.OI_INPUT_VALUE, semconv.OI_OUTPUT_VALUE} == OPENINFERENCE_CONTENT_KEYS


def test_traces_go_to_jaeger_and_tempo(config: dict[str, Any], pipelines: dict[str, dict[str, list[str]]]) -> None:
    exporters = config["exporters"]
    backends = {"jaeger": "jaeger:4317", "tempo": "tempo:4317"}
    for pipeline in pipelines_of_signal(pipelines, "traces"):
        for backend, endpoint in backends.items():
            (exporter_id,) = [e for e in pipeline["exporters"] if e.endswith(f"/{backend}")]
            assert component_type(exporter_id) in OTLP_GRPC_EXPORTER_TYPES
            assert exporters[exporter_id]["endpoint"] == endpoint
            assert exporters[exporter_id]["tls"]["insecure"] is True
        assert "debug" in pipeline["exporters"]


def test_metrics_go_to_prometheus_and_debug_not_to_trace_stores(
    config: dict[str, Any], pipelines: dict[str, dict[str, list[str]]]
) -> None:
    metrics = pipelines_of_signal(pipelines, "metrics")
    assert metrics
    for pipeline in metrics:
        assert set(pipeline["exporters"]) >= {"debug", "prometheus"}
        # Jaeger and Tempo store traces only.
        assert not [e for e in pipeline["exporters"] if e.endswith(("/jaeger", "/tempo"))]
    assert config["exporters"]["prometheus"]["endpoint"] == "0.0.0.0:8889"


def test_current_exporter_syntax(config: dict[str, Any]) -> None:
    types = {component_type(e) for e in config["exporters"]}
    assert "logging" not in types, "the logging exporter was removed; use debug"
    assert config["exporters"]["debug"]["verbosity"] == "basic"
    (file_id,) = [e for e in config["exporters"] if component_type(e) == "file"]
    assert config["exporters"][file_id]["path"] == "/var/log/otel/traces.json"
    assert config["exporters"][file_id].get("format", "json") == "json"


# --- docs/export.md ---------------------------------------------------------------------------


def yaml_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```ya?ml\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL)


def test_docs_yaml_snippets_parse_and_wire_the_collector_config() -> None:
    blocks = [yaml.safe_load(block) for block in yaml_blocks(DOCS_PATH.read_text(encoding="utf-8"))]
    assert blocks, "docs/export.md has no ```yaml blocks"
    composes = [b for b in blocks if isinstance(b, dict) and "services" in b]
    mounting = {
        name: [c for c in composes if any(name in str(v) for s in c["services"].values() for v in s.get("volumes", []))]
        for name in (CONFIG_PATH.name, GATEWAY_PATH.name)
    }
    (full_stack,) = [c for c in mounting[CONFIG_PATH.name] if c not in mounting[GATEWAY_PATH.name]]
    services = full_stack["services"]
    assert {"otel-collector", "jaeger", "tempo", "grafana"} <= set(services)
    collector = services["otel-collector"]
    assert any(str(v).startswith("./collector-config.yaml:") for v in collector["volumes"])
    ports = {str(p) for p in collector["ports"]}
    assert {"4317:4317", "4318:4318"} <= ports
    tempo_configs = [b for b in blocks if isinstance(b, dict) and "distributor" in b]
    assert len(tempo_configs) == 1, "exactly one tempo.yaml snippet"
    otlp = tempo_configs[0]["distributor"]["receivers"]["otlp"]["protocols"]
    assert otlp["grpc"]["endpoint"].endswith(":4317")


# --- tail sampling (collector-config.yaml) ----------------------------------------------------


def go_duration_seconds(value: str) -> float:
    """``60s`` / ``1m30s`` / ``500ms`` -> seconds (the subset of Go durations these configs use)."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", value)
    assert parts and "".join(n + u for n, u in parts) == value, value
    return sum(float(n) * units[u] for n, u in parts)


def leaf_policies(policy: dict[str, Any]) -> list[dict[str, Any]]:
    if policy["type"] == "and":
        return [leaf for sub in policy["and"]["and_sub_policy"] for leaf in leaf_policies(sub)]
    return [policy]


def is_agent_run_filter(policy: dict[str, Any]) -> bool:
    agent_runs: dict[str, Any] = {"key": "gen_ai.operation.name", "values": ["invoke_agent"]}
    return bool(policy["type"] == "string_attribute" and policy["string_attribute"] == agent_runs)


@pytest.fixture(scope="module")
def sampling_policies(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    policies = config["processors"]["tail_sampling"]["policies"]
    names = [p["name"] for p in policies]
    assert len(names) == len(set(names)), names
    return {p["name"]: p for p in policies}


def test_tail_sampling_runs_on_every_traces_pipeline_before_the_guard_and_batching(
    pipelines: dict[str, dict[str, list[str]]],
) -> None:
    for pipeline in pipelines_of_signal(pipelines, "traces"):
        processors = pipeline["processors"]
        assert processors.index("tail_sampling") < processors.index(REDACTION_PROCESSOR) < processors.index("batch")
    for pipeline in pipelines_of_signal(pipelines, "metrics"):
        assert "tail_sampling" not in pipeline["processors"]


def test_tail_sampling_keeps_failed_redacted_and_slow_agent_runs(
    sampling_policies: dict[str, dict[str, Any]],
) -> None:
    keep_all = [p for p in sampling_policies.values() if p["type"] != "probabilistic"]
    leaves = {p["name"]: leaf_policies(p) for p in keep_all}

    errors = [n for n, ls in leaves.items() if any(leaf["type"] == "status_code" for leaf in ls)]
    assert len(errors) == 1
    (error_leaf,) = [leaf for leaf in leaves[errors[0]] if leaf["type"] == "status_code"]
    assert error_leaf["status_code"]["status_codes"] == ["ERROR"]

    redacted = [n for n, ls in leaves.items() if any(leaf["type"] == "boolean_attribute" for leaf in ls)]
    assert len(redacted) == 1
    assert sampling_policies[redacted[0]]["boolean_attribute"] == {"key": "flowra.redaction.applied", "value": True}

    slow = [n for n, ls in leaves.items() if any(leaf["type"] == "latency" for leaf in ls)]
    assert len(slow) == 1
    (latency_leaf,) = [leaf for leaf in leaves[slow[0]] if leaf["type"] == "latency"]
    assert latency_leaf["latency"]["threshold_ms"] >= 1000

    # Errors and slowness count for agent runs: each is AND-ed with an invoke_agent span.
    for name in (errors[0], slow[0]):
        assert sampling_policies[name]["type"] == "and"
        assert sum(is_agent_run_filter(leaf) for leaf in leaves[name]) == 1, name


def test_tail_sampling_samples_the_rest(sampling_policies: dict[str, dict[str, Any]]) -> None:
    (rest,) = [p for p in sampling_policies.values() if p["type"] == "probabilistic"]
    assert 0 < rest["probabilistic"]["sampling_percentage"] < 100


def test_tail_sampling_waits_for_a_whole_agent_run(config: dict[str, Any]) -> None:
    tail_sampling = config["processors"]["tail_sampling"]
    decision_wait = go_duration_seconds(tail_sampling["decision_wait"])
    assert decision_wait >= 30, "agent runs take tens of seconds: a shorter wait decides before the root ends"
    (slow,) = [
        leaf for policy in tail_sampling["policies"] for leaf in leaf_policies(policy) if leaf["type"] == "latency"
    ]
    assert slow["latency"]["threshold_ms"] / 1000 <= decision_wait, "a slow run must be seen whole to count as slow"
    assert tail_sampling["num_traces"] > 0


# --- the load-balancing tier (collector-gateway.yaml) -----------------------------------------


def test_gateway_routes_every_span_by_trace_id_to_the_samplers(gateway: dict[str, Any], config: dict[str, Any]) -> None:
    pipelines = gateway["service"]["pipelines"]
    traces = pipelines_of_signal(pipelines, "traces")
    assert traces
    for pipeline in traces:
        assert pipeline["exporters"] == ["load_balancing"], "every span, and only through the load balancer"
    balancer = gateway["exporters"]["load_balancing"]
    assert balancer["routing_key"] == "traceID"
    template = balancer["protocol"]["otlp"]
    assert "endpoint" not in template, "the load balancer sets each sampler's endpoint itself"
    assert template["tls"]["insecure"] is True
    (resolver_kind,) = [kind for kind in ("dns", "static", "k8s") if kind in balancer["resolver"]]
    assert resolver_kind == "dns"
    # The port the gateway sends to is the samplers' OTLP/gRPC port.
    sampler_grpc_port = int(config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].rsplit(":", 1)[1])
    # A string: the collector rejects a number there ("expected type 'string'"; otelcol validate).
    assert balancer["resolver"]["dns"]["port"] == str(sampler_grpc_port)


def test_gateway_is_stateless_and_leaves_sampling_and_redaction_to_the_samplers(gateway: dict[str, Any]) -> None:
    types = {component_type(p) for p in gateway["processors"]}
    assert "tail_sampling" not in types
    assert REDACTION_PROCESSOR not in gateway["processors"]
    # Metrics do not need trace affinity and never go through the trace-id balancer.
    for pipeline in pipelines_of_signal(gateway["service"]["pipelines"], "metrics"):
        assert "load_balancing" not in pipeline["exporters"]


def test_docs_show_the_two_tier_layout() -> None:
    """The scale-out compose snippet: gateways in front, the samplers behind under the DNS name
    the gateway's resolver asks for, each sampler running collector-config.yaml."""
    blocks = [yaml.safe_load(block) for block in yaml_blocks(DOCS_PATH.read_text(encoding="utf-8"))]
    (two_tier,) = [
        b
        for b in blocks
        if isinstance(b, dict)
        and "services" in b
        and any(GATEWAY_PATH.name in str(v) for s in b["services"].values() for v in s.get("volumes", []))
    ]
    services = two_tier["services"]
    hostname = load(GATEWAY_PATH)["exporters"]["load_balancing"]["resolver"]["dns"]["hostname"]
    assert hostname in services, f"the gateway resolves {hostname!r}: it must be the samplers' service name"
    sampler = services[hostname]
    assert any(str(v).startswith(f"./{CONFIG_PATH.name}:") for v in sampler["volumes"])
    assert "ports" not in sampler, "samplers are reached through the gateway only (and scale without port clashes)"
    (gateway_service,) = [
        s for s in services.values() if any(str(v).startswith(f"./{GATEWAY_PATH.name}:") for v in s.get("volumes", []))
    ]
    assert {"4317:4317", "4318:4318"} <= {str(p) for p in gateway_service["ports"]}


def test_backends_doc_dedicates_tempo_columns_tempo_accepts() -> None:
    """docs/backends.md: the dedicated columns it recommends parse, use types Tempo has, and
    cover the attributes agent queries filter by."""
    blocks = [yaml.safe_load(b) for b in yaml_blocks((ROOT / "docs" / "backends.md").read_text(encoding="utf-8"))]
    columns = [
        column
        for block in blocks
        if isinstance(block, dict)
        for column in (
            block.get("storage", {}).get("trace", {}).get("block", {}).get("parquet_dedicated_columns")
            or block.get("parquet_dedicated_columns")
            or []
        )
    ]
    names = {c["name"] for c in columns}
    assert {"gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.conversation.id", "flowra.redaction.fields"} <= names
    for column in columns:
        assert column["type"] in {"string", "int"}, column  # no bool columns: flowra.redaction.applied cannot be one
        assert column["scope"] in {"span", "resource", "event"}, column
        assert set(column.get("options", [])) <= {"array", "blob"}, column
    assert "flowra.redaction.applied" not in names
