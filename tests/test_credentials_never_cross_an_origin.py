"""No credential the package sends crosses an origin: ``flowra-otel audit --phoenix``
(``PHOENIX_API_KEY`` as a bearer token) keeps the key on a redirect within Phoenix's origin,
sends it to no other scheme, host or port, and refuses a redirect from https to plain http
outright; the OTLP/HTTP exporters ``configure_telemetry`` builds send the
``OTEL_EXPORTER_OTLP_*HEADERS`` to no other origin either (OpenTelemetry 1.42 - 1.44 follow a
collector's redirect; 1.45 follows none: ``./dev bounds`` runs this file on the floors too).

Real servers on two loopback addresses: "Phoenix" (or the collector) at 127.0.0.1 answers with a
redirect (every status urllib follows) to a server at 127.0.0.2 that serves a spans page (or
takes the export) and records what it received. Paired negative: urllib's own redirect handling,
which the audit used, hands that server the key.
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowra_otel.__main__ import main
from flowra_otel.core import audit as audit_module
from flowra_otel.core.audit import EXIT_BAD_INPUT, EXIT_CLEAN
from flowra_otel.export import configure_telemetry
from tests.http_origins import OriginServer, tls_files
from tests.telemetry_probe import send_probes

API_KEY = "phx-key-Vb83-secret"
REDIRECTS = [301, 302, 303, 307, 308]


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHOENIX_API_KEY", API_KEY)
    for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)


@pytest.fixture
def elsewhere() -> Iterator[OriginServer]:
    """Another origin (127.0.0.2) that answers with a spans page and records what it got."""
    with OriginServer("127.0.0.2", lambda path: (200, None)) as server:
        yield server


def audit_phoenix(url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["audit", "--phoenix", url, "--project", "default", "--no-builtin-patterns"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def received_keys(server: OriginServer) -> list[str | None]:
    return [seen.headers.get("authorization") for seen in server.seen]


@pytest.mark.parametrize("status", REDIRECTS)
def test_a_redirect_to_another_host_gets_no_key(
    status: int, elsewhere: OriginServer, capsys: pytest.CaptureFixture[str]
) -> None:
    to = lambda path: (status, f"{elsewhere.url}{path}")  # noqa: E731
    with OriginServer("127.0.0.1", to) as phoenix:
        code, out, err = audit_phoenix(phoenix.url, capsys)
    assert (code, err) == (EXIT_CLEAN, ""), err
    assert "1 span(s)" in out  # the redirect was followed: the page came from the other host
    assert received_keys(phoenix) == [f"Bearer {API_KEY}"]  # Phoenix itself got the key
    assert received_keys(elsewhere) == [None]
    assert all(API_KEY not in repr(seen.headers) for seen in elsewhere.seen)


def test_a_redirect_to_another_port_of_the_same_host_gets_no_key(capsys: pytest.CaptureFixture[str]) -> None:
    with (
        OriginServer("127.0.0.1", lambda path: (200, None)) as other_port,
        OriginServer("127.0.0.1", lambda path: (302, f"{other_port.url}{path}")) as phoenix,
    ):
        code, _, err = audit_phoenix(phoenix.url, capsys)
    assert (code, err) == (EXIT_CLEAN, "")
    assert received_keys(phoenix) == [f"Bearer {API_KEY}"]
    assert received_keys(other_port) == [None]


@pytest.mark.parametrize(("to_host", "keeps_key"), [("phoenix.test..", False), ("PHOENIX.test.", True)])
def test_a_host_with_two_trailing_dots_is_another_origin(
    to_host: str, keeps_key: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``h.`` is ``h`` (DNS's root dot, and the allow-list's rule), but ``h..`` is no host and
    never the same origin as ``h``: the key does not follow a redirect to it. Through a real
    HTTP proxy (the client resolves no name: the proxy gets every request, and records it)."""

    def answer(target: str) -> tuple[int, str | None]:
        if target.startswith("http://phoenix.test/"):
            return 302, target.replace("phoenix.test", to_host, 1)
        return 200, None

    with OriginServer("127.0.0.1", answer) as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        code, out, err = audit_phoenix("http://phoenix.test", capsys)
    assert (code, err) == (EXIT_CLEAN, ""), err
    assert "1 span(s)" in out
    assert [seen.path.split("/")[2] for seen in proxy.seen] == ["phoenix.test", to_host]
    assert received_keys(proxy) == [f"Bearer {API_KEY}", f"Bearer {API_KEY}" if keeps_key else None]


def test_a_redirect_within_phoenix_keeps_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    """A reverse proxy moving the API keeps working: same scheme, host and port."""

    def answer(path: str) -> tuple[int, str | None]:
        return (200, None) if path.startswith("/phoenix/") else (307, f"/phoenix{path}")

    with OriginServer("127.0.0.1", answer) as phoenix:
        code, out, err = audit_phoenix(phoenix.url, capsys)
    assert (code, err) == (EXIT_CLEAN, "")
    assert "1 span(s)" in out
    assert received_keys(phoenix) == [f"Bearer {API_KEY}"] * 2


