"""``flowra-otel audit`` on files made by the real export path, in both formats, and on bad input.

The OTLP JSON files are written from what an ``OtlpReceiver`` received from a real flowra run
(``tests.test_otlp_export_end_to_end``), the way the Collector's file exporter writes them; the Jaeger file is
built from the same received spans the way Jaeger exports them.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from flowra_otel.__main__ import main
from flowra_otel.core import audit as audit_module
from flowra_otel.core import redaction, semconv
from flowra_otel.core.audit import EXIT_BAD_INPUT, EXIT_CLEAN, EXIT_LEAK, audit_file
from tests.hook_registry.test_otlp_export_end_to_end import (
    REDACTED,
    REDACTION_HANDLER,
    SECRET_KEY,
    ExportedRun,
    Scenario,
    collector_json,
    export_run,
    write_otlp_json,
)
from tests.otlp_receiver import AttrValue, SpanRecord

TOOL_SPAN = "execute_tool lookup_account"
CHAT_SPAN = "chat sonnet-4-5"


async def exported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scenario: Scenario) -> tuple[ExportedRun, Path]:
    run = await export_run(monkeypatch, scenario=scenario)
    return run, write_otlp_json(run.trace_requests, tmp_path / f"{scenario}.jsonl")


def audit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["audit", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def otlp_json_from_spans(spans: list[ReadableSpan]) -> dict[str, Any]:
    """SDK spans as one Collector file-exporter line (the OTLP exporters' own protobuf encoding)."""
    return collector_json(encode_spans(spans))


# ------------------------------------------------------------------------------------ Jaeger
def _jaeger_tag(key: str, value: AttrValue) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, tuple):  # Jaeger has no arrays: the Collector's translator writes JSON text
        return {"key": key, "type": "string", "value": json.dumps(list(value))}
    return {"key": key, "type": "string", "value": str(value)}


def jaeger_json(spans: list[SpanRecord]) -> dict[str, Any]:
    """The spans as Jaeger's JSON trace export (``GET /api/traces/{id}``, the UI's download)."""
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    processes: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for span in spans:
        service = span.resource_attributes.get("service.name")
        assert isinstance(service, str)
        pid = f"p{len(processes[span.trace_id]) + 1}"
        pid = next((p for p, proc in processes[span.trace_id].items() if proc["serviceName"] == service), pid)
        processes[span.trace_id][pid] = {
            "serviceName": service,
            "tags": [_jaeger_tag(k, v) for k, v in span.resource_attributes.items() if k != "service.name"],
        }
        tags = [_jaeger_tag(k, v) for k, v in span.attributes.items()]
        tags.append({"key": "span.kind", "type": "string", "value": span.kind.lower()})
        tags.append({"key": "otel.scope.name", "type": "string", "value": span.scope_name})
        if span.status_code != "UNSET":
            tags.append({"key": "otel.status_code", "type": "string", "value": span.status_code})
        if span.status_message:
            tags.append({"key": "otel.status_description", "type": "string", "value": span.status_message})
        if span.status_code == "ERROR":
            tags.append({"key": "error", "type": "bool", "value": True})
        by_trace[span.trace_id].append(
            {
                "traceID": span.trace_id,
                "spanID": span.span_id,
                "operationName": span.name,
                "references": (
                    [{"refType": "CHILD_OF", "traceID": span.trace_id, "spanID": span.parent_span_id}]
                    if span.parent_span_id
                    else []
                ),
                "startTime": span.start_time_unix_nano // 1000,
                "duration": span.duration_ns // 1000,
                "tags": tags,
                "logs": [
                    {
                        "timestamp": event.time_unix_nano // 1000,
                        "fields": [
                            {"key": "event", "type": "string", "value": event.name},
                            *(_jaeger_tag(k, v) for k, v in event.attributes.items()),
                        ],
                    }
                    for event in span.events
                ],
                "processID": pid,
                "warnings": None,
                "flags": 1,
            }
        )
    return {
        "data": [
            {"traceID": trace_id, "spans": trace_spans, "processes": processes[trace_id], "warnings": None}
            for trace_id, trace_spans in by_trace.items()
        ],
        "total": 0,
        "limit": 0,
        "offset": 0,
        "errors": None,
    }


