"""``flowra-otel audit`` reads every value an export carries, and its report never repeats a secret.

An auditor runs the command to learn whether anything slipped through; a "clean" that only looked
at span attributes holding strings proves nothing. So the command reads, as text, everything an
OTLP JSON (or Jaeger) export holds: the resource's attributes, the instrumentation scope (name,
version, attributes), span names, attribute keys and values of every type (``intValue``,
``doubleValue``, ``boolValue``, arrays, key-value lists, bytes), events, links and the status
message. What it prints (tool names, ids, ledger values, span names, where a leak is) is masked
wherever a secret matches, so the report cannot spread what it found.

Each document here is hand-written the way a Collector's file exporter writes one, with one
secret planted in one place; the paired clean document differs only by that value, so a scan
that flags everything cannot pass either.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from flowra_otel.__main__ import main
from flowra_otel.core import audit as audit_module
from flowra_otel.core.audit import EXIT_CLEAN, EXIT_LEAK, audit_file

API_KEY = "sk-live-" + "9QxT4" * 5
"""Matches the built-in ``api_key`` pattern."""
CARD_INT = 7358114902
"""An account number stored as an integer (no built-in pattern knows it), given with ``--secret``."""
PASSWORD = "hunter2-Zq"
"""A given secret that no built-in pattern knows."""


def kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def text(value: str) -> dict[str, Any]:
    return {"stringValue": value}


def document() -> dict[str, Any]:
    """One clean tool span: resource, scope, events, a link, an error status, values of every type."""
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "execute_tool lookup",
        "kind": 1,
        "attributes": [
            kv("gen_ai.operation.name", text("execute_tool")),
            kv("gen_ai.tool.name", text("lookup")),
            kv("gen_ai.tool.call.id", text("c1")),
            kv("app.customer_number", {"intValue": "4200"}),
            kv("app.score", {"doubleValue": 0.5}),
            kv("app.flag", {"boolValue": False}),
            kv("app.tags", {"arrayValue": {"values": [text("a"), {"intValue": "7"}]}}),
            kv("app.meta", {"kvlistValue": {"values": [kv("region", text("eu"))]}}),
            kv("app.blob", {"bytesValue": base64.b64encode(b"plain bytes").decode("ascii")}),
        ],
        "events": [{"name": "exception", "attributes": [kv("exception.type", text("ValueError"))]}],
        "links": [
            {
                "traceId": "1af7651916cd43dd8448eb211c80319c",
                "spanId": "c7ad6b7169203331",
                "attributes": [kv("flowra.link.type", text("resumed_from"))],
            }
        ],
        "status": {"code": 2, "message": "tool failed"},
    }
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [kv("service.name", text("shop")), kv("deploy.env", text("prod"))]},
                "scopeSpans": [
                    {
                        "scope": {"name": "flowra_otel", "version": "1.0", "attributes": [kv("lib", text("x"))]},
                        "spans": [span],
                    }
                ],
            }
        ]
    }


def _span(doc: dict[str, Any]) -> dict[str, Any]:
    span: dict[str, Any] = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    return span


def _set_attribute(attributes: list[dict[str, Any]], key: str, value: dict[str, Any]) -> None:
    for item in attributes:
        if item["key"] == key:
            item["value"] = value
            return
    attributes.append(kv(key, value))


def plant(where: str, doc: dict[str, Any]) -> None:
    """Put a secret in one place of ``doc``."""
    rs = doc["resourceSpans"][0]
    span = _span(doc)
    scope = rs["scopeSpans"][0]["scope"]
    if where == "resource attribute":
        _set_attribute(rs["resource"]["attributes"], "deploy.env", text(f"token {API_KEY}"))
    elif where == "scope attribute":
        _set_attribute(scope["attributes"], "lib", text(API_KEY))
    elif where == "scope name":
        scope["name"] = f"lib-{PASSWORD}"
    elif where == "int value":
        _set_attribute(span["attributes"], "app.customer_number", {"intValue": str(CARD_INT)})
    elif where == "double value":
        _set_attribute(span["attributes"], "app.score", {"doubleValue": float(CARD_INT)})
    elif where == "array value":
        _set_attribute(span["attributes"], "app.tags", {"arrayValue": {"values": [{"intValue": str(CARD_INT)}]}})
    elif where == "kvlist value":
        _set_attribute(span["attributes"], "app.meta", {"kvlistValue": {"values": [kv("pw", text(PASSWORD))]}})
    elif where == "bytes value":
        _set_attribute(span["attributes"], "app.blob", {"bytesValue": base64.b64encode(PASSWORD.encode()).decode()})
    elif where == "attribute key":
        span["attributes"].append(kv(f"app.{PASSWORD}", {"boolValue": True}))
    elif where == "event attribute":
        span["events"][0]["attributes"].append(kv("exception.message", text(f"key {API_KEY}")))
    elif where == "link attribute":
        span["links"][0]["attributes"].append(kv("app.note", text(PASSWORD)))
    elif where == "status message":
        span["status"]["message"] = f"failed with {API_KEY}"
    else:  # pragma: no cover - a typo in the parametrisation
        raise AssertionError(where)


PLACES = {
    "resource attribute": ("resource attribute deploy.env", "api_key"),
    "scope attribute": ("scope attribute lib", "api_key"),
    "scope name": ("scope name", "given_secret"),
    "int value": ("attribute app.customer_number", "given_secret"),
    "double value": ("attribute app.score", "given_secret"),
    "array value": ("attribute app.tags", "given_secret"),
    "kvlist value": ("attribute app.meta", "given_secret"),
    "bytes value": ("attribute app.blob", "given_secret"),
    "attribute key": ("attribute key", "given_secret"),
    "event attribute": ("event exception attribute exception.message", "api_key"),
    "link attribute": ("link attribute app.note", "given_secret"),
    "status message": ("status message", "api_key"),
}
SECRETS = ["--secret", str(CARD_INT), "--secret", PASSWORD]


def write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "export.jsonl"
    path.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    return path


def run_audit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["audit", *argv])
    return code, capsys.readouterr().out


def test_the_clean_document_is_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The paired negative of every case below: the same document, nothing planted."""
    code, out = run_audit([str(write(tmp_path, document())), *SECRETS], capsys)
    assert code == EXIT_CLEAN, out
    assert out.endswith("result: clean\n")
    assert "lookup  call_id=c1  status=error" in out


