"""Each common OTLP endpoint mistake gets one line naming the variable, what it holds and the fix.

``configure_telemetry`` (and with it the zero-code configurator) is given a real mistake against
the suite's real OTLP receiver: a traces URL without ``/v1/traces``, a base endpoint that already
ends in it, HTTP to the gRPC port, gRPC to the HTTP port, no scheme. The real exporters then fail
(the receiver gets no span), and exactly one ``flowra_otel.export`` warning says why; the fix that
line names, applied as written, delivers the span with no warning. A right configuration gets no
warning at all.

The metrics refusal line is checked here too: a base endpoint ending in ``/v1/traces`` makes the
backend refuse metrics (404) *and* traces, so that line must not say traces are unaffected.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from opentelemetry._logs import LogRecord

from flowra_otel.export import configure_telemetry
from tests.otlp_receiver import OtlpReceiver

Env = dict[str, str]


@dataclass
class Outcome:
    warnings: list[str]
    """``flowra_otel.export`` warnings."""
    delivered: int
    """Spans the receiver got."""


def _export_one_span(
    env: Env, rx: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> Outcome:
    """Configure from ``env`` alone, export one span (and a metric, when metrics are on), shut down."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    for name, value in {"OTEL_EXPORTER_OTLP_TIMEOUT": "2", **env}.items():
        monkeypatch.setenv(name, value)
    caplog.set_level(logging.WARNING)
    first = len(caplog.records)
    handles = configure_telemetry(set_global=False, register_atexit=False, console=False)
    try:
        handles.meter_provider.get_meter("probe").create_counter("probe").add(1)
        with handles.tracer_provider.get_tracer("probe").start_as_current_span("probe"):
            pass
        handles.force_flush(5_000)
    finally:
        handles.shutdown(5_000)
    records = caplog.records[first:]
    warnings = [r.getMessage() for r in records if r.name == "flowra_otel.export" and r.levelno == logging.WARNING]
    return Outcome(warnings, len(rx.spans()))


@pytest.fixture
def rx() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture
def rx_on_otlp_ports() -> Iterator[OtlpReceiver]:
    """A receiver on OTLP's own ports (4317 gRPC, 4318 HTTP): the port mistakes are about them."""
    receiver = OtlpReceiver(grpc_port=4317, http_port=4318)
    try:
        receiver.start()
    except (OSError, RuntimeError) as taken:
        pytest.skip(f"ports 4317/4318 are taken on this machine: {taken}")
    try:
        yield receiver
    finally:
        receiver.close()
        # The gRPC exporter's logger has the SDK's DuplicateFilter, which drops a record repeating
        # the previous one's format for up to 20 s, process-wide: forget this test's export error,
        # so the next test that expects one (a refused metrics export, say) sees its own.
        grpc_logger = logging.getLogger("opentelemetry.exporter.otlp.proto.grpc.exporter")
        for duplicate_filter in grpc_logger.filters:
            if type(duplicate_filter).__name__ == "DuplicateFilter" and hasattr(duplicate_filter, "last_log"):
                del duplicate_filter.last_log


def _fix_in(warning: str, variable: str) -> Env:
    """The first ``set VARIABLE=value`` the warning names, as an environment."""
    match = re.search(rf"set {variable}=(\S+?)(?:,|\s|$)", warning)
    assert match is not None, f"no fix for {variable} in: {warning}"
    return {variable: match.group(1)}


Case = Callable[[OtlpReceiver], tuple[Env, str, str]]
"""The receiver -> (the mistaken environment, the variable the warning must name, the variable it fixes)."""

MISTAKES: dict[str, Case] = {
    "traces-url-without-path": lambda rx: (
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rx.http_endpoint},
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ),
    "base-ending-in-v1-traces": lambda rx: (
        {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.http_traces_endpoint, "OTEL_METRICS_EXPORTER": "none"},
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ),
    "no-scheme": lambda rx: (
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rx.http_traces_endpoint.removeprefix("http://")},
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ),
}
_ODD_STARTS = {
    # What stands before the host, as a copy-paste or a typo leaves it: the fix is http://host...,
    # never the value with http:// glued in front (http:////host, http://http:/host).
    "leading-slashes": "//",
    "empty-scheme": "://",
    "scheme-without-slashes": "http:",
    "scheme-with-one-slash": "http:/",
    "scheme-without-colon": "http//",
    "upper-case-scheme-without-colon": "HTTP//",
    "another-scheme": "tcp://",
    "an-invalid-scheme": "1x://",
    "leading-spaces": "  ",
}