def write_jaeger(spans: list[SpanRecord], path: Path) -> Path:
    path.write_text(json.dumps(jaeger_json(spans), indent=2), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------ clean runs
async def test_redacted_run_is_clean_and_the_ledger_is_printed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, path = await exported(monkeypatch, tmp_path, "redacted")
    code, out, err = audit([str(path)], capsys)
    assert (code, err) == (EXIT_CLEAN, "")
    tool = run.span(TOOL_SPAN)
    assert f"lookup_account  call_id=call_a  status=ok  trace_id={tool.trace_id}  span_id={tool.span_id}" in out
    assert "tool calls: 1" in out
    assert "    redaction ledger:\n" in out
    assert "      flowra.redaction.applied = true\n" in out
    assert '      flowra.redaction.fields = ["result"]\n' in out
    assert f'      flowra.redaction.result.handlers = ["{REDACTION_HANDLER}"]\n' in out
    original_length = tool.attributes[redaction.key("result", "original_length")]
    assert isinstance(original_length, int)
    assert f"      flowra.redaction.result.original_length = {original_length}\n" in out
    assert "leaks: none found (checked 4 built-in pattern(s), 0 given secret(s))" in out
    assert out.endswith("result: clean\n")
    assert out.startswith(f"flowra-otel audit: {path} (OTLP JSON: 1 trace(s), 4 span(s))\n")


async def test_content_free_run_is_clean_without_ledger(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = await exported(monkeypatch, tmp_path, "weather")
    code, out, _ = audit([str(path)], capsys)
    assert code == EXIT_CLEAN
    assert "get_weather  call_id=call_w  status=ok" in out
    assert "    redaction ledger: none (no hook changed the arguments or the result)" in out


# ------------------------------------------------------------------------------------ leaks
async def test_planted_leak_is_reported_with_span_and_attribute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, path = await exported(monkeypatch, tmp_path, "leak")
    code, out, err = audit([str(path)], capsys)
    assert (code, err) == (EXIT_LEAK, "")
    tool = run.span(TOOL_SPAN)
    masked = f"{SECRET_KEY[:4]}…[{len(SECRET_KEY)} chars]"
    assert (
        f"  LEAK api_key: span {TOOL_SPAN!r} (trace_id={tool.trace_id} span_id={tool.span_id})"
        f" attribute {semconv.GEN_AI_TOOL_CALL_RESULT}: {masked}"
    ) in out
    # The second LLM call was sent the tool result: its input messages carry the key too.
    (second_chat,) = [
        s
        for s in run.spans
        if s.name == CHAT_SPAN
        and semconv.GEN_AI_INPUT_MESSAGES in s.attributes
        and SECRET_KEY in str(s.attributes[semconv.GEN_AI_INPUT_MESSAGES])
    ]
    assert f"span_id={second_chat.span_id}) attribute {semconv.GEN_AI_INPUT_MESSAGES}: {masked}" in out
    assert "lookup_account  call_id=call_a  status=ok" in out
    assert "    redaction ledger: none" in out
    assert out.endswith("finding(s))\n")
    assert "result: LEAK (" in out
    assert SECRET_KEY not in out  # the report does not spread the secret


async def test_json_report(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, path = await exported(monkeypatch, tmp_path, "leak")
    code, out, _ = audit([str(path), "--json"], capsys)
    assert code == EXIT_LEAK
    report = json.loads(out)
    tool = run.span(TOOL_SPAN)
    assert report["format"] == "otlp-json"
    assert (report["traces"], report["spans"], report["clean"]) == (1, 4, False)
    assert report["tool_calls"] == [
        {
            "trace_id": tool.trace_id,
            "span_id": tool.span_id,
            "tool_name": "lookup_account",
            "call_id": "call_a",
            "status": "ok",
            "error_type": None,
            "end_reason": None,
            "agent_name": "assistant",
            "ledger": {},
        }
    ]
    where = {(leak["span_name"], leak["where"], leak["kind"]) for leak in report["leaks"]}
    assert (TOOL_SPAN, f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}", "api_key") in where
    assert (CHAT_SPAN, f"attribute {semconv.GEN_AI_INPUT_MESSAGES}", "api_key") in where
    assert all(leak["preview"] == f"{SECRET_KEY[:4]}…[{len(SECRET_KEY)} chars]" for leak in report["leaks"])


async def test_given_secrets_and_builtin_switch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, redacted = await exported(monkeypatch, tmp_path, "redacted")
    _, leaked = await exported(monkeypatch, tmp_path, "leak")

    # A user-given string: the tool argument "alice" was captured (only the result was redacted).
    code, out, _ = audit([str(redacted), "--secret", "alice", "--secret", "not-there"], capsys)
    assert code == EXIT_LEAK
    assert f"  LEAK given_secret: span {TOOL_SPAN!r}" in out
    assert f"attribute {semconv.GEN_AI_TOOL_CALL_ARGUMENTS}: a…[5 chars]" in out
    assert "2 given secret(s)" in out

    # Without the built-in patterns and without given strings, nothing is looked for.
    code, out, _ = audit([str(leaked), "--no-builtin-patterns"], capsys)
    assert code == EXIT_CLEAN
    assert "checked 0 built-in pattern(s), 0 given secret(s)" in out

    secrets = tmp_path / "secrets.txt"
    secrets.write_text(f"# production keys\n\n{SECRET_KEY}\n", encoding="utf-8")
    code, out, _ = audit([str(leaked), "--no-builtin-patterns", "--secrets-file", str(secrets)], capsys)
    assert code == EXIT_LEAK
    assert "LEAK given_secret" in out and "1 given secret(s)" in out
    code, _, _ = audit([str(redacted), "--no-builtin-patterns", "--secrets-file", str(secrets)], capsys)
    assert code == EXIT_CLEAN


EDITOR_ENCODINGS = [
    pytest.param("utf-8-sig", "\n", id="utf-8-bom"),  # Notepad, PowerShell 5 Out-File -Encoding utf8
    pytest.param("utf-16", "\r\n", id="utf-16-bom-crlf"),  # PowerShell 5's > redirection
    pytest.param("utf-32", "\n", id="utf-32-bom"),
    pytest.param("utf-8", "\r\n", id="utf-8-crlf"),
    pytest.param("utf-8", "\r", id="utf-8-cr"),
]


@pytest.mark.parametrize(("encoding", "newline"), EDITOR_ENCODINGS)
async def test_a_secrets_file_as_editors_save_it_finds_the_leak(
    encoding: str, newline: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The secret first in the file (where a byte order mark sits) and with an editor's trailing
    space: still found. Paired negative below: read as before, the BOM made the audit clean."""
    _, leaked = await exported(monkeypatch, tmp_path, "leak")
    secrets = tmp_path / "secrets.txt"
    secrets.write_bytes(newline.join([f"{SECRET_KEY} ", "# production keys", ""]).encode(encoding))
    code, out, _ = audit([str(leaked), "--no-builtin-patterns", "--secrets-file", str(secrets)], capsys)
    assert code == EXIT_LEAK, out
    assert "LEAK given_secret" in out and "1 given secret(s)" in out


async def test_read_as_before_a_bom_hid_the_first_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, leaked = await exported(monkeypatch, tmp_path, "leak")
    monkeypatch.setattr(audit_module, "read_text_file", lambda path: Path(path).read_text(encoding="utf-8"))
    secrets = tmp_path / "secrets.txt"
    secrets.write_bytes(f"{SECRET_KEY}\n".encode("utf-8-sig"))
    code, _, _ = audit([str(leaked), "--no-builtin-patterns", "--secrets-file", str(secrets)], capsys)
    assert code == EXIT_CLEAN  # the false clean the BOM caused


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-32"])
async def test_a_traces_file_with_a_byte_order_mark_gives_the_same_report(
    encoding: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, leaked = await exported(monkeypatch, tmp_path, "leak")
    code, expected, _ = audit([str(leaked)], capsys)
    assert code == EXIT_LEAK
    again = tmp_path / "again.jsonl"
    again.write_bytes(leaked.read_text(encoding="utf-8").replace("\n", "\r\n").encode(encoding))
    code, out, _ = audit([str(again)], capsys)
    assert code == EXIT_LEAK
    assert out.replace(str(again), str(leaked)) == expected


# ------------------------------------------------------------------------------------ other encodings
@pytest.mark.parametrize(("scenario", "expected_code"), [("redacted", EXIT_CLEAN), ("leak", EXIT_LEAK)])
async def test_jaeger_export_gives_the_same_report(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scenario: Scenario,
    expected_code: int,
) -> None:
    run, otlp_path = await exported(monkeypatch, tmp_path, scenario)
    jaeger_path = write_jaeger(run.spans, tmp_path / "jaeger.json")
    otlp = audit_file(otlp_path)
    jaeger = audit_file(jaeger_path)
    assert (otlp.format, jaeger.format) == ("otlp-json", "jaeger-json")
    assert jaeger.exit_code == otlp.exit_code == expected_code
    assert jaeger.tool_calls == otlp.tool_calls  # ids, names, status, ledger (arrays decoded back)
    assert sorted((x.span_id, x.where, x.kind) for x in jaeger.leaks) == sorted(
        (x.span_id, x.where, x.kind) for x in otlp.leaks
    )
    if scenario == "redacted":
        assert otlp.tool_calls[0].ledger[redaction.FIELDS] == ["result"]
    code, out, _ = audit([str(jaeger_path)], capsys)
    assert code == expected_code
    assert "(Jaeger JSON: 1 trace(s), 4 span(s))" in out


async def test_protobuf_json_mapping_with_base64_ids(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = await exported(monkeypatch, tmp_path, "redacted")
    path = write_otlp_json(run.trace_requests, tmp_path / "plain.jsonl", collector_style=False)
    first_span = json.loads(path.read_text().splitlines()[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert first_span["traceId"].endswith("==")  # base64, not hex
    report = audit_file(path)
    tool = run.span(TOOL_SPAN)
    assert [(c.trace_id, c.span_id) for c in report.tool_calls] == [(tool.trace_id, tool.span_id)]
    assert report.clean


def test_hand_written_otlp_json_error_status_events_and_status_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Enum names, string intValues, arrays, an exception event and a status message."""
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "parentSpanId": "00f067aa0ba902b7",
        "name": "execute_tool send_mail",
        "kind": "SPAN_KIND_INTERNAL",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "send_mail"}},
            {"key": "gen_ai.tool.call.id", "value": {"stringValue": "m1"}},
            {"key": "error.type", "value": {"stringValue": "tool_error"}},
            {"key": "flowra.redaction.applied", "value": {"boolValue": True}},
            {"key": "flowra.redaction.fields", "value": {"arrayValue": {"values": [{"stringValue": "arguments"}]}}},
            {"key": "flowra.redaction.arguments.original_length", "value": {"intValue": "42"}},
        ],
        "events": [
            {
                "name": "exception",
                "attributes": [
                    {"key": "exception.message", "value": {"stringValue": "auth Bearer abcdefghijklmnop12"}}
                ],
            }
        ],
        "status": {"code": "STATUS_CODE_ERROR", "message": "could not reach bob@example.com"},
    }
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}), encoding="utf-8")
    code, out, _ = audit([str(path)], capsys)
    assert code == EXIT_LEAK
    assert "send_mail  call_id=m1  status=error (tool_error)  trace_id=0af7651916cd43dd8448eb211c80319c" in out
    assert "      flowra.redaction.arguments.original_length = 42\n" in out
    assert '      flowra.redaction.fields = ["arguments"]\n' in out
    assert "LEAK bearer_token: span 'execute_tool send_mail'" in out
    assert "event exception attribute exception.message: Bear…[" in out
    assert "LEAK email:" in out and "status message: bob@…[15 chars]" in out


