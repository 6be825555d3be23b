"""Any value becomes a JSON tree that is safe to export and fits its budget
(``flowra_otel.core.bounded_json``), leaf by leaf: every text leaf (strings, keys, the text of
numbers, bytes, text media inside their base64) is scrubbed, within the budget, over it and with
none; a secret straddling the cut is scrubbed whole; a scrubber that fails withholds the leaf;
numbers that JSON cannot carry become text; containers are bounded in items, depth and work,
cycles become a marker; ``fit`` shrinks a tree to an exact budget, longest leaves and widest
containers first, never above the caller's levels.

Flowra-free and fast: these are the tests ``tools/mutate.py bounded_json`` runs per mutant.
"""

from __future__ import annotations

import base64
import codecs
import dataclasses
import json
import math
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from flowra_otel.core import bounded_json as bj
from flowra_otel.core.bounded_json import (
    CIRCULAR,
    MAX_DEPTH,
    OMITTED_ITEMS,
    OMITTED_KEY,
    OVER_BUDGET,
    REDACTION_FAILED,
    SCRUB_MARGIN,
    TOO_DEEP,
    TRUNCATION_MARKER,
    Blob,
    Cut,
    TextBlob,
    Walk,
    dumps_fitted,
    dumps_tree,
    fit,
    leaf_text,
    textual_media,
)

SECRET = "AKIAIOSFODNN7EXAMPLE"
MASK = "[KEY]"


def scrub(text: str) -> str:
    return text.replace(SECRET, MASK)


def failing(text: str) -> str:
    raise ValueError(f"cannot scrub {text[:10]}")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def tree(value: Any, cap: int | None = None, scrubber: Any = scrub) -> Any:
    return Walk(scrubber, cap).node(value)


# ------------------------------------------------------------------------------------ constants
def test_the_markers_say_what_happened() -> None:
    assert TRUNCATION_MARKER.format(dropped=5, total=12) == "…[flowra_otel: truncated 5 of 12 chars]"
    assert REDACTION_FAILED == "[flowra_otel: redaction failed; content withheld]"
    assert OMITTED_ITEMS.format(count=3) == "…[flowra_otel: 3 more items omitted]"
    assert OMITTED_KEY == "flowra_otel.omitted"
    assert TOO_DEEP.format(depth=64) == "…[flowra_otel: nested deeper than 64 levels]"
    assert CIRCULAR.format(kind="dict") == "…[flowra_otel: circular reference to a dict]"
    assert OVER_BUDGET == "…[flowra_otel: omitted, over max_content_length]"
    assert (MAX_DEPTH, SCRUB_MARGIN) == (64, 8_192)


# ------------------------------------------------------------------------------------ media types
@pytest.mark.parametrize(
    "media_type",
    [
        "text/plain",
        "text/csv",
        "text/html; charset=utf-8",
        " TEXT/Markdown ",
        "application/json",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/csv",
        "application/javascript",
        "application/x-ndjson",
        "application/sql",
        "application/vnd.api+json",
        "application/atom+xml",
        "application/ld+json; profile=x",
        "application/vnd.k8s+yaml",
        "APPLICATION/JSON",
    ],
)
def test_text_media_types(media_type: str) -> None:
    assert textual_media(media_type) is True


@pytest.mark.parametrize(
    "media_type",
    [
        "image/png",
        "application/octet-stream",
        "application/pdf",
        "application/jsonp",
        "application/",
        "audio/json",
        "textual/plain",
        "application/json-seq",
        "",
        None,
        3,
        b"text/plain",
    ],
)
def test_opaque_media_types(media_type: object) -> None:
    assert textual_media(media_type) is False


# ------------------------------------------------------------------------------------ strings
def test_a_short_string_is_kept_and_counted() -> None:
    walk = Walk(None, 100)
    assert walk.string("hello") == "hello" and walk.spent == 5
    assert walk.string("é\udc80") == "é\ufffd" and walk.spent == 7
    walk = Walk(scrub, None)
    assert walk.string(f"key {SECRET}") == f"key {MASK}" and walk.spent == 9


def test_a_string_over_the_budget_is_cut_after_scrubbing_its_head_and_a_margin() -> None:
    walk = Walk(scrub, 10)
    value = walk.string(f"{SECRET} and then a long tail")
    assert value == Cut(f"{MASK} and ", 41) and walk.spent == 10  # the total is the value's own length
    assert isinstance(value, Cut)
    assert value.text() == f"{MASK} and …[flowra_otel: truncated 31 of 41 chars]"
    assert leaf_text(value) == value.text() and leaf_text("x") == "x"
    assert Walk(None, 3).string("hello") == Cut("hel", 5)  # no scrubber: cut all the same


def test_a_secret_straddling_the_cut_is_scrubbed_whole() -> None:
    for start in range(0, 12):
        value = f"{'x' * start}{SECRET}{'y' * 50}"
        kept = Walk(scrub, 10).string(value)
        assert isinstance(kept, Cut)
        assert SECRET[:4] not in kept.kept, start  # the head of the key is never shown
        assert kept.total == len(value)


def test_a_secret_as_long_as_the_margin_straddling_the_cut_is_scrubbed_whole() -> None:
    key = "K" * (SCRUB_MARGIN - 10)
    value = "a" * 95 + key + "b" * 100
    kept = Walk(lambda t: t.replace(key, "[K]"), 100).string(value)
    assert isinstance(kept, Cut) and "KKKKK" not in kept.kept
    assert kept.kept.startswith("a" * 95 + "[K]")