@pytest.mark.parametrize("where", list(PLACES))
def test_a_secret_anywhere_in_the_export_is_a_leak(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = document()
    plant(where, doc)
    path = write(tmp_path, doc)
    code, out = run_audit([str(path), *SECRETS], capsys)
    assert code == EXIT_LEAK, out
    report = audit_file(path, secrets=[str(CARD_INT), PASSWORD])
    assert [(leak.where, leak.kind) for leak in report.leaks] == [PLACES[where]]
    assert [leak.span_name for leak in report.leaks] == ["execute_tool lookup"]
    # The report says where, masked: never the secret itself.
    for secret in (API_KEY, str(CARD_INT), PASSWORD):
        assert secret not in out


def test_a_resource_is_checked_once_for_all_its_spans(tmp_path: Path) -> None:
    """Three spans of one resource holding a key: one finding (with the first span), not three."""
    doc = document()
    plant("resource attribute", doc)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for i in range(2):
        extra = copy.deepcopy(spans[0])
        extra["spanId"] = f"{i:016x}"
        spans.append(extra)
    report = audit_file(write(tmp_path, doc))
    assert report.span_count == 3
    assert [(leak.where, leak.span_id) for leak in report.leaks] == [
        ("resource attribute deploy.env", "b7ad6b7169203331")
    ]


def test_jaeger_process_tags_are_the_resource(tmp_path: Path) -> None:
    trace = {
        "traceID": "0af7651916cd43dd8448eb211c80319c",
        "spans": [
            {
                "traceID": "0af7651916cd43dd8448eb211c80319c",
                "spanID": "b7ad6b7169203331",
                "operationName": "invoke_agent shop",
                "processID": "p1",
                "tags": [{"key": "otel.scope.name", "type": "string", "value": f"lib-{PASSWORD}"}],
            }
        ],
        "processes": {
            "p1": {"serviceName": "shop", "tags": [{"key": "deploy.token", "type": "string", "value": API_KEY}]}
        },
    }
    path = tmp_path / "jaeger.json"
    path.write_text(json.dumps({"data": [trace]}), encoding="utf-8")
    report = audit_file(path, secrets=[PASSWORD])
    assert report.format == "jaeger-json"
    assert sorted((leak.where, leak.kind) for leak in report.leaks) == [
        ("resource attribute deploy.token", "api_key"),
        ("scope otel.scope.name", "given_secret"),
    ]


def test_what_the_report_prints_is_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A secret in a tool's name, call id, agent name and ledger, and in the span name: each is
    found, and the report (text and JSON) shows none of them."""
    doc = document()
    span = _span(doc)
    span["name"] = f"execute_tool {PASSWORD}"
    _set_attribute(span["attributes"], "gen_ai.tool.name", text(PASSWORD))
    _set_attribute(span["attributes"], "gen_ai.tool.call.id", text(API_KEY))
    _set_attribute(span["attributes"], "gen_ai.agent.name", text(f"agent {PASSWORD}"))
    _set_attribute(span["attributes"], "flowra.redaction.result.handlers", text(f"mod.{PASSWORD}"))
    path = write(tmp_path, doc)
    for extra in ([], ["--json"]):
        code, out = run_audit([str(path), *SECRETS, *extra], capsys)
        assert code == EXIT_LEAK
        assert PASSWORD not in out and API_KEY not in out
        assert "h…[10 chars]" in out
    report = audit_file(path, secrets=[PASSWORD])
    (call,) = report.tool_calls
    assert (call.tool_name, call.call_id, call.agent_name) == (
        "h…[10 chars]",
        "sk-l…[33 chars]",
        "agent h…[10 chars]",
    )
    assert call.ledger == {"flowra.redaction.result.handlers": "mod.h…[10 chars]"}


def test_without_reading_resources_and_numbers_the_export_would_read_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: the audit as it read spans before (string attribute values of the span,
    its events, links and status; nothing of the resource, scope or any number) calls the issue's
    export clean."""

    def strings_only(span: audit_module.AuditSpan, checked: set[int] | None = None) -> Any:
        yield "span name", span.name
        for key, value in span.attributes.items():
            if isinstance(value, str):
                yield f"attribute {key}", value

    doc = document()
    plant("resource attribute", doc)
    plant("int value", doc)
    path = write(tmp_path, doc)
    assert len(audit_file(path, secrets=[str(CARD_INT)]).leaks) == 2
    monkeypatch.setattr(audit_module, "_span_texts", strings_only)
    assert audit_file(path, secrets=[str(CARD_INT)]).clean


DIGIT_UUID = "96213456-7890-1234-5678-1234abcd5678"
"""A random UUID whose first groups are digits only, as about one ``service.instance.id`` in
800 is (the SDK makes one per process): 20 digits, dashed, that the card-number shape took
for a card, so the audit of a clean export failed now and then."""


@pytest.mark.parametrize("uuid", [DIGIT_UUID, "abcdef12-3456-7890-1234-567890123456"])
def test_a_dashed_hex_id_of_digits_is_no_card_number(uuid: str, tmp_path: Path) -> None:
    doc = document()
    doc["resourceSpans"][0]["resource"]["attributes"].append(kv("service.instance.id", text(uuid)))
    assert audit_file(write(tmp_path, doc)).leaks == ()
    # the paired negative: a card number in the same place is found
    doc["resourceSpans"][0]["resource"]["attributes"][-1] = kv("service.instance.id", text("4111-1111-1111-1111"))
    assert [(leak.where, leak.kind) for leak in audit_file(write(tmp_path, doc)).leaks] == [
        ("resource attribute service.instance.id", "card_number")
    ]


def test_redacting_secrets_keeps_ids_and_masks_card_numbers() -> None:
    """``redact_secrets=True`` (the same shapes the audit looks for) leaves a UUID of digits alone."""
    from flowra_otel.core.content import ContentPolicy

    policy = ContentPolicy.build(redact=None, redact_secrets=True, max_length=None)
    text_in = f"order {DIGIT_UUID} paid with 4111 1111 1111 1111 and 4111-1111-1111-1111."
    assert policy.clean(text_in) == (f"order {DIGIT_UUID} paid with [REDACTED:card_number] and [REDACTED:card_number].")
