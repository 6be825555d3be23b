"""No credential of an exporter's configuration reaches a log line or an error message the package
causes: every path that can mention an endpoint is driven with credentials planted in the user
info (a token as the user name, and ``user:password``), the query (``?api-key=``), the fragment
and every headers variable (``OTEL_EXPORTER_OTLP_HEADERS`` and its traces, metrics and logs
forms, one entry malformed, which the SDK logs whole), and every log record of every logger
(ours, the OpenTelemetry SDK's and exporters', urllib3's: the root logger at DEBUG) and every
raised message or stderr line is searched for each credential, in every form it may take
(``flowra_otel.testing.secret_forms``: percent-encoded, JSON-escaped... a plain substring search,
not the audit's scanner).

Paths: the endpoint-mistake warnings (HTTP without a path, gRPC port, no scheme; traces, metrics
and the content events' logs), the "endpoint refused metrics" warning, a collector that cannot be
reached (HTTP and gRPC: the SDK's retry and failure lines), a shutdown that runs out of time, the
zero-code configurator (``opentelemetry-instrument``, in its own process), content upload
(``content_upload=`` and its environment variable), and the audit's ``--phoenix``. Each path is
also checked to have logged what it is about (the warning is there, naming the host), so a path
that logged nothing cannot pass. Paired negatives: with the lines as they were (the password-only
mask, the exporter's raw endpoint, no filter on the exporters' loggers), the credentials are found.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

import pytest
from opentelemetry.sdk.trace import TracerProvider

from flowra_otel import OtelHooks
from flowra_otel.__main__ import main
from flowra_otel.core import export, log_credentials
from flowra_otel.core.upload import UploadTarget
from flowra_otel.export import configure_telemetry
from flowra_otel.testing import secret_forms
from tests.http_origins import OriginServer
from tests.metrics_refusal import TracesOnlyReceiver
from tests.otlp_receiver import OtlpReceiver
from tests.telemetry_probe import send_probes

CREDENTIALS: Final = {
    "user token": "usertok-Ab12Cd34",
    "user": "svcuser-Ef56",
    "password": "passwd-Gh78Ij90",
    "query key": "qkey-Kl12Mn34",
    "fragment": "frag-Op56Qr78",
    "general header": "hdr-general-St90",
    "traces header": "hdr-traces-Uv12",
    "metrics header": "hdr-metrics-Wx34",
    "logs header": "hdr-logs-Yz56",
    "malformed header": "hdr-bad-Za78",
}
C = CREDENTIALS
HEADERS: Final = {
    # metrics use the general variable (their own is set by the refusal test), traces their own,
    # with one malformed entry the SDK logs whole
    "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{C['general header']}",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"api-key={C['traces header']},bad entry {C['malformed header']}",
    "OTEL_EXPORTER_OTLP_LOGS_HEADERS": f"authorization={C['logs header']}",
}
METRICS_HEADERS: Final = {"OTEL_EXPORTER_OTLP_METRICS_HEADERS": f"x-api-key={C['metrics header']}"}


def with_credentials(base: str, path: str = "", *, token: bool = False) -> str:
    """``base`` (``http://host:port``) with user info, ``path``, a query and a fragment planted."""
    scheme, _, hostport = base.partition("://")
    userinfo = C["user token"] if token else f"{C['user']}:{C['password']}"
    return f"{scheme}://{userinfo}@{hostport}{path}?api-key={C['query key']}#{C['fragment']}"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


@dataclass
class Said:
    """What one path made the process say."""

    lines: list[str] = field(default_factory=list)
    """Every log record (formatted, with its traceback), every raised message, stderr and stdout."""

    def leaks(self) -> list[str]:
        found = []
        for name, credential in CREDENTIALS.items():
            forms = secret_forms(credential)
            for line in self.lines:
                if any(form in line for form in forms):
                    found.append(f"{name} in: {line[:300]}")
        return found

    def mentions(self, text: str) -> bool:
        return any(text in line for line in self.lines)


class _Everything(logging.Handler):
    def __init__(self, said: Said) -> None:
        super().__init__(logging.DEBUG)
        self.said = said
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.said.lines.append(self.format(record))


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> Iterator[Said]:
    """Every record of every logger (root at DEBUG) while the test runs, in a clean ``OTEL_*``
    environment with the planted headers."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    for name, value in {**HEADERS, "OTEL_EXPORTER_OTLP_TIMEOUT": "1", "OTEL_METRIC_EXPORT_INTERVAL": "600000"}.items():
        monkeypatch.setenv(name, value)
    captured = Said()
    handler = _Everything(captured)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield captured
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        _forget_duplicates()


def _forget_duplicates() -> None:
    """The SDK's DuplicateFilter drops a record repeating the previous one's format for 20 s,
    process-wide: forget this test's, so the next test sees its own lines."""
    for name in ("opentelemetry.exporter.otlp.proto.grpc.exporter", "opentelemetry.sdk._shared_internal"):
        for duplicate_filter in logging.getLogger(name).filters:
            if type(duplicate_filter).__name__ == "DuplicateFilter" and hasattr(duplicate_filter, "last_log"):
                del duplicate_filter.last_log


def export_once(said: Said, env: dict[str, str], *, logs: bool = False, shutdown_ms: int = 3_000) -> None:
    """Configure from ``env`` (on top of the fixture's), record a span, a metric and (``logs``)
    a content event, flush, shut down; what was raised goes into ``said``."""
    with contextlib.ExitStack() as stack:
        monkeypatch = stack.enter_context(pytest.MonkeyPatch.context())
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        try:
            handles = configure_telemetry(set_global=False, register_atexit=False, console=False, logs=logs or None)
            try:
                send_probes(handles, logs=logs, timeout_millis=shutdown_ms)
            finally:
                handles.shutdown(shutdown_ms)
        except Exception as exc:  # a raised message is checked like a log line
            said.lines.append(f"raised {type(exc).__name__}: {exc}")


def test_the_endpoint_mistake_warnings_show_no_credential(said: Said) -> None:
    with OtlpReceiver() as rx:
        export_once(
            said,
            {
                # no path: one warning; a token as the user name
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": with_credentials(rx.http_endpoint, token=True),
                # the gRPC port over HTTP: one warning; user:password
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": with_credentials("http://127.0.0.1:4317", "/v1/metrics"),
                "OTEL_METRICS_EXPORTER": "otlp",
                # no scheme, for the content events
                "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": with_credentials(rx.http_endpoint, "/v1/logs").split("://", 1)[1],
                "OTEL_LOGS_EXPORTER": "otlp",
            },
            logs=True,
        )
    assert said.leaks() == []
    assert said.mentions("has no path") and said.mentions("is the OTLP/gRPC port") and said.mentions("has no scheme")
    assert said.mentions("user info and query and fragment left out here")


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_an_unreachable_collector_is_reported_without_a_credential(protocol: str, said: Said) -> None:
    """The exporters' own retry and failure lines, which quote the endpoint (gRPC: with its user
    info), the query and the transport's error."""
    base = f"http://127.0.0.1:{closed_port()}"
    export_once(
        said,
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": with_credentials(base),
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
        },
        shutdown_ms=300,
    )
    assert said.leaks() == []
    assert said.mentions("Header format invalid")  # the SDK's line about the malformed entry, masked
    assert said.mentions("Transient error") or said.mentions("Failed to export")  # the exporters' own lines
    assert said.mentions("127.0.0.1")


