"""The audit's scanner (``flowra_otel.core.secret_scan``) reports every leak in a text, whatever it
found first: every given secret and every pattern, each once, each with its index, its match and
whether only a decoded view showed it, across every view (raw, JSON decoded layer by layer, JSON
unescaped when the text is cut), down to the deepest layer it promises (``MAX_LAYERS``) and not
beyond. A scanner that stops early (after the first finding of a view, or when a miscount says
all were found) reports a false clean for the rest.

Flowra-free and fast: these are the tests ``tools/mutate.py secret_scan`` runs per mutant.
"""

from __future__ import annotations

import base64
import json
import re

import pytest

from flowra_otel.core.content import BUILTIN_SECRET_PATTERNS
from flowra_otel.core.secret_scan import (
    BASE64_FROM,
    MAX_LAYERS,
    Finding,
    base64_texts,
    json_unescape,
    scan_text,
    text_views,
)

PATTERNS = [(name, re.compile(pattern)) for name, pattern in BUILTIN_SECRET_PATTERNS.items()]
API_KEY = "sk-live-" + "Ab3dE" * 4
EMAIL = "ada.lovelace@example.com"
CARD = "4111 1111 1111 1111"
CARD_ESCAPED = "".join(f"\\u{ord(c):04x}" for c in CARD)
"""The card as a JSON string may spell it (every character a ``\\u`` escape): no digit shows raw."""
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9.payload"


def wrap(text: str, layers: int) -> str:
    """``text`` as a string inside a JSON document, ``layers`` times over."""
    for _ in range(layers):
        text = json.dumps({"content": text})
    return text


def test_the_layer_bound_is_eight() -> None:
    assert MAX_LAYERS == 8


def test_json_unescape_undoes_every_json_escape_and_keeps_the_rest() -> None:
    assert json_unescape('a\\"b\\\\c\\/d') == 'a"b\\c/d'
    assert json_unescape("\\b\\f\\n\\r\\t") == "\b\f\n\r\t"
    assert json_unescape("\\u00e9\\u00E9") == "éé"
    assert json_unescape("\\ud83d\\ude00 \\uD83D\\uDE00") == "😀 😀"  # surrogate pairs, either case
    assert json_unescape("\\ud83d alone") == "\ud83d alone"
    assert json_unescape("\\x \\q") == "\\x \\q"  # not JSON escapes: kept
    plain = "no escapes at all"
    assert json_unescape(plain) is plain


def test_the_views_of_a_text_raw_first_then_each_hidden_text_once() -> None:
    doc = json.dumps({"a": "x", "b": ["x", 'say "hi"'], "c": {"k\\n": 1}})
    views = list(text_views(doc))
    # the raw text, then the document's strings (keys too), each once and each in its own views
    # (the key "k\\n" is unescaped): a document that parses is not also unescaped as text
    assert views == [
        (doc, False),
        ("a", True),
        ("x", True),
        ("b", True),
        ('say "hi"', True),
        ("c", True),
        ("k\\n", True),
        ("k\n", True),
    ]


def test_a_cut_document_is_unescaped_and_its_unescaped_json_decoded_again() -> None:
    inner = json.dumps({"secret": 'pa"ss', "more": "x" * 40})
    cut = json.dumps({"content": inner})[:-30]  # no longer JSON: only unescaping can show it
    assert 'pa"ss' not in cut
    (finding,) = scan_text(cut, secrets=['pa"ss'])
    assert finding.decoded
    assert any('"secret": "pa\\"ss"' in view for view, _ in text_views(cut))  # one layer undone


def test_whitespace_around_a_json_document_still_decodes() -> None:
    assert ("deep", True) in list(text_views("  \n" + json.dumps(["deep"]) + " \t"))


def test_a_json_string_document_is_decoded() -> None:
    assert ('a "quoted" value', True) in list(text_views(json.dumps('a "quoted" value')))


@pytest.mark.parametrize("layers", range(MAX_LAYERS + 1))
def test_a_secret_is_found_down_to_the_deepest_layer(layers: int) -> None:
    secret = 'pa"ss\\wörd\n'  # escaped differently at every layer
    (finding,) = scan_text(wrap(f"x {secret} y", layers), secrets=[secret])
    assert (finding.kind, finding.index, finding.match, finding.decoded) == ("given_secret", 0, secret, layers > 0)


def test_nothing_is_decoded_beyond_the_deepest_layer() -> None:
    secret = 'pa"ss\\wörd\n'
    assert scan_text(wrap(f"x {secret} y", MAX_LAYERS + 1), secrets=[secret]) == []


def test_nothing_is_unescaped_beyond_the_deepest_layer_of_a_cut_document() -> None:
    secret = 'pa"ss\\wörd'
    assert scan_text(wrap(f"x {secret} y", MAX_LAYERS + 1)[:-3], secrets=[secret]) == []


def test_the_deepest_layer_of_a_cut_document_is_found_too() -> None:
    secret = 'pa"ss\\wörd'
    cut = wrap(f"x {secret} y", MAX_LAYERS)[:-3]
    (finding,) = scan_text(cut, secrets=[secret])
    assert finding.decoded