def test_a_scrubber_that_shortens_the_text_cannot_pull_raw_text_into_the_cut() -> None:
    """Deleting most of the window would bring what follows it (unscrubbed) inside the cut: the
    window grows instead, so everything kept went through the scrubber."""
    value = "z" * 50 + SECRET * 600 + "tail"

    def drop(text: str) -> str:
        return text.replace(SECRET, "")

    kept = Walk(drop, 40).string(value)
    assert isinstance(kept, Cut)
    assert SECRET[:6] not in kept.kept and kept.kept.startswith("z" * 40)


def test_a_scrubber_that_deletes_everything_leaves_nothing() -> None:
    kept = Walk(lambda t: "", 10).string("x" * 100)
    assert kept == ""  # the whole value was scrubbed: nothing left, nothing to cut


def test_a_scrubber_that_fails_withholds_the_leaf_and_the_first_error_is_kept() -> None:
    walk = Walk(failing, None)
    assert walk.string("first") == REDACTION_FAILED
    first = walk.failure
    assert isinstance(first, ValueError)
    assert walk.string("second") == REDACTION_FAILED
    assert walk.failure is first
    cut = Walk(failing, 3)
    assert cut.string("a long value") == REDACTION_FAILED and cut.spent == len(REDACTION_FAILED)


def test_a_long_string_costs_its_budget_not_its_length() -> None:
    """The scrubber sees one window (the budget and the margin) of a value that keeps its length,
    and at most eight of them, doubling, of one it shortens."""
    seen: list[int] = []

    def measuring(text: str) -> str:
        seen.append(len(text))
        return text

    Walk(measuring, 100).string("x" * 10_000_000)
    assert seen == [100 + SCRUB_MARGIN]
    seen.clear()

    def deleting(text: str) -> str:
        seen.append(len(text))
        return text.replace(SECRET, "")

    Walk(deleting, 100).string(SECRET * 500_000)
    assert seen == [(100 + SCRUB_MARGIN) * 2**k for k in range(4)]  # 1, 2, 4, 8 windows: no more


def test_what_the_scrubber_made_of_the_margins_end_is_never_kept() -> None:
    """A value the scrubber deletes almost all of: the windows grow to the limit, and a secret cut
    in two at the end of the last window (raw there: the scrubber saw only its head) is dropped
    with the margin, never kept."""
    kept = Walk(lambda t: t.replace(SECRET, ""), 40).string(SECRET * 10_000)
    assert kept == Cut("", 200_000)


def test_a_value_the_scrubber_shortens_to_fit_is_whole_and_counted() -> None:
    walk = Walk(scrub, 35)
    value = "a" * 30 + SECRET  # 50 characters, 35 once scrubbed: exactly the budget
    assert walk.string(value) == "a" * 30 + MASK
    assert walk.spent == 35
    tail = Walk(lambda t: t.replace(SECRET, ""), 40).string(SECRET * 1_000 + "tail")
    assert tail == "tail"  # scrubbed whole over growing windows: no piece of a key in between


def test_a_big_string_given_twice_is_remembered_by_identity() -> None:
    memo: dict[int, Any] = {}
    calls: list[int] = []

    def counting(text: str) -> str:
        calls.append(len(text))
        return text.replace(SECRET, MASK)

    big = SECRET + "x" * (4_096 - len(SECRET))  # MEMO_FROM: strings at least this long
    walk = Walk(counting, None, memo)
    first = walk.string(big)
    second = walk.string(big)
    assert isinstance(first, str)
    assert first is second and len(calls) == 1 and walk.spent == 2 * len(first)
    assert Walk(counting, None, memo).string(big[:-1] + "y") == MASK + "x" * (4_096 - len(SECRET) - 1) + "y"
    small = "s" * 4_095
    Walk(counting, None, memo).string(small)
    assert id(small) not in memo  # shorter strings are not remembered
    assert id(big) in memo


def test_the_memo_keeps_the_latest_strings_only() -> None:
    memo: dict[int, Any] = {}
    walk = Walk(scrub, None, memo)
    strings = [chr(65 + i % 26) * (bj.MEMO_FROM + i) for i in range(bj.MEMO_SIZE + 3)]
    for text in strings:
        walk.string(text)
    assert len(memo) == bj.MEMO_SIZE == 32
    assert id(strings[0]) not in memo and id(strings[-1]) in memo


def test_a_str_subclass_is_a_plain_string_leaf() -> None:
    class Name(str):
        pass

    assert tree(Name(f"x {SECRET}")) == f"x {MASK}"
    assert type(tree(Name("plain"), scrubber=None)) is str


# ------------------------------------------------------------------------------------ keys and numbers
def test_keys_are_scrubbed_cut_and_stringified() -> None:
    walk = Walk(scrub, 8)
    assert walk.key(f"{SECRET}") == "[KEY]"
    assert walk.key("a long key of text") == "a long k…[flowra_otel: truncated 10 of 18 chars]"
    assert walk.key(None) == "null" and walk.key(True) == "true" and walk.key(False) == "false"
    assert walk.key(12) == "12" and walk.key(1.5) == "1.5"
    assert Walk(scrub, None).key(4111111111111111) == "4111111111111111"

    class Named:
        def __str__(self) -> str:
            return f"named {SECRET}"

    class Reprd:
        def __repr__(self) -> str:
            return "reprd"

    assert Walk(scrub, None).key(Named()) == f"named {MASK}"
    assert Walk(scrub, None).key(Reprd()) == "reprd"
    assert Walk(scrub, None).key(object()) == "<object>"

    class Key(str):
        pass

    assert Walk(scrub, None).key(Key(SECRET)) == MASK


