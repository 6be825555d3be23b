"""The traces file (``configure_telemetry(traces_file=...)``, ``FLOWRA_OTEL_TRACES_FILE``): OTLP JSON
lines as the Collector's file exporter writes them, which ``flowra-otel audit`` reads.

Spans here come from the OpenTelemetry SDK directly (the exporter knows nothing of flowra); the
whole path with a real flowra app, app -> file -> audit, is in each line's
``test_zero_code_follows_configure_telemetry.py`` and ``test_examples_run.py``.
"""

from __future__ import annotations

import io
import json
import logging
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from flowra_otel.core.audit import EXIT_CLEAN, EXIT_LEAK, audit_file, load_traces
from flowra_otel.core.export import configure_telemetry
from flowra_otel.export import FLOWRA_OTEL_TRACES_FILE, OtlpJsonFileSpanExporter

FIXED_NS = 1_700_000_000_000_000_000


def make_spans(tracer_provider: TracerProvider, *, secret: str = "no secret here") -> None:
    """One small trace: an agent span with a tool span under it that links to another trace."""
    tracer = tracer_provider.get_tracer("flowra-otel-test", "1.0")
    with tracer.start_as_current_span("other") as other:
        other_context = other.get_span_context()
    with (
        tracer.start_as_current_span(
            "invoke_agent assistant", kind=SpanKind.INTERNAL, start_time=FIXED_NS, attributes={"gen_ai.agent.name": "a"}
        ),
        tracer.start_as_current_span(
            "execute_tool lookup",
            links=[Link(other_context, {"flowra.link": "resumed"})],
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.id": "c1",
                "gen_ai.tool.call.result": secret,
                "flowra.tokens": 42,
                "flowra.ratio": 0.5,
                "flowra.redaction.fields": ("result",),
                "flowra.redaction.applied": True,
            },
        ) as tool,
    ):
        tool.add_event("retry", {"attempt": 2})
        tool.set_status(Status(StatusCode.ERROR, "boom"))


def provider_with(exporter: OtlpJsonFileSpanExporter) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "traces-file-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_export_is_one_line_of_otlp_json_as_the_collector_writes_it(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    exporter = OtlpJsonFileSpanExporter(path)
    provider = provider_with(exporter)
    make_spans(provider)
    provider.shutdown()

    documents = lines_of(path)
    assert len(documents) == 3  # SimpleSpanProcessor: one export, so one line, per span
    spans = {
        span["name"]: (span, resource_spans, scope_spans)
        for resource_spans in (d["resourceSpans"][0] for d in documents)
        for scope_spans in resource_spans["scopeSpans"]
        for span in scope_spans["spans"]
    }
    tool, resource_spans, scope_spans = spans["execute_tool lookup"]
    agent = spans["invoke_agent assistant"][0]
    other = spans["other"][0]
    assert {"key": "service.name", "value": {"stringValue": "traces-file-test"}} in resource_spans["resource"][
        "attributes"
    ]
    assert scope_spans["scope"] == {"name": "flowra-otel-test", "version": "1.0"}
    # The OTLP JSON encoding: hex ids (spans and links), enums as numbers, 64-bit integers as strings.
    assert set(tool) == {
        "traceId",
        "spanId",
        "parentSpanId",
        "name",
        "kind",
        "startTimeUnixNano",
        "endTimeUnixNano",
        "attributes",
        "events",
        "links",
        "status",
        "flags",
    }
    assert tool["traceId"] == agent["traceId"] == f"{int(tool['traceId'], 16):032x}"
    assert tool["parentSpanId"] == agent["spanId"] == f"{int(agent['spanId'], 16):016x}"
    assert "parentSpanId" not in agent
    assert tool["kind"] == 1
    assert agent["startTimeUnixNano"] == str(FIXED_NS)
    assert tool["attributes"] == [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
        {"key": "gen_ai.tool.call.id", "value": {"stringValue": "c1"}},
        {"key": "gen_ai.tool.call.result", "value": {"stringValue": "no secret here"}},
        {"key": "flowra.tokens", "value": {"intValue": "42"}},
        {"key": "flowra.ratio", "value": {"doubleValue": 0.5}},
        {"key": "flowra.redaction.fields", "value": {"arrayValue": {"values": [{"stringValue": "result"}]}}},
        {"key": "flowra.redaction.applied", "value": {"boolValue": True}},
    ]
    assert tool["events"][0]["name"] == "retry"
    assert tool["events"][0]["attributes"] == [{"key": "attempt", "value": {"intValue": "2"}}]
    assert tool["links"] == [
        {
            "traceId": other["traceId"],
            "spanId": other["spanId"],
            "attributes": [{"key": "flowra.link", "value": {"stringValue": "resumed"}}],
            "flags": tool["links"][0]["flags"],
        }
    ]
    assert tool["status"] == {"code": 2, "message": "boom"}


