"""The rules of ``mcp_servers`` (``flowra_otel.core.server_allow_list``), case by case: what each
kind of entry admits, every bypass a string prefix let through (user info, a longer port, a
longer host, dot segments, encoded dot segments and separators), how hosts compare (case, one
trailing dot, IDNA, IPv6 by value), and the entries refused when the ``OtelHooks`` is built, with
a message that shows no credential. tests/runtime_hooks/test_mcp_allow_list_matches_urls_by_parts.py
proves the same on the wire with the real MCP server.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider

from flowra_otel import OtelHooks
from flowra_otel.core.mcp_invocation import McpPropagation
from flowra_otel.core.server_allow_list import allowed, parse_entries

# (entry, url, admitted)
TABLE: list[tuple[str, str, bool]] = [
    # a host entry: any scheme, port and path of that host
    ("tools.internal", "http://tools.internal/mcp", True),
    ("tools.internal", "https://tools.internal:8443/x/y", True),
    ("tools.internal", "http://tools.internal.evil.io/mcp", False),
    ("tools.internal", "http://eviltools.internal/mcp", False),
    ("tools.internal", "http://tools.internal@evil.io/mcp", False),
    ("tools.internal", "http://evil.io@tools.internal/mcp", False),  # user info never matches
    ("tools.internal", "http://tools.internal:@evil.io/", False),
    ("Tools.Internal.", "http://TOOLS.internal./mcp", True),
    ("tools.internal", "http://tools.internal../mcp", False),
    ("tools.internal", "ftp://tools.internal/", False),
    ("tools.internal", "tools.internal/mcp", False),  # no scheme: not a server URL
    ("tools.internal", "//tools.internal/mcp", False),
    ("tools.internal", "http://tools.internal\\@evil.io/", False),
    ("tools.internal", "http://tools.internal /mcp", False),
    ("tools.internal", "http://tools%2einternal/mcp", False),
    # host:port: the port explicit or the scheme's default
    ("127.0.0.1:4496", "http://127.0.0.1:4496/mcp", True),
    ("127.0.0.1:4496", "http://127.0.0.1:44965/mcp", False),
    ("127.0.0.1:4496", "http://127.0.0.1:449/mcp", False),
    ("127.0.0.1:80", "http://127.0.0.1/mcp", True),
    ("127.0.0.1:443", "https://127.0.0.1/mcp", True),
    ("127.0.0.1:443", "http://127.0.0.1/mcp", False),
    ("127.0.0.1:8931", "http://127.0.0.1:08931/mcp", True),  # the same number
    ("127.0.0.1:8931", "http://127.0.0.1:8931x/mcp", False),
    ("127.0.0.1:8931", "http://127.0.0.1:99999/mcp", False),
    ("127.0.0.1", "http://127.0.0.12:8931/mcp", False),
    ("127.0.0.1", "http://127.1/mcp", False),  # another spelling of the address: not listed
    # IPv6, bracketed or bare, compared by value
    ("[::1]:8931", "http://[::1]:8931/mcp", True),
    ("[::1]:8931", "http://[0:0:0:0:0:0:0:1]:8931/mcp", True),
    ("[::1]:8931", "http://[::1]:8932/mcp", False),
    ("[::1]", "http://[::1]:1/mcp", True),
    ("::1", "http://[::1]/mcp", True),
    ("[2001:DB8::1]", "http://[2001:db8:0::1]/", True),
    ("[::1]", "http://[::2]/", False),
    ("[::1]", "http://[::1/", False),
    # URL entries: scheme, host, port, and a path on segment boundaries
    ("https://mcp.example.com", "https://mcp.example.com/", True),
    ("https://mcp.example.com", "https://mcp.example.com:443/mcp", True),
    ("https://mcp.example.com", "https://mcp.example.com:8443/mcp", False),
    ("https://mcp.example.com", "http://mcp.example.com/mcp", False),
    ("https://mcp.example.com", "https://mcp.example.com.evil.io/", False),
    ("https://mcp.example.com", "https://mcp.example.com@evil.io/", False),
    ("http://mcp.internal", "http://mcp.internal@127.0.0.1:8931/mcp", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a/mcp", True),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a", True),
    ("https://mcp.example.com/team-a", "https://mcp.example.com/team-a/mcp?x=1#f", True),
    ("https://mcp.example.com/team-a", "https://mcp.example.com/team-ab/mcp", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-b/mcp", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a/../team-b/", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a/./mcp", True),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/x/../team-a/mcp", True),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a/%2e%2e/team-b/", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a/.%2E/team-b/", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a/..%2Fteam-b/", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a/..%2fteam-b/", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a/..%5Cteam-b/", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a/%252e%252e/team-b/", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a/..;/team-b/", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/team-a/..\\team-b/", False),
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/%74eam-a/mcp", True),  # %74 is t
    ("https://mcp.example.com/team-a/", "https://mcp.example.com/TEAM-A/mcp", False),  # paths keep case
    ("https://mcp.example.com/a%20b/", "https://mcp.example.com/a%20b/mcp", True),
    ("https://mcp.example.com/a%2ab/", "https://mcp.example.com/a%2Ab/mcp", True),  # hex case only
    ("https://mcp.example.com/a%20b/", "https://mcp.example.com/a%20B/mcp", False),
    ("https://mcp.example.com/", "https://mcp.example.com/%2e%2e/anything", True),  # no path named: any
    # internationalised names, in their IDNA form
    ("bücher.example", "https://xn--bcher-kva.example/mcp", True),
    ("xn--bcher-kva.example", "https://BÜCHER.example/mcp", True),
    ("strasse.example", "https://straße.example/mcp", False),  # IDNA would map ß to ss: refused
    ("example.com", "https://\uff45xample.com/", False),  # a full-width e
]


@pytest.mark.parametrize(("entry", "url", "admitted"), TABLE)
def test_the_allow_list_matches_urls_by_their_parts(entry: str, url: str, admitted: bool) -> None:
    assert allowed(url, parse_entries([entry])) is admitted
    assert McpPropagation.build(True, [entry]).allows(url) is admitted
    assert McpPropagation.build(False, [entry]).allows(url) is False


def test_no_list_admits_every_server_and_an_empty_list_none() -> None:
    assert McpPropagation.build(True, None).allows("http://anything:1/mcp")
    assert McpPropagation.build(True, None).allows("http://user@anything:1/mcp")
    assert not McpPropagation.build(True, []).allows("http://anything:1/mcp")
    assert not McpPropagation.build(False, None).allows("http://anything:1/mcp")


def test_a_url_that_is_not_a_string_or_does_not_parse_matches_nothing() -> None:
    entries = parse_entries(["tools.internal", "https://mcp.example.com/"])
    for url in (None, b"http://tools.internal/", 3, "", "http://", "http://[::1", "http://tools.internal:x/"):
        assert allowed(url, entries) is False  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("https://mcp.example.com/?team=a", "has a query"),
        ("https://mcp.example.com/#a", "has a fragment"),
        ("https://mcp.example.com?", "has a query"),
        ("ftp://mcp.example.com/", "is not http or https"),
        ("ws://mcp.example.com/", "is not http or https"),
        ("1http://mcp.example.com/", "does not parse as a URL"),
        ("https://", "names no host"),
        ("https://mcp.example.com:0/", "not a number from 1 to 65535"),
        ("https://mcp.example.com:65536/", "not a number from 1 to 65535"),
        ("mcp.example.com:http", "not a number from 1 to 65535"),
        ("https://mcp.example.com/a/../b/", "'.' or '..' segments"),
        ("https://mcp.example.com/a/%2e%2e/b/", "'.' or '..' segments"),
        ("https://mcp.example.com/a%2Fb/", "encoded '/'"),
        ("https://mcp.example.com/a%25b/", "encoded '/'"),
        ("mcp.example.com/team-a/", "a path needs the scheme"),
        ("*.example.com", "is not a host name or IP address"),
        ("mcp example.com", "holds a space"),
        ("mcp.example.com\\x", "backslash"),
        ("::zz", "write IPv6 in brackets"),
        ("[::1", "is not a host name or IP address"),
        ("[::1]x", "is not a host name or IP address"),
        ("[not-v6]:80", "is not a host name or IP address"),
        ("mcp.%65xample.com", "is not a host name or IP address"),
    ],
)
def test_a_bad_entry_is_refused_at_construction(entry: str, why: str) -> None:
    with pytest.raises(ValueError, match="mcp_servers entry") as refused:
        OtelHooks(tracer_provider=TracerProvider(), mcp_servers=["tools.internal", entry])
    assert why in str(refused.value)


@pytest.mark.parametrize(
    "entry",
    [
        "https://svc:s3cr3t-Passw0rd@mcp.example.com/",
        "https://s3cr3t-Passw0rd@mcp.example.com/",
        "s3cr3t-Passw0rd@mcp.example.com",
        "https://mcp.example.com/?api-key=s3cr3t-Passw0rd",
        "https://mcp.example.com/#s3cr3t-Passw0rd",
    ],
)
def test_the_refusal_shows_no_credential_the_entry_holds(entry: str) -> None:
    with pytest.raises(ValueError, match="mcp_servers entry") as refused:
        OtelHooks(tracer_provider=TracerProvider(), mcp_servers=[entry])
    assert "s3cr3t-Passw0rd" not in str(refused.value)
    assert "mcp.example.com" in str(refused.value)


def test_entries_of_the_wrong_type_are_refused_at_construction() -> None:
    with pytest.raises(TypeError, match="not one string"):
        OtelHooks(tracer_provider=TracerProvider(), mcp_servers="tools.internal")
    for bad in ("", "  ", None, 8931, b"tools.internal"):
        with pytest.raises(ValueError, match="non-empty strings"):
            OtelHooks(tracer_provider=TracerProvider(), mcp_servers=[bad])  # type: ignore[list-item]