def test_the_metrics_refusal_warning_shows_no_credential(said: Said) -> None:
    with TracesOnlyReceiver(http_error_status=404) as rx:
        export_once(
            said,
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": with_credentials(rx.http_endpoint, "/v1/traces"),
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": with_credentials(rx.http_endpoint, "/v1/metrics"),
                **METRICS_HEADERS,
            },
        )
        assert len(rx.spans()) == 1
    assert said.leaks() == []
    assert said.mentions(f"the OTLP endpoint {rx.http_endpoint}/v1/metrics refused metrics (HTTP 404)")


def test_a_collector_that_never_answers_is_reported_without_a_credential(said: Said) -> None:
    with OtlpReceiver(mode="hang", hang_seconds=5) as rx:
        export_once(
            said,
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": with_credentials(rx.http_endpoint, "/v1/traces")},
            shutdown_ms=300,
        )
    assert said.leaks() == []
    assert said.mentions("telemetry shutdown did not finish")


def test_the_zero_code_configurator_shows_no_credential(said: Said) -> None:
    """``opentelemetry-instrument`` with this package's distro, in a process of its own: its
    stderr and stdout (the configurator's warnings, the exporters' lines at exit)."""
    launcher = os.path.join(os.path.dirname(sys.executable), "opentelemetry-instrument")
    with OtlpReceiver() as rx:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
            **HEADERS,
            "OTEL_PYTHON_DISTRO": "flowra",
            "OTEL_PYTHON_CONFIGURATOR": "flowra",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": with_credentials(rx.http_endpoint, token=True),
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": with_credentials(f"http://127.0.0.1:{closed_port()}", "/v1/metrics"),
        }
        app = "from opentelemetry import trace; trace.get_tracer('app').start_span('probe').end(); print('app ran')"
        proc = subprocess.run(
            [launcher, sys.executable, "-c", app], env=env, capture_output=True, text=True, timeout=60, check=False
        )
    said.lines += [proc.stdout, proc.stderr]
    assert proc.returncode == 0, proc.stderr
    assert said.leaks() == []
    assert said.mentions("has no path")


