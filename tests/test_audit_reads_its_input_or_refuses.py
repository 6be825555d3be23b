"""``flowra-otel audit`` reads every input it takes as the text it is, or refuses it (exit 2,
naming what the bytes look like): never a verdict from a file it could not read.

The trap: a secrets file saved as UTF-16 or UTF-32 *without* a byte order mark is valid UTF-8 (a
NUL after every character), so read as UTF-8 each secret is ``"s\\x00e\\x00..."``, matches
nothing, and the audit said ``result: clean`` with the secret in a span. The same file with a
byte order mark, and the traces file (OTLP JSON, Jaeger JSON, a Phoenix export) in every one of
these encodings, must give the report the UTF-8 file gives; bytes that are no such text are
refused, for the secrets file and the traces file alike. The ``--phoenix`` URL is read without
the whitespace a copy-paste or a shell variable leaves around it, and refused with whitespace or a
control character inside (never stripped there: parsers disagree on which host that names).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flowra_otel.__main__ import main
from flowra_otel.core import audit as audit_module
from flowra_otel.core.audit import EXIT_BAD_INPUT, EXIT_CLEAN, EXIT_LEAK
from tests.http_origins import OriginServer

SECRET = "Quartz-Ledger-4417"
"""No built-in pattern knows it: only the secrets file can find it."""

WIDE = ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]
"""Without a byte order mark (``iconv -t UTF-16LE``, a .NET ``Encoding.Unicode`` writer)."""
WITH_BOM = ["utf-8-sig", "utf-16", "utf-32"]


def otlp_line(value: str) -> str:
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "execute_tool lookup",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.call.result", "value": {"stringValue": value}},
        ],
    }
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": [span]}]}]}
    return json.dumps(doc) + "\n"


def jaeger_document(value: str) -> str:
    span = {
        "traceID": "0af7651916cd43dd8448eb211c80319c",
        "spanID": "b7ad6b7169203331",
        "operationName": "execute_tool lookup",
        "tags": [{"key": "gen_ai.tool.call.result", "type": "string", "value": value}],
        "processID": "p1",
    }
    trace = {"traceID": span["traceID"], "spans": [span], "processes": {"p1": {"serviceName": "shop"}}}
    return json.dumps({"data": [trace]})


def phoenix_document(value: str) -> str:
    span = {
        "context": {"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331"},
        "name": "execute_tool lookup",
        "attributes": {"gen_ai.tool.call.result": value},
        "status_code": "OK",
    }
    return json.dumps({"data": [span]})


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["audit", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def audit_with_secrets_file(tmp_path: Path, data: bytes, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    traces = tmp_path / "traces.jsonl"
    traces.write_text(otlp_line(f"account {SECRET} closed"), encoding="utf-8")
    secrets = tmp_path / "secrets.txt"
    secrets.write_bytes(data)
    return run([str(traces), "--no-builtin-patterns", "--secrets-file", str(secrets)], capsys)


@pytest.mark.parametrize("encoding", WIDE + WITH_BOM + ["utf-8"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_secrets_file_in_any_unicode_encoding_finds_the_leak(
    encoding: str, newline: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = newline.join(["# production keys", SECRET, "", "Other-Secret-0001", ""]).encode(encoding)
    code, out, err = audit_with_secrets_file(tmp_path, data, capsys)
    assert (code, err) == (EXIT_LEAK, ""), out
    assert "LEAK given_secret" in out and "2 given secret(s)" in out


@pytest.mark.parametrize("encoding", WIDE)
def test_read_as_utf8_the_wide_file_was_a_false_clean(
    encoding: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paired negative: the file read as UTF-8 (what the audit did) reads clean."""
    monkeypatch.setattr(audit_module, "read_text_file", lambda path: Path(path).read_bytes().decode("utf-8"))
    code, out, _ = audit_with_secrets_file(tmp_path, f"{SECRET}\n".encode(encoding), capsys)
    assert code == EXIT_CLEAN and "result: clean" in out


