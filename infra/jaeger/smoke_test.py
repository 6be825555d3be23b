# ruff: noqa: T201  (a command-line tool: it reports on stdout)
"""Smoke test of the Go test backends: Jaeger v2 (and optionally otelcol-flowra in front of it).

Starts Jaeger with infra/jaeger/jaeger-test.yaml on free loopback ports, waits until it is ready,
sends one small trace over OTLP/HTTP with the OpenTelemetry SDK, reads it back with
GET /api/v3/traces/{trace id} and prints the JSON. With --collector, the trace goes through
otelcol-flowra started on a loopback copy of a collector config (default: the shipped
collector-config.yaml): OTLP/HTTP -> collector -> OTLP/gRPC -> Jaeger. With --gateway as well, a
second otelcol-flowra on a loopback copy of the gateway config (default:
collector-gateway.yaml) sits in front and load-balances to that sampler.

    eval "$(infra/build-backends all)"
    .venv/bin/python infra/jaeger/smoke_test.py --jaeger "$JAEGER" \\
        [--collector "$OTELCOL" [--gateway]] [--json out.json]

Needs opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http and (for --collector) PyYAML.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_ready(url: str, proc: subprocess.Popen[bytes], what: str, deadline_s: float = 30) -> float:
    start = time.monotonic()
    while time.monotonic() - start < deadline_s:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode} before it was ready")
        try:
            status, _ = http_get(url, timeout=0.5)
            if status == 200:
                return time.monotonic() - start
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.05)
    raise SystemExit(f"{what} not ready after {deadline_s} s ({url})")


def send_trace(otlp_http: str) -> str:
    provider = TracerProvider(resource=Resource.create({"service.name": "flowra-otel-smoke"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{otlp_http}/v1/traces")))
    tracer = provider.get_tracer("flowra-otel-smoke", "0.0.1")
    with tracer.start_as_current_span("other") as other:  # a span to link to
        linked = other.get_span_context()
    with tracer.start_as_current_span(
        "invoke_agent demo",
        kind=SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "demo",
            "gen_ai.usage.input_tokens": 12,
            "smoke.ratio": 0.5,
            "flowra.redaction.applied": True,
            "smoke.tags": ["a", "b"],
            "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]',
        },
        links=[Link(linked, {"link.kind": "previous_run"})],
    ) as root:
        root.add_event("flowra.step", {"step.index": 1})
        with tracer.start_as_current_span("chat model", kind=SpanKind.CLIENT) as chat:
            chat.set_attribute("gen_ai.request.model", "m")
            chat.set_status(Status(StatusCode.ERROR, "boom"))
            chat.record_exception(ValueError("boom"))
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.shutdown()
    return trace_id


def derive_collector_config(src: Path, dst: Path, ports: dict[str, int], jaeger_grpc: int, tmp: Path) -> None:
    """The given collector config, made runnable on loopback next to the test Jaeger."""
    import yaml

    cfg: dict[str, Any] = yaml.safe_load(src.read_text())
    cfg["extensions"]["health_check"]["endpoint"] = f"127.0.0.1:{ports['health']}"
    protos = cfg["receivers"]["otlp"]["protocols"]
    protos["grpc"]["endpoint"] = f"127.0.0.1:{ports['grpc']}"
    protos["http"]["endpoint"] = f"127.0.0.1:{ports['http']}"
    exporters = cfg["exporters"]
    for name in list(exporters):
        if name.split("/")[0] in ("otlp", "otlp_grpc"):
            if name.endswith("/jaeger"):
                exporters[name]["endpoint"] = f"127.0.0.1:{jaeger_grpc}"
            else:  # no Tempo here: drop every other OTLP exporter
                del exporters[name]
        elif name.split("/")[0] == "file":
            exporters[name]["path"] = str(tmp / "traces.json")
        elif name.split("/")[0] == "prometheus":
            exporters[name]["endpoint"] = f"127.0.0.1:{ports['prom']}"
    if "tail_sampling" in cfg.get("processors", {}):
        cfg["processors"]["tail_sampling"]["decision_wait"] = "1s"  # decide fast in a test
    for pipeline in cfg["service"]["pipelines"].values():
        pipeline["exporters"] = [e for e in pipeline["exporters"] if e in exporters]
    # The collector's own metrics default to localhost:8888: off, so nothing clashes.
    cfg["service"]["telemetry"] = {"metrics": {"level": "none"}}
    dst.write_text(yaml.safe_dump(cfg, sort_keys=False))


def derive_gateway_config(src: Path, dst: Path, ports: dict[str, int], sampler_grpc: int) -> None:
    """The given gateway config on loopback, load-balancing to one sampler by a static list."""
    import yaml

    cfg: dict[str, Any] = yaml.safe_load(src.read_text())
    cfg["extensions"]["health_check"]["endpoint"] = f"127.0.0.1:{ports['health']}"
    protos = cfg["receivers"]["otlp"]["protocols"]
    protos["grpc"]["endpoint"] = f"127.0.0.1:{ports['grpc']}"
    protos["http"]["endpoint"] = f"127.0.0.1:{ports['http']}"
    for name, exp in cfg["exporters"].items():
        if name.split("/")[0] in ("loadbalancing", "load_balancing"):
            exp["resolver"] = {"static": {"hostnames": [f"127.0.0.1:{sampler_grpc}"]}}
        elif name.split("/")[0] == "prometheus":
            exp["endpoint"] = f"127.0.0.1:{ports['prom']}"
    cfg["service"]["telemetry"] = {"metrics": {"level": "none"}}
    dst.write_text(yaml.safe_dump(cfg, sort_keys=False))


def start_collector(binary: str, cfg: Path, health_port: int, what: str, procs: list[subprocess.Popen[bytes]]) -> None:
    log = cfg.with_suffix(".log").open("wb")
    proc = subprocess.Popen([binary, "--config", str(cfg)], stdout=log, stderr=subprocess.STDOUT)
    procs.append(proc)
    url = f"http://127.0.0.1:{health_port}/"
    print(f"{what} ready after {wait_ready(url, proc, what):.2f} s (GET {url} -> 200)")


def read_back(query_port: int, trace_id: str, t0: float, json_out: str | None) -> int:
    """GET the trace from Jaeger's API v3 (waiting for it) and print it; 0 when found."""
    url = f"http://127.0.0.1:{query_port}/api/v3/traces/{trace_id}"
    status, body = 0, b""
    for _ in range(300):  # through collectors: decision_wait (1 s) and batch timeouts (up to 5 s) first
        status, body = http_get(url)
        if status == 200:
            break
        time.sleep(0.1)
    print(f"GET {url} -> {status} after {time.monotonic() - t0:.2f} s since start")
    if status != 200:
        print(body.decode()[:2000])
        return 1
    doc = json.loads(body)
    if json_out:
        Path(json_out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    spans = [s for rs in doc["result"]["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    print(f"{len(spans)} spans: {sorted(s['name'] for s in spans)}")
    svc = http_get(f"http://127.0.0.1:{query_port}/api/v3/services")
    print(f"GET /api/v3/services -> {svc[0]} {svc[1].decode()}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jaeger", required=True, help="path of the jaeger binary")
    ap.add_argument("--config", default=str(HERE / "jaeger-test.yaml"))
    ap.add_argument("--collector", help="path of otelcol-flowra: send through it")
    ap.add_argument("--collector-config", default=str(REPO / "collector-config.yaml"))
    ap.add_argument("--gateway", action="store_true", help="put a load-balancing gateway in front (needs --collector)")
    ap.add_argument("--gateway-config", default=str(REPO / "collector-gateway.yaml"))
    ap.add_argument("--json", help="write the read-back JSON here")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="flowra-otel-smoke-"))
    jp = {
        k: free_port()
        for k in (
            "JAEGER_OTLP_GRPC_PORT",
            "JAEGER_OTLP_HTTP_PORT",
            "JAEGER_QUERY_PORT",
            "JAEGER_QUERY_GRPC_PORT",
            "JAEGER_HEALTH_PORT",
        )
    }
    procs: list[subprocess.Popen[bytes]] = []
    try:
        t0 = time.monotonic()
        jlog = (tmp / "jaeger.log").open("wb")
        jaeger = subprocess.Popen(
            [args.jaeger, "--config", args.config],
            env={**os.environ, **{k: str(v) for k, v in jp.items()}},
            stdout=jlog,
            stderr=subprocess.STDOUT,
        )
        procs.append(jaeger)
        health = f"http://127.0.0.1:{jp['JAEGER_HEALTH_PORT']}/status"
        ready = wait_ready(health, jaeger, "jaeger")
        print(f"jaeger ready after {ready:.2f} s (GET {health} -> 200): {http_get(health)[1].decode()[:300]}")
        target = f"http://127.0.0.1:{jp['JAEGER_OTLP_HTTP_PORT']}"

        if args.collector:
            cp = {k: free_port() for k in ("grpc", "http", "health", "prom")}
            ccfg = tmp / "collector.yaml"
            derive_collector_config(Path(args.collector_config), ccfg, cp, jp["JAEGER_OTLP_GRPC_PORT"], tmp)
            start_collector(args.collector, ccfg, cp["health"], "collector", procs)
            target = f"http://127.0.0.1:{cp['http']}"
            if args.gateway:
                gp = {k: free_port() for k in ("grpc", "http", "health", "prom")}
                gcfg = tmp / "gateway.yaml"
                derive_gateway_config(Path(args.gateway_config), gcfg, gp, cp["grpc"])
                start_collector(args.collector, gcfg, gp["health"], "gateway", procs)
                target = f"http://127.0.0.1:{gp['http']}"

        trace_id = send_trace(target)
        print(f"sent trace {trace_id} to {target}/v1/traces")
        return read_back(jp["JAEGER_QUERY_PORT"], trace_id, t0, args.json)
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        print(f"logs in {tmp}")


if __name__ == "__main__":
    sys.exit(main())