def test_every_given_secret_and_every_pattern_is_reported_whatever_was_found_first() -> None:
    """Five given secrets and the four patterns: one secret raw, the others only after decoding,
    at different depths, patterns raw and decoded: all nine reported, each once, in order."""
    secrets = ["raw-secret-0001", 'quoted "secret" 2', "deep\\secret\\3", "ünïcode-secret-4", "tab\tsecret-5"]
    text = json.dumps(
        {
            "raw": "raw-secret-0001 and raw-secret-0001 again",
            "msg": wrap(f"{secrets[1]} {EMAIL}", 1),
            "deeper": wrap(secrets[2], 3),
            "list": [wrap(secrets[3], 2), wrap(f"{secrets[4]} {BEARER}", 4)],
        },
        ensure_ascii=True,
    )
    text = f'{API_KEY} {text} ["{CARD_ESCAPED}"]'
    assert CARD not in text
    findings = scan_text(text, secrets=secrets, patterns=PATTERNS)
    assert [(f.kind, f.index) for f in findings] == [
        ("given_secret", 0),
        ("given_secret", 1),
        ("given_secret", 2),
        ("given_secret", 3),
        ("given_secret", 4),
        ("api_key", 0),
        ("bearer_token", 1),
        ("email", 2),
        ("card_number", 3),
    ]
    by_kind = {(f.kind, f.index): f for f in findings}
    assert not by_kind["given_secret", 0].decoded and by_kind["given_secret", 1].decoded
    assert not by_kind["api_key", 0].decoded and by_kind["card_number", 3].decoded
    assert by_kind["email", 2].match == EMAIL
    assert by_kind["card_number", 3].match == CARD
    assert by_kind["bearer_token", 1].match == BEARER
    assert by_kind["given_secret", 2].match == secrets[2]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 6])
def test_with_any_number_of_secrets_the_later_views_are_searched(count: int) -> None:
    """The first view holds every pattern and ``count`` - 1 secrets; the last secret is only in a
    decoded view. A scan that counts what it wants wrongly stops after the first view."""
    secrets = [f"given-secret-{i:04d}" for i in range(count)]
    raw = " ".join(secrets[:-1])
    text = f"{raw} {API_KEY} {BEARER} {EMAIL} {CARD} " + json.dumps({"hidden": wrap(f'"{secrets[-1]}"', 2)})[:-2]
    findings = scan_text(text, secrets=secrets, patterns=PATTERNS)
    assert [(f.kind, f.index) for f in findings if f.kind == "given_secret"] == [
        ("given_secret", i) for i in range(count)
    ]
    assert len(findings) == count + len(PATTERNS)


def hidden(text: str) -> str:
    """``text`` as a JSON string spelling every character as a ``\\u`` escape: nothing of it raw."""
    return '"' + "".join(f"\\u{ord(c):04x}" for c in text) + '"'


@pytest.mark.parametrize("count", [5, 6, 7, 8])
def test_four_or_more_secrets_with_the_patterns_are_all_found_whatever_the_first_view_holds(count: int) -> None:
    """``count`` secrets and the four patterns: the raw view shows ``count`` - 4 secrets only,
    every other secret and every pattern is in the unescaped view alone. A scan that counts what
    it wants wrongly (``secrets - patterns``) believes it is done after the first view."""
    secrets = [f"given-secret-{i:04d}" for i in range(count)]
    raw = " ".join(secrets[: count - 4])
    rest = " ".join([*secrets[count - 4 :], API_KEY, BEARER, EMAIL, CARD])
    text = f"{raw} [{hidden(rest)}"  # a cut array: only unescaping shows the rest
    findings = scan_text(text, secrets=secrets, patterns=PATTERNS)
    assert [(f.kind, f.index, f.decoded) for f in findings] == [
        *[("given_secret", i, i >= count - 4) for i in range(count)],
        ("api_key", 0, True),
        ("bearer_token", 1, True),
        ("email", 2, True),
        ("card_number", 3, True),
    ]


def test_a_pattern_found_earlier_does_not_stop_the_search_for_the_next() -> None:
    """The raw view shows the first pattern (an API key) only; the e-mail is in a decoded view
    alone: both are reported."""
    hidden = json.dumps({"to": EMAIL.replace("@", "\\u0040")})
    text = f"{API_KEY} {json.dumps(hidden)}"
    assert EMAIL not in text
    findings = scan_text(text, patterns=PATTERNS)
    assert [(f.kind, f.decoded) for f in findings] == [("api_key", False), ("email", True)]


def test_a_secret_found_earlier_does_not_stop_the_search_for_the_next() -> None:
    text = "first-secret " + json.dumps(json.dumps({"x": "second\\secret"}))
    findings = scan_text(text, secrets=["first-secret", "second\\secret"])
    assert [(f.index, f.decoded) for f in findings] == [(0, False), (1, True)]