def test_content_upload_shows_no_credential(said: Said, monkeypatch: pytest.MonkeyPatch) -> None:
    """The refusal of a URL nothing can write to (no fsspec here), the environment's base path
    (a warning: the environment cannot be corrected at construction), and the references a
    span would carry for a bucket URL."""
    bucket = f"s3://{C['user']}:{C['password']}@bucket/prefix?sig={C['query key']}#{C['fragment']}"
    with pytest.raises(ValueError, match="content_upload") as refused:
        OtelHooks(tracer_provider=TracerProvider(), content_upload=bucket)
    said.lines.append(str(refused.value))
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", "upload")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH", bucket)
    OtelHooks(tracer_provider=TracerProvider())
    file_url = f"file://{C['user token']}@elsewhere/dir"
    with pytest.raises(ValueError, match="file://") as refused_file:
        OtelHooks(tracer_provider=TracerProvider(), content_upload=file_url)
    said.lines.append(str(refused_file.value))
    reference = UploadTarget(bucket).ref("0_inputs.json")
    said.lines.append(reference)
    assert said.leaks() == []
    assert reference == "s3://bucket/prefix/0_inputs.json"
    assert said.mentions("s3://bucket/prefix") and said.mentions("no content is uploaded")


def test_audit_phoenix_shows_no_credential(said: Said, capsys: pytest.CaptureFixture[str]) -> None:
    for url in (with_credentials(f"http://127.0.0.1:{closed_port()}"), f"http://127.0.0.1:{closed_port()}"):
        code = main(["audit", "--phoenix", url, "--project", "default"])
        captured = capsys.readouterr()
        said.lines += [captured.out, captured.err]
        assert code == 2
    assert said.leaks() == []
    assert said.mentions("user info and query and fragment") and said.mentions("cannot reach Phoenix")


def refuse_everywhere(url: str, said: Said, capsys: pytest.CaptureFixture[str]) -> None:
    """``url`` given to each option that refuses a bad URL (``mcp_servers``, ``content_upload``) and
    to ``audit --phoenix``: every message and output line goes into ``said``. (``content_upload``
    takes a value without ``://`` as a local path, which is no URL to refuse.)"""
    refusing = [{"mcp_servers": [url]}] + ([{"content_upload": url}] if "://" in url else [])
    for options in refusing:
        with pytest.raises(ValueError) as refused:
            OtelHooks(tracer_provider=TracerProvider(), **options)
        said.lines.append(str(refused.value))
    assert main(["audit", "--phoenix", url, "--project", "default"]) == 2
    captured = capsys.readouterr()
    said.lines += [captured.out, captured.err]


def test_a_url_without_a_valid_scheme_shows_no_credential(said: Said, capsys: pytest.CaptureFixture[str]) -> None:
    """A URL whose scheme is missing (``//user@host``) or not a scheme (``1x://``): the refusals
    that name it show its host, never its user info, query or fragment."""
    secret = f"{C['user']}:{C['password']}@host/p?k={C['query key']}#{C['fragment']}"
    for url in (f"//{secret}", f"1x://{secret}", f"_grpc://{secret}"):
        refuse_everywhere(url, said, capsys)
    assert said.leaks() == []
    assert said.mentions("host")


SLASHED_TOKEN: Final = "Zm9vYmFy/cXV4+YmF6"
"""A base64 token with a ``/`` (and a ``+``), as it is pasted into a URL unencoded."""


