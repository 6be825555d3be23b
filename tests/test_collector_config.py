"""collector-config.yaml (the OpenTelemetry Collector config we ship) is internally consistent.

No collector binary runs here, so this checks what the collector would reject or silently
mis-wire: pipelines naming undefined components, defined components no pipeline uses, processor
order, listen addresses, and that the redaction guard covers exactly the GenAI content keys.
The YAML snippets of docs/export.md are parsed too, so the documented stack stays loadable.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIG_PATH = ROOT / "collector-config.yaml"
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
REDACTION_PROCESSOR = "attributes/redaction"
OTLP_GRPC_EXPORTER_TYPES = frozenset({"otlp_grpc", "otlp"})  # `otlp` is the pre-v0.144 (now deprecated) name


def component_type(component_id: str) -> str:
    """``otlp_grpc/jaeger`` -> ``otlp_grpc``: the part before the first slash names the component type."""
    return component_id.split("/", 1)[0]


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    loaded = yaml.safe_load(CONFIG_PATH.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def pipelines(config: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    result = config["service"]["pipelines"]
    assert isinstance(result, dict) and result
    return result


def pipelines_of_signal(pipelines: dict[str, dict[str, list[str]]], signal: str) -> list[dict[str, list[str]]]:
    """``traces`` and ``traces/anything`` are both traces pipelines."""
    return [p for name, p in pipelines.items() if component_type(name) == signal]


def test_top_level_sections(config: dict[str, Any]) -> None:
    assert set(config) <= {"extensions", "receivers", "processors", "exporters", "connectors", "service"}
    for kind in KINDS:
        assert isinstance(config[kind], dict) and config[kind], kind


def test_pipelines_reference_only_defined_components(
    config: dict[str, Any], pipelines: dict[str, dict[str, list[str]]]
) -> None:
    for name, pipeline in pipelines.items():
        assert set(pipeline) <= set(KINDS), name
        assert pipeline.get("receivers") and pipeline.get("exporters"), f"{name} needs receivers and exporters"
        for kind in KINDS:
            ids = pipeline.get(kind, [])
            assert len(ids) == len(set(ids)), f"{name}: duplicate {kind}"
            undefined = set(ids) - set(config[kind])
            assert not undefined, f"pipeline {name} uses undefined {kind}: {sorted(undefined)}"


def test_every_defined_component_is_used(config: dict[str, Any], pipelines: dict[str, dict[str, list[str]]]) -> None:
    for kind in KINDS:
        used = {component for pipeline in pipelines.values() for component in pipeline.get(kind, [])}
        unused = set(config[kind]) - used
        assert not unused, f"{kind} defined but in no pipeline: {sorted(unused)}"
    assert set(config.get("extensions") or {}) == set(config["service"].get("extensions") or [])


def test_otlp_receiver_listens_on_all_interfaces(config: dict[str, Any]) -> None:
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"


def test_memory_limiter_first_and_batch_last(
    config: dict[str, Any], pipelines: dict[str, dict[str, list[str]]]
) -> None:
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
    assert set(keys) == CONTENT_KEYS
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
    assert len(composes) == 1, "exactly one docker-compose snippet"
    services = composes[0]["services"]
    assert {"otel-collector", "jaeger", "tempo", "grafana"} <= set(services)
    collector = services["otel-collector"]
    assert any(str(v).startswith("./collector-config.yaml:") for v in collector["volumes"])
    ports = {str(p) for p in collector["ports"]}
    assert {"4317:4317", "4318:4318"} <= ports
    tempo_configs = [b for b in blocks if isinstance(b, dict) and "distributor" in b]
    assert len(tempo_configs) == 1, "exactly one tempo.yaml snippet"
    otlp = tempo_configs[0]["distributor"]["receivers"]["otlp"]["protocols"]
    assert otlp["grpc"]["endpoint"].endswith(":4317")
