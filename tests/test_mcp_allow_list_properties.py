"""Round five's properties of ``mcp_servers`` matching, on generated entries and URLs (seeded, so a
failure reproduces; thousands of cases in well under a second):

1. **Sound against the client.** Whenever an entry admits a URL, the server flowra's MCP client
   (httpx) connects to *is* the listed one: no user info; the same scheme, host (IDNA, case, one
   trailing dot aside) and port (explicit or the scheme's default); and a path that lies under the
   entry's path even for a server that percent-decodes it (twice) and resolves dot segments and
   backslashes. Checked on URLs made by random edits of listed ones (user info, longer ports and
   hosts, dot segments in every encoding, backslashes, case, stray characters...).
2. **Complete for the harmless spellings.** A listed server's URL admitted however it is spelt:
   host case, a trailing dot, the default port explicit or not, a query or fragment, a deeper path.
3. **Closed for the bypasses.** User info, a port or host the entry's is a prefix of, another
   scheme, a path leaving the prefix by any encoding of ``..``, a sibling segment: never admitted.
4. **Total.** Any string (random characters, bytes-like junk) is answered True or False, never
   an exception.

The table of individual cases is tests/test_mcp_allow_list_rules.py; the real server,
tests/runtime_hooks/test_mcp_allow_list_matches_urls_by_parts.py.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import random
from collections.abc import Callable
from typing import Final
from urllib.parse import unquote

import httpx
import pytest

from flowra_otel.core.server_allow_list import allowed, parse_entry

SEED: Final = 20_260_533
CASES: Final = 3_000
HOSTS: Final = [
    "tools.internal",
    "mcp.example.com",
    "Mcp.Example.COM",
    "bücher.example",
    "xn--bcher-kva.example",
    "10.0.0.5",
    "127.0.0.1",
    "[::1]",
    "[2001:db8::5]",
    "a-b_c.test",
]
SEGMENTS: Final = ["team-a", "mcp", "v1", "a%20b", "x.y", "t~1"]
DEFAULT_PORTS: Final = {"http": 80, "https": 443}


@dataclasses.dataclass(frozen=True)
class Entry:
    scheme: str | None
    host: str
    port: int | None
    path: tuple[str, ...]
    slash: bool = True
    """Whether a URL entry ends in ``/`` (``https://h/`` or ``https://h``, ``/team-a/`` or ``/team-a``)."""

    def text(self) -> str:
        host_port = self.host + (f":{self.port}" if self.port is not None else "")
        if self.scheme is None:
            return host_port
        return f"{self.scheme}://{host_port}" + "".join(f"/{s}" for s in self.path) + ("/" if self.slash else "")

    def listed_url(self, rng: random.Random) -> str:
        """A URL of the server this entry lists, spelt in one of its harmless ways."""
        scheme = self.scheme or rng.choice(["http", "https"])
        host = self.host
        if not host.startswith("[") and rng.random() < 0.3:
            host = "".join(c.upper() if rng.random() < 0.5 else c for c in host)
        if not host.startswith("[") and not _is_ip(host) and rng.random() < 0.2:
            host += "."
        port = self.port
        if port is None and rng.random() < 0.5:
            port = rng.choice([DEFAULT_PORTS[scheme], 8931, 1234]) if self.scheme is None else DEFAULT_PORTS[scheme]
        if port is not None and self.scheme is not None and self.port is None and port != DEFAULT_PORTS[scheme]:
            port = None
        host_port = host + (f":{port}" if port is not None else "")
        path = "/" + "/".join([*self.path, *rng.sample(["mcp", "x", ""], rng.randint(0, 2))])
        suffix = rng.choice(["", "?session=1", "#frag", "?a=b#c"])
        return f"{scheme}://{host_port}{path}{suffix}"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def random_entry(rng: random.Random) -> Entry:
    scheme = rng.choice([None, "http", "https"])
    host = rng.choice(HOSTS)
    port = rng.choice([None, 80, 443, 8931, 4496])
    path = tuple(rng.sample(SEGMENTS, rng.randint(0, 2))) if scheme is not None else ()
    return Entry(scheme, host, port, path, rng.random() < 0.5)


# ------------------------------------------------------------------------------------ the oracle
def _norm_host(host: str) -> str:
    host = host.lower().rstrip(".")
    try:
        return ipaddress.ip_address(host.strip("[]")).compressed
    except ValueError:
        return host.encode("idna").decode("ascii") if not host.isascii() else host


def _server_path(raw: str) -> list[str]:
    """The path as the most liberal server reads it: decoded (twice), ``\\`` as ``/``, dot
    segments resolved."""
    for _ in range(3):
        raw = unquote(raw)
    segments: list[str] = []
    for segment in raw.replace("\\", "/").split("/")[1:]:
        head = segment.split(";", 1)[0]
        if head == ".":
            continue
        if head == "..":
            if segments:
                segments.pop()
            continue
        segments.append(segment)
    return segments


def _entry_segments(entry: Entry) -> list[str]:
    return [unquote(s) for s in entry.path]


def sound(entry: Entry, url: str) -> bool:
    """Whether ``url``, as httpx reads it, is the server ``entry`` lists (see the docstring)."""
    try:
        parsed = httpx.URL(url)
        raw_host = parsed.raw_host.decode("ascii")
    except Exception:
        return False
    if parsed.userinfo or parsed.scheme not in DEFAULT_PORTS or "\\" in url:
        return False
    if entry.scheme is not None and parsed.scheme != entry.scheme:
        return False
    if _norm_host(raw_host) != _norm_host(entry.host):
        return False
    port = parsed.port or DEFAULT_PORTS[parsed.scheme]
    if entry.port is not None and port != entry.port:
        return False
    if entry.scheme is not None and entry.port is None and port != DEFAULT_PORTS[parsed.scheme]:
        return False
    wanted = _entry_segments(entry)
    return _server_path(parsed.raw_path.decode("ascii").split("?", 1)[0])[: len(wanted)] == wanted


# ------------------------------------------------------------------------------------ edits
Edit = Callable[[str, random.Random], str]


def _insert_userinfo(url: str, rng: random.Random) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{rng.choice(['mcp.internal', 'u:p', 'tools.internal:443', '', 'a%40b'])}@{rest}"


def _longer_port(url: str, rng: random.Random) -> str:
    scheme, rest = url.split("://", 1)
    authority, slash, path = rest.partition("/")
    if authority.endswith("]") or ":" not in authority.split("]")[-1]:
        authority = f"{authority}:{DEFAULT_PORTS.get(scheme, 80)}"
    return f"{scheme}://{authority}{rng.choice('0123456789')}{slash}{path}"


def _longer_host(url: str, rng: random.Random) -> str:
    scheme, rest = url.split("://", 1)
    authority, slash, path = rest.partition("/")
    if authority.startswith("["):
        return f"{scheme}://{authority.replace(']', rng.choice(['1]', ':1]']), 1)}{slash}{path}"
    host, colon, port = authority.partition(":")
    host = host.rstrip(".") + rng.choice([".evil.io", "x", "-x", "2", ".."])
    return f"{scheme}://{host}{colon}{port}{slash}{path}"


def _leave_path(url: str, rng: random.Random) -> str:
    up = rng.choice(["..", "%2e%2e", "%2E.", ".%2e", "..%2F", "..%2f..", "%252e%252e", "..;", "..\\", "%2e%2e%2f"])
    base = url.partition("?")[0]
    base = base.split("#")[0].rstrip("/")
    return f"{base}/{up}/{up}/{up}/other/mcp"


def _sibling_segment(url: str, rng: random.Random) -> str:
    scheme, rest = url.split("://", 1)
    authority, _, path = rest.partition("/")
    segments = path.split("?")[0].split("#")[0].split("/")
    if segments and segments[0]:
        segments[0] += rng.choice(["x", "-b", "~", "%20"])
    return f"{scheme}://{authority}/" + "/".join(segments)


def _other_scheme(url: str, rng: random.Random) -> str:
    scheme, rest = url.split("://", 1)
    return f"{rng.choice([s for s in ('http', 'https', 'ws', 'ftp') if s != scheme])}://{rest}"


def _backslash(url: str, rng: random.Random) -> str:
    position = rng.randrange(len(url) + 1)
    return url[:position] + "\\" + url[position:]


def _stray_character(url: str, rng: random.Random) -> str:
    position = rng.randrange(len(url) + 1)
    return url[:position] + rng.choice("@:/?#[]%.\\ \t\n;,=+~é\x00\uff45") + url[position:]


def _percent_host(url: str, rng: random.Random) -> str:
    return url.replace(".", "%2e", 1)


HOSTILE: Final[dict[str, Edit]] = {
    "user info": _insert_userinfo,
    "longer port": _longer_port,
    "longer host": _longer_host,
    "backslash": _backslash,
    "percent-encoded host": _percent_host,
}
HOSTILE_WITH_SCHEME: Final[dict[str, Edit]] = {"other scheme": _other_scheme}
HOSTILE_WITH_PATH: Final[dict[str, Edit]] = {"leave the path": _leave_path, "sibling segment": _sibling_segment}
ANY: Final[list[Edit]] = [*HOSTILE.values(), _other_scheme, _leave_path, _sibling_segment, _stray_character]


def cases(count: int, salt: int) -> list[tuple[Entry, random.Random]]:
    rng = random.Random(SEED + salt)
    return [(random_entry(rng), random.Random(rng.random())) for _ in range(count)]


def test_whatever_is_admitted_is_the_listed_server_as_the_client_sees_it() -> None:
    admitted = 0
    for entry, rng in cases(CASES, 1):
        parsed = (parse_entry(entry.text()),)
        url = entry.listed_url(rng)
        for _ in range(rng.randint(0, 3)):
            if "://" in url:  # an earlier stray character may have broken the scheme
                url = rng.choice(ANY)(url, rng)
        if allowed(url, parsed):
            admitted += 1
            assert sound(entry, url), (entry.text(), url)
    assert admitted > CASES // 10  # the generator reaches admitted URLs, not only refusals


def test_a_listed_server_is_admitted_however_its_url_spells_it() -> None:
    for entry, rng in cases(CASES, 2):
        url = entry.listed_url(rng)
        assert allowed(url, (parse_entry(entry.text()),)), (entry.text(), url)
        assert sound(entry, url), (entry.text(), url)  # the oracle agrees it is the listed server


@pytest.mark.parametrize("edit", sorted({**HOSTILE, **HOSTILE_WITH_SCHEME, **HOSTILE_WITH_PATH}))
def test_a_bypass_is_never_admitted(edit: str) -> None:
    edits = {**HOSTILE, **HOSTILE_WITH_SCHEME, **HOSTILE_WITH_PATH}
    tried = 0
    for entry, rng in cases(CASES // 3, 3 + len(edit)):
        if edit in HOSTILE_WITH_SCHEME and entry.scheme is None:
            continue
        if edit in HOSTILE_WITH_PATH and not entry.path:
            continue
        if edit == "longer port" and entry.port is None and entry.scheme is None:
            continue  # a host entry admits any port
        if edit == "percent-encoded host" and "." not in entry.host.split(":")[0]:
            continue
        url = edits[edit](entry.listed_url(rng), rng)
        tried += 1
        assert not allowed(url, (parse_entry(entry.text()),)), (edit, entry.text(), url)
    assert tried > 50


def test_any_string_is_answered_never_raised() -> None:
    rng = random.Random(SEED)
    entries = tuple(parse_entry(text) for text in ["tools.internal", "https://mcp.example.com/team-a/", "[::1]:8931"])
    alphabet = "hts:/@[]%.\\?#;=+-_~09aAé\x00 \t\n\ud800\uff45"
    for _ in range(CASES):
        junk = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        for url in (junk, "http://" + junk, "https://mcp.example.com/" + junk):
            assert allowed(url, entries) in (True, False)
