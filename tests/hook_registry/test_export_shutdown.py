"""Flush and shutdown stay bounded when the backend is down or never answers.

Two dead backends, for both OTLP transports: a closed port (connection refused: the exporters
retry with backoff) and a black hole (a listener that accepts and never answers: each attempt
waits out its timeout). Without the bound, ``shutdown()`` took 14-20 s here (traces then
metrics, each retried for up to ``OTEL_EXPORTER_OTLP_TIMEOUT``); the limits asserted below are
deliberately generous (5 s against a 2 s budget) so a loaded machine cannot make them flaky.
They are guards, not speed claims.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pytest

from flowra_otel.export import TelemetryHandles, configure_telemetry
from tests.otlp_receiver import OtlpReceiver

Protocol = Literal["grpc", "http/protobuf"]
GENEROUS_LIMIT_S = 5.0


@pytest.fixture(autouse=True)
def clean_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def closed_port() -> str:
    """A local URL nobody listens on (bound and released: the kernel refuses connections)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class BlackHole:
    """Accepts TCP connections on 127.0.0.1 and never reads or answers. Closing it drops every
    connection, which ends any export still waiting on one."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="black-hole", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()
        for conn in self._held:
            conn.close()


@pytest.fixture
def black_hole() -> Iterator[BlackHole]:
    hole = BlackHole()
    yield hole
    hole.close()


@pytest.fixture(params=["closed-port", "black-hole"])
def dead_endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "closed-port":
        yield closed_port()
    else:
        hole = BlackHole()
        yield hole.url
        hole.close()


@pytest.fixture
def configure() -> Iterator[Callable[..., TelemetryHandles]]:
    made: list[TelemetryHandles] = []

    def make(**options: Any) -> TelemetryHandles:
        handles = configure_telemetry(set_global=False, register_atexit=False, **options)
        made.append(handles)
        return handles

    yield make
    for handles in made:
        handles.shutdown()


def record_a_span_and_a_measurement(handles: TelemetryHandles) -> None:
    handles.tracer_provider.get_tracer("test").start_span("invoke_agent a").end()
    handles.meter_provider.get_meter("test").create_counter("c").add(1)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_shutdown_is_bounded_with_the_backend_down(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    configure: Callable[..., TelemetryHandles],
    dead_endpoint: str,
    protocol: Protocol,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", dead_endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    handles = configure()
    assert handles.metric_exporters, "both signals go to the dead endpoint"
    record_a_span_and_a_measurement(handles)

    started = time.monotonic()
    finished = handles.shutdown()
    took = time.monotonic() - started

    assert finished is False
    assert took < GENEROUS_LIMIT_S, f"shutdown took {took:.1f}s"
    dropped = [r for r in caplog.records if r.name == "flowra_otel.export" and "did not finish" in r.getMessage()]
    assert len(dropped) == 1
    assert dropped[0].levelno == logging.WARNING
    assert handles.shutdown() is True  # idempotent, and immediate


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_force_flush_honours_its_timeout_with_the_backend_down(
    monkeypatch: pytest.MonkeyPatch,
    configure: Callable[..., TelemetryHandles],
    dead_endpoint: str,
    protocol: Protocol,
) -> None:
    """The SDK's batch processor ignores the flush timeout; the handles do not."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", dead_endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    handles = configure()
    record_a_span_and_a_measurement(handles)

    started = time.monotonic()
    flushed = handles.force_flush(timeout_millis=500)
    took = time.monotonic() - started

    assert flushed is False
    assert took < GENEROUS_LIMIT_S, f"force_flush took {took:.1f}s"


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_live_backend_gets_everything_and_shutdown_says_so(
    monkeypatch: pytest.MonkeyPatch, configure: Callable[..., TelemetryHandles], protocol: Protocol
) -> None:
    """The bound must not cut a healthy export short: the paired check of the tests above."""
    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.grpc_endpoint if protocol == "grpc" else rx.http_endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        handles = configure()
        record_a_span_and_a_measurement(handles)

        assert handles.shutdown() is True
        [span] = rx.wait_for_spans(1, timeout=10)
    assert span.name == "invoke_agent a"


def test_force_flush_after_shutdown_is_false(configure: Callable[..., TelemetryHandles]) -> None:
    handles = configure(console=False)
    assert handles.force_flush() is True
    handles.shutdown()
    assert handles.force_flush() is False


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2000"])
def test_bad_timeouts_are_refused(configure: Callable[..., TelemetryHandles], bad: object) -> None:
    handles = configure(console=False)
    with pytest.raises(ValueError, match="timeout_millis must be a non-negative int of milliseconds"):
        handles.force_flush(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout_millis must be a non-negative int of milliseconds"):
        handles.shutdown(bad)  # type: ignore[arg-type]


# --- at interpreter exit, in a fresh interpreter ----------------------------------------------

EXITING_APP = """
    import sys
    from flowra_otel.export import configure_telemetry

    handles = configure_telemetry(service_name="exiting")  # shutdown registered with atexit
    handles.tracer_provider.get_tracer("t").start_span("last run").end()
    handles.meter_provider.get_meter("t").create_counter("c").add(1)
    print("end of script", file=sys.stderr, flush=True)
"""


@pytest.mark.parametrize(("protocol", "backend"), [("grpc", "black-hole"), ("http/protobuf", "closed-port")])
def test_process_exit_is_bounded_with_the_backend_down(black_hole: BlackHole, protocol: Protocol, backend: str) -> None:
    """Python 3.12 refuses new threads in atexit handlers: the bound must hold there too."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = black_hole.url if backend == "black-hole" else closed_port()
    env["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(EXITING_APP)],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    ) as proc:
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()  # the imports may take a while on a loaded machine
            script_ended = time.monotonic()
            assert line == "end of script\n"
            rest = proc.stderr.read()
            returncode = proc.wait(timeout=60)
            took = time.monotonic() - script_ended
        finally:
            proc.kill()

    assert returncode == 0, rest
    assert took < GENEROUS_LIMIT_S, f"exit took {took:.1f}s after the script ended\n{rest}"
    assert "telemetry shutdown did not finish within 2000 ms" in rest
    assert "Traceback" not in rest, rest