def test_the_audit_reads_the_file_back_span_for_span(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    exporter = OtlpJsonFileSpanExporter(path)
    provider = provider_with(exporter)
    make_spans(provider)
    provider.shutdown()

    fmt, spans = load_traces(path)
    assert fmt == "otlp-json"
    by_name = {s.name: s for s in spans}
    assert set(by_name) == {"other", "invoke_agent assistant", "execute_tool lookup"}
    tool, agent = by_name["execute_tool lookup"], by_name["invoke_agent assistant"]
    assert tool.parent_span_id == agent.span_id and tool.trace_id == agent.trace_id
    assert tool.attributes["flowra.tokens"] == 42
    assert tool.attributes["flowra.redaction.fields"] == ["result"]
    assert tool.status_code == "ERROR" and tool.status_message == "boom"
    assert tool.service_name == "traces-file-test"

    report = audit_file(path)
    assert report.exit_code == EXIT_CLEAN
    assert [(c.tool_name, c.call_id, c.status) for c in report.tool_calls] == [("lookup", "c1", "error")]


def test_a_secret_in_the_file_is_found(tmp_path: Path) -> None:
    """The paired check of the clean audit above: the same spans with a secret in the tool result."""
    path = tmp_path / "spans.jsonl"
    provider = provider_with(OtlpJsonFileSpanExporter(path))
    make_spans(provider, secret="the key is sk-proj-" + "Zx81Qa" * 5)
    provider.shutdown()
    report = audit_file(path)
    assert report.exit_code == EXIT_LEAK
    assert [(leak.span_name, leak.where, leak.kind) for leak in report.leaks] == [
        ("execute_tool lookup", "attribute gen_ai.tool.call.result", "api_key")
    ]


def test_configure_telemetry_appends_run_after_run_and_prints_no_tree(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    for _ in range(2):  # two programs, one after the other
        console = io.StringIO()
        telemetry = configure_telemetry(
            traces_file=path, console_stream=console, set_global=False, register_atexit=False
        )
        assert [type(e).__name__ for e in telemetry.span_exporters] == ["OtlpJsonFileSpanExporter"]
        make_spans(telemetry.tracer_provider)
        assert telemetry.shutdown()
        assert console.getvalue() == ""  # the spans had somewhere to go
    _, spans = load_traces(path)
    assert len({s.trace_id for s in spans}) == 4  # two runs, each with its own two traces
    assert sorted(s.name for s in spans) == sorted(["other", "invoke_agent assistant", "execute_tool lookup"] * 2)


def test_the_variable_selects_the_file_and_an_empty_one_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "from-env.jsonl"
    monkeypatch.setenv(FLOWRA_OTEL_TRACES_FILE, str(path))
    telemetry = configure_telemetry(console=False, set_global=False, register_atexit=False)
    make_spans(telemetry.tracer_provider)
    telemetry.shutdown()
    assert len(load_traces(path)[1]) == 3

    monkeypatch.setenv(FLOWRA_OTEL_TRACES_FILE, "  ")
    console = io.StringIO()
    telemetry = configure_telemetry(console_stream=console, set_global=False, register_atexit=False)
    assert [type(e).__name__ for e in telemetry.span_exporters] == ["ConsoleTreeExporter"]
    make_spans(telemetry.tracer_provider)
    telemetry.shutdown()
    assert "execute_tool lookup" in console.getvalue()  # no file: the tree, as before


def test_a_path_that_cannot_be_opened_fails_at_configure_time(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "spans.jsonl"
    with pytest.raises(ValueError, match=r"traces file '.*no-such-dir/spans.jsonl': cannot open it for appending"):
        configure_telemetry(traces_file=missing, set_global=False, register_atexit=False)
    assert not missing.parent.exists()


def test_a_failed_write_is_logged_and_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    exporter = OtlpJsonFileSpanExporter("/dev/full")  # every write fails with ENOSPC
    provider = TracerProvider()
    spans: list[ReadableSpan] = []

    class Keep(SimpleSpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            spans.append(span)

    provider.add_span_processor(Keep(exporter))
    make_spans(provider)
    with caplog.at_level(logging.WARNING, logger="flowra_otel.export"):
        assert exporter.export(spans) is SpanExportResult.FAILURE
    assert [r.getMessage() for r in caplog.records if r.name == "flowra_otel.export"] == [
        "could not write 3 span(s) to the traces file /dev/full: [Errno 28] No space left on device"
    ]
    exporter.shutdown()
    assert exporter.export(spans) is SpanExportResult.FAILURE  # closed: refused, not raised
    exporter.shutdown()  # twice is fine


def test_writers_sharing_a_file_never_mix_their_lines(tmp_path: Path) -> None:
    """Each line is one unbuffered write: two exporters (as two processes would) appending at once
    leave only whole lines."""
    path = tmp_path / "shared.jsonl"
    providers = [provider_with(OtlpJsonFileSpanExporter(path)) for _ in range(2)]

    def write(provider: TracerProvider) -> None:
        for _ in range(30):
            make_spans(provider, secret="x" * 5000)  # lines larger than a buffer

    threads = [threading.Thread(target=write, args=(p,)) for p in providers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for provider in providers:
        provider.shutdown()
    documents = lines_of(path)
    assert len(documents) == 2 * 30 * 3


def test_a_file_it_creates_is_private_and_an_existing_one_keeps_its_mode(tmp_path: Path) -> None:
    """The file holds content when capture is on: created 0600 (not the umask's 0644); a file the
    user made keeps the permissions they gave it."""
    old_umask = os.umask(0o022)
    try:
        created = tmp_path / "spans.jsonl"
        OtlpJsonFileSpanExporter(created).shutdown()
        existing = tmp_path / "shared.jsonl"
        existing.write_text("", encoding="utf-8")
        existing.chmod(0o640)
        OtlpJsonFileSpanExporter(existing).shutdown()
    finally:
        os.umask(old_umask)
    assert oct(stat.S_IMODE(created.stat().st_mode)) == oct(0o600)
    assert oct(stat.S_IMODE(existing.stat().st_mode)) == oct(0o640)