def test_each_finding_once_with_the_first_view_it_was_in() -> None:
    text = "raw-secret " + json.dumps(["raw-secret", "raw-secret"])
    assert scan_text(text, secrets=["raw-secret"]) == [Finding("given_secret", 0, "raw-secret", False)]


def test_nothing_found_is_nothing_reported() -> None:
    assert scan_text(wrap("nothing here", 3), secrets=["absent"], patterns=PATTERNS) == []
    assert scan_text("", secrets=["absent"]) == []


def test_a_hostile_document_is_scanned_without_error() -> None:
    nested = "[" * 100_000 + "]" * 100_000  # json.loads recursion
    assert scan_text(nested, secrets=["x"]) == []
    (finding,) = scan_text(nested[:-1] + ' "secret"', secrets=["secret"])
    assert not finding.decoded


# ------------------------------------------------------------------------------------ base64 of text
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
DOC = f"id,key\n1,{AWS_KEY}\n"
ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"]
"""UTF-8 with and without a BOM; UTF-16 / UTF-32 with a BOM (``utf-16``, ``utf-32``) and without
one (``-le`` / ``-be``: told by where the NULs are)."""


def blob_part(data: bytes, *, urlsafe: bool = False, cut: int | None = None) -> str:
    """A tool result holding a ``blob`` part whose content is ``data`` in base64 (cut as the budget
    cuts it: a head, then the marker)."""
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode("ascii")
    if cut is not None:
        encoded = encoded[:cut] + "…[flowra_otel: truncated 9 of 99 chars]"
    return json.dumps({"content": [{"type": "blob", "mime_type": "text/csv", "content": encoded}]})


@pytest.mark.parametrize("codec", ENCODINGS)
def test_a_secret_in_base64_of_text_in_any_unicode_encoding_is_found(codec: str) -> None:
    data = DOC.encode(codec)
    for urlsafe in (False, True):
        found = scan_text(blob_part(data, urlsafe=urlsafe), secrets=[AWS_KEY], patterns=PATTERNS)
        assert found == [Finding("given_secret", 0, AWS_KEY, True), Finding("api_key", 0, AWS_KEY, True)]
    assert [t for t in base64_texts(base64.b64encode(data).decode()) if AWS_KEY in t] == [DOC]


@pytest.mark.parametrize("codec", ["utf-8", "utf-16", "utf-32-be"])
@pytest.mark.parametrize("extra", range(4))
def test_a_cut_base64_run_is_read_up_to_where_it_was_cut(codec: str, extra: int) -> None:
    """Cut anywhere after the key (inside a group, inside a character): the key is still found."""
    data = DOC.encode(codec)
    key_end = len(DOC[: DOC.index(AWS_KEY) + len(AWS_KEY)].encode(codec))  # bytes up to the key's end
    end = -(-4 * key_end // 3)  # the base64 characters holding them
    assert scan_text(blob_part(data + b"x" * 40, cut=end + extra), secrets=[AWS_KEY])


def test_base64_with_the_url_safe_alphabet_or_in_a_nested_document_is_read() -> None:
    """``+`` / ``/`` against ``-`` / ``_``: either alphabet decodes; a JSON document in the base64
    is decoded again (a secret escaped inside it is found)."""
    data = ("\ufeff" + DOC + "\u00ff\u00fe?>~" * 8).encode("utf-16-le")
    for encode, marks in ((base64.b64encode, "+/"), (base64.urlsafe_b64encode, "-_")):
        encoded = encode(data).decode()
        assert any(mark in encoded for mark in marks)
        assert scan_text(encoded, secrets=[AWS_KEY]) == [Finding("given_secret", 0, AWS_KEY, True)]
    secret = 'pa"ss\\word-Zq'
    nested = base64.b64encode(json.dumps({"password": secret}).encode("utf-16")).decode()
    assert scan_text(nested, secrets=[secret]) == [Finding("given_secret", 0, secret, True)]


@pytest.mark.parametrize("layers", [MAX_LAYERS, MAX_LAYERS + 1])
def test_base64_is_decoded_down_to_the_deepest_layer_and_not_beyond(layers: int) -> None:
    text = AWS_KEY
    for _ in range(layers):
        text = base64.b64encode(text.encode()).decode()
    assert bool(scan_text(text, secrets=[AWS_KEY])) is (layers == MAX_LAYERS)


def test_base64_that_is_no_text_gives_no_view() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    assert list(base64_texts(base64.b64encode(png).decode())) == []
    assert list(base64_texts("482122036b940b7c73f67b415c03a038 and_a_long_identifier_name")) == []
    assert list(base64_texts(base64.b64encode(b"short").decode())) == []  # under BASE64_FROM characters
    assert BASE64_FROM == 16


def test_a_secret_in_a_wide_document_without_base64_decoding_is_not_seen() -> None:
    """Why the view exists: the raw text and its JSON strings hold the key in no form a scan sees."""
    text = blob_part(DOC.encode("utf-16"))
    assert not any(AWS_KEY in view for view, _ in text_views(text) if view not in set(base64_texts(text)))
