"""The audit's matching and verdict (``flowra_otel.core.audit``: ``audit_spans`` and the functions
that mask, list and print what it found), span by span: every value of every place is checked,
resource and scope once; each leak once per place and kind, with a masked preview; every value
the report prints is masked wherever a secret or a pattern matches in it, inside lists and
mappings of the ledger too; numbers compared as the text a secret would be (a card number stored
as a double included), ``NaN`` and infinities never crash it; the verdict and the exit status;
the MCP servers' ``tools/call`` spans told apart from the tool calls, each with the agent's call it
continues (up to 64 spans up), its status and its names masked.

Flowra-free and fast: these are the tests ``tools/mutate.py audit`` runs per mutant.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from flowra_otel.core import audit, semconv
from flowra_otel.core.audit import (
    EXIT_CLEAN,
    EXIT_LEAK,
    AuditReport,
    AuditSpan,
    Leak,
    SpanEvent,
    ToolCall,
    audit_file,
    audit_spans,
    render_json,
    render_text,
)
from flowra_otel.core.content import BUILTIN_SECRET_PATTERNS

SECRET = "Quartz-Ledger-4417"
"""A given secret (no built-in pattern knows it), 18 characters."""
SHOWN = "Quar…[18 chars]"
EMAIL = "ada.lovelace@example.com"
PATTERNS = [(n, re.compile(p)) for n, p in BUILTIN_SECRET_PATTERNS.items()]
TRACE = "0af7651916cd43dd8448eb211c80319c"


def span(name: str = "chat m", span_id: str = "b7ad6b7169203331", **fields: Any) -> AuditSpan:
    values: dict[str, Any] = {"attributes": {}}
    values.update(fields)
    return AuditSpan(trace_id=TRACE, span_id=span_id, parent_span_id=None, name=name, **values)


def tool_span(**attributes: Any) -> AuditSpan:
    return span(
        "execute_tool lookup",
        attributes={semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL, **attributes},
    )


def leaks_of(spans: list[AuditSpan], *, secrets: tuple[str, ...] = (SECRET,), builtin: bool = True) -> list[Leak]:
    return audit_spans(spans, secrets=secrets, builtin_patterns=builtin)[1]


def test_mask_keeps_a_head_and_the_length() -> None:
    assert audit._mask(SECRET) == SHOWN
    assert audit._mask("twelve chars") == "twel…[12 chars]"
    assert audit._mask("eleven char") == "e…[11 chars]"
    assert audit._mask("x") == "x…[1 chars]"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (False, "false"),
        (42, "42"),
        (4111111111111111.0, "4111111111111111"),
        (1.5, "1.5"),
        (-0.0, "0"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
        (float("nan"), "nan"),
        (1e300, str(int(1e300))),
    ],
)
def test_a_number_is_compared_as_the_text_a_secret_would_be(value: Any, text: str) -> None:
    assert audit._scalar_text(value) == text


def test_strings_walks_every_value_and_key() -> None:
    value = {"k1": ["a", 1, None, {"k2": True}], "k3": None, "k4": ("t",)}
    assert list(audit._strings(value)) == ["k1", "a", "1", "k2", "true", "k3", "k4", "t"]
    assert list(audit._strings(None)) == []
    assert list(audit._strings(2.0)) == ["2"]


def test_span_texts_cover_every_place_and_the_resource_and_scope_once() -> None:
    resource = {"service.name": "shop"}
    scope = {"name": "lib", "version": "1.0", "attributes": {"scope.key": "v"}}
    first = span(
        attributes={"a": "x"},
        events=(SpanEvent("ev", {"e": "y"}),),
        link_attributes=({"l": "z"},),
        status_message="failed",
        resource_attributes=resource,
        scope=scope,
    )
    second = span(span_id="c7ad6b7169203331", resource_attributes=resource, scope=scope)
    checked: set[int] = set()
    assert list(audit._span_texts(first, checked)) == [
        ("span name", "chat m"),
        ("attribute key", "a"),
        ("attribute a", "x"),
        ("event ev", "ev"),
        ("event ev attribute key", "e"),
        ("event ev attribute e", "y"),
        ("link attribute key", "l"),
        ("link attribute l", "z"),
        ("status message", "failed"),
        ("resource attribute key", "service.name"),
        ("resource attribute service.name", "shop"),
        ("scope name", "lib"),
        ("scope version", "1.0"),
        ("scope attribute key", "scope.key"),
        ("scope attribute scope.key", "v"),
    ]
    assert list(audit._span_texts(second, checked)) == [("span name", "chat m")]
    assert ("resource attribute service.name", "shop") in list(audit._span_texts(second))  # no memory given


def test_a_leak_is_found_in_every_place_each_once_per_place_and_kind() -> None:
    resource = {"deploy.owner": EMAIL}
    spans = [
        span(
            name=f"chat {SECRET}",
            attributes={"a": SECRET, SECRET: "key", "list": [SECRET, SECRET], "n": 42},
            events=(SpanEvent("exception", {"message": f"{SECRET} and {EMAIL}"}),),
            link_attributes=({"l": SECRET},),
            status_message=SECRET,
            resource_attributes=resource,
            scope={"name": "lib", "attributes": {"owner": SECRET}},
        ),
        span(span_id="c7ad6b7169203331", resource_attributes=resource, attributes={"b": EMAIL}),
    ]
    found = [(leak.span_id, leak.where, leak.kind, leak.preview) for leak in leaks_of(spans)]
    first = "b7ad6b7169203331"
    assert found == [
        (first, "span name", "given_secret", SHOWN),
        (first, "attribute a", "given_secret", SHOWN),
        (first, "attribute key", "given_secret", SHOWN),
        (first, "attribute list", "given_secret", SHOWN),
        (first, "event exception attribute message", "given_secret", SHOWN),
        (first, "event exception attribute message", "email", "ada.…[24 chars]"),
        (first, "link attribute l", "given_secret", SHOWN),
        (first, "status message", "given_secret", SHOWN),
        (first, "resource attribute deploy.owner", "email", "ada.…[24 chars]"),
        (first, "scope attribute owner", "given_secret", SHOWN),
        ("c7ad6b7169203331", "attribute b", "email", "ada.…[24 chars]"),
    ]
    leak = leaks_of(spans)[0]
    assert (leak.trace_id, leak.span_name) == (TRACE, f"chat {SHOWN}")


def test_every_kind_found_in_one_place_is_reported_after_a_repeated_kind() -> None:
    """Two given secrets and an e-mail in one value: the second secret (a kind already reported
    for this place) is skipped, and the e-mail after it is still reported."""
    spans = [span(attributes={"a": f"{SECRET} other-secret-77 {EMAIL}"})]
    found = [(x.where, x.kind) for x in leaks_of(spans, secrets=(SECRET, "other-secret-77"))]
    assert found == [("attribute a", "given_secret"), ("attribute a", "email")]


def test_a_scope_read_from_odd_input_is_walked_whatever_its_shape() -> None:
    scope = {"attributes": ["listed", SECRET], "version": {"nested": SECRET}, "name": "lib"}
    found = [x.where for x in leaks_of([span(scope=scope)], builtin=False)]
    assert found == ["scope attributes", "scope version"]


def test_where_a_secret_is_a_key_the_place_is_masked_too() -> None:
    (leak,) = leaks_of([span(attributes={f"user.{SECRET}": "x"})], builtin=False)
    assert leak.where == "attribute key"
    value_leaks = leaks_of([span(attributes={f"user.{SECRET}": SECRET})], builtin=False)
    assert [x.where for x in value_leaks] == ["attribute key", f"attribute user.{SHOWN}"]


def test_a_number_holding_a_secret_is_a_leak() -> None:
    found = leaks_of([span(attributes={"card": 4111111111111111.0, "pin": 7358114902})], secrets=("7358114902",))
    assert [(x.where, x.kind) for x in found] == [("attribute card", "card_number"), ("attribute pin", "given_secret")]


def test_what_is_looked_for_secrets_deduplicated_empty_ones_ignored_patterns_optional() -> None:
    spans = [span(attributes={"a": f"{SECRET} {EMAIL}"})]
    assert [x.kind for x in leaks_of(spans, secrets=(SECRET, SECRET, ""))] == ["given_secret", "email"]
    assert [x.kind for x in leaks_of(spans, secrets=(SECRET,), builtin=False)] == ["given_secret"]
    assert leaks_of(spans, secrets=(), builtin=False) == []
    assert leaks_of(spans, secrets=("",), builtin=False) == []


def test_a_secret_only_inside_encoded_text_is_found() -> None:
    nested = json.dumps([{"role": "tool", "parts": [{"content": json.dumps({"card": SECRET})}]}])
    (leak,) = leaks_of([span(attributes={"gen_ai.input.messages": nested[:-4]})], builtin=False)
    assert leak.where == "attribute gen_ai.input.messages"


def test_the_tool_calls_and_their_ledger() -> None:
    spans = [
        span(attributes={semconv.GEN_AI_OPERATION_NAME: "chat"}),
        tool_span(
            **{
                semconv.GEN_AI_TOOL_NAME: "lookup",
                semconv.GEN_AI_TOOL_CALL_ID: "c1",
                semconv.GEN_AI_AGENT_NAME: "clerk",
                "flowra.redaction.fields": '["result"]',  # Jaeger's text form of an array
                "flowra.redaction.applied": True,
                "flowra.redaction.result.original_length": 163,
                "app.other": "x",
            }
        ),
        span(
            "execute_tool fallback_name",
            attributes={semconv.GEN_AI_OPERATION_NAME: "execute_tool", semconv.ERROR_TYPE: "TimeoutError"},
        ),
        span(
            "execute_tool failed",
            attributes={semconv.GEN_AI_OPERATION_NAME: "execute_tool", semconv.FLOWRA_END_REASON: "cancelled"},
            status_code="ERROR",
        ),
    ]
    calls, _ = audit_spans(spans, secrets=(), builtin_patterns=False)
    assert calls == [
        ToolCall(
            TRACE,
            "b7ad6b7169203331",
            "lookup",
            "c1",
            "ok",
            None,
            None,
            "clerk",
            {
                "flowra.redaction.applied": True,
                "flowra.redaction.fields": ["result"],
                "flowra.redaction.result.original_length": 163,
            },
        ),
        ToolCall(TRACE, "b7ad6b7169203331", "fallback_name", None, "error", "TimeoutError", None, None, {}),
        ToolCall(TRACE, "b7ad6b7169203331", "failed", None, "error", None, "cancelled", None, {}),
    ]
    assert list(calls[0].ledger) == sorted(calls[0].ledger)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('["a", "b"]', ["a", "b"]),
        ("[1, 2", "[1, 2"),
        ("[not json]", "[not json]"),
        ('{"a": 1}', '{"a": 1}'),
        ("plain", "plain"),
        (["kept"], ["kept"]),
        (7, 7),
    ],
)
def test_a_ledger_value_in_jaeger_text_form_gets_its_list_back(value: Any, expected: Any) -> None:
    assert audit._ledger_value(value) == expected


def test_every_value_the_report_prints_is_masked() -> None:
    ledger_value = {f"by {SECRET}": [SECRET, {"deep": EMAIL}], "n": 7358114902}
    spans = [
        tool_span(
            **{
                semconv.GEN_AI_TOOL_NAME: f"tool {SECRET}",
                semconv.GEN_AI_TOOL_CALL_ID: SECRET,
                semconv.GEN_AI_AGENT_NAME: EMAIL,
                semconv.ERROR_TYPE: SECRET,
                semconv.FLOWRA_END_REASON: SECRET,
                f"flowra.redaction.{SECRET}": "x",
                "flowra.redaction.result.handlers": [f"app.{SECRET}", "app.other"],
                "flowra.redaction.result.nested": ledger_value,
                "flowra.redaction.result.number": 7358114902,
                "flowra.redaction.result.count": 3,
                "flowra.redaction.result.ratio": 0.5,
                "flowra.redaction.applied": True,
                "flowra.redaction.result.none": None,
            }
        )
    ]
    calls, leaks = audit_spans(spans, secrets=(SECRET, "7358114902"), builtin_patterns=True)
    (call,) = calls
    assert call.tool_name == f"tool {SHOWN}"
    assert call.call_id == SHOWN and call.error_type == SHOWN and call.end_reason == SHOWN
    assert call.agent_name == "ada.…[24 chars]"
    assert call.ledger == {
        "flowra.redaction.applied": True,
        "flowra.redaction.result.count": 3,
        "flowra.redaction.result.handlers": [f"app.{SHOWN}", "app.other"],
        "flowra.redaction.result.nested": {
            f"by {SHOWN}": [SHOWN, {"deep": "ada.…[24 chars]"}],
            "n": "7…[10 chars]",
        },
        "flowra.redaction.result.none": None,
        "flowra.redaction.result.number": "7…[10 chars]",
        "flowra.redaction.result.ratio": 0.5,
        f"flowra.redaction.{SHOWN}": "x",
    }
    printed = render_text(audit._report("f", "otlp-json", spans, secrets=[SECRET], builtin_patterns=True))
    printed += render_json(audit._report("f", "otlp-json", spans, secrets=[SECRET], builtin_patterns=True))
    assert SECRET not in printed and EMAIL not in printed
    assert leaks


def test_masked_value_keeps_other_types_and_unmatched_numbers() -> None:
    needles, patterns = [SECRET], PATTERNS
    marker = object()
    assert audit._masked_value(marker, needles, patterns) is marker
    assert audit._masked_value(12.5, needles, patterns) == 12.5
    assert audit._masked_value(("a", SECRET), needles, patterns) == ["a", SHOWN]
    assert audit._masked_value(False, needles, patterns) is False
    assert audit._masked_value(True, ["true"], []) is True  # a boolean carries no secret: shown as is
    assert audit._masked_value(None, ["None", "null"], []) is None
    assert audit._masked(f"{SECRET}/{SECRET} {EMAIL}", needles, patterns) == f"{SHOWN}/{SHOWN} ada.…[24 chars]"


def report(leaks: tuple[Leak, ...] = (), calls: tuple[ToolCall, ...] = (), builtin: bool = True) -> AuditReport:
    return AuditReport(
        path="spans.jsonl",
        format="otlp-json",
        trace_count=1,
        span_count=4,
        tool_calls=calls,
        leaks=leaks,
        patterns=tuple(BUILTIN_SECRET_PATTERNS) if builtin else (),
        given_secrets=2,
    )


def test_the_verdict_and_its_exit_status() -> None:
    clean = report()
    assert clean.clean and clean.exit_code == EXIT_CLEAN == 0
    leaky = report((Leak(TRACE, "s1", "chat", "attribute a", "email", "ada.…[24 chars]"),))
    assert not leaky.clean and leaky.exit_code == EXIT_LEAK == 1


def test_the_report_as_text() -> None:
    call = ToolCall(TRACE, "s1", "lookup", None, "error", "TimeoutError", "cancelled", "clerk", {})
    redacted = ToolCall(TRACE, "s2", "lookup", "c2", "ok", None, None, None, {"flowra.redaction.fields": ["result"]})
    leak = Leak(TRACE, "s1", "chat m", "attribute a", "email", "ada.…[24 chars]")
    assert render_text(report(calls=(call, redacted))) == (
        "flowra-otel audit: spans.jsonl (OTLP JSON: 1 trace(s), 4 span(s))\n"
        "\n"
        "tool calls: 2\n"
        f"  lookup  call_id=-  status=error (TimeoutError) end_reason=cancelled  trace_id={TRACE}  span_id=s1\n"
        "    redaction ledger: none (no hook changed the arguments or the result)\n"
        f"  lookup  call_id=c2  status=ok  trace_id={TRACE}  span_id=s2\n"
        "    redaction ledger:\n"
        '      flowra.redaction.fields = ["result"]\n'
        "\n"
        "leaks: none found (checked 4 built-in pattern(s), 2 given secret(s))\n"
        "result: clean\n"
    )
    text = render_text(report(leaks=(leak,), builtin=False))
    assert text.endswith(
        "leaks: 1 (checked 0 built-in pattern(s), 2 given secret(s))\n"
        f"  LEAK email: span 'chat m' (trace_id={TRACE} span_id=s1) attribute a: ada.…[24 chars]\n"
        "result: LEAK (1 finding(s))\n"
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (False, "false"),
        ("x", "x"),
        (3, "3"),
        (0.5, "0.5"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (["é", 1], '["é", 1]'),
        ({"k": None}, '{"k": null}'),
    ],
)
def test_a_ledger_value_as_the_report_prints_it(value: Any, text: str) -> None:
    assert audit._format_value(value) == text


def test_the_report_counts_traces_spans_and_what_was_looked_for() -> None:
    spans = [span(), span(span_id="c7ad6b7169203331"), AuditSpan("1" * 32, "d" * 16, None, "other", {})]
    made = audit._report("where", "jaeger-json", spans, secrets=[SECRET, SECRET, "", "other"], builtin_patterns=True)
    assert (made.path, made.format, made.trace_count, made.span_count) == ("where", "jaeger-json", 2, 3)
    assert made.patterns == tuple(BUILTIN_SECRET_PATTERNS) and made.given_secrets == 2
    assert audit._report("w", "f", spans, secrets=[], builtin_patterns=False).patterns == ()


def test_non_finite_doubles_never_crash_the_audit(tmp_path: Path) -> None:
    """``NaN`` and infinities as OTLP JSON spells them (``"NaN"``, ``"Infinity"``), in attributes
    and in the ledger, beside a card number stored as a double: the audit reads, judges and prints."""
    attributes = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "app.ratio", "value": {"doubleValue": "NaN"}},
        {"key": "app.limit", "value": {"doubleValue": "Infinity"}},
        {"key": "app.floor", "value": {"doubleValue": "-Infinity"}},
        {"key": "flowra.redaction.result.original_length", "value": {"doubleValue": "NaN"}},
        {"key": "app.card", "value": {"doubleValue": 4111111111111111.0}},
    ]
    doc = {
        "resourceSpans": [
            {
                "resource": {},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": TRACE,
                                "spanId": "b7ad6b7169203331",
                                "name": "execute_tool x",
                                "attributes": attributes,
                            }
                        ]
                    }
                ],
            }
        ]
    }
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    made = audit_file(path)
    (call,) = made.tool_calls
    assert math.isnan(call.ledger["flowra.redaction.result.original_length"])
    assert [(x.where, x.kind) for x in made.leaks] == [("attribute app.card", "card_number")]
    assert "flowra.redaction.result.original_length = nan" in render_text(made)
    assert json.loads(render_json(made).replace("NaN", "null"))["clean"] is False


def _escaped(text: str) -> str:
    """``text`` as a JSON string spelling every character as a ``\\u`` escape."""
    return '"' + "".join(f"\\u{ord(c):04x}" for c in text) + '"'


def test_the_audit_reports_every_kind_whatever_it_found_first(tmp_path: Path) -> None:
    """One message attribute, as a real export carries it: five given secrets (one raw, the others
    only in JSON inside JSON, escaped, or at the deepest layer the scanner promises) and every
    built-in pattern only after decoding; and each secret alone in an attribute of its own. The
    report names the place for every kind, and every place."""
    secrets = [f"given-secret-{i:04d}" for i in range(5)]
    api_key, bearer, card = "sk-live-" + "Ab3dE" * 4, "Bearer eyJhbGciOiJIUzI1NiJ9.payload", "4111 1111 1111 1111"
    deepest = f"x {secrets[4]} y"
    for _ in range(8):  # secret_scan.MAX_LAYERS
        deepest = json.dumps({"content": deepest})
    inner = json.dumps({"parts": [{"content": f"{secrets[1]} {EMAIL}"}]})
    message = (
        f"{secrets[0]} "
        + json.dumps([{"role": "tool", "content": inner}])
        + f" [{_escaped(f'{secrets[2]} {api_key} {bearer} {card}')}, {_escaped(secrets[3])}"
    )
    attributes = [
        {"key": "gen_ai.input.messages", "value": {"stringValue": message}},
        *({"key": f"app.s{i}", "value": {"stringValue": _escaped(s)[1:-1]}} for i, s in enumerate(secrets[1:4], 1)),
        {"key": "app.s4", "value": {"stringValue": deepest}},
    ]
    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {"traceId": TRACE, "spanId": "b7ad6b7169203331", "name": "chat", "attributes": attributes}
                        ]
                    }
                ]
            }
        ]
    }
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    made = audit_file(path, secrets=secrets)
    found = {(leak.where, leak.kind) for leak in made.leaks}
    place = "attribute gen_ai.input.messages"
    assert {kind for where, kind in found if where == place} == {"given_secret", *BUILTIN_SECRET_PATTERNS}
    assert {where for where, kind in found if kind == "given_secret"} == {
        place,
        *(f"attribute app.s{i}" for i in range(1, 5)),
    }
    assert made.exit_code == EXIT_LEAK


# ---------------------------------------------------------------- the MCP servers' spans, apart
MCP = {"mcp.method.name": "tools/call"}


def server_span(
    name: str = "tools/call forecast", span_id: str = "5e" * 8, parent: str | None = None, **kw: Any
) -> AuditSpan:
    attributes = {**MCP, **kw.pop("attributes", {})}
    return AuditSpan(trace_id=TRACE, span_id=span_id, parent_span_id=parent, name=name, attributes=attributes, **kw)


@pytest.mark.parametrize(
    ("name", "attributes", "is_server"),
    [
        ("tools/call forecast", MCP, True),
        ("tools/call", MCP, True),
        ("tools/callforecast", MCP, False),
        ("execute_tool forecast", MCP, False),  # the agent's own span of the call
        ("tools/call forecast", {}, False),
        ("tools/call forecast", {"mcp.method.name": "tools/list"}, False),
    ],
)
def test_an_mcp_server_call_is_told_by_its_method_and_name(
    name: str, attributes: dict[str, Any], is_server: bool
) -> None:
    assert audit.is_mcp_server_call(AuditSpan(TRACE, "a" * 16, None, name, dict(attributes))) is is_server


def test_an_mcp_servers_span_is_not_a_tool_call_of_its_own() -> None:
    agent = tool_span(**MCP)
    server = server_span(attributes={semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL})
    calls, _ = audit_spans([agent, server], secrets=(), builtin_patterns=False)
    assert [c.span_id for c in calls] == [agent.span_id]


def _chain(length: int) -> list[AuditSpan]:
    """The agent's ``execute_tool``, ``length - 1`` spans under it, then the server's ``tools/call``."""
    agent = tool_span()
    spans = [agent]
    parent = agent.span_id
    for hop in range(length - 1):
        spans.append(AuditSpan(TRACE, f"{hop:016x}", parent, "POST /mcp", {}))
        parent = f"{hop:016x}"
    spans.append(server_span(parent=parent))
    return spans


def test_an_mcp_server_call_continues_the_agents_call_up_its_parents() -> None:
    def continued(spans: list[AuditSpan]) -> list[str | None]:
        calls, _ = audit_spans(spans, secrets=(), builtin_patterns=False)
        return [s.continues for s in audit.mcp_server_calls(spans, calls)]

    agent_id = tool_span().span_id
    assert continued(_chain(1)) == [agent_id]  # straight under execute_tool (_meta)
    assert continued(_chain(3)) == [agent_id]  # through the client's and the server's HTTP spans
    assert continued(_chain(64)) == [agent_id]  # the 64th span up is still looked at
    assert continued(_chain(65)) == [None]  # and no further
    assert continued([server_span()]) == [None]  # a trace of its own
    assert continued([tool_span(), server_span(parent="f" * 16)]) == [None]  # its parent not in the input
    elsewhere = AuditSpan("2" * 32, tool_span().span_id, None, "execute_tool lookup", tool_span().attributes)
    assert continued([elsewhere, server_span(parent=elsewhere.span_id)]) == [None]  # the same id in another trace
    assert continued([tool_span(), span()]) == []  # no server span, no entry


def test_an_mcp_server_calls_status_name_and_service_are_masked() -> None:
    ok = server_span(service_name=f"svc-{SECRET}")
    named = server_span("tools/call x", "1" * 16, attributes={semconv.GEN_AI_TOOL_NAME: f"t-{SECRET}"})
    failed = server_span(f"tools/call {EMAIL}", "2" * 16, attributes={semconv.ERROR_TYPE: f"E-{SECRET}"})
    status_only = server_span(span_id="3" * 16, status_code="ERROR")
    found = audit.mcp_server_calls([ok, named, failed, status_only], [], secrets=[SECRET, SECRET, ""])
    assert [(c.span_id, c.tool_name, c.service_name, c.status, c.error_type) for c in found] == [
        (ok.span_id, "forecast", f"svc-{SHOWN}", "ok", None),
        (named.span_id, f"t-{SHOWN}", None, "ok", None),
        (failed.span_id, "ada.…[24 chars]", None, "error", f"E-{SHOWN}"),
        (status_only.span_id, "forecast", None, "error", None),
    ]
    assert all(c.trace_id == TRACE for c in found)
    unmasked = audit.mcp_server_calls([failed], [], secrets=[], builtin_patterns=False)
    assert (unmasked[0].tool_name, unmasked[0].error_type) == (EMAIL, f"E-{SECRET}")


def test_the_report_lists_the_mcp_server_calls_apart() -> None:
    spans = [*_chain(2), server_span("tools/call other", "6e" * 8, attributes={semconv.ERROR_TYPE: "tool_error"})]
    made = audit._report("f", "otlp-json", spans, secrets=[SECRET], builtin_patterns=True)
    assert [c.tool_name for c in made.tool_calls] == ["lookup"]
    text = render_text(made)
    assert (
        "\n\nMCP server spans: 2 (servers' side of the MCP tool calls above)\n"  # after a blank line
        f"  forecast  service=-  status=ok  continues=span_id={tool_span().span_id}  trace_id={TRACE}"
        f"  span_id={'5e' * 8}\n"
        f"  other  service=-  status=error (tool_error)  continues=none (a trace of its own)  trace_id={TRACE}"
        f"  span_id={'6e' * 8}\n"
    ) in text
    assert "MCP server spans" not in render_text(
        audit._report("f", "otlp-json", [tool_span()], secrets=[], builtin_patterns=True)
    )
    listed = json.loads(render_json(made))["mcp_server_calls"]
    assert [(c["tool_name"], c["status"], c["continues"]) for c in listed] == [
        ("forecast", "ok", tool_span().span_id),
        ("other", "error", None),
    ]
