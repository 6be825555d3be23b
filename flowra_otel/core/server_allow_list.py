"""Which servers an allow-list admits: a URL matched by its parts, never as a string.

Why parts: a string prefix admits what nobody listed. ``http://mcp.internal`` is a prefix of
``http://mcp.internal@127.0.0.1:8931/`` (user info: the host is 127.0.0.1), ``http://127.0.0.1:4496``
of port 44965, ``https://mcp.example.com`` of ``https://mcp.example.com.evil.io/``, and
``https://h/team-a/`` of ``https://h/team-a/../team-b/``. So an entry and a URL are each parsed
into scheme, host, port and path segments, and compared part by part.

An entry (``OtelHooks(mcp_servers=[...])``) is one of:

* a host name or address: ``tools.internal``, ``10.0.0.5``, ``[::1]`` (IPv6 in brackets, or bare):
  that host, any port, any scheme, any path;
* ``host:port``: that host and port (a URL without a port has its scheme's: http 80, https 443);
* a URL ``http://`` / ``https://`` ``host[:port][/path]``: that scheme, host and port, and a path
  that is the entry's path or lies under it, on segment boundaries (``/team-a`` and ``/team-a/``
  admit ``/team-a``, ``/team-a/`` and ``/team-a/mcp``, never ``/team-ab``).

Hosts compare case-insensitively, without one trailing dot (``MCP.internal.`` is ``mcp.internal``),
internationalised names in their IDNA (``xn--``) form, IP addresses by value (``[0:0::1]`` is
``[::1]``). A name that IDNA would change beyond its case (``ß`` -> ``ss``, full-width letters) is
not matched: two libraries may map it to two hosts.

Fail closed, whatever the URL:

* a URL with user info (``user@host``) matches no entry (the part before the ``@`` is not the
  host, and a reader of the URL may think it is);
* only ``http`` and ``https`` URLs match; one that does not parse (a bad port, a backslash, a
  space or control character, a ``%`` in the host) matches nothing;
* paths: percent-encoded unreserved characters are decoded (``%2e`` is ``.``), then ``.`` and ``..``
  segments are removed (RFC 3986 5.2.4), so ``/team-a/%2e%2e/team-b/`` is ``/team-b/``. A path
  holding an encoded ``/`` or ``\\`` (``%2F``, ``%5C``), an encoded ``%`` (``%25``: a server that
  decodes twice sees another path), a backslash, or a dot segment followed by ``;`` (``..;/``,
  which some servers read as ``..``) matches no entry that names a path. Its query and fragment
  are not part of the match.

A bad entry is refused when the ``OtelHooks`` is built (``ValueError``): one that does not parse,
has a query, a fragment or user info (an ``@`` in its path counts: ``https://svc:Zm9v/YmFy@host``
is a token with a ``/`` pasted unencoded), a scheme other than http/https, a path with dot segments
or encoded separators, or an unbracketed ``host:port`` that is neither.

Flowra-free and small on purpose: ``McpPropagation.allows`` asks it once per MCP request, in
``mcp_invocation.trace_fields``, whose answer both ``params._meta`` and the HTTP headers take.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from .shown_url import hidden_parts, shown_url

__all__ = ["DEFAULT_PORTS", "ServerEntry", "allowed", "parse_entries", "parse_entry", "without_root_dot"]

DEFAULT_PORTS: Final = {"http": 80, "https": 443}
"""The port of a URL that names none, per scheme: the one table `same_origin_http` and
`mcp_invocation` read too."""
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_FORBIDDEN: Final = re.compile(r"[\x00-\x20\x7f\\]")
"""Anywhere in a URL: whitespace, control characters, a backslash (some parsers read it as ``/``)."""
_REG_NAME: Final = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
_UNRESERVED_ESCAPE: Final = re.compile(r"%(2[dDeE]|5[fF]|7[eE]|[46][1-9a-fA-F]|[57][0-9aA]|3[0-9])")
"""``%XX`` of an unreserved character (``-`` ``.`` ``_`` ``~``, letters, digits): decoded before matching."""
_UNSAFE_ESCAPE: Final = re.compile(r"%(2[fF]|5[cC]|25)")
"""``%2F`` (``/``), ``%5C`` (``\\``) and ``%25`` (``%``): a server may turn them into separators."""
_ESCAPE: Final = re.compile(r"%[0-9a-fA-F]{2}")


@dataclasses.dataclass(frozen=True, slots=True)
class ServerEntry:
    """One allow-list entry, parsed. ``shown``: the entry as messages may print it."""

    shown: str
    host: str
    scheme: str | None = None
    """None: any scheme (a host or ``host:port`` entry)."""
    port: int | None = None
    """None: any port (a bare host entry)."""
    path: tuple[str, ...] = ()
    """Segments of the path prefix; empty: any path."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: tuple[str, ...] | None
    """None: a path no entry with a path may admit (see the module docstring)."""


