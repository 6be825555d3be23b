"""Jaeger v2 and the OpenTelemetry Collector (``otelcol-flowra``) as real processes on loopback,
for the end-to-end tests of the shipped collector configs.

The binaries are built by ``infra/build-backends`` (``./dev test`` passes their paths as
``FLOWRA_OTEL_JAEGER`` and ``FLOWRA_OTEL_OTELCOL``); nothing here builds or installs anything.
Every process gets free 127.0.0.1 ports, its own process group and a log file, and is stopped by
its PID (SIGTERM, then SIGKILL) when its context ends, also when a test fails.

The collector configs are the repository's own files, made runnable here with the least change:
endpoints, ports and file paths point at loopback and a temporary directory, the exporters of
backends that do not run here (Tempo) are left out, timeouts that would make a test wait
(``decision_wait``, batch timeouts, retry intervals) are shortened, and the collector's own
metrics (``localhost:8888`` by default: two collectors would clash) are off. Everything else
(processors, policies, the redaction guard, the queue) runs as shipped.

Reading back: ``Jaeger.trace(trace_id)`` is ``GET /api/v3/traces/{id}`` (OTLP JSON: hex ids,
int64 as strings, kinds as numbers) decoded into the ``SpanRecord`` of ``tests.otlp_receiver``,
so what Jaeger stored compares field by field with what the app exported (``exported_records``
runs the app's finished spans through the SDK's own OTLP encoder).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from google.protobuf import json_format  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan

from tests.otlp_receiver import SpanRecord, flatten_spans
from tests.phoenix_server import free_ports

OTELCOL_ENV: Final = "FLOWRA_OTEL_OTELCOL"
JAEGER_ENV: Final = "FLOWRA_OTEL_JAEGER"
REPO: Final = Path(__file__).resolve().parent.parent
COLLECTOR_CONFIG: Final = REPO / "collector-config.yaml"
GATEWAY_CONFIG: Final = REPO / "collector-gateway.yaml"
JAEGER_CONFIG: Final = REPO / "infra" / "jaeger" / "jaeger-test.yaml"
SHIPPED_COLLECTOR_CONFIGS: Final = (COLLECTOR_CONFIG, GATEWAY_CONFIG)
"""Every collector config the repository ships (tests check that no other YAML at the root is one)."""

START_TIMEOUT_S: Final = 30.0
STOP_TIMEOUT_S: Final = 10.0
POLL_S: Final = 0.05
JAEGER_PORTS: Final = (
    "JAEGER_OTLP_GRPC_PORT",
    "JAEGER_OTLP_HTTP_PORT",
    "JAEGER_QUERY_PORT",
    "JAEGER_QUERY_GRPC_PORT",
    "JAEGER_HEALTH_PORT",
)


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """``(status, body)``; HTTP errors are answers too. Connection errors raise ``OSError``."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def rss_kib(pid: int) -> int | None:
    """Resident memory of a process in KiB (``VmRSS``), None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class Process:
    """One backend process: its own process group, its output in ``log_path``, stopped by PID."""

    def __init__(self, name: str, command: Sequence[str], workdir: Path, env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.command = list(command)
        self.log_path = workdir / f"{name}.log"
        self.env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} is not running"
        return self.process.pid

    def start(self, ready_url: str, timeout: float = START_TIMEOUT_S) -> float:
        """Start and wait (bounded) until ``GET ready_url`` answers 200; the seconds it took."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | self.env
        began = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        while time.monotonic() - began < timeout:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise RuntimeError(f"{self.name} exited with {code} while starting:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                if http_get(ready_url, timeout=1.0)[0] == 200:
                    return time.monotonic() - began
            time.sleep(POLL_S)
        self.stop()
        raise TimeoutError(f"{self.name} not ready within {timeout:.0f} s ({ready_url}):\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after a grace period; a no-op when not running."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT_S)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:]) or "(no log)"


