"""The OTLP endpoint mistakes a newcomer makes, each named once with its fix, before any export.

Why: the OTLP exporters take whatever the ``OTEL_EXPORTER_OTLP_*ENDPOINT`` variables say and
report a wrong one only as the transport's raw error, again at every export: HTTP sent to the gRPC
port (``Connection aborted ... ConnectionResetError(104)``), a traces URL without ``/v1/traces``
(``404 Not Found``), no scheme (``No connection adapters were found``). Each of those has one
cause and one fix, and the variables already tell which, so `configure_telemetry` (and with it
the zero-code configurator) logs one line per mistake when it sets up the exporters: the
variable, what it holds and what to set. Nothing is changed: the exporters still get what the
user set (guessing the "right" URL would hide the mistake from everything else that reads it).
A line shows the value as ``shown_url`` does (scheme, host, port, path: a token in the user info
or the query goes to no log), and says when it left parts out.

The rules follow how the exporters resolve endpoints (the OTLP exporter specification):

* HTTP, signal variable (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``): used exactly as given, so it
  needs its path; an empty path or another signal's path is a mistake.
* HTTP, base variable (``OTEL_EXPORTER_OTLP_ENDPOINT``): ``/v1/traces`` and ``/v1/metrics`` are
  appended, so a value that already ends in ``/v1/<signal>`` is posted to ``.../v1/traces/v1/traces``.
* HTTP needs ``http://`` or ``https://``; without a scheme (or with another one) nothing is sent.
  The fix names ``http://`` and the host, whatever stood before it (``//host``, ``://host``,
  ``http:host``, ``http//host``, ``tcp://host``). (gRPC reads ``host:port`` without one, so
  that is not flagged.)
* HTTP needs its URL without trailing whitespace (a copy-paste's, a shell variable's): the
  exporter keeps it in the URL, and nothing arrives.
* Port 4317 is OTLP/gRPC's and 4318 OTLP/HTTP's by convention: HTTP to 4317 or gRPC to 4318 is
  almost always the protocol and the port disagreeing.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Final, Literal

from .shown_url import hidden_parts, shown_url

__all__ = ["ENDPOINT_VARIABLES", "endpoint_problems"]

Signal = Literal["traces", "metrics", "logs"]
Protocol = Literal["grpc", "http/protobuf"]

BASE: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
PROTOCOL: Final = "OTEL_EXPORTER_OTLP_PROTOCOL"
GRPC_PORT: Final = 4317
HTTP_PORT: Final = 4318
_SIGNALS: Final[tuple[Signal, ...]] = ("traces", "metrics", "logs")
_SCHEME: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_MISTYPED_HTTP: Final = re.compile(r"(https?)(?:/+|:/+|:(?!\d+(?:[/?#]|$)))", re.IGNORECASE)
"""``http:host``, ``http:/host``, ``http//host`` (not ``http:4318``: a host named http and its port)."""
_LOOSE_AUTHORITY: Final = re.compile(r"[^/?#]*?//")
"""Whatever stands before a ``//`` that starts the value's authority: ``//host``, ``://host``, ``1x://host``."""


def _signal_variable(signal: Signal) -> str:
    return f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT"


ENDPOINT_VARIABLES: Final = (BASE, *(_signal_variable(signal) for signal in _SIGNALS))
"""Every variable an OTLP exporter reads its endpoint from: the base one, then one per signal
(`log_credentials` notes the credentials of the same list)."""


def _protocol_variable(signal: Signal, environ: Mapping[str, str]) -> str:
    specific = f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL"
    return specific if environ.get(specific, "").strip() else PROTOCOL


def endpoint_problems(protocols: Mapping[Signal, Protocol], environ: Mapping[str, str]) -> list[str]:
    """One message per mistake in the endpoint variables of the signals in ``protocols`` (each
    exported over OTLP with that protocol), in a stable order, without repeats (a base endpoint
    shared by traces and metrics is named once)."""
    problems: list[str] = []
    for signal in _SIGNALS:
        protocol = protocols.get(signal)
        if protocol is None:
            continue
        specific = _signal_variable(signal)
        name = specific if environ.get(specific, "").strip() else BASE
        value = environ.get(name, "")
        raw = value.strip()
        if not raw:
            continue
        found = _problems(signal, protocol, name, raw, environ)
        if protocol == "http/protobuf" and value.rstrip() != value:
            found.append(_trailing_whitespace(name, value, raw))
        for problem in found:
            if problem not in problems:
                problems.append(problem)
    return problems


def _trailing_whitespace(name: str, value: str, raw: str) -> str:
    """The OTLP/HTTP exporter posts to the URL with its trailing whitespace (nothing arrives);
    leading whitespace is dropped on the way (the URL still works), so it is not named."""
    shown = shown_url(raw) + value[len(value.rstrip()) :]
    return (
        f"{name}={shown!r}{_hidden_note(raw)} ends in whitespace, which the OTLP/HTTP exporter "
        f"keeps in the URL it posts to (nothing arrives): set {name}={shown_url(raw)}"
    )


