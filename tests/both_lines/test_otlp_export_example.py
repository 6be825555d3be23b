"""The OTLP export example (``examples/otlp_export.py``, ``examples/hook_registry/otlp_export.py``
for flowra 0.0.3 - 0.0.8) does what its docstring promises, on either line: the console without an
endpoint, traces and metrics over HTTP and gRPC to a real OTLP receiver with the service name
from the environment, and no metric exporter for a traces-only endpoint (the Jaeger recipe).

Each run is a fresh interpreter with no ``OTEL_*`` variable from the developer's shell.
"""

from __future__ import annotations

import subprocess

import pytest

from flowra_otel.core import semconv
from tests import examples_run
from tests.both_lines.line import S
from tests.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.skipif(S.EXAMPLES_SKIP is not None, reason=S.EXAMPLES_SKIP or "")

SPAN_NAMES = ["chat claude-sonnet-4-5", "chat claude-sonnet-4-5", "execute_tool get_weather", "invoke_agent assistant"]


def run_example(**env: str) -> subprocess.CompletedProcess[str]:
    return examples_run.run_example(S.EXAMPLES, "otlp_export.py", **env)


def test_otlp_export_without_an_endpoint_falls_back_to_the_console() -> None:
    out = run_example().stdout
    assert out.startswith("OTEL_EXPORTER_OTLP_ENDPOINT is not set: printing the trace to the console instead\n")
    assert "\ninvoke_agent assistant  " in out
    assert out.rstrip().endswith("answer: It is sunny and 24 C in Lisbon.")


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_otlp_export_ships_spans_and_metrics(protocol: str) -> None:
    with OtlpReceiver() as rx:
        endpoint = rx.http_endpoint if protocol == "http/protobuf" else rx.grpc_endpoint
        out = run_example(
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
            OTEL_SERVICE_NAME="weather-bot",
        ).stdout
        spans = rx.wait_for_spans(4)
        points = rx.wait_for_metric_points("gen_ai.client.token.usage", 2)
    assert out.startswith(f"exporting traces and metrics to {endpoint} over {protocol}\n")
    assert "export: flushed" in out
    assert "invoke_agent" not in out  # no console tree when an endpoint is set
    assert sorted(s.name for s in spans) == SPAN_NAMES
    assert {s.resource_attributes["service.name"] for s in spans} == {"weather-bot"}
    assert {p.resource_attributes["service.name"] for p in points} == {"weather-bot"}
    assert {p.attributes[semconv.GEN_AI_TOKEN_TYPE] for p in points} == {"input", "output"}


def test_otlp_export_to_a_traces_only_endpoint_sends_no_metrics() -> None:
    """The docstring's Jaeger recipe: the traces endpoint alone, so no metric exporter is built."""
    with OtlpReceiver() as rx:
        out = run_example(
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=rx.http_traces_endpoint, OTEL_SERVICE_NAME="weather-bot"
        ).stdout
        spans = rx.wait_for_spans(4)
        attempts = {(a.protocol, a.signal) for a in rx.attempts}
    assert out.startswith(f"exporting traces only to {rx.http_traces_endpoint} over http/protobuf\n")
    assert "export: flushed" in out
    assert len(spans) == 4
    assert attempts == {("http", "traces")}
