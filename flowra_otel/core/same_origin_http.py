"""HTTP requests whose credentials stay with the origin they were meant for.

Why: urllib copies every header of a request onto the request a redirect makes, to whatever host
the redirect names. ``flowra-otel audit --phoenix`` sends ``PHOENIX_API_KEY`` as an
``Authorization`` header, so a Phoenix (or a proxy in front of it, or whoever answers at its
address) that redirected to another host received the key, and an ``https`` -> ``http`` redirect
sent it in clear.

Every request the package makes with a credential goes through `open_url`, whose redirect rule is:

* a redirect from ``https`` to anything else is refused (`RefusedRedirectError`): whatever the
  headers, the answer would come back unprotected;
* a redirect to another origin (scheme, host or port; the port explicit or the scheme's default)
  keeps only the headers in `KEPT_ACROSS_ORIGINS` (``Accept``, ``User-Agent``...):
  ``Authorization``, API-key headers, cookies and anything else stay behind;
* a redirect within the origin keeps every header (a reverse proxy adding a slash still works).

The messages name URLs as ``shown_url`` does (no user info, query or fragment).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from http.client import HTTPMessage
from typing import IO, Final
from urllib.parse import urlsplit

from .shown_url import shown_url

__all__ = ["KEPT_ACROSS_ORIGINS", "RefusedRedirectError", "open_url", "origin"]

KEPT_ACROSS_ORIGINS: Final = frozenset({"accept", "accept-encoding", "accept-language", "user-agent"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class RefusedRedirectError(urllib.error.URLError):
    """A redirect the rule above refuses; ``reason`` says which and where it pointed."""


def origin(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of ``url``, the port explicit or the scheme's default; a URL
    that does not parse has an origin no other URL shares."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        return scheme, (parts.hostname or "").rstrip(".").lower(), parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        return "", url, None


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
        before, after = origin(req.full_url), origin(new.full_url)
        if before[0] == "https" and after[0] != "https":
            reason = (
                f"refused a redirect from {shown_url(req.full_url)} to {shown_url(new.full_url)}: "
                "from https to plain http, the request and its answer would travel unprotected"
            )
            raise RefusedRedirectError(reason)
        if after != before:
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