# ------------------------------------------------------------------------------------ Jaeger
class Jaeger(Process):
    """Jaeger v2 on ``infra/jaeger/jaeger-test.yaml`` (memory store); ports fixed at construction,
    so a stopped Jaeger can be started again on the same ones (the collector's exporter keeps its
    endpoint)."""

    def __init__(self, binary: str, workdir: Path, name: str = "jaeger") -> None:
        self.ports = dict(zip(JAEGER_PORTS, free_ports(len(JAEGER_PORTS)), strict=True))
        super().__init__(
            name,
            [binary, "--config", str(JAEGER_CONFIG)],
            workdir,
            {k: str(v) for k, v in self.ports.items()},
        )

    @property
    def otlp_grpc(self) -> str:
        return f"127.0.0.1:{self.ports['JAEGER_OTLP_GRPC_PORT']}"

    @property
    def otlp_http(self) -> str:
        return f"http://127.0.0.1:{self.ports['JAEGER_OTLP_HTTP_PORT']}"

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['JAEGER_QUERY_PORT']}"

    def up(self) -> float:
        return self.start(f"http://127.0.0.1:{self.ports['JAEGER_HEALTH_PORT']}/status")

    def trace_json(self, trace_id: str) -> dict[str, Any] | None:
        """``GET /api/v3/traces/{trace_id}`` as JSON; None for 404 ("No traces found")."""
        status, body = http_get(f"{self.query_url}/api/v3/traces/{trace_id}")
        if status == 404:
            return None
        if status != 200:
            raise RuntimeError(f"GET /api/v3/traces/{trace_id} answered {status}: {body[:500]!r}")
        document: dict[str, Any] = json.loads(body)
        return document

    def trace(self, trace_id: str) -> list[SpanRecord]:
        """The spans Jaeger holds for ``trace_id`` (empty when none)."""
        document = self.trace_json(trace_id)
        return [] if document is None else decode_api_v3(document)

    def wait_for_trace(self, trace_id: str, spans: int, timeout: float = 30.0) -> list[SpanRecord]:
        """The trace once at least ``spans`` of its spans are there (``TimeoutError`` otherwise)."""
        deadline = time.monotonic() + timeout
        found: list[SpanRecord] = []
        while time.monotonic() < deadline:
            found = self.trace(trace_id)
            if len(found) >= spans:
                return found
            time.sleep(0.1)
        raise TimeoutError(f"{len(found)} of {spans} span(s) of trace {trace_id} in Jaeger after {timeout:.0f} s")


def _b64_of_hex(value: str) -> str:
    return base64.b64encode(bytes.fromhex(value)).decode() if value else ""


def decode_api_v3(document: Mapping[str, Any]) -> list[SpanRecord]:
    """Jaeger's ``{"result": {"resourceSpans": [...]}}`` as ``SpanRecord``s.

    The API writes OTLP JSON with hex ids (as the OTLP/HTTP JSON encoding does); protobuf's own
    JSON reader expects base64 for bytes, so the ids are converted and everything else (int64
    as strings, enum numbers, camelCase keys) is read by ``json_format`` as the OTLP schema says.
    """
    resource_spans = json.loads(json.dumps(document["result"].get("resourceSpans", [])))
    for rs in resource_spans:
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = _b64_of_hex(span[key])
                for link in span.get("links", []):
                    for key in ("traceId", "spanId"):
                        if key in link:
                            link[key] = _b64_of_hex(link[key])
    request = ExportTraceServiceRequest()
    json_format.ParseDict({"resourceSpans": resource_spans}, request, ignore_unknown_fields=True)
    return flatten_spans([request])


def exported_records(spans: Iterable[ReadableSpan]) -> list[SpanRecord]:
    """The app's finished spans as the OTLP exporter puts them on the wire (the SDK's encoder)."""
    return flatten_spans([encode_spans(list(spans))])


# ------------------------------------------------------------------------------------ collectors
@dataclass(frozen=True)
class CollectorPorts:
    grpc: int
    http: int
    health: int
    prometheus: int
    """The ``prometheus`` exporter's scrape endpoint (the app's metrics)."""
    telemetry: int
    """The collector's own metrics (``otelcol_*``: spans accepted, sampling decisions, queue)."""

    @classmethod
    def free(cls) -> CollectorPorts:
        grpc, http, health, prometheus, telemetry = free_ports(5)
        return cls(grpc, http, health, prometheus, telemetry)

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc}"

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http}"