def allowed(url: str, entries: Iterable[ServerEntry]) -> bool:
    """Whether ``url`` is admitted by one of ``entries`` (see the module docstring). Never raises."""
    try:
        target = _target(url)
    except Exception:  # a URL this module cannot parse is no listed server's
        return False
    if target is None:
        return False
    return any(_admits(entry, target) for entry in entries)


def parse_entries(items: Iterable[object]) -> tuple[ServerEntry, ...]:
    """Every entry parsed (``ValueError`` for the first bad one, ``TypeError`` for a non-string)."""
    return tuple(parse_entry(item) for item in items)


def parse_entry(item: object) -> ServerEntry:
    """One entry (see the module docstring); ``ValueError`` names what is wrong with it, showing
    it without user info, query or fragment."""
    if not isinstance(item, str) or not item.strip():
        msg = f"mcp_servers entries must be non-empty strings, got {item!r}"
        raise ValueError(msg)
    text = item.strip()
    shown = shown_url(text)
    if "user info" in hidden_parts(text):  # before any part of the entry is named in a message
        raise _bad(shown, "has user info (user@host, or an '@' in its path): an entry is a host, never credentials")
    if _FORBIDDEN.search(text):
        raise _bad(shown, "holds a space, a control character or a backslash")
    scheme, sep, _ = text.partition("://")
    if sep:
        if not _SCHEME.fullmatch(scheme):
            raise _bad(shown, "does not parse as a URL")
        if scheme.lower() not in DEFAULT_PORTS:
            raise _bad(shown, f"the scheme {scheme.lower()!r} is not http or https")
        return _url_entry(text, scheme.lower(), shown)
    if text.count(":") > 1 and "[" not in text:  # a bare IPv6 address
        host = _host(f"[{text}]")
        if host is None:
            raise _bad(shown, "is neither host:port nor an IPv6 address (write IPv6 in brackets: [::1]:8931)")
        return ServerEntry(shown, host)
    if any(c in text for c in "/?#"):
        raise _bad(shown, "is not a host, host:port or http(s):// URL (a path needs the scheme: https://host/path)")
    host, port = _authority(text, shown)
    return ServerEntry(shown, host, None, port)


def _bad(shown: str, why: str) -> ValueError:
    return ValueError(f"mcp_servers entry {shown!r}: {why}")


def _url_entry(text: str, scheme: str, shown: str) -> ServerEntry:
    parts = urlsplit(text)
    if "?" in text:
        raise _bad(shown, "has a query: an entry is a scheme, a host, a port and a path")
    if "#" in text:
        raise _bad(shown, "has a fragment: an entry is a scheme, a host, a port and a path")
    host, port = _authority(parts.netloc, shown)
    if _UNSAFE_ESCAPE.search(parts.path):
        raise _bad(shown, "has an encoded '/', '\\' or '%' in its path")
    segments = _entry_segments(parts.path)
    if segments is None:
        raise _bad(shown, "has '.' or '..' segments in its path: write the path they lead to")
    return ServerEntry(shown, host, scheme, port if port is not None else DEFAULT_PORTS[scheme], segments)


def _authority(netloc: str, shown: str) -> tuple[str, int | None]:
    """``host[:port]`` of an entry: (normalised host, port or None)."""
    if "@" in netloc:
        raise _bad(shown, "has user info (user@host): an entry is a host, never credentials")
    if not netloc:
        raise _bad(shown, "names no host")
    host_text, port_text = _split_host_port(netloc)
    host = _host(host_text)
    if host is None:
        raise _bad(shown, f"{shown_url(host_text)!r} is not a host name or IP address (IPv6: [::1]:8931)")
    if port_text is None:
        return host, None
    if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) <= 65535:
        raise _bad(shown, f"the port {port_text!r} is not a number from 1 to 65535")
    return host, int(port_text)


