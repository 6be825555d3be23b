"""How the package shows a URL anywhere it writes one: scheme, host, port and path, nothing else.

Why one helper: endpoints carry credentials in more places than ``user:password@``. A token
given as the user name (``https://<token>@collector``), an ``?api-key=`` query parameter, a
fragment, a header: each of them was printed by a line that meant to show only where data goes.
So every log line, error message, span attribute or file the package writes that names a URL
goes through `shown_url`, which keeps the parts that say *where* (``scheme://host:port/path``)
and drops user info, query and fragment, whatever the URL looks like (no scheme, a gRPC
``host:port``, a value that does not parse). Header values are never shown (`log_credentials`
masks them in the exporters' own lines).

`hidden_parts` says what was dropped, so a message can say that the real value has more than it
shows (a fix written from a shown URL must keep the user's query, say).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["hidden_parts", "shown_url", "split_url"]

_SCHEME: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(//)?")
_LOOSE_AUTHORITY: Final = re.compile(r"[^/?#]*:?//")
"""An authority without a valid scheme before it: ``//user@host``, ``1x://``, ``_grpc://``."""
_ODD_SLASHES: Final = re.compile(r"[/\\]+(?=[^/\\?#]*@)")
"""Slashes or backslashes, other than the scheme's ``//``, before a segment with an ``@``
(``https:/tok@host``, ``https:///tok@host``): URL parsers that follow the WHATWG URL standard
(browsers, Node) skip them and read that segment as the authority, its user info a credential."""
_AUTHORITY_END: Final = re.compile(r"[/?#]")
_PATH_END: Final = re.compile(r"[?#]")


def split_url(raw: str) -> tuple[str, str, str, str, str]:
    """(scheme with ``://`` or "", user info, host and port, path, what follows the path): how
    every URL the package writes is cut, and where `log_credentials` finds a URL's credentials.

    An ``@`` in the path makes everything before the last one user info: parsers end the
    authority at the first ``/``, so ``https://svc:Zm9v/YmFy@collector/`` (a token with a ``/``,
    pasted unencoded) is host ``svc``, port ``Zm9v``: a URL no parser accepts, whose messages
    quote it, while its writer meant the user info ``svc:Zm9v/YmFy``. A real path with an ``@``
    (``/users/@alice``) is then shown shorter than it is: never a credential."""
    scheme = ""
    rest = raw
    match = _SCHEME.match(raw)
    # "scheme://": an authority follows; "https:/tok@host": one does for some parsers (_ODD_SLASHES)
    if match is not None and (match.group(2) or _ODD_SLASHES.match(raw, match.end())):
        scheme, rest = raw[: match.end()], raw[match.end() :]
    elif (loose := _LOOSE_AUTHORITY.match(raw)) is not None:  # no valid scheme, but an authority
        scheme, rest = raw[: loose.end()], raw[loose.end() :]
    if scheme and (odd := _ODD_SLASHES.match(rest)) is not None:  # "https:///tok@host"
        scheme, rest = scheme + rest[: odd.end()], rest[odd.end() :]
    end = _AUTHORITY_END.search(rest)
    authority, tail = (rest[: end.start()], rest[end.start() :]) if end else (rest, "")
    cut = _PATH_END.search(tail)
    path, after = (tail[: cut.start()], tail[cut.start() :]) if cut else (tail, "")
    if "@" in path:  # "https://svc:ab/cd@host/": a "/" in the user info (a base64 token, unencoded)
        at = path.rindex("@")
        host_and_path = path[at + 1 :]
        slash = host_and_path.find("/")
        host_end = len(host_and_path) if slash < 0 else slash
        authority, path = authority + path[: at + 1] + host_and_path[:host_end], host_and_path[host_end:]
    userinfo, _, hostport = authority.rpartition("@")
    return scheme, userinfo, hostport, path, after


def shown_url(raw: object) -> str:
    """``raw`` as ``scheme://host:port/path`` (or ``host:port/path`` when it has no scheme): no
    user info, no query, no fragment. Never raises; a value that is not a string shows its type."""
    if not isinstance(raw, str):
        return f"<{type(raw).__name__}>"
    scheme, _, hostport, path, _ = split_url(raw.strip())
    return f"{scheme}{hostport}{path}"


def hidden_parts(raw: object) -> tuple[str, ...]:
    """The parts `shown_url` leaves out of ``raw``: ``user info``, ``query``, ``fragment``."""
    if not isinstance(raw, str):
        return ()
    _, userinfo, _, _, after = split_url(raw.strip())
    hidden: list[str] = []
    if userinfo:
        hidden.append("user info")
    query, hash_, fragment = after.partition("#")
    if query:
        hidden.append("query")
    if hash_ and fragment:
        hidden.append("fragment")
    return tuple(hidden)