ONE_SPAN: dict[str, Any] = {
    "resourceSpans": [
        {"scopeSpans": [{"spans": [{"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "invoke_agent a"}]}]}
    ]
}


def test_metrics_lines_are_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(f'{{"resourceMetrics": []}}\n{json.dumps(ONE_SPAN)}\n', encoding="utf-8")
    code, out, _ = audit([str(path)], capsys)
    assert code == EXIT_CLEAN
    assert "1 span(s)" in out and "tool calls: 0" in out


# ------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "no such file", id="missing"),
        pytest.param("", "empty file", id="empty"),
        pytest.param("this is not json\n", "not JSON (Expecting value at line 1, column 1)", id="not-json"),
        pytest.param('{"resourceSpans": []}\n{"resourceSpans": [\n', "line 2 is not JSON", id="bad-second-line"),
        pytest.param('{"spans": []}', "JSON of an unknown shape", id="unknown-object"),
        pytest.param("[1, 2]", "item 0: JSON of an unknown shape", id="array-of-numbers"),
        pytest.param('"traces"', "found a string", id="string"),
        pytest.param(
            '{"resourceSpans": {"oops": 1}}', "resourceSpans is an object, expected an array", id="otlp-shape"
        ),
        pytest.param(
            '{"data": [{"spans": [42]}]}', "data[0].spans[0] is a number, expected an object", id="jaeger-shape"
        ),
        pytest.param('{"resourceMetrics": []}', "holds no traces", id="metrics-only"),
        pytest.param(b"\xff\xfe\x00binary", "not valid UTF-16 LE", id="binary"),
    ],
)
def test_malformed_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes | None, message: str
) -> None:
    path = tmp_path / "traces.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    code, out, err = audit([str(path)], capsys)
    assert code == EXIT_BAD_INPUT
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"flowra-otel audit: error: {path}: ")
    assert message in err


def test_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ok.jsonl"
    path.write_text('{"resourceSpans": []}\n', encoding="utf-8")
    code, _, err = audit([str(path), "--secrets-file", str(tmp_path / "nope.txt")], capsys)
    assert code == EXIT_BAD_INPUT and "no such secrets file" in err
    code, _, err = audit([str(path), "--secret", ""], capsys)
    assert code == EXIT_BAD_INPUT and "--secret must not be empty" in err
    code, _, err = audit([], capsys)
    assert code == EXIT_BAD_INPUT and "nothing to audit" in err
    code, _, err = audit([str(path), "--phoenix", "http://127.0.0.1:9"], capsys)
    assert code == EXIT_BAD_INPUT and "not both" in err
    code, _, err = audit(["--phoenix", "http://127.0.0.1:9"], capsys)
    assert code == EXIT_BAD_INPUT and "--phoenix needs --project" in err
    code, _, err = audit([str(path), "--project", "p"], capsys)
    assert code == EXIT_BAD_INPUT and "go with --phoenix" in err
    code, _, err = audit(["--phoenix", "http://127.0.0.1:9", "--project", "p", "--since", "yesterday"], capsys)
    assert code == EXIT_BAD_INPUT and "--since 'yesterday'" in err


# ------------------------------------------------------------------------------------ as a process
async def test_python_dash_m_flowra_otel_audit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _, path = await exported(monkeypatch, tmp_path, "leak")
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "flowra_otel", "audit", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == EXIT_LEAK, proc.stderr
    assert f"LEAK api_key: span {TOOL_SPAN!r}" in proc.stdout
    assert proc.stderr == ""

    missing = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "flowra_otel", "audit", str(tmp_path / "missing.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == EXIT_BAD_INPUT
    assert missing.stdout == ""
    assert missing.stderr == f"flowra-otel audit: error: {tmp_path / 'missing.jsonl'}: no such file\n"


# ------------------------------------------------------------------------------------ Phoenix exports
PHOENIX_DATA = Path(__file__).parents[1] / "data" / "phoenix"
PHOENIX_FILES = (("spans.json", "phoenix-json"), ("spans-otlpv1.json", "phoenix-otlp-json"))


@pytest.mark.parametrize(("file", "fmt"), PHOENIX_FILES)
def test_phoenix_exports_are_read(file: str, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Real Phoenix answers (``tests/data/phoenix``): before, their ``data`` array was taken for
    Jaeger traces and the audit said "0 span(s) ... clean"."""
    code, out, _ = audit([str(PHOENIX_DATA / file), "--secret", SECRET_KEY, "--json"], capsys)
    report = json.loads(out)
    assert code == EXIT_CLEAN
    assert (report["format"], report["traces"], report["spans"]) == (fmt, 1, 10)
    calls = {c["call_id"]: c for c in report["tool_calls"]}
    assert set(calls) == {"call_research", "call_account", "call_weather", "call_rome"}
    assert calls["call_account"]["ledger"] == {
        redaction.APPLIED: True,
        redaction.FIELDS: ["result"],
        redaction.key("result", "final_length"): 50,
        redaction.key("result", "handlers"): ["tests.test_otlp_export_end_to_end.redact_api_keys"],
        redaction.key("result", "original_length"): 74,
    }
    assert {c["agent_name"] for c in calls.values()} == {"assistant", "research"}
    text_code, text, _ = audit([str(PHOENIX_DATA / file)], capsys)
    assert text_code == EXIT_CLEAN
    assert "None" not in text and "null" not in text  # explicit nulls are no values


def test_phoenix_otlpv1_nulls_are_not_values() -> None:
    report = audit_file(PHOENIX_DATA / "spans-otlpv1.json")
    (root,) = [c for c in report.tool_calls if c.call_id == "call_account"]
    assert root.status == "ok" and root.error_type is None and root.end_reason is None


@pytest.mark.parametrize(("file", "fmt"), PHOENIX_FILES)
def test_phoenix_export_with_a_planted_secret_is_a_leak(
    file: str, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (PHOENIX_DATA / file).read_text(encoding="utf-8")
    assert text.count(REDACTED) >= 2
    planted = tmp_path / file
    planted.write_text(text.replace(REDACTED, SECRET_KEY), encoding="utf-8")
    code, out, _ = audit([str(planted), "--secret", SECRET_KEY, "--json"], capsys)
    report = json.loads(out)
    assert code == EXIT_LEAK
    places = {(leak["span_name"], leak["where"], leak["kind"]) for leak in report["leaks"]}
    assert ("execute_tool lookup_account", "attribute gen_ai.tool.call.result", "given_secret") in places
    assert ("execute_tool lookup_account", "attribute gen_ai.tool.call.result", "api_key") in places
    assert SECRET_KEY not in out


async def test_jaeger_v2_api_v3_answer_is_otlp_json(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = await exported(monkeypatch, tmp_path, "leak")
    (request,) = run.trace_requests
    v3 = tmp_path / "jaeger-v3.json"
    v3.write_text(json.dumps({"result": collector_json(request)}), encoding="utf-8")
    code, out, _ = audit([str(v3), "--json"], capsys)
    report = json.loads(out)
    assert code == EXIT_LEAK and report["format"] == "otlp-json" and report["spans"] == len(run.spans)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param('{"data": [], "next_cursor": null}', "holds no spans", id="phoenix-empty"),
        pytest.param('{"data": []}', "holds no spans", id="jaeger-empty"),
        pytest.param('{"resourceSpans": []}', "holds no spans", id="otlp-empty"),
        pytest.param('{"result": {"resourceSpans": []}}', "holds no spans", id="jaeger-v3-empty"),
        pytest.param('{"data": [{"id": 1, "name": "x"}]}', "data[0] is neither", id="unknown-data-item"),
    ],
)
def test_nothing_to_audit_is_never_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "export.json"
    path.write_text(content, encoding="utf-8")
    code, out, err = audit([str(path), "--secret", "anything"], capsys)
    assert (code, out) == (EXIT_BAD_INPUT, "")
    assert message in err
