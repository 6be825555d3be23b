"""A traces-only backend given the base endpoint: one clear warning, then no metric export.

With only ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, ``configure_telemetry`` exports metrics to
``<base>/v1/metrics`` (HTTP) or the MetricsService (gRPC) of the same server. A backend that stores
traces only refuses that for good: Phoenix answers HTTP 405 and gRPC UNIMPLEMENTED, MLflow HTTP
404 (the Phoenix and MLflow end-to-end tests check those real servers). The SDK exporter would log
one error per export interval until the process exits; ``flowra_otel.core.export`` turns that into
ONE warning naming the fix (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_METRICS_EXPORTER=none``)
and stops exporting metrics, while traces go on. A collector that is down or busy (503,
UNAVAILABLE) is not a refusal: the exporter retries and reports as before.

Here the suite's own OTLP receiver plays the backend (traces accepted, metrics refused with the
status a real one sends), so these run everywhere; the paired negatives remove the guard and
see the error repeated at every export.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from flowra_otel.core import export
from tests.metrics_refusal import FLUSHES, TracesOnlyReceiver, export_with_base_endpoint
from tests.otlp_receiver import OtlpReceiver

CASES = [
    pytest.param(("http/protobuf", 405, None), id="http-405-like-phoenix"),
    pytest.param(("http/protobuf", 404, None), id="http-404-like-mlflow"),
    pytest.param(("grpc", 503, grpc.StatusCode.UNIMPLEMENTED), id="grpc-unimplemented-like-phoenix"),
]


@pytest.fixture(params=CASES)
def backend(request: pytest.FixtureRequest) -> Iterator[tuple[TracesOnlyReceiver, dict[str, str]]]:
    """A traces-only receiver and the environment of a program given its base endpoint."""
    protocol, http_status, grpc_status = request.param
    with TracesOnlyReceiver(http_error_status=http_status, grpc_error=grpc_status) as rx:
        yield rx, base_env(rx, protocol)


def base_env(rx: OtlpReceiver, protocol: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": rx.grpc_endpoint if protocol == "grpc" else rx.http_endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
    }


def test_a_refusing_metrics_endpoint_gets_one_warning_and_no_more_exports(
    backend: tuple[TracesOnlyReceiver, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver, env = backend
    logged = export_with_base_endpoint(env, monkeypatch, caplog)
    logged.assert_one_clear_warning()
    # One metric export reached the backend; none after the refusal (FLUSHES flushes and the shutdown).
    assert receiver.attempt_count(signal="metrics") == 1
    # Traces are unaffected.
    (span,) = receiver.wait_for_spans(1)
    assert span.trace_id == logged.trace_id


def test_without_the_guard_every_export_logs_an_error(
    backend: tuple[TracesOnlyReceiver, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The paired negative: the reader given the bare OTLP exporter (the guard removed)."""

    def bare(exporter: Any, *_: Any) -> Any:
        return exporter

    monkeypatch.setattr(export, "_MetricsRefusalGuard", bare)
    receiver, env = backend
    logged = export_with_base_endpoint(env, monkeypatch, caplog)
    assert logged.warnings == []
    # An error per export (the gRPC exporter's logger drops a repeat of the same message within
    # 20 s, so there one per 20 s: with the default 60 s interval, one per export again).
    assert len(logged.errors) >= (1 if env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "grpc" else FLUSHES), logged.errors
    assert receiver.attempt_count(signal="metrics") >= FLUSHES


@pytest.mark.parametrize("status", [503, 500])
def test_a_collector_that_fails_otherwise_is_not_a_refusal(
    status: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """503 (down, retried) or 500: the exporter's own errors stay, and metric export goes on."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # the 503 retries end within a second
    with TracesOnlyReceiver(http_error_status=status, http_retry_after="0") as rx:
        logged = export_with_base_endpoint(base_env(rx, "http/protobuf"), monkeypatch, caplog)
        assert logged.warnings == []
        assert logged.errors, "the SDK reported the failures itself"
        assert rx.attempt_count(signal="metrics") >= FLUSHES
    # The guard did not swallow the records of other threads or of non-refusals.
    assert any(r.levelno >= logging.ERROR and r.name.startswith("opentelemetry") for r in caplog.records)