def test_numbers_stay_numbers_unless_their_text_is_scrubbed() -> None:
    card = lambda text: text.replace("4111111111111111", "[CARD]")  # noqa: E731
    walk = Walk(card, None)
    assert walk.number(4111111111111111) == "[CARD]"
    assert walk.number(4111111111111111.0) == "[CARD].0"  # a float's text is its repr
    assert walk.number(42) == 42 and type(walk.number(42)) is int
    assert walk.number(2.5) == 2.5
    assert Walk(None, None).number(7) == 7
    assert walk.spent == len("4111111111111111") + len("4111111111111111.0") + 2 + 2 + 3  # 42 twice


@pytest.mark.parametrize(("value", "text"), [(math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity")])
def test_numbers_json_cannot_carry_become_text(value: float, text: str) -> None:
    assert tree(value) == text
    assert tree(value, scrubber=None) == text
    assert dumps_tree(tree({"v": value})) == json.dumps({"v": text}, separators=(",", ":"))


def test_an_int_too_long_to_print_is_named_by_its_size() -> None:
    huge = 10 ** (sys.get_int_max_str_digits() + 5)
    assert tree(huge, scrubber=None) == f"<int of about {int(huge.bit_length() * 0.30103)} digits>"
    assert tree(huge) == f"<int of about {int(huge.bit_length() * 0.30103)} digits>"
    assert tree(True) is True and tree(None) is None


# ------------------------------------------------------------------------------------ bytes and media
def test_utf8_bytes_are_their_text_scrubbed() -> None:
    assert tree(f"id = {SECRET}\n".encode()) == f"id = {MASK}\n"
    assert tree(bytearray(b"plain")) == "plain"
    assert tree(memoryview(b"view")) == "view"


def test_other_bytes_are_base64_whose_text_is_scrubbed() -> None:
    raw = b"\xff\xfe sealed"
    encoded = b64(raw)
    assert tree(raw, scrubber=lambda t: t.replace(encoded[4:12], "[B]")) == encoded[:4] + "[B]" + encoded[12:]
    assert tree(raw, scrubber=None) == encoded
    assert tree(raw) == encoded  # nothing to take out of its text: base64


def test_other_bytes_holding_a_secret_are_their_text_scrubbed() -> None:
    """A key in a file with a stray byte: in base64 no pattern would see it, so the bytes are
    recorded as their text (each invalid byte U+FFFD), scrubbed."""
    raw = b"\x00\xff\xfe id = " + SECRET.encode()
    assert tree(raw) == f"\x00\ufffd\ufffd id = {MASK}"
    assert tree(raw, scrubber=None) == b64(raw)
    assert tree(raw, scrubber=failing) == REDACTION_FAILED
    long = b"\xff" + SECRET.encode() + b"y" * 300_000  # its head only, within the budget
    assert Walk(scrub, 10).node(long) == Cut(f"\ufffd{MASK}yyyy", 300_021)
    cut = Walk(scrub, 10).node(b"\xff" + SECRET.encode() + b"y" * 100)  # whole, then cut
    assert cut == Cut(f"\ufffd{MASK}yyyy", 121)  # its 121 characters read as text


def test_long_bytes_are_decoded_only_as_far_as_the_budget_keeps() -> None:
    data = SECRET.encode() + b"x" * 200_000
    kept = Walk(scrub, 10).node(data)
    assert kept == Cut(f"{MASK}xxxxx", len(data))
    binary = b"\xff" + b"y" * 200_000
    cut = Walk(None, 16).node(binary)
    assert isinstance(cut, Cut) and cut.kept == b64(binary)[:16] and cut.total == 4 * ((len(binary) + 2) // 3)
    assert Walk(None, 16).node(b"\xff" + b"y" * 299_999) == Cut(b64(b"\xff" + b"y" * 11)[:16], 400_000)
    whole = Walk(None, 10).node("é".encode() * 100_000)  # decoded whole: its total in characters
    assert isinstance(whole, Cut) and whole.kept == "é" * 10 and whole.total == 100_000
    head = Walk(None, 10).node("é".encode() * 200_000)  # only its head decoded: the total in bytes
    assert isinstance(head, Cut) and head.kept == "é" * 10 and head.total == 400_000
    # the bound: 4 bytes a character for the 8 windows a cut value may be scrubbed over
    chars = 8 * (10 + SCRUB_MARGIN)
    at = Walk(None, 10).node("é".encode() * (2 * chars))  # exactly 4 * chars bytes: whole
    assert isinstance(at, Cut) and at.total == 2 * chars
    over = Walk(None, 10).node(b"x" + "é".encode() * (2 * chars))  # one byte more: its head
    assert isinstance(over, Cut) and over.kept == "x" + "é" * 9 and over.total == 4 * chars + 1
    invalid = Walk(None, 16).node(b"\xff" + b"y" * (4 * chars))  # not UTF-8: base64 of its head
    assert isinstance(invalid, Cut) and invalid.kept == b64(b"\xff" + b"y" * 11)[:16]


def test_long_other_bytes_are_read_for_a_secret_only_as_far_as_their_base64_is_kept() -> None:
    """Bytes that are not UTF-8 and whose base64 is over the scrubbed characters: only their head
    (``chars // 4 * 3 + 3`` bytes, whole base64 groups) is read as text for the scrubber, so a
    secret ending at that bound makes the bytes their text and one starting there does not."""
    chars = 8 * (10 + SCRUB_MARGIN)
    bound = chars // 4 * 3 + 3
    inside = b"\xff" + b"y" * (bound - 1 - len(SECRET)) + SECRET.encode() + b"y" * 1_000
    kept = Walk(scrub, 10).node(inside)
    assert kept == Cut("\ufffd" + "y" * 9, len(inside))  # its text, scrubbed (the secret beyond the cut)
    for beyond in (
        b"\xff" + b"y" * (bound - 1) + SECRET.encode() + b"y" * 1_000,  # starting at the bound
        b"\xff" + b"y" * (bound - len(SECRET)) + SECRET.encode() + b"y" * 1_000,  # ending one byte over it
    ):
        encoded = Walk(scrub, 10).node(beyond)
        assert encoded == Cut(b64(beyond[:9])[:10], 4 * ((len(beyond) + 2) // 3))  # base64 of its head


def test_text_media_that_is_not_utf8_is_recorded_as_the_same_bytes_would_be() -> None:
    """A ``TextBlob`` whose bytes do not decode is read as the same bytes given plainly are, at the
    bound too (base64 of exactly the scrubbed characters), where the whole value is read as text and
    its total is its characters, not its bytes; a blob part's content is base64, so the document's
    scrubbed text goes out as base64 of its UTF-8, its total the original's base64 length."""
    chars = 8 * (10 + SCRUB_MARGIN)
    size = chars // 4 * 3  # its base64: exactly ``chars`` characters
    head = "é".encode() * 1_000 + b"\xff" + SECRET.encode()
    raw = head + b"y" * (size - len(head))
    assert 4 * ((len(raw) + 2) // 3) == chars
    plain = Walk(scrub, 10).node(raw)
    assert plain == Cut("é" * 10, len(raw.decode("utf-8", "replace")))  # its text: fewer characters than bytes
    assert Walk(scrub, 10).node(TextBlob(raw)) == Cut(b64(("é" * 10).encode()), chars)
    over = raw + b"y"
    plain_over = Walk(scrub, 10).node(over)  # one byte over: a head of it read as text
    assert isinstance(plain_over, Cut)
    expected_over = Cut(b64(plain_over.kept.encode()), 4 * ((len(over) + 2) // 3))
    assert Walk(scrub, 10).node(TextBlob(over)) == expected_over


def test_binary_media_is_base64_as_it_is_and_cut_to_the_budget() -> None:
    png = Blob(b"\x89PNG" + SECRET.encode())
    assert tree(png) == b64(png)  # an image is not text: not scrubbed
    assert tree(Blob(SECRET.encode())) == b64(SECRET.encode())  # even when its bytes read as text
    walk = Walk(scrub, 8)
    cut = walk.node(Blob(png + b"!"))  # 25 bytes: 36 base64 characters
    assert cut == Cut(b64(png[:6]), 36)
    assert walk.spent == 8
    assert Walk(scrub, 8).binary(b"abcdef") == "YWJjZGVm"  # exactly the budget: whole
    walk = Walk(None, 100)
    walk.binary(b"abc")
    assert walk.spent == 4


@pytest.mark.parametrize("cap", [None, 1_000, 12])
def test_text_media_is_base64_of_its_scrubbed_text_within_over_and_without_a_budget(cap: int | None) -> None:
    doc = TextBlob(json.dumps({"key": SECRET, "note": "n" * 40}).encode())
    value = Walk(scrub, cap).node(doc)
    text = json.dumps({"key": MASK, "note": "n" * 40})
    if cap == 12:
        assert value == Cut(b64(text[:12].encode()), 4 * ((len(doc) + 2) // 3))
    else:
        assert value == b64(text.encode())
    assert SECRET not in base64.b64decode(leaf_text(value).split("…")[0] + "==")[:80].decode("utf-8", "replace")


def test_text_media_that_is_not_utf8_is_scrubbed_as_base64_text() -> None:
    doc = TextBlob(b"\xff" + SECRET.encode())
    encoded = b64(doc)
    assert Walk(lambda t: t.replace(encoded, "[B64]"), None).node(doc) == "[B64]"


def test_text_media_without_a_scrubber_is_base64_as_it_is() -> None:
    doc = TextBlob(SECRET.encode())
    assert Walk(None, None).node(doc) == b64(doc)


def test_long_text_media_is_decoded_only_as_far_as_the_budget_keeps() -> None:
    doc = TextBlob(SECRET.encode() + b"x" * 200_000)
    value = Walk(scrub, 10).node(doc)
    assert value == Cut(b64(f"{MASK}xxxxx".encode()), 4 * ((len(doc) + 2) // 3))
    chars = 8 * (10 + SCRUB_MARGIN)
    huge = TextBlob(SECRET.encode() + b"x" * (4 * chars))  # beyond 4 bytes a character: its head only
    assert Walk(scrub, 10).node(huge) == Cut(b64(f"{MASK}xxxxx".encode()), 4 * ((len(huge) + 2) // 3))
    odd = TextBlob(b"x" + "é".encode() * (2 * chars))  # the head ends inside a character
    assert Walk(scrub, 10).node(odd) == Cut(b64(("x" + "é" * 9).encode()), 4 * ((len(odd) + 2) // 3))
    # valid as far as its head goes, not after: the head is text, scrubbed
    tail = TextBlob(SECRET.encode() + b"a" * (4 * chars) + b"\xff")
    assert Walk(scrub, 10).node(tail) == Cut(b64(f"{MASK}aaaaa".encode()), 4 * ((len(tail) + 2) // 3))
    # not text within its head: base64 of the bytes, scrubbed as text
    binary = TextBlob(b"\xff" + b"y" * (4 * chars))
    assert Walk(scrub, 10).node(binary) == Cut(b64(b"\xff" + b"y" * 11)[:10], 4 * ((len(binary) + 2) // 3))


def test_text_media_that_fits_in_characters_is_whole_whatever_its_bytes() -> None:
    """Ten two-byte characters under a budget of twelve: whole, not cut for its 20 bytes."""
    doc = TextBlob("é".encode() * 10)
    assert Walk(scrub, 12).node(doc) == b64(doc)


def test_a_cut_text_medias_total_is_its_base64_length() -> None:
    doc = TextBlob(b"x" * 30)  # a multiple of 3: 40 base64 characters exactly
    assert Walk(scrub, 6).node(doc) == Cut(b64(b"x" * 6), 40)


WIDE = ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]
"""UTF-16 and UTF-32, each with its byte order mark (``"\ufeff"`` encoded in the codec is it)."""


@pytest.mark.parametrize("codec", WIDE)
@pytest.mark.parametrize("cap", [None, 1_000, 12])
def test_text_media_with_a_utf16_or_utf32_bom_is_base64_of_its_scrubbed_text_in_utf8(
    codec: str, cap: int | None
) -> None:
    """Read as UTF-8 such a document holds a NUL beside every ASCII character and no pattern sees
    the key: it is read in the encoding its BOM names, scrubbed, and recorded as base64 of the
    scrubbed text's UTF-8 (the BOM left out), like every scrubbed text document; cut to the budget,
    its total the original's base64 length."""
    text = json.dumps({"key": SECRET, "note": "n" * 40})
    doc = TextBlob(("\ufeff" + text).encode(codec))
    value = Walk(scrub, cap).node(doc)
    scrubbed = text.replace(SECRET, MASK)
    if cap == 12:
        assert value == Cut(b64(scrubbed[:12].encode()), 4 * ((len(doc) + 2) // 3))
    else:
        assert value == b64(scrubbed.encode())
    assert Walk(None, None).node(doc) == b64(doc)  # no scrubber: the bytes as they are


@pytest.mark.parametrize("codec", WIDE)
def test_bytes_with_a_utf16_or_utf32_bom_are_their_text_scrubbed(codec: str) -> None:
    raw = f"\ufeffid = {SECRET}\n".encode(codec)
    assert tree(raw) == f"id = {MASK}\n"
    assert tree(raw, scrubber=None) == f"id = {SECRET}\n"  # text, as UTF-8 bytes are


def test_long_utf16_media_is_decoded_only_as_far_as_the_budget_keeps() -> None:
    chars = 8 * (10 + SCRUB_MARGIN)
    huge = TextBlob(("\ufeff" + SECRET + "x" * (2 * chars)).encode("utf-16-le"))  # over 4 bytes a character
    assert Walk(scrub, 10).node(huge) == Cut(b64(f"{MASK}xxxxx".encode()), 4 * ((len(huge) + 2) // 3))
    pairs = TextBlob(("\ufeff" + "x" + "\U0001f600" * chars).encode("utf-16-le"))  # its head ends inside a pair
    value = Walk(scrub, 10).node(pairs)
    assert value == Cut(b64(("x" + "\U0001f600" * 9).encode()), 4 * ((len(pairs) + 2) // 3))
    # the bound: a body of 4 bytes a character is read whole (its total in characters), one more
    # character is read as its head (its total in bytes); plain bytes show the total
    at = Walk(None, 10).node(("\ufeff" + "y" * chars).encode("utf-32-le"))
    assert isinstance(at, Cut) and at.total == chars
    over = Walk(None, 10).node(("\ufeff" + "y" * (chars + 1)).encode("utf-32-le"))
    assert isinstance(over, Cut) and over.total == 4 * (chars + 1)
    # invalid within its head (a lone surrogate): no UTF-16, base64 as other bytes are
    lone = b"\xff\xfe" + b"\x00\xdcy\x00" + "y".encode("utf-16-le") * (2 * chars)
    assert Walk(None, 10).node(lone) == Cut(b64(lone[:9])[:10], 4 * ((len(lone) + 2) // 3))


def test_a_bom_that_does_not_decode_leaves_the_bytes_to_the_other_rules() -> None:
    """``FF FE 00 00`` and then UTF-16 LE: not UTF-32 (it does not decode), UTF-16 LE starting
    with a NUL; UTF-16 cut at an odd byte is no UTF-16: base64, its text scrubbed as before."""
    nul_first = TextBlob(codecs.BOM_UTF16_LE + ("\0" + SECRET + "!").encode("utf-16-le"))
    assert Walk(scrub, None).node(nul_first) == b64(("\0" + MASK + "!").encode())
    utf8_bom = TextBlob(codecs.BOM_UTF8 + b"\xff " + SECRET.encode())  # a UTF-8 BOM, then no UTF-8
    assert Walk(scrub, None).node(utf8_bom) == b64(f"\ufeff\ufffd {MASK}".encode())
    odd = TextBlob(("\ufeff" + SECRET).encode("utf-16-le") + b"!")
    assert Walk(scrub, None).node(odd) == b64(odd)  # nothing its UTF-8 reading shows to scrub


# ------------------------------------------------------------------------------------ containers
@dataclasses.dataclass
class Point:
    label: str
    x: int


class Odd:
    pass


def test_every_kind_of_value_becomes_a_tree_node() -> None:
    class Settings(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            return {"token": SECRET}[key]

        def __iter__(self) -> Iterator[str]:
            return iter(["token"])

        def __len__(self) -> int:
            return 1

    value = {
        "list": [1, SECRET],
        "tuple": (True, None),
        "set": {SECRET},
        "frozenset": frozenset({2}),
        "point": Point(SECRET, 3),
        "mapping": Settings(),
        "odd": Odd(),
        "class": Odd,
        "float": 0.5,
    }
    assert tree(value) == {
        "list": [1, MASK],
        "tuple": [True, None],
        "set": [MASK],
        "frozenset": [2],
        "point": {"label": MASK, "x": 3},
        "mapping": {"token": MASK},
        "odd": "<Odd>",
        "class": "<type>",
        "float": 0.5,
    }


def test_keys_scrubbed_to_the_same_text_are_all_kept() -> None:
    value = {f"a {SECRET}": 1, "a [KEY]": 2, f"a {SECRET} ": 3, 1: "one", "1": "uno"}
    walked = tree(value, scrubber=lambda t: t.replace(SECRET, "[KEY]").strip())
    assert walked == {"a [KEY]": 1, "a [KEY] #2": 2, "a [KEY] #3": 3, "1": "one", "1 #2": "uno"}


def test_depth_is_bounded() -> None:
    deep: Any = "bottom"
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    walked = tree(deep)
    depth = 0
    node = walked
    while isinstance(node, list):
        node = node[0]
        depth += 1
    assert depth == MAX_DEPTH and node == TOO_DEEP.format(depth=MAX_DEPTH)
    shallow: Any = "bottom"
    for _ in range(MAX_DEPTH):
        shallow = {"k": shallow}
    assert "bottom" in dumps_tree(tree(shallow))
    deep_dict: Any = "bottom"
    for _ in range(MAX_DEPTH + 1):
        deep_dict = {"k": deep_dict}
    assert "bottom" not in dumps_tree(tree(deep_dict)) and TOO_DEEP.format(depth=MAX_DEPTH) in dumps_tree(
        tree(deep_dict)
    )


def test_a_cycle_becomes_a_marker_and_a_shared_value_does_not() -> None:
    loop: dict[str, Any] = {"name": "root"}
    loop["self"] = loop
    items: list[Any] = [1]
    items.append(items)
    assert tree(loop) == {"name": "root", "self": CIRCULAR.format(kind="dict")}
    assert tree(items) == [1, CIRCULAR.format(kind="list")]
    shared = [SECRET]
    assert tree({"a": shared, "b": shared}) == {"a": [MASK], "b": [MASK]}

    class Registry(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            return self

        def __iter__(self) -> Iterator[str]:
            return iter(["self"])

        def __len__(self) -> int:
            return 1

    assert tree(Registry()) == {"self": CIRCULAR.format(kind="dict")}


def test_a_container_keeps_no_more_items_than_the_budget_has_characters() -> None:
    walked = tree(list(range(50)), cap=10)
    assert walked == [*range(10), OMITTED_ITEMS.format(count=40)]
    mapping = tree({str(i): i for i in range(30)}, cap=5)
    assert list(mapping) == ["0", "1", "2", "3", "4", OMITTED_KEY]
    assert mapping[OMITTED_KEY] == OMITTED_ITEMS.format(count=25)
    assert tree(list(range(50)), cap=None) == list(range(50))


def test_the_work_is_bounded_by_the_budget() -> None:
    walk = Walk(scrub, 10)
    assert walk.stop_at == 4 * 10 + 256
    walked = walk.node(["x" * 10] * 100)
    assert OVER_BUDGET in walked or walked[-1] == OMITTED_ITEMS.format(count=90)
    big = [{"k": "v" * 9} for _ in range(1_000)]
    assert OVER_BUDGET in json.dumps(Walk(None, 200).node(big), ensure_ascii=False)
    assert Walk(None, None).stop_at is None
    over = Walk(None, 10)
    assert over.stop_at is not None
    over.spent = over.stop_at
    assert over.node("ok") == "ok"
    over.spent = over.stop_at + 1
    assert over.node("anything") == OVER_BUDGET


def test_the_spent_characters_are_counted_per_leaf_and_item() -> None:
    walk = Walk(None, None)
    walk.node({"ab": ["c", None, True, 12]})
    # the key as a leaf 2, and as an item 2 + 4; items 4 x 1; "c" 1, None 5, True 5, 12 -> 2
    assert walk.spent == 2 + 6 + 4 + 1 + 5 + 5 + 2


# ------------------------------------------------------------------------------------ serialising
def test_a_tree_is_compact_json_with_its_cuts_marked() -> None:
    value = {"a": ["é", Cut("ab", 10)], "b": None}
    assert dumps_tree(value) == '{"a":["é","ab…[flowra_otel: truncated 8 of 10 chars]"],"b":null}'
    assert dumps_tree({"b": 1, OMITTED_KEY: "x", "a": 2}) == '{"b":1,"flowra_otel.omitted":"x","a":2}'  # as built
    assert json.loads(dumps_tree(value))["a"][1].startswith("ab…")
    with pytest.raises(TypeError, match="not a JSON tree node: object"):
        dumps_tree([object()])
    with pytest.raises(ValueError):
        dumps_tree([math.nan])  # trees never hold one: the walk made it text


def test_the_pure_python_encoder_gives_the_same_text(monkeypatch: pytest.MonkeyPatch) -> None:
    value = {"b": ["é", Cut("ab", 10), 1.5, True], "a": None}
    expected = dumps_tree(value)
    monkeypatch.setattr(bj, "_C_ENCODE", None)
    assert dumps_tree(value) == expected
    with pytest.raises(ValueError):
        dumps_tree([math.nan])


def test_a_cut_compares_by_what_it_keeps_and_its_total() -> None:
    assert Cut("ab", 5) == Cut("ab", 5) and hash(Cut("ab", 5)) == hash(Cut("ab", 5))
    assert Cut("ab", 5) != Cut("ab", 6) and Cut("ab", 5) != Cut("ac", 5) and Cut("ab", 5) != "ab"
    assert repr(Cut("abc", 10)) == "Cut(3 of 10)"


# ------------------------------------------------------------------------------------ fit
def test_a_tree_that_fits_is_returned_as_it_is() -> None:
    value = {"a": "short"}
    assert fit(value, 100, prune_from=1) is value
    assert fit(value, len(dumps_tree(value)), prune_from=1) is value


def test_fit_cuts_the_longest_leaves_first_to_the_exact_budget() -> None:
    value = {"short": "keep me", "long": "L" * 500}
    for budget in (120, 200, 300):
        fitted = fit(value, budget, prune_from=1)
        assert fitted is not None
        text = dumps_tree(fitted)
        assert len(text) <= budget
        assert fitted["short"] == "keep me"
        assert isinstance(fitted["long"], Cut) and fitted["long"].total == 500
        assert budget - len(text) < 10  # as much as fits is kept


def test_fit_keeps_the_original_total_when_it_cuts_a_cut_again() -> None:
    fitted = fit({"v": Cut("x" * 400, 9_000)}, 100, prune_from=1)
    assert fitted is not None and fitted["v"].total == 9_000


def test_fit_drops_items_of_the_widest_containers_below_the_callers_levels() -> None:
    value = [{"items": [f"item number {i:03d}" for i in range(60)]}]
    fitted = fit(value, 200, prune_from=2)
    assert fitted is not None
    assert len(dumps_tree(fitted)) <= 200
    (part,) = fitted  # the caller's level is never pruned
    items = part["items"]
    assert items[-1].startswith("…[flowra_otel: ") and items[-1].endswith(" more items omitted]")
    assert all(item.startswith("item number") for item in items[:-1])  # whole leaves kept
    assert int(items[-1].split()[1]) + len(items) - 1 == 60


def test_fit_prunes_mappings_too() -> None:
    value = {"parts": {f"k{i:02d}": "v" * 20 for i in range(40)}}
    fitted = fit(value, 150, prune_from=1)
    assert fitted is not None and len(dumps_tree(fitted)) <= 150
    assert OMITTED_KEY in fitted["parts"]


def test_fit_cannot_shrink_the_callers_levels_and_says_so() -> None:
    value = [["x"] * 200]
    assert fit(value, 50, prune_from=5) is None
    assert fit(["a" * 10] * 100, 20, prune_from=0) is None  # not even one item and a marker
    assert fit(["a" * 10] * 100, 60, prune_from=0) == ["a" * 10, OMITTED_ITEMS.format(count=99)]


def test_fit_keeps_every_item_cut_when_each_keeps_at_least_64_characters() -> None:
    """``USEFUL_LEAF``: at 64 characters a leaf, every item stays, cut; below, fewer items whole."""
    value = ["a" * 200, "b" * 200]
    at_64 = len(dumps_tree([Cut("a" * 64, 200), Cut("b" * 64, 200)]))
    assert fit(value, at_64, prune_from=0) == [Cut("a" * 64, 200), Cut("b" * 64, 200)]
    below = fit(value, at_64 - 2, prune_from=0)
    assert below == ["a" * 200, OMITTED_ITEMS.format(count=1)] or below == [OMITTED_ITEMS.format(count=2)]
    assert below is not None and len(dumps_tree(below)) <= at_64 - 2


def test_fit_prunes_a_single_item_container_too() -> None:
    fitted = fit([["x" * 1_000]], 60, prune_from=1)
    assert fitted == [[OMITTED_ITEMS.format(count=1)]]


def test_fit_keeps_as_many_whole_items_as_fit() -> None:
    value = [{"items": [f"item number {i:03d} " + "." * 45 for i in range(60)]}]  # longer than a marker
    fifty_nine = [{"items": [*value[0]["items"][:59], OMITTED_ITEMS.format(count=1)]}]
    assert fit(value, len(dumps_tree(fifty_nine)), prune_from=2) == fifty_nine


def test_fit_never_prunes_the_callers_levels() -> None:
    value = [{key: [f"{key}-item-{i:03d}" for i in range(10)] for key in "abc"}]
    fitted = fit(value, 300, prune_from=2)
    assert fitted is not None and len(dumps_tree(fitted)) <= 300
    assert list(fitted[0]) == ["a", "b", "c"]  # the caller's mapping keeps every key


def test_fit_prefers_cut_leaves_when_dropping_items_cannot_fit() -> None:
    """A long leaf at the caller's level: dropping items (leaves whole) cannot fit, so the leaves
    are cut and every item stays."""
    value = {"big": "x" * 500, "list": [1, 2, 3]}
    fitted = fit(value, 90, prune_from=1)
    assert fitted is not None and len(dumps_tree(fitted)) <= 90
    assert fitted["list"] == [1, 2, 3] and isinstance(fitted["big"], Cut) and fitted["big"].kept


def test_fit_falls_back_to_bare_markers_and_fewer_items() -> None:
    """Neither cut leaves with every item nor whole leaves with fewer items fit: every leaf a bare
    marker, and items dropped below the caller's levels only."""
    value = {"a": "x" * 200, "b": ["y" * 100] * 30}
    fitted = fit(value, 120, prune_from=1)
    assert fitted is not None and len(dumps_tree(fitted)) <= 120
    assert fitted["a"] == Cut("", 200)
    assert fitted["b"][-1] == OMITTED_ITEMS.format(count=30 - len(fitted["b"]) + 1)
    assert all(item == Cut("", 100) for item in fitted["b"][:-1])


def test_the_fallback_keeps_as_many_items_as_fit() -> None:
    value = {"a": "x" * 200, "b": ["y" * 100] * 3}
    two = {"a": Cut("", 200), "b": [Cut("", 100), Cut("", 100), OMITTED_ITEMS.format(count=1)]}
    assert fit(value, len(dumps_tree(two)), prune_from=1) == two


def test_fit_with_many_mid_sized_leaves_prefers_fewer_whole_items() -> None:
    value = [f"{i:02d}-" + "m" * 70 for i in range(30)]
    fitted = fit(value, 600, prune_from=0)
    assert fitted is not None and len(dumps_tree(fitted)) <= 600
    kept = [v for v in fitted if not v.startswith("…[flowra_otel")]
    assert kept and all(len(v) == 73 for v in kept)  # whole, not 30 stubs


def test_dumps_fitted_encodes_once_and_falls_back_when_nothing_fits() -> None:
    value = {"a": "x" * 100}
    assert dumps_fitted(value, None, prune_from=1, otherwise=lambda: "never") == dumps_tree(value)
    assert dumps_fitted(value, 1_000, prune_from=1, otherwise=lambda: "never") == dumps_tree(value)
    assert len(dumps_fitted(value, 60, prune_from=1, otherwise=lambda: "never")) <= 60
    assert dumps_fitted([["x"] * 100], 10, prune_from=3, otherwise=lambda: ["gone"]) == '["gone"]'


def test_the_search_finds_the_largest_size_that_fits() -> None:
    k, built = bj._search(lambda n: "x" * n, 100, 12)
    assert (k, built) == (10, "x" * 10)  # '"xxxxxxxxxx"' is 12 characters
    assert bj._search(lambda n: "x" * n, 100, 2) == (0, "")  # only the smallest fits
    assert bj._search(lambda n: "x" * (n + 50), 10, 5) == (-1, None)


def test_the_longest_leaf_and_the_widest_container() -> None:
    value = {"a": ["xx", Cut("yyyy", 99), {"b": "z" * 7}], "c": 5}
    assert bj._longest_leaf(value) == 7
    assert bj._longest_leaf([]) == 0 and bj._longest_leaf({}) == 0 and bj._longest_leaf(3) == 0
    assert bj._longest_leaf([Cut("yyyy", 99), "zz"]) == 4
    assert bj._widest([], 0, 0) == 0 and bj._widest({}, 0, 0) == 0
    assert bj._widest(value, 0, 0) == 3
    assert bj._widest(value, 1, 0) == 3
    assert bj._widest(value, 2, 0) == 1
    assert bj._widest(value, 3, 0) == 0
    assert bj._marker_len(10) == len(TRUNCATION_MARKER.format(dropped=10, total=10))


def test_recut_shortens_only_what_a_marker_makes_shorter() -> None:
    assert bj._recut("x" * 100, 3, None, 0, 0) == Cut("xxx", 100)
    assert bj._recut(Cut("y" * 100, 900), 3, None, 0, 0) == Cut("yyy", 900)
    assert bj._recut("abcdef", 3, None, 0, 0) == "abcdef"  # a marker is longer than what it saves
    short = "x" * 20
    assert bj._recut(short, 15, None, 0, 0) == short  # the marker would make it longer
    assert bj._recut([1, 2, 3], 5, 1, 0, 0) == [1, OMITTED_ITEMS.format(count=2)]
    assert bj._recut([1, 2, 3], 5, 1, 1, 0) == [1, 2, 3]  # above prune_from: whole
    assert bj._recut({"a": 1, "b": 2}, 5, 1, 0, 0) == {"a": 1, OMITTED_KEY: OMITTED_ITEMS.format(count=1)}
    assert bj._recut({"a": 1}, 5, 1, 0, 0) == {"a": 1}
    assert bj._recut(7, 0, 0, 0, 0) == 7
    assert bj._recut([1, 2], 5, 2, 0, 0) == [1, 2]  # as many items as allowed: none dropped
    exact = 100 - bj._marker_len(100)
    assert bj._recut("x" * 100, exact, None, 0, 0) == "x" * 100  # a marker saving nothing: whole
    nested = [[[1, 2, 3], [4, 5, 6]]]
    assert bj._recut(nested, 5, 1, 2, 0) == [[[1, OMITTED_ITEMS.format(count=2)], [4, OMITTED_ITEMS.format(count=2)]]]
    keyed = {"top": {"a": {"x": 1, "y": 2}, "b": {"x": 3, "y": 4}}}
    assert bj._recut(keyed, 5, 1, 2, 0) == {
        "top": {
            "a": {"x": 1, OMITTED_KEY: OMITTED_ITEMS.format(count=1)},
            "b": {"x": 3, OMITTED_KEY: OMITTED_ITEMS.format(count=1)},
        }
    }