def test_a_redirect_from_https_to_http_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, key = tls_files(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with (
        OriginServer("127.0.0.1", lambda path: (200, None)) as plain,
        OriginServer("127.0.0.1", lambda path: (302, f"{plain.url}{path}"), tls=(cert, key)) as phoenix,
    ):
        assert phoenix.url.startswith("https://")
        code, out, err = audit_phoenix(phoenix.url, capsys)
    assert code == EXIT_BAD_INPUT and out == ""
    assert "refused a redirect from https://127.0.0.1" in err and "to plain http" in err, err
    assert received_keys(phoenix) == [f"Bearer {API_KEY}"]  # over TLS
    assert plain.seen == []  # never asked, with or without the key


def test_https_phoenix_itself_still_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, key = tls_files(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with OriginServer("127.0.0.1", lambda path: (200, None), tls=(cert, key)) as phoenix:
        code, out, err = audit_phoenix(phoenix.url, capsys)
    assert (code, err) == (EXIT_CLEAN, "")
    assert "1 span(s)" in out
    assert received_keys(phoenix) == [f"Bearer {API_KEY}"]


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://admin:{key}@127.0.0.1:1", "user info"),
        ("http://127.0.0.1:1/?api_key={key}", "query"),
        ("http://127.0.0.1:1/#{key}", "fragment"),
        ("file:///etc/x?{key}", "http:// or https://"),
    ],
)
def test_a_phoenix_url_with_credentials_in_it_is_refused_without_showing_them(
    url: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = audit_phoenix(url.format(key=API_KEY), capsys)
    assert code == EXIT_BAD_INPUT and out == ""
    assert why in err and API_KEY not in err


def test_with_urllibs_own_redirects_the_other_host_got_the_key(
    elsewhere: OriginServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The paired negative: what the audit did before (``urlopen``), the other host got the key."""
    monkeypatch.setattr(
        audit_module, "open_url", lambda request, timeout: urllib.request.urlopen(request, timeout=timeout)
    )
    with OriginServer("127.0.0.1", lambda path: (302, f"{elsewhere.url}{path}")) as phoenix:
        code, _, _ = audit_phoenix(phoenix.url, capsys)
    assert code == EXIT_CLEAN
    assert received_keys(elsewhere) == [f"Bearer {API_KEY}"]


# ------------------------------------------------------------------------------- OTLP exports
EXPORT_KEY = "otlp-key-Qm47-secret"
"""An ``OTEL_EXPORTER_OTLP_HEADERS`` value (``api-key=...``): a collector's credential."""


def export_a_span(
    monkeypatch: pytest.MonkeyPatch, endpoint: str, *, logs: bool = False, certificate: Path | None = None
) -> bool:
    """``configure_telemetry`` with only ``endpoint`` (OTLP/HTTP, base) and the key header: a span,
    a metric and (``logs``) a content event exported; whether the flush reported success."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"api-key={EXPORT_KEY},authorization=Bearer%20{EXPORT_KEY}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    if certificate is not None:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(certificate))
        for bundle in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # requests prefers them to the exporter's
            monkeypatch.delenv(bundle, raising=False)
    handles = configure_telemetry(set_global=False, register_atexit=False, console=False, logs=logs)
    try:
        return send_probes(handles, logs=logs)
    finally:
        handles.shutdown(5_000)


@pytest.mark.parametrize("status", [307, 308])
def test_an_otlp_export_redirected_to_another_host_carries_no_header_credential(
    status: int, elsewhere: OriginServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OriginServer("127.0.0.1", lambda path: (status, f"{elsewhere.url}{path}")) as collector:
        export_a_span(monkeypatch, collector.url, logs=True)
    assert {seen.path for seen in collector.seen} == {"/v1/traces", "/v1/metrics", "/v1/logs"}
    assert all(seen.headers.get("api-key") == EXPORT_KEY for seen in collector.seen)  # the collector got it
    for seen in elsewhere.seen:  # followed (OpenTelemetry 1.42 - 1.44) or not (1.45+): never the key
        assert EXPORT_KEY not in repr(seen.headers), seen


def test_an_otlp_export_redirected_from_https_to_http_is_not_followed(
    tmp_path: Path, elsewhere: OriginServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = tls_files(tmp_path)
    with OriginServer("127.0.0.1", lambda path: (307, f"{elsewhere.url}{path}"), tls=(cert, key)) as collector:
        export_a_span(monkeypatch, collector.url, certificate=cert)
    assert collector.seen  # the TLS collector was asked
    assert elsewhere.seen == []