@pytest.mark.parametrize(
    ("slashes", "token"),
    [(":/", C["user token"]), (":///", C["user token"]), (":\\\\", C["user token"]), ("://", SLASHED_TOKEN)],
    ids=["one slash", "three slashes", "backslashes", "a slash in the token"],
)
def test_a_url_with_odd_slashes_around_its_user_info_shows_no_credential(
    slashes: str, token: str, said: Said, capsys: pytest.CaptureFixture[str]
) -> None:
    """``http:/token@host`` and ``http:///token@host``: a slash short or one too many, which URL
    parsers that follow the WHATWG URL standard skip (the token is the user info there); and
    ``http://user:Zm9v/YmFy@host``, a token with a ``/`` pasted unencoded, where every parser ends
    the authority at that ``/``. Python's parsers see no host (or a bad port), so every path names
    the URL whole: the endpoint-mistake warning, the HTTP exporter's "Invalid URL" line, and the
    refusals of ``mcp_servers``, ``content_upload`` and ``audit --phoenix``. None shows the token."""
    with OtlpReceiver() as rx:
        hostport = rx.http_endpoint.split("://", 1)[1]
        endpoint = f"http{slashes}{C['user']}:{token}@{hostport}/v1/traces"
        export_once(said, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint}, shutdown_ms=500)
    refuse_everywhere(f"https{slashes}{C['user']}:{token}@127.0.0.1:{closed_port()}/mcp", said, capsys)
    assert said.leaks() == [], said.leaks()
    assert not [line[:300] for line in said.lines if any(part in line for part in token.split("/"))]
    # each path spoke (the exporters at the lowest bound write "span batch", the highest "spans batch")
    assert said.mentions("Failed to export span") and said.mentions("mcp_servers entry")
    assert said.mentions("127.0.0.1")


def test_a_long_line_from_the_collector_is_masked_at_once(said: Said) -> None:
    """What a collector sends reaches the exporters' lines (the HTTP status line's reason phrase,
    on older SDKs the response body), and the mask reads every such line while credentials are
    configured. A 64 KB reason without ``@``, ``?`` or ``#`` (``x://x://...``) took the mask's URL
    pattern 27 s, in the exporter's thread: the export outlived the shutdown's 3 s. Now the line is
    masked in milliseconds, the export ends, and the shutdown with it."""
    reason = "x://" * 16_000  # the longest status line http.client reads is 64 KiB
    with OriginServer("127.0.0.1", lambda path: (400, None), reason=reason) as collector:
        started = time.monotonic()
        export_once(said, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": with_credentials(collector.url, "/v1/traces")})
        took = time.monotonic() - started
    assert said.leaks() == []
    assert said.mentions(f"batch code: 400, reason: {reason[:40]}")
    assert not said.mentions("telemetry shutdown did not finish")
    assert took < 3.0, took


# ------------------------------------------------------------------------------- paired negatives
def _as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines as they were: the endpoint check showing the value with the password masked
    only, the refusal warning showing the exporter's endpoint, no filter on the exporters' loggers."""
    from flowra_otel.core import endpoint_check

    def password_masked(raw: object) -> str:
        text = str(raw)
        scheme, sep, rest = text.partition("://")
        netloc, slash, tail = rest.partition("/")
        userinfo, at, hostport = netloc.rpartition("@")
        if not sep or not at or ":" not in userinfo:
            return text
        return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{hostport}{slash}{tail}"

    monkeypatch.setattr(endpoint_check, "shown_url", password_masked)
    monkeypatch.setattr(endpoint_check, "hidden_parts", lambda raw: ())
    monkeypatch.setattr(export, "shown_url", str)
    monkeypatch.setattr(export, "watch_loggers", lambda names=(): None)
    for name in log_credentials.LIBRARY_LOGGERS:
        with contextlib.suppress(ValueError):
            logging.getLogger(name).removeFilter(log_credentials.MASK_FILTER)


NEGATIVES: Final[dict[str, Callable[[Said], None]]] = {
    "endpoint-mistake": test_the_endpoint_mistake_warnings_show_no_credential,
    "metrics-refusal": test_the_metrics_refusal_warning_shows_no_credential,
    "unreachable-http": lambda said: test_an_unreachable_collector_is_reported_without_a_credential(
        "http/protobuf", said
    ),
    "unreachable-grpc": lambda said: test_an_unreachable_collector_is_reported_without_a_credential("grpc", said),
}


@pytest.mark.parametrize("path", list(NEGATIVES))
def test_as_the_lines_were_the_credentials_were_logged(path: str, said: Said, monkeypatch: pytest.MonkeyPatch) -> None:
    _as_before(monkeypatch)
    try:
        with pytest.raises(AssertionError, match="in: "):
            NEGATIVES[path](said)
    finally:
        log_credentials.watch_loggers()  # as every configure_telemetry with OTLP would again