@pytest.mark.parametrize(
    ("data", "named"),
    [
        pytest.param(f"caf\u00e9 {SECRET}\n".encode("latin-1"), "not valid UTF-8 text", id="latin-1"),
        pytest.param(b"\x00\x01\x02\x03binary\x00", "NUL bytes in no pattern of UTF-16 or UTF-32", id="binary"),
        pytest.param(f"{SECRET}\n".encode("utf-16-le")[:-1], "UTF-16", id="utf-16-le-cut-short"),
        pytest.param(b"\xff\xfe" + b"\x00\xd8a\x00", "not valid UTF-16 LE (with a byte order mark)", id="bad-utf-16"),
        pytest.param(b"\xfe\xff" + "a\x00b".encode("utf-16-be"), "still holds NUL characters", id="utf-16-with-a-nul"),
    ],
)
def test_a_secrets_file_that_is_no_such_text_is_refused(
    data: bytes, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = audit_with_secrets_file(tmp_path, data, capsys)
    assert code == EXIT_BAD_INPUT
    assert out == ""
    assert "cannot read the secrets file" in err and named in err, err
    assert err.count("\n") == 1


@pytest.mark.parametrize("make", [otlp_line, jaeger_document, phoenix_document], ids=["otlp", "jaeger", "phoenix"])
@pytest.mark.parametrize("encoding", WIDE + WITH_BOM)
def test_a_traces_file_in_any_unicode_encoding_gives_the_utf8_report(
    make: Any, encoding: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = make(f"account {SECRET} closed")
    utf8 = tmp_path / "utf8.json"
    utf8.write_text(document, encoding="utf-8")
    code, expected, _ = run([str(utf8), "--secret", SECRET], capsys)
    assert code == EXIT_LEAK
    wide = tmp_path / "wide.json"
    wide.write_bytes(document.encode(encoding))
    code, out, err = run([str(wide), "--secret", SECRET], capsys)
    assert (code, err) == (EXIT_LEAK, "")
    assert out.replace(str(wide), str(utf8)) == expected


@pytest.mark.parametrize(
    ("data", "named"),
    [
        pytest.param(otlp_line("x").encode("latin-1") + b"\xe9", "not valid UTF-8 text", id="latin-1"),
        pytest.param(b"\x00\x00\x01binary\x00", "NUL bytes", id="binary"),
        pytest.param(otlp_line("x").encode("utf-32-le")[:-2], "UTF-16", id="cut-wide"),
    ],
)
def test_a_traces_file_that_is_no_such_text_is_refused(
    data: bytes, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "traces.json"
    path.write_bytes(data)
    code, out, err = run([str(path)], capsys)
    assert code == EXIT_BAD_INPUT and out == ""
    assert err.startswith(f"flowra-otel audit: error: {path}: ") and named in err, err


def test_a_secret_given_on_the_command_line_that_is_no_text_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``--secret`` from bytes the shell's locale could not decode (``\\udcXX`` surrogates)
    would match no span text: refused rather than read as a secret nothing can contain."""
    traces = tmp_path / "traces.jsonl"
    traces.write_text(otlp_line("x"), encoding="utf-8")
    code, out, err = run([str(traces), "--secret", "caf\udce9"], capsys)
    assert code == EXIT_BAD_INPUT and out == ""
    assert "--secret" in err and "not valid UTF-8" in err


@pytest.mark.parametrize("pad", [(" ", ""), ("", " "), ("\t", "\n"), ("  ", "\r\n")], ids=repr)
def test_a_phoenix_url_with_whitespace_around_it_is_read(
    pad: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--phoenix " $PHOENIX_URL"``: the spans of the Phoenix the URL names, not a refusal."""
    monkeypatch.delenv("PHOENIX_API_KEY", raising=False)
    with OriginServer("127.0.0.1", lambda path: (200, None)) as phoenix:
        url = f"{pad[0]}{phoenix.url}{pad[1]}"
        code, out, err = run(["--phoenix", url, "--project", "default", "--no-builtin-patterns"], capsys)
    assert (code, err) == (EXIT_CLEAN, ""), err
    assert "1 span(s)" in out
    assert [seen.path.split("?")[0] for seen in phoenix.seen] == ["/v1/projects/default/spans"]


@pytest.mark.parametrize("inside", ["\t", "\n", " ", "\x00", "\u200b"], ids=repr)
def test_a_phoenix_url_with_whitespace_inside_is_refused(
    inside: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``http://127.0.0<TAB>.1:P``: urlsplit deletes the tab, urllib's own parsing keeps it; refused
    before any request, whatever either would have contacted."""
    monkeypatch.delenv("PHOENIX_API_KEY", raising=False)
    with OriginServer("127.0.0.1", lambda path: (200, None)) as phoenix:
        host, port = phoenix.url.removeprefix("http://").rstrip("/").rsplit(":", 1)
        url = f"http://{host[:-2]}{inside}{host[-2:]}:{port}"
        code, out, err = run(["--phoenix", url, "--project", "default", "--no-builtin-patterns"], capsys)
    assert code == EXIT_BAD_INPUT and out == ""
    assert "holds whitespace or a control character" in err, err
    assert phoenix.seen == []
