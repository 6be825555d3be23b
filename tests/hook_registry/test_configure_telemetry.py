"""configure_telemetry: what the standard OTEL_* environment turns into.

Everything in-process uses ``set_global=False``: the OpenTelemetry API lets a process set its
global providers once, so a test that did would leak into every later test. What only the
global path does (idempotence, reusing an ``opentelemetry-instrument`` setup, the atexit hook)
is checked in a fresh interpreter instead.

The OTLP endpoints point at a closed local port: exporters are built, never used (no span or
measurement is recorded in those tests), so nothing touches the network.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, InMemoryMetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.core.console import ConsoleTreeExporter
from flowra_otel.export import (
    DEFAULT_TIMEOUT_MILLIS,
    TelemetryHandles,
    configure_telemetry,
    resolve_metrics_exporters,
    resolve_otlp_protocol,
)

CLOSED_PORT = "http://127.0.0.1:9"


@pytest.fixture(autouse=True)
def clean_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_* variable from the developer's shell may change what these tests see."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


@pytest.fixture
def configure() -> Iterator[Callable[..., TelemetryHandles]]:
    """``configure_telemetry(set_global=False, register_atexit=False)``, shut down afterwards."""
    made: list[TelemetryHandles] = []

    def make(**options: Any) -> TelemetryHandles:
        handles = configure_telemetry(set_global=False, register_atexit=False, **options)
        made.append(handles)
        return handles

    yield make
    for handles in made:
        handles.shutdown()


# --- no endpoint: the console tree -------------------------------------------------------------


def test_no_endpoint_prints_trees_to_the_console(configure: Callable[..., TelemetryHandles]) -> None:
    out = io.StringIO()
    handles = configure(console_stream=out)

    assert [type(e) for e in handles.span_exporters] == [ConsoleTreeExporter]
    assert [type(p) for p in handles.span_processors] == [SimpleSpanProcessor]
    assert handles.metric_readers == ()
    assert handles.metric_exporters == ()

    tracer = handles.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent a"), tracer.start_as_current_span("chat m"):
        pass

    lines = out.getvalue().splitlines()
    assert lines[0].startswith("trace ")
    assert lines[1].startswith("invoke_agent a  ")
    assert lines[2].startswith("└─ chat m  ")


def test_no_endpoint_meter_provider_works_without_a_reader(configure: Callable[..., TelemetryHandles]) -> None:
    handles = configure(console_stream=io.StringIO())
    counter = handles.meter_provider.get_meter("test").create_counter("c")
    counter.add(1)  # accepted and discarded: nothing to collect it

    assert handles.force_flush(1_000) is True


def test_console_false_without_endpoint_exports_nothing(configure: Callable[..., TelemetryHandles]) -> None:
    handles = configure(console=False)

    assert handles.span_exporters == ()
    assert handles.span_processors == ()


# --- OTLP: protocol and endpoint selection ----------------------------------------------------


@pytest.mark.parametrize(
    ("env", "span_exporter_type", "metric_exporter_type"),
    [
        pytest.param({}, HttpSpanExporter, HttpMetricExporter, id="default-http"),
        pytest.param({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, HttpSpanExporter, HttpMetricExporter, id="http"),
        pytest.param({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, GrpcSpanExporter, GrpcMetricExporter, id="grpc"),
        pytest.param({"OTEL_EXPORTER_OTLP_PROTOCOL": " GRPC "}, GrpcSpanExporter, GrpcMetricExporter, id="case-space"),
        pytest.param({"OTEL_EXPORTER_OTLP_PROTOCOL": ""}, HttpSpanExporter, HttpMetricExporter, id="empty-is-unset"),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
            HttpSpanExporter,
            GrpcMetricExporter,
            id="traces-override",
        ),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"},
            HttpSpanExporter,
            GrpcMetricExporter,
            id="metrics-override",
        ),
    ],
)
def test_protocol_selects_the_exporter_classes(
    monkeypatch: pytest.MonkeyPatch,
    configure: Callable[..., TelemetryHandles],
    env: dict[str, str],
    span_exporter_type: type,
    metric_exporter_type: type,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", CLOSED_PORT)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    handles = configure()

    assert [type(e) for e in handles.span_exporters] == [span_exporter_type]
    assert [type(p) for p in handles.span_processors] == [BatchSpanProcessor]
    assert [type(e) for e in handles.metric_exporters] == [metric_exporter_type]
    assert [type(r) for r in handles.metric_readers] == [PeriodicExportingMetricReader]


def test_signal_specific_endpoints(monkeypatch: pytest.MonkeyPatch, configure: Callable[..., TelemetryHandles]) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{CLOSED_PORT}/v1/traces")
    traces_only = configure()

    assert [type(e) for e in traces_only.span_exporters] == [HttpSpanExporter]
    assert traces_only.metric_readers == ()

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", f"{CLOSED_PORT}/v1/metrics")
    metrics_only = configure(console_stream=io.StringIO())

    assert [type(e) for e in metrics_only.span_exporters] == [ConsoleTreeExporter]
    assert [type(e) for e in metrics_only.metric_exporters] == [HttpMetricExporter]


def test_console_true_adds_the_tree_next_to_otlp(
    monkeypatch: pytest.MonkeyPatch, configure: Callable[..., TelemetryHandles]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", CLOSED_PORT)
    handles = configure(console=True, console_stream=io.StringIO())

    assert [type(e) for e in handles.span_exporters] == [HttpSpanExporter, ConsoleTreeExporter]
    assert [type(p) for p in handles.span_processors] == [BatchSpanProcessor, SimpleSpanProcessor]


@pytest.mark.parametrize("value", ["http/json", "grpcs", "http", "otlp"])
@pytest.mark.parametrize(
    "variable",
    ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"],
)
def test_unsupported_protocol_raises(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", CLOSED_PORT)
    monkeypatch.setenv(variable, value)

    with pytest.raises(ValueError, match=rf"^{variable}='{value}' is not a supported OTLP protocol") as error:
        configure_telemetry(set_global=False, register_atexit=False)

    assert "'grpc' or 'http/protobuf'" in str(error.value)
    assert ("http/json" in str(error.value).split(":", 1)[1]) == (value == "http/json")


def test_protocol_without_an_endpoint_is_not_consulted(
    monkeypatch: pytest.MonkeyPatch, configure: Callable[..., TelemetryHandles]
) -> None:
    """Nothing would use it: the console gets the spans and metrics go nowhere."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "bogus")

    handles = configure(console_stream=io.StringIO())

    assert [type(e) for e in handles.span_exporters] == [ConsoleTreeExporter]
    assert handles.metric_readers == ()


