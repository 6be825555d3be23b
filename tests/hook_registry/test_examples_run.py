"""The examples run as documented (``python examples/X.py``) and print what their docstrings promise.

Each runs in a fresh interpreter, the way a reader runs it, with no ``OTEL_*`` variable from the
developer's shell. They are written for the current flowra API (entry steps, agents as tools),
so they are skipped on flowra older than 0.0.6; ``multi_agent.py`` also defines its own agent
with plain dataclass spec/result, which flowra accepts from 0.0.7.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flowra_otel.core import semconv
from tests.hook_registry.flowra_support import FLOWRA_VERSION, HAS_AGENT_TOOLS, HAS_PLAIN_RESULTS
from tests.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.skipif(
    not HAS_AGENT_TOOLS, reason=f"the examples use the flowra >= 0.0.6 API; installed: {FLOWRA_VERSION}"
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hook_registry"


def run_example(name: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    clean.update(env)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=EXAMPLES.parents[1],
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.mark.skipif(
    not HAS_PLAIN_RESULTS,
    reason=f"multi_agent.py's ResearchAgent returns a plain dataclass (flowra >= 0.0.7); installed: {FLOWRA_VERSION}",
)
def test_multi_agent_prints_the_nested_tree() -> None:
    out = run_example("multi_agent.py").stdout
    lines = out.splitlines()
    assert lines[0].startswith("trace ")
    assert lines[1].startswith("invoke_agent assistant  ")
    assert any(line.startswith("├─ execute_tool research  ") for line in lines)
    assert any(line.startswith("│  └─ invoke_agent research  ") for line in lines)
    assert any(line.startswith("│     ├─ execute_tool search_web  ") for line in lines)
    assert out.rstrip().endswith(
        "answer: Python 3.13 adds a new interactive shell, an experimental free-threaded build and a JIT."
    )


def test_redaction_audit_is_clean_with_the_hook_and_finds_the_leak_without() -> None:
    out = run_example("redaction_audit.py").stdout
    clean, leaky = out.split("=== audit without it (a planted leak): exit status 1\n")
    assert clean.startswith("=== audit with the redaction hook: exit status 0\n")
    assert '      flowra.redaction.result.handlers = ["__main__.scrub_customer_record"]' in clean
    assert "result: clean" in clean
    assert "LEAK api_key: span 'execute_tool lookup_customer'" in leaky
    assert "LEAK email: span 'chat gpt-4o'" in leaky
    assert "result: LEAK (4 finding(s))" in leaky


def test_otlp_export_without_an_endpoint_falls_back_to_the_console() -> None:
    out = run_example("otlp_export.py").stdout
    assert out.startswith("OTEL_EXPORTER_OTLP_ENDPOINT is not set: printing the trace to the console instead\n")
    assert "\ninvoke_agent assistant  " in out
    assert out.rstrip().endswith("answer: It is sunny and 24 C in Lisbon.")


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_otlp_export_ships_spans_and_metrics(protocol: str) -> None:
    with OtlpReceiver() as rx:
        endpoint = rx.http_endpoint if protocol == "http/protobuf" else rx.grpc_endpoint
        out = run_example(
            "otlp_export.py",
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
            OTEL_SERVICE_NAME="weather-bot",
        ).stdout
        spans = rx.wait_for_spans(4)
        points = rx.wait_for_metric_points("gen_ai.client.token.usage", 2)
    assert out.startswith(f"exporting traces and metrics to {endpoint} over {protocol}\n")
    assert "export: flushed" in out
    assert "invoke_agent" not in out  # no console tree when an endpoint is set
    assert sorted(s.name for s in spans) == [
        "chat claude-sonnet-4-5",
        "chat claude-sonnet-4-5",
        "execute_tool get_weather",
        "invoke_agent assistant",
    ]
    assert {s.resource_attributes["service.name"] for s in spans} == {"weather-bot"}
    assert {p.resource_attributes["service.name"] for p in points} == {"weather-bot"}
    assert {p.attributes[semconv.GEN_AI_TOKEN_TYPE] for p in points} == {"input", "output"}


def test_otlp_export_to_a_traces_only_endpoint_sends_no_metrics() -> None:
    """The docstring's Jaeger recipe: the traces endpoint alone, so no metric exporter is built."""
    with OtlpReceiver() as rx:
        out = run_example(
            "otlp_export.py",
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=rx.http_traces_endpoint,
            OTEL_SERVICE_NAME="weather-bot",
        ).stdout
        spans = rx.wait_for_spans(4)
        attempts = {(a.protocol, a.signal) for a in rx.attempts}
    assert out.startswith(f"exporting traces only to {rx.http_traces_endpoint} over http/protobuf\n")
    assert "export: flushed" in out
    assert len(spans) == 4
    assert attempts == {("http", "traces")}
