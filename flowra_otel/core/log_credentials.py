"""The exporter credentials of ``configure_telemetry``'s environment, kept out of the log lines the
OpenTelemetry exporters (and the HTTP library under them) write about the exports it set up.

Why: our own lines show URLs through ``shown_url`` and never a header, but the exporters
``configure_telemetry`` builds write lines of their own, and they do not hold back: the gRPC
exporter names its endpoint with the user info (``Failed to export traces to user:pass@host``),
the HTTP one quotes the transport's error with the query (``Max retries exceeded with url:
/v1/traces?api-key=...``), the SDK logs a malformed ``OTEL_EXPORTER_OTLP_HEADERS`` entry whole,
value included, and urllib3's debug line shows every request's path and query. A line we made
the process write is ours to keep clean.

So before it builds an OTLP exporter, ``configure_telemetry`` notes the credentials its
environment holds (`note_environment`: the user info, query and fragment of every
``OTEL_EXPORTER_OTLP_*ENDPOINT``, and every value of every ``OTEL_EXPORTER_OTLP_*HEADERS``, raw and
percent-decoded) and puts `MASK_FILTER` on the loggers those libraries write to
(`watch_loggers`): a record that contains a noted credential has it replaced with ``***`` in its
message, its arguments, its exception text and its stack, before any handler sees it; every other
record passes untouched. Values shorter than ``MIN_LENGTH`` characters are not searched for (they
would mask ordinary words; our own lines never show them at all).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import unquote, unquote_plus

from .endpoint_check import ENDPOINT_VARIABLES
from .shown_url import shown_url, split_url

__all__ = [
    "MASK_FILTER",
    "MIN_LENGTH",
    "credentials_in",
    "mask",
    "note_environment",
    "watch_loggers",
    "without_credentials",
]

MIN_LENGTH: Final = 4
SHOWN: Final = "***"
HEADER_VARIABLES: Final = tuple(f"{name.removesuffix('ENDPOINT')}HEADERS" for name in ENDPOINT_VARIABLES)
"""``OTEL_EXPORTER_OTLP_HEADERS`` and one per signal, beside each endpoint variable."""
LIBRARY_LOGGERS: Final = (
    "opentelemetry.util.re",  # a malformed header entry, logged whole
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.http.transport._requests",
    "opentelemetry.exporter.http.transport._urllib3",
    "opentelemetry.sdk._shared_internal",  # the batch processors' "Exception while exporting"
    "opentelemetry.sdk.trace.export",
    "opentelemetry.sdk.metrics._internal.export",
    "opentelemetry.sdk._logs._internal.export",
    "urllib3.connectionpool",  # its debug line: every request's path and query
    "urllib3.util.retry",
    "requests",
    "grpc._channel",
)
"""Where the OTLP exporters of every supported SDK release, their transports and the SDK's
processors log (a name a release lacks costs an unused logger object)."""

_AUTH_SCHEMES: Final = frozenset({"basic", "bearer", "digest", "token", "apikey", "api-key", "negotiate"})
_URL: Final = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*")
"""A URL in a line: a scheme that starts a word, ``://``, and what follows up to a space or quote.
Linear in the line's length (a scheme only where a word starts, nothing to backtrack after it):
the lines it reads carry what a server sent (an HTTP reason phrase, a response body), and the
earlier pattern (a scheme anywhere, then a required ``@``, ``?`` or ``#``) took quadratic time on a long
line without ``@?#`` (64 KB of ``x://`` took 27 s, in the thread that logged it)."""
_HIDDEN: Final = re.compile(r"[@?#]")


def _shown(match: re.Match[str]) -> str:
    """A URL found in a line as `shown_url` shows it, when it has a part that may be a credential."""
    url = match.group(0)
    return shown_url(url) if _HIDDEN.search(url) else url


_lock = threading.Lock()
_credentials: tuple[str, ...] = ()
"""Longest first, so a whole user info is masked before its password alone."""


def credentials_in(environ: Mapping[str, str]) -> set[str]:
    """What `note_environment` notes of ``environ`` (see the module docstring)."""
    found: set[str] = set()
    for name in ENDPOINT_VARIABLES:
        found |= _url_credentials(environ.get(name, ""))
    for name in HEADER_VARIABLES:
        found |= _header_credentials(environ.get(name, ""))
    return {value for value in found if len(value) >= MIN_LENGTH}


def _url_credentials(raw: str) -> set[str]:
    found: set[str] = set()
    _, userinfo, _, _, tail = split_url(raw.strip())  # the user info as shown_url finds it
    if userinfo:
        found |= _forms(userinfo)
        for part in userinfo.split(":", 1):
            found |= _forms(part)
            for piece in part.split("/"):  # a parser cuts a token pasted with its "/" there
                found |= _forms(piece)
    query_start, fragment_start = tail.find("?"), tail.find("#")
    if fragment_start >= 0:
        found |= _forms(tail[fragment_start + 1 :])
    if query_start >= 0 and (fragment_start < 0 or query_start < fragment_start):
        query = tail[query_start + 1 : fragment_start if fragment_start >= 0 else None]
        found |= _forms(query)
        for pair in re.split(r"[&;]", query):
            found |= _forms(pair)
            found |= _forms(pair.partition("=")[2])
    return found


def _header_credentials(raw: str) -> set[str]:
    found: set[str] = set()
    if not raw.strip():
        return found
    found |= _forms(raw.strip())
    for piece in raw.split(","):
        found |= _forms(piece.strip())
        value = piece.partition("=")[2].strip()
        found |= _forms(value)
        for word in re.split(r"\s+|%20", value):
            if word.lower() not in _AUTH_SCHEMES:  # "Bearer" is no secret, and in many lines
                found |= _forms(word)
    return found


def _forms(value: str) -> set[str]:
    """A value as it may appear in a line: as given, percent-decoded, ``+`` as a space."""
    return {form for form in (value, unquote(value), unquote_plus(value)) if form.strip()}


def note_environment(environ: Mapping[str, str] | None = None) -> None:
    """Note the exporter credentials of ``environ`` (default ``os.environ``) for `mask`; they
    add to those noted before (a process may configure more than once)."""
    found = credentials_in(os.environ if environ is None else environ)
    global _credentials  # noqa: PLW0603 -- one set per process, as the loggers are
    with _lock:
        if found - set(_credentials):
            _credentials = tuple(sorted(set(_credentials) | found, key=len, reverse=True))


def mask(text: str) -> str:
    """``text`` with every noted credential replaced by ``***``, and every URL in it that holds
    user info, a query or a fragment shown as ``shown_url`` shows it."""
    return _masked(text, _credentials)


def without_credentials(text: str, url: str) -> str:
    """``text`` (another library's message about ``url``) with ``url``'s user info, query and
    fragment replaced by ``***`` wherever it quotes them, and any URL in it shown by ``shown_url``."""
    found = (credential for credential in _url_credentials(url) if len(credential) >= MIN_LENGTH)
    return _masked(text, sorted(found, key=len, reverse=True))


def _masked(text: str, credentials: Iterable[str]) -> str:
    """What `mask` and `without_credentials` share: each of ``credentials`` (longest first, so a
    whole user info goes before its password alone) replaced, then the URLs shown."""
    for credential in credentials:
        if credential in text:
            text = text.replace(credential, SHOWN)
    return _URL.sub(_shown, text) if "://" in text else text


def _masked_arg(arg: Any) -> Any:
    if arg is None or isinstance(arg, bool | int | float):
        return arg  # a status code stays a number (the metrics refusal guard reads it)
    text = arg if isinstance(arg, str) else str(arg)
    masked = mask(text)
    return arg if masked == text else masked


class _MaskFilter(logging.Filter):
    """Rewrites a record that holds a noted credential (see the module docstring); never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _credentials:
            return True
        try:
            msg = record.msg if isinstance(record.msg, str) else str(record.msg)
            record.msg = mask(msg)
            if isinstance(record.args, tuple):
                record.args = tuple(_masked_arg(arg) for arg in record.args)
            elif isinstance(record.args, Mapping):
                record.args = {key: _masked_arg(value) for key, value in record.args.items()}
            if record.exc_info and record.exc_info[1] is not None:
                text = logging.Formatter().formatException(record.exc_info)
                masked = mask(text)
                if masked != text:  # the traceback text, masked, in place of the exception
                    record.exc_info, record.exc_text = None, masked
            elif record.exc_text:
                record.exc_text = mask(record.exc_text)
            if record.stack_info:
                record.stack_info = mask(record.stack_info)
        except Exception:  # a record we cannot read is left as it is, never lost
            return True
        return True


MASK_FILTER: Final = _MaskFilter()


def watch_loggers(names: Iterable[str] = ()) -> None:
    """Put `MASK_FILTER` (once, first) on `LIBRARY_LOGGERS` and on ``names``."""
    with _lock:
        for name in (*LIBRARY_LOGGERS, *names):
            library_logger = logging.getLogger(name)
            if MASK_FILTER not in library_logger.filters:
                library_logger.filters.insert(0, MASK_FILTER)