def component_type(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def _loopback_receivers_and_extensions(cfg: dict[str, Any], ports: CollectorPorts) -> None:
    cfg["extensions"]["health_check"]["endpoint"] = f"127.0.0.1:{ports.health}"
    protocols = cfg["receivers"]["otlp"]["protocols"]
    protocols["grpc"]["endpoint"] = ports.grpc_endpoint
    protocols["http"]["endpoint"] = f"127.0.0.1:{ports.http}"
    for name, exporter in cfg["exporters"].items():
        if component_type(name) == "prometheus":
            exporter["endpoint"] = f"127.0.0.1:{ports.prometheus}"
    # Its own metrics would bind localhost:8888 (a second collector then fails to start): on a
    # port of its own instead, where the tests read them.
    reader = {"pull": {"exporter": {"prometheus": {"host": "127.0.0.1", "port": ports.telemetry}}}}
    cfg.setdefault("service", {})["telemetry"] = {"metrics": {"level": "detailed", "readers": [reader]}}


def sampler_config(
    *,
    ports: CollectorPorts,
    jaeger_grpc: str,
    workdir: Path,
    decision_wait: str = "3s",
    batch_timeout: str = "200ms",
    retry: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``collector-config.yaml`` on loopback: OTLP in on ``ports``, traces to the Jaeger at
    ``jaeger_grpc``, the audit file in ``workdir``; Tempo (not run here) left out; the sampling
    wait and batch timeout shortened (``retry``: the Jaeger exporter's retry intervals too)."""
    cfg: dict[str, Any] = yaml.safe_load(COLLECTOR_CONFIG.read_text(encoding="utf-8"))
    _loopback_receivers_and_extensions(cfg, ports)
    exporters: dict[str, Any] = cfg["exporters"]
    for name in list(exporters):
        kind = component_type(name)
        if kind in {"otlp", "otlp_grpc"} and name.endswith("/jaeger"):
            exporters[name]["endpoint"] = jaeger_grpc
            if retry is not None:
                exporters[name].setdefault("retry_on_failure", {}).update(retry)
        elif kind in {"otlp", "otlp_grpc", "otlphttp", "otlp_http"}:
            del exporters[name]  # Tempo: not run here
        elif kind == "file":
            exporters[name]["path"] = str(workdir / "audit" / "traces.json")
            (workdir / "audit").mkdir(parents=True, exist_ok=True)
    for pipeline in cfg["service"]["pipelines"].values():
        pipeline["exporters"] = [e for e in pipeline["exporters"] if e in exporters]
    cfg["processors"]["tail_sampling"]["decision_wait"] = decision_wait
    cfg["processors"]["batch"]["timeout"] = batch_timeout
    return cfg


def gateway_config(*, ports: CollectorPorts, samplers: Sequence[str], batch_timeout: str = "200ms") -> dict[str, Any]:
    """``collector-gateway.yaml`` on loopback, its resolver a static list of ``samplers``
    (``127.0.0.1:port`` each) instead of the DNS name of a scaled service."""
    cfg: dict[str, Any] = yaml.safe_load(GATEWAY_CONFIG.read_text(encoding="utf-8"))
    _loopback_receivers_and_extensions(cfg, ports)
    balancers = [e for n, e in cfg["exporters"].items() if component_type(n) in {"loadbalancing", "load_balancing"}]
    assert len(balancers) == 1, "collector-gateway.yaml has one load-balancing exporter"
    balancers[0]["resolver"] = {"static": {"hostnames": list(samplers)}}
    cfg["processors"]["batch"]["timeout"] = batch_timeout
    return cfg


class Collector(Process):
    """``otelcol-flowra --config <file>``, ready when its health check answers 200."""

    def __init__(self, binary: str, name: str, config: Mapping[str, Any], ports: CollectorPorts, workdir: Path) -> None:
        self.config_path = workdir / f"{name}.yaml"
        self.config_path.write_text(yaml.safe_dump(dict(config), sort_keys=False), encoding="utf-8")
        self.ports = ports
        super().__init__(name, [binary, "--config", str(self.config_path)], workdir)

    def up(self) -> float:
        return self.start(f"http://127.0.0.1:{self.ports.health}/")

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """The collector's own metrics now (Prometheus text from its telemetry port):
        ``(name, labels) -> value``."""
        status, body = http_get(f"http://127.0.0.1:{self.ports.telemetry}/metrics")
        if status != 200:
            raise RuntimeError(f"{self.name}: GET /metrics answered {status}")
        return parse_prometheus_text(body.decode("utf-8"))

    def metric(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels`` (0 when none)."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.metrics().items() if n == name and wanted <= ls)


_LABEL: Final = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prometheus_text(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Samples of the Prometheus text format."""
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, rest = head.partition("{")
        samples[(name, frozenset(_LABEL.findall(rest)))] = float(value)
    return samples


def validate(binary: str, config: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``<binary> validate --config <config>`` (exit 0: the config is one the binary can run)."""
    return subprocess.run(
        [binary, "validate", "--config", str(config)],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@contextlib.contextmanager
def running(*processes: Process) -> Iterator[None]:
    """Stops every given process when the block ends, whatever happened (started or not)."""
    try:
        yield
    finally:
        for process in reversed(processes):
            process.stop()


@dataclass
class TwoTierStack:
    """Jaeger, two samplers (``collector-config.yaml``) and the gateway (``collector-gateway.yaml``,
    its static resolver naming both samplers)."""

    jaeger: Jaeger
    samplers: list[Collector]
    gateway: Collector


@contextlib.contextmanager
def two_tier_stack(otelcol: str, jaeger_binary: str, workdir: Path) -> Iterator[TwoTierStack]:
    """The two-tier stack, all running (each process up before the block starts); every process is
    stopped when the block ends, whatever happened."""
    jaeger = Jaeger(jaeger_binary, workdir)
    samplers = []
    for index in range(2):
        ports = CollectorPorts.free()
        config = sampler_config(ports=ports, jaeger_grpc=jaeger.otlp_grpc, workdir=workdir / f"sampler{index}")
        samplers.append(Collector(otelcol, f"sampler{index}", config, ports, workdir))
    ports = CollectorPorts.free()
    gateway = Collector(
        otelcol,
        "gateway",
        gateway_config(ports=ports, samplers=[s.ports.grpc_endpoint for s in samplers]),
        ports,
        workdir,
    )
    with running(jaeger, *samplers, gateway):
        jaeger.up()
        for process in (*samplers, gateway):
            process.up()
        yield TwoTierStack(jaeger, samplers, gateway)