def _problems(signal: Signal, protocol: Protocol, name: str, given: str, environ: Mapping[str, str]) -> list[str]:
    # What the messages show, and every URL they suggest is built from: scheme, host, port and
    # path only (the value's user info, query and fragment may be credentials: never logged).
    raw = shown_url(given)
    note = _hidden_note(given)
    return [
        p.replace(f"{name}={raw!r}", f"{name}={raw!r}{note}", 1) for p in _found(signal, protocol, name, raw, environ)
    ]


def _hidden_note(given: str) -> str:
    hidden = hidden_parts(given)
    if not hidden:
        return ""
    return f" (its {' and '.join(hidden)} left out here; a fix keeps {'them' if len(hidden) > 1 else 'it'})"


def _http_fix(raw: str) -> tuple[str | None, str]:
    """For an OTLP/HTTP endpoint without a usable scheme: (the scheme it has, if a valid one
    other than http/https; the URL to suggest). What comes before the host is dropped, not
    prefixed: ``//host`` and ``://host`` become ``http://host``, a mistyped ``http:host``,
    ``http:/host`` or ``http//host`` keeps its scheme, ``tcp://host`` becomes ``http://host``."""
    scheme, rest = "http", raw
    if (valid := _SCHEME.match(raw)) is not None:
        return valid.group(1), f"http://{raw[valid.end() :]}"
    if (mistyped := _MISTYPED_HTTP.match(raw)) is not None:
        scheme, rest = mistyped.group(1).lower(), raw[mistyped.end() :]
    elif (loose := _LOOSE_AUTHORITY.match(raw)) is not None:
        rest = raw[loose.end() :]
    return None, f"{scheme}://{rest}"


def _found(signal: Signal, protocol: Protocol, name: str, raw: str, environ: Mapping[str, str]) -> list[str]:
    if protocol == "grpc" and "://" not in raw:
        return []  # the gRPC exporter takes host:port as it is
    valid = _SCHEME.match(raw)
    if protocol == "http/protobuf" and (valid is None or valid.group(1).lower() not in ("http", "https")):
        other, fix = _http_fix(raw)
        what = f"has the scheme {other!r}, which" if other is not None else "has no scheme, so"
        return [
            f"{name}={raw!r} {what} the OTLP/HTTP exporter cannot send to it "
            f"(its error: 'No connection adapters were found'): set {name}={fix} (https:// for TLS)"
        ]
    try:
        url = urllib.parse.urlsplit(raw)
        port = url.port
    except ValueError:
        return [f"{name}={raw!r} is not a valid URL: set it like http://localhost:{HTTP_PORT}"]
    found: list[str] = []
    protocol_var = _protocol_variable(signal, environ)
    what = "exports" if name == BASE else signal  # a base endpoint's line is the same for every signal
    if protocol == "http/protobuf" and port == GRPC_PORT:
        found.append(
            f"{name}={raw!r} is the OTLP/gRPC port ({GRPC_PORT}), but {what} go over OTLP/HTTP "
            f"({protocol_var} {'says so' if environ.get(protocol_var, '').strip() else 'is unset: the default'}), "
            f"which that port drops (the exporter's error: 'Connection aborted ... ConnectionResetError'): "
            f"set {name}={_with_port(url, HTTP_PORT)}, or {protocol_var}=grpc"
        )
    elif protocol == "grpc" and port == HTTP_PORT:
        found.append(
            f"{name}={raw!r} is the OTLP/HTTP port ({HTTP_PORT}), but {what} go over OTLP/gRPC "
            f"({protocol_var}=grpc): set {name}={_with_port(url, GRPC_PORT)}, or {protocol_var}=http/protobuf"
        )
    if protocol != "http/protobuf":
        return found
    path = url.path.rstrip("/")
    if name == BASE:
        ends = next((s for s in _SIGNALS if path.endswith(f"/v1/{s}")), None)
        if ends is not None:
            base = urllib.parse.urlunsplit(url._replace(path=path[: -len(f"/v1/{ends}")]))
            found.append(
                f"{name}={raw!r} already ends in /v1/{ends}, but the exporters append /v1/traces and "
                f"/v1/metrics to this base URL (traces go to {path}/v1/traces, which is refused with 404): "
                f"set {BASE}={base} for every signal, or {_signal_variable(ends)}={raw} for {ends} only"
            )
    elif not path:
        found.append(
            f"{name}={raw!r} has no path, but the exporter posts {signal} to this URL exactly as given "
            f"(a collector answers 404): set {name}={raw.rstrip('/')}/v1/{signal}, or give the base URL "
            f"as {BASE}={raw.rstrip('/')} instead"
        )
    else:
        other = next((s for s in _SIGNALS if s != signal and path.endswith(f"/v1/{s}")), None)
        if other is not None:
            fixed = urllib.parse.urlunsplit(url._replace(path=f"{path[: -len(f'/v1/{other}')]}/v1/{signal}"))
            found.append(f"{name}={raw!r} is the path for {other}, not {signal}: set {name}={fixed}")
    return found


def _with_port(url: urllib.parse.SplitResult, port: int) -> str:
    host = url.netloc.rsplit(":", 1)[0] if not url.netloc.endswith("]") else url.netloc
    return urllib.parse.urlunsplit(url._replace(netloc=f"{host}:{port}"))
