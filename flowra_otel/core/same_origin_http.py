"""HTTP requests whose credentials stay with the origin they were meant for.

Why: urllib copies every header of a request onto the request a redirect makes, to whatever host
the redirect names. ``flowra-otel audit --phoenix`` sends ``PHOENIX_API_KEY`` as an
``Authorization`` header, so a Phoenix (or a proxy in front of it, or whoever answers at its
address) that redirected to another host received the key, and an ``https`` -> ``http`` redirect
sent it in clear.

The same holds for the OTLP/HTTP exporters ``configure_telemetry`` builds: the headers of
``OTEL_EXPORTER_OTLP_*HEADERS`` (``api-key=...``) are credentials, and the exporters of
OpenTelemetry 1.42 - 1.44 follow a collector's redirects with ``requests``, which drops only
``Authorization`` on the way to another host. Those exporters get `otlp_http_session`, a
``requests.Session`` with the rule below (OpenTelemetry 1.45 and later follow no redirect at all;
a session named by ``OTEL_PYTHON_EXPORTER_OTLP_HTTP_*CREDENTIAL_PROVIDER`` is the user's, left as is).

Every request the package makes with a credential goes through `open_url`, whose redirect rule is:

* a redirect from ``https`` to anything else is refused (`RefusedRedirectError`): whatever the
  headers, the answer would come back unprotected;
* a redirect to another origin (scheme, host or port; the port explicit or the scheme's default;
  the host without case and without one trailing dot, as ``server_allow_list`` compares hosts, so
  ``h.`` is ``h`` but ``h..`` is another origin) keeps only the headers in `KEPT_ACROSS_ORIGINS`
  (``Accept``, ``User-Agent``...): ``Authorization``, API-key headers, cookies and anything else stay behind;
* a redirect within the origin keeps every header (a reverse proxy adding a slash still works).

The messages name URLs as ``shown_url`` does (no user info, query or fragment).
"""

from __future__ import annotations

import functools
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from http.client import HTTPMessage
from typing import IO, Any, Final
from urllib.parse import urlsplit

from .server_allow_list import DEFAULT_PORTS, without_root_dot
from .shown_url import shown_url

__all__ = ["KEPT_ACROSS_ORIGINS", "RefusedRedirectError", "open_url", "origin", "otlp_http_session"]

KEPT_ACROSS_ORIGINS: Final = frozenset(
    {"accept", "accept-encoding", "accept-language", "user-agent", "content-type", "content-encoding", "content-length"}
)
"""What a request may carry to another origin: what it asks for and how its body is encoded."""


class RefusedRedirectError(urllib.error.URLError):
    """A redirect the rule above refuses; ``reason`` says which and where it pointed."""


def origin(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of ``url``, the port explicit or the scheme's default; a URL
    that does not parse has an origin no other URL shares."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        return scheme, without_root_dot(parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return "", url, None


def _refusal(before: str, after: str) -> str | None:
    """Why a redirect from ``before`` to ``after`` is refused, or None."""
    if origin(before)[0] == "https" and origin(after)[0] != "https":
        return (
            f"refused a redirect from {shown_url(before)} to {shown_url(after)}: "
            "from https to plain http, the request and its answer would travel unprotected"
        )
    return None


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is None:
            return None
        refused = _refusal(req.full_url, new.full_url)
        if refused is not None:
            raise RefusedRedirectError(refused)
        if origin(new.full_url) != origin(req.full_url):
            for name in list(new.headers):
                if name.lower() not in KEPT_ACROSS_ORIGINS:
                    del new.headers[name]
        return new


def open_url(request: urllib.request.Request, timeout: float) -> IO[bytes]:
    """``urllib.request.urlopen(request, timeout=timeout)`` with the redirect rule above (and the
    environment's proxies, as urlopen has)."""
    opener = urllib.request.build_opener(_SameOriginRedirects)
    response: IO[bytes] = opener.open(request, timeout=timeout)
    return response


CREDENTIAL_PROVIDERS: Final = (
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_{signal}_CREDENTIAL_PROVIDER",
)


def otlp_http_session(signal: str, environ: Mapping[str, str] | None = None) -> Any:
    """A ``requests.Session`` with the redirect rule above for the OTLP/HTTP exporter of
    ``signal`` (``TRACES``, ``METRICS``, ``LOGS``), or None when the environment names a
    credential-provider session for it (the exporter then builds that one)."""
    env = os.environ if environ is None else environ
    if any(env.get(name.format(signal=signal.upper()), "").strip() for name in CREDENTIAL_PROVIDERS):
        return None
    return _session_class()()


@functools.cache
def _session_class() -> type[Any]:
    import requests  # the OTLP/HTTP exporters' own dependency; imported only when one is built

    class SameOriginSession(requests.Session):
        """``requests.Session`` whose redirects follow the rule of `same_origin_http`."""

        def rebuild_auth(self, prepared_request: Any, response: Any) -> None:
            before, after = str(response.request.url), str(prepared_request.url)
            refused = _refusal(before, after)
            if refused is not None:
                raise requests.exceptions.InvalidURL(refused)
            if origin(after) != origin(before):
                for name in list(prepared_request.headers):
                    if name.lower() not in KEPT_ACROSS_ORIGINS:
                        del prepared_request.headers[name]
            super().rebuild_auth(prepared_request, response)

    return SameOriginSession