def _odd_start(start: str) -> Case:
    def case(rx: OtlpReceiver) -> tuple[Env, str, str]:
        variable = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        return {variable: start + rx.http_traces_endpoint.removeprefix("http://")}, variable, variable

    return case


MISTAKES.update({name: _odd_start(start) for name, start in _ODD_STARTS.items()})


@pytest.mark.parametrize("case", list(MISTAKES))
def test_a_wrong_url_is_named_once_with_a_fix_that_works(
    case: str, rx: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    env, named, fixed = MISTAKES[case](rx)
    wrong = _export_one_span(env, rx, monkeypatch, caplog)
    assert wrong.delivered == 0  # the mistake is real: the exporter sends nothing the receiver takes
    (warning,) = wrong.warnings
    assert f"{named}={env[named].strip()!r}" in warning, warning
    fix = _fix_in(warning, fixed)
    assert fix[fixed].startswith("http://127.0.0.1:"), warning
    right = _export_one_span({**env, **fix}, rx, monkeypatch, caplog)
    assert right.warnings == []
    assert right.delivered == 1, fix


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"])
def test_trailing_whitespace_is_named_once_with_a_fix_that_works(
    variable: str, rx: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A URL pasted with a trailing space (or a newline from a shell variable) looks right once
    stripped, but the exporter posts to it as it is: nothing arrives, and only this line says why."""
    url = rx.http_traces_endpoint if variable != "OTEL_EXPORTER_OTLP_ENDPOINT" else rx.http_endpoint
    env = {variable: f"{url} \n", "OTEL_METRICS_EXPORTER": "none"}
    wrong = _export_one_span(env, rx, monkeypatch, caplog)
    assert wrong.delivered == 0
    (warning,) = wrong.warnings
    assert f"{variable}={env[variable]!r} ends in whitespace" in warning, warning
    fix = _fix_in(warning, variable)
    assert fix == {variable: url}
    right = _export_one_span({**env, **fix}, rx, monkeypatch, caplog)
    assert right.warnings == []
    assert right.delivered == 1


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"])
@pytest.mark.parametrize(
    ("protocol", "port", "fixed_port"),
    [("http/protobuf", 4317, 4318), ("grpc", 4318, 4317)],
    ids=["http-to-4317", "grpc-to-4318"],
)
def test_the_protocol_and_port_disagreeing_is_named_once_with_a_fix_that_works(
    variable: str,
    protocol: str,
    port: int,
    fixed_port: int,
    rx_on_otlp_ports: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With the base endpoint, metrics go to the same wrong port: still one line for the variable."""
    path = "/v1/traces" if protocol != "grpc" and variable != "OTEL_EXPORTER_OTLP_ENDPOINT" else ""
    env = {
        variable: f"http://127.0.0.1:{port}{path}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
    }
    wrong = _export_one_span(env, rx_on_otlp_ports, monkeypatch, caplog)
    assert wrong.delivered == 0
    (warning,) = wrong.warnings
    assert f"{variable}={env[variable]!r}" in warning
    assert f"OTEL_EXPORTER_OTLP_PROTOCOL={'grpc' if protocol != 'grpc' else 'http/protobuf'}" in warning
    fix = _fix_in(warning, variable)
    assert f":{fixed_port}" in fix[variable]
    right = _export_one_span({**env, **fix}, rx_on_otlp_ports, monkeypatch, caplog)
    assert right.warnings == []
    assert right.delivered == 1


@pytest.mark.parametrize(
    "env",
    [
        pytest.param(lambda rx: {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rx.http_traces_endpoint}, id="http-traces-url"),
        pytest.param(lambda rx: {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.http_endpoint}, id="http-base"),
        pytest.param(
            lambda rx: {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "HTTP://" + rx.http_traces_endpoint.removeprefix("http://")
            },
            id="upper-case-scheme",
        ),
        pytest.param(
            lambda rx: {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"  {rx.http_traces_endpoint}"}, id="leading-spaces"
        ),
        pytest.param(
            lambda rx: {
                "OTEL_EXPORTER_OTLP_ENDPOINT": rx.grpc_endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_INSECURE": "true",
            },
            id="grpc-base",
        ),
    ],
)
def test_a_right_endpoint_gets_no_warning(
    env: Callable[[OtlpReceiver], Env],
    rx: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    outcome = _export_one_span(env(rx), rx, monkeypatch, caplog)
    assert outcome.warnings == []
    assert outcome.delivered == 1


def test_the_metrics_refusal_line_does_not_say_traces_are_fine_when_they_are_lost_too(
    rx: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``OTEL_EXPORTER_OTLP_ENDPOINT=<base>/v1/traces`` with metrics on: the receiver answers 404 to
    ``.../v1/traces/v1/metrics`` (a refusal) and to ``.../v1/traces/v1/traces`` (traces lost)."""
    outcome = _export_one_span({"OTEL_EXPORTER_OTLP_ENDPOINT": rx.http_traces_endpoint}, rx, monkeypatch, caplog)
    assert outcome.delivered == 0
    endpoint_line, refusal = outcome.warnings
    assert "already ends in /v1/traces" in endpoint_line
    assert "refused metrics (HTTP 404)" in refusal
    assert "traces are unaffected" not in refusal
    assert "no trace export has succeeded yet either" in refusal


def test_the_zero_code_configurator_names_the_mistake_too(rx: OtlpReceiver) -> None:
    """``opentelemetry-instrument`` with this package's distro: the same line, before the app runs."""
    launcher = os.path.join(os.path.dirname(sys.executable), "opentelemetry-instrument")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run(
        [launcher, sys.executable, "-c", "print('app ran')"],
        env={
            **clean,
            "OTEL_PYTHON_DISTRO": "flowra",  # the dev environment has opentelemetry-distro too
            "OTEL_PYTHON_CONFIGURATOR": "flowra",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rx.http_endpoint,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "app ran\n"
    lines = [line for line in proc.stderr.splitlines() if "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" in line]
    assert len(lines) == 1, proc.stderr
    assert f"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={rx.http_endpoint!r} has no path" in lines[0]
    assert f"set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={rx.http_endpoint}/v1/traces" in lines[0]


def test_the_content_events_logs_endpoint_is_checked_too(
    rx: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``configure_telemetry(logs=True)`` exports the content events over OTLP as well: a logs URL
    without ``/v1/logs`` gets its line, and the line's fix delivers the event."""

    def export_one_event(env: Env) -> tuple[list[str], int]:
        for name in list(os.environ):
            if name.startswith("OTEL_"):
                monkeypatch.delenv(name)
        for name, value in {"OTEL_EXPORTER_OTLP_TIMEOUT": "2", **env}.items():
            monkeypatch.setenv(name, value)
        first = len(caplog.records)
        handles = configure_telemetry(set_global=False, register_atexit=False, console=False, logs=True)
        try:
            assert handles.logger_provider is not None
            handles.logger_provider.get_logger("probe").emit(LogRecord(body="probe"))
            handles.force_flush(5_000)
        finally:
            handles.shutdown(5_000)
        records = caplog.records[first:]
        warnings = [r.getMessage() for r in records if r.name == "flowra_otel.export" and r.levelno == logging.WARNING]
        return warnings, len(rx.log_records())

    caplog.set_level(logging.WARNING)
    env = {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": rx.http_endpoint, "OTEL_LOGS_EXPORTER": "otlp"}
    warnings, delivered = export_one_event(env)
    assert delivered == 0
    (warning,) = warnings
    assert f"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT={rx.http_endpoint!r} has no path" in warning
    warnings, delivered = export_one_event({**env, **_fix_in(warning, "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")})
    assert warnings == []
    assert delivered == 1