def test_resolve_otlp_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_otlp_protocol("traces") == "http/protobuf"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf")

    assert resolve_otlp_protocol("traces") == "grpc"
    assert resolve_otlp_protocol("metrics") == "http/protobuf"


# --- metrics only when wanted ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({}, (), id="nothing-set"),
        pytest.param({"OTEL_EXPORTER_OTLP_ENDPOINT": CLOSED_PORT}, ("otlp",), id="generic-endpoint"),
        pytest.param({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": CLOSED_PORT}, ("otlp",), id="metrics-endpoint"),
        pytest.param({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": CLOSED_PORT}, (), id="traces-endpoint-only"),
        pytest.param({"OTEL_EXPORTER_OTLP_ENDPOINT": CLOSED_PORT, "OTEL_METRICS_EXPORTER": "none"}, (), id="none-wins"),
        pytest.param({"OTEL_METRICS_EXPORTER": " None "}, (), id="none-case-space"),
        pytest.param({"OTEL_METRICS_EXPORTER": "otlp"}, ("otlp",), id="explicit-otlp"),
        pytest.param({"OTEL_METRICS_EXPORTER": "console"}, ("console",), id="console"),
        pytest.param({"OTEL_METRICS_EXPORTER": "otlp, console,otlp"}, ("otlp", "console"), id="list"),
        pytest.param({"OTEL_METRICS_EXPORTER": ""}, (), id="empty-is-unset"),
    ],
)
def test_resolve_metrics_exporters(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: tuple[str]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    assert resolve_metrics_exporters() == expected


@pytest.mark.parametrize("value", ["prometheus", "otlp,bogus", "none,otlp", "jaeger"])
def test_unsupported_metrics_exporter_raises(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", value)

    with pytest.raises(ValueError, match=rf"^OTEL_METRICS_EXPORTER='{value}': configure_telemetry supports") as error:
        configure_telemetry(set_global=False, register_atexit=False)

    assert ("PrometheusMetricReader" in str(error.value)) == (value == "prometheus")


def test_metrics_exporter_none_keeps_traces_on_otlp(
    monkeypatch: pytest.MonkeyPatch, configure: Callable[..., TelemetryHandles]
) -> None:
    """The set-up for Jaeger, Tempo or Phoenix behind one base URL: traces yes, metrics no."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", CLOSED_PORT)
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")

    handles = configure()

    assert [type(e) for e in handles.span_exporters] == [HttpSpanExporter]
    assert handles.metric_readers == ()
    assert handles.metric_exporters == ()


def test_explicit_otlp_metrics_with_a_traces_endpoint(
    monkeypatch: pytest.MonkeyPatch, configure: Callable[..., TelemetryHandles]
) -> None:
    """Asked for by name, metrics are exported even though only a trace endpoint is set."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{CLOSED_PORT}/v1/traces")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc")

    handles = configure()

    assert [type(e) for e in handles.metric_exporters] == [GrpcMetricExporter]


def test_console_metrics_exporter(monkeypatch: pytest.MonkeyPatch, configure: Callable[..., TelemetryHandles]) -> None:
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "console")

    handles = configure(console=False)

    assert [type(e) for e in handles.metric_exporters] == [ConsoleMetricExporter]
    assert [type(r) for r in handles.metric_readers] == [PeriodicExportingMetricReader]


def test_metrics_false_turns_metric_export_off(
    monkeypatch: pytest.MonkeyPatch, configure: Callable[..., TelemetryHandles]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", CLOSED_PORT)
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "otlp")

    handles = configure(metrics=False)

    assert [type(e) for e in handles.span_exporters] == [HttpSpanExporter]
    assert handles.metric_readers == ()
    handles.meter_provider.get_meter("test").create_counter("c").add(1)  # still works, goes nowhere
    assert configure(metrics=True).metric_exporters != ()


def test_the_default_flush_and_exit_budget_is_two_seconds() -> None:
    """Long enough for a healthy collector, short enough that a dead one barely delays exit."""
    assert DEFAULT_TIMEOUT_MILLIS == 2_000


def test_metrics_option_bad_input() -> None:
    with pytest.raises(ValueError, match="metrics=False and a metric_reader contradict"):
        configure_telemetry(
            set_global=False, register_atexit=False, metrics=False, metric_reader=InMemoryMetricReader()
        )
    with pytest.raises(ValueError, match="metrics must be True or False, got 'no'"):
        configure_telemetry(set_global=False, register_atexit=False, metrics="no")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exit_timeout_millis must be a non-negative int"):
        configure_telemetry(set_global=False, register_atexit=False, exit_timeout_millis=-1)


# --- explicit exporter and reader ------------------------------------------------------------


def test_explicit_exporter_and_reader_replace_the_environment(
    monkeypatch: pytest.MonkeyPatch, configure: Callable[..., TelemetryHandles]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", CLOSED_PORT)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "not even valid")
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()

    handles = configure(span_exporter=spans, metric_reader=reader, service_name="svc")

    assert handles.span_exporters == (spans,)
    assert handles.metric_readers == (reader,)
    assert handles.metric_exporters == ()
    handles.tracer_provider.get_tracer("test").start_span("s").end()
    handles.meter_provider.get_meter("test").create_counter("c").add(2)

    [span] = spans.get_finished_spans()
    assert span.name == "s"
    assert span.resource.attributes["service.name"] == "svc"
    metrics_data = reader.get_metrics_data()
    assert metrics_data is not None
    [resource_metrics] = metrics_data.resource_metrics
    assert resource_metrics.resource.attributes["service.name"] == "svc"
    assert resource_metrics.scope_metrics[0].metrics[0].name == "c"


def test_a_failure_on_the_metric_side_shuts_the_trace_side_down(configure: Callable[..., TelemetryHandles]) -> None:
    reader = InMemoryMetricReader()
    configure(console=False, metric_reader=reader)  # the SDK allows a reader in one MeterProvider only
    spans = InMemorySpanExporter()

    with pytest.raises(Exception, match="registered already"):
        configure_telemetry(set_global=False, span_exporter=spans, metric_reader=reader)

    assert spans.export(()) is SpanExportResult.FAILURE  # shut down, not leaked


# --- resource ---------------------------------------------------------------------------------


def test_resource_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, configure: Callable[..., TelemetryHandles]
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=staging,team=agents%20core")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")

    attributes = configure(console=False, service_name="from-code").resource.attributes

    assert attributes["service.name"] == "from-env"
    assert attributes["deployment.environment.name"] == "staging"
    assert attributes["team"] == "agents core"
    assert attributes["telemetry.sdk.name"] == "opentelemetry"


def test_service_name_from_resource_attributes_also_beats_the_argument(
    monkeypatch: pytest.MonkeyPatch, configure: Callable[..., TelemetryHandles]
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes")

    assert configure(console=False, service_name="from-code").resource.attributes["service.name"] == "from-attributes"


def test_service_name_argument_is_the_fallback(configure: Callable[..., TelemetryHandles]) -> None:
    assert configure(console=False, service_name="from-code").resource.attributes["service.name"] == "from-code"
    unnamed = configure(console=False).resource.attributes["service.name"]
    assert isinstance(unnamed, str)
    assert unnamed.startswith("unknown_service")


def test_both_providers_share_the_resource(configure: Callable[..., TelemetryHandles]) -> None:
    reader = InMemoryMetricReader()
    handles = configure(console=False, metric_reader=reader, service_name="svc")
    handles.meter_provider.get_meter("test").create_counter("c").add(1)

    metrics_data = reader.get_metrics_data()
    assert metrics_data is not None
    assert metrics_data.resource_metrics[0].resource == handles.resource


# --- handles ----------------------------------------------------------------------------------


def test_set_global_false_gives_independent_providers(configure: Callable[..., TelemetryHandles]) -> None:
    first = configure(console=False)
    second = configure(console=False)

    assert first is not second
    assert first.tracer_provider is not second.tracer_provider
    assert trace.get_tracer_provider() is not first.tracer_provider


def test_force_flush_and_idempotent_shutdown(configure: Callable[..., TelemetryHandles]) -> None:
    out = io.StringIO()
    handles = configure(console_stream=out)
    tracer = handles.tracer_provider.get_tracer("test")
    parent = tracer.start_span("parent")
    tracer.start_span("child", context=trace.set_span_in_context(parent)).end()

    assert handles.force_flush() is True
    assert out.getvalue() == ""  # flushing does not cut a running trace into pieces

    handles.shutdown()
    handles.shutdown()

    assert out.getvalue().splitlines()[0].endswith("(incomplete)")
    assert out.getvalue().count("child") == 1


# --- the process-wide path, in a fresh interpreter --------------------------------------------


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    clean.pop("NO_COLOR", None)
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(code)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_global_configuration_is_installed_once_and_idempotent() -> None:
    result = run_python(
        """
        import json, logging, sys
        logging.basicConfig(stream=sys.stderr, level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
        from opentelemetry import metrics, trace
        from flowra_otel.export import configure_telemetry

        first = configure_telemetry(service_name="first", console=False)
        second = configure_telemetry(service_name="second", console=True)
        print(json.dumps({
            "same": first is second,
            "global_tp": trace.get_tracer_provider() is first.tracer_provider,
            "global_mp": metrics.get_meter_provider() is first.meter_provider,
            "service": first.resource.attributes["service.name"],
            "exporters": len(first.span_exporters),
        }))
        """
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "same": True,
        "global_tp": True,
        "global_mp": True,
        "service": "first",
        "exporters": 0,
    }
    assert "flowra_otel.export DEBUG configure_telemetry(set_global=True) already ran" in result.stderr
    assert "Overriding" not in result.stderr


def test_global_configuration_reuses_providers_installed_by_someone_else() -> None:
    """``opentelemetry-instrument`` (or the app) got there first: use theirs, add nothing."""
    result = run_python(
        """
        import json
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider
        theirs_tp, theirs_mp = TracerProvider(), MeterProvider()
        trace.set_tracer_provider(theirs_tp)
        metrics.set_meter_provider(theirs_mp)
        from flowra_otel.export import configure_telemetry

        handles = configure_telemetry(console=True)
        handles.tracer_provider.get_tracer("t").start_span("not printed: their provider").end()
        handles.shutdown()
        theirs_tp.get_tracer("t").start_span("still alive").end()  # not shut down by us
        print(json.dumps({
            "tp": handles.tracer_provider is theirs_tp,
            "mp": handles.meter_provider is theirs_mp,
            "exporters": len(handles.span_exporters),
        }))
        """
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"tp": True, "mp": True, "exporters": 0}
    assert "Overriding" not in result.stderr


def test_atexit_shutdown_prints_what_is_still_buffered() -> None:
    result = run_python(
        """
        from flowra_otel.export import configure_telemetry

        handles = configure_telemetry(service_name="demo")
        tracer = handles.tracer_provider.get_tracer("t")
        tracer.start_span("done").end()
        parent = tracer.start_span("never ends")
        from opentelemetry import trace
        tracer.start_span("orphan", context=trace.set_span_in_context(parent)).end()
        print("-- end of script --")
        """
    )

    assert result.returncode == 0, result.stderr
    during, at_exit = result.stdout.split("-- end of script --\n")
    assert during.splitlines()[0].startswith("trace ")
    assert during.splitlines()[1].startswith("done  ")
    assert at_exit.splitlines()[0].endswith("(incomplete)")
    assert at_exit.splitlines()[1].startswith("orphan  ")
    assert result.stderr == ""


def test_manual_shutdown_unregisters_the_atexit_hook() -> None:
    result = run_python(
        """
        from flowra_otel.export import configure_telemetry

        handles = configure_telemetry()
        tracer = handles.tracer_provider.get_tracer("t")
        parent = tracer.start_span("never ends")
        from opentelemetry import trace
        tracer.start_span("orphan", context=trace.set_span_in_context(parent)).end()
        handles.shutdown()
        print("-- after shutdown --")
        """
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.count("orphan") == 1
    assert result.stdout.rstrip().endswith("-- after shutdown --")