def _split_host_port(netloc: str) -> tuple[str, str | None]:
    """``("[::1]", "8931")`` / ``("h", None)``; an empty port (``h:``) counts as none."""
    if netloc.startswith("["):
        end = netloc.find("]")
        if end < 0:
            return netloc, None
        host, rest = netloc[: end + 1], netloc[end + 1 :]
        if not rest:
            return host, None
        if not rest.startswith(":"):
            return netloc, "x"  # junk after the bracket: an invalid port
        return host, rest[1:] or None
    host, sep, port = netloc.rpartition(":")
    if not sep:
        return netloc, None
    return host, port or None


def without_root_dot(name: str) -> str:
    """A host name without the one trailing dot DNS allows (the root: ``h.`` is ``h``). Only one:
    ``h..`` stays ``h.``, which is no host (an empty label), so it never equals ``h``. The rule
    `same_origin_http.origin` follows too."""
    return name.removesuffix(".")


def _host(raw: str) -> str | None:
    """The host as compared: lowercase, one trailing dot dropped, IDNA ``xn--`` form, IP
    addresses in their canonical text (IPv6 in brackets); None when it is not a host."""
    if raw.startswith("[") and raw.endswith("]"):
        inner = raw[1:-1].replace("%25", "%")  # a zone id is written %25 in a URL
        try:
            return f"[{ipaddress.IPv6Address(inner).compressed.lower()}]"
        except ValueError:
            return None
    name = without_root_dot(raw).lower()
    if not name or "%" in name:
        return None
    if not name.isascii():
        ascii_name = _idna(name)
        if ascii_name is None:
            return None
        name = ascii_name
    if not _REG_NAME.fullmatch(name):
        return None
    if all(c.isdigit() or c == "." for c in name):
        try:
            return str(ipaddress.IPv4Address(name))
        except ValueError:
            return name  # "127.1": a name that is no dotted quad; matches only itself
    return name


def _idna(name: str) -> str | None:
    """The ``xn--`` form of a non-ASCII name, if IDNA changes nothing but its case (it maps
    ``ß`` to ``ss`` and full-width letters to ASCII, where parsers disagree: refused)."""
    try:
        ascii_name = name.encode("idna").decode("ascii")
        if ascii_name.encode("ascii").decode("idna") != name:
            return None
    except (UnicodeError, ValueError):
        return None
    return ascii_name


def _target(url: str) -> _Target | None:
    """What a server URL is made of, or None when no entry may admit it (see the docstring)."""
    if not isinstance(url, str) or _FORBIDDEN.search(url):
        return None
    scheme, sep, _ = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme) or scheme.lower() not in DEFAULT_PORTS:
        return None
    parts = urlsplit(url)
    if not parts.netloc or "@" in parts.netloc:
        return None
    host_text, port_text = _split_host_port(parts.netloc)
    host = _host(host_text)
    if host is None:
        return None
    scheme = scheme.lower()
    if port_text is None:
        port = DEFAULT_PORTS[scheme]
    elif port_text.isascii() and port_text.isdigit() and int(port_text) <= 65535:
        port = int(port_text)
    else:
        return None
    return _Target(scheme, host, port, _url_segments(parts.path))


def _admits(entry: ServerEntry, target: _Target) -> bool:
    if entry.host != target.host:
        return False
    if entry.scheme is not None and entry.scheme != target.scheme:
        return False
    if entry.port is not None and entry.port != target.port:
        return False
    if not entry.path:
        return True
    if target.path is None:
        return False
    return target.path[: len(entry.path)] == entry.path


def _normalised(path: str) -> str:
    """Unreserved escapes decoded, the other escapes' hex upper-cased (RFC 3986 6.2.2)."""
    path = _UNRESERVED_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), path)
    return _ESCAPE.sub(lambda m: m.group(0).upper(), path)


def _url_segments(path: str) -> tuple[str, ...] | None:
    """The URL's path as segments with dot segments removed; None when a server might read it
    as another path (encoded separators, ``%25``, ``..;``)."""
    if _UNSAFE_ESCAPE.search(path):
        return None
    stack: list[str] = []
    for segment in _normalised(path).split("/")[1:]:
        if segment.split(";", 1)[0] in (".", "..") and ";" in segment:
            return None
        if segment == ".":
            continue
        if segment == "..":
            if stack:
                stack.pop()
            continue
        stack.append(segment)
    return tuple(stack)


def _entry_segments(path: str) -> tuple[str, ...] | None:
    """An entry's path prefix as segments (a trailing ``/`` adds none); None if it has dot segments."""
    segments = _normalised(path).split("/")[1:]
    if any(s in (".", "..") or s.split(";", 1)[0] in (".", "..") for s in segments):
        return None
    if segments and segments[-1] == "":
        segments.pop()
    return tuple(segments)
