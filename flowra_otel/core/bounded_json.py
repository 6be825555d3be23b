"""Any Python value -> a JSON tree that is safe to export and fits a size budget.

Why a tree and not text: content attributes must stay valid JSON whatever the size and whatever
the redaction does. So scrubbing is applied to each **leaf** (strings, dict keys, the text of
numbers) and the size budget **inside** the value (a long leaf is shortened with a visible marker,
a container loses its last items with a marker item), and only then is the tree serialised.

``Walk.node`` builds the tree in one pass whose cost is bounded by the budget, not by the input:
a leaf longer than the budget is cut *before* it is scrubbed (with a margin of ``SCRUB_MARGIN``
characters, so a secret up to that long that straddles the cut is still seen whole), a container
stops after as many items as the budget could ever hold, depth is capped, cycles become a marker.
``fit`` then shrinks a tree to an exact budget (the longest leaves first, then the widest
containers), working on the already-scrubbed tree, so nothing is scrubbed twice.
"""

from __future__ import annotations

import base64
import codecs
import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from .safety import utf8_safe
from .text_encoding import bom_codecs

TRUNCATION_MARKER: Final = "…[flowra_otel: truncated {dropped} of {total} chars]"
"""Appended to a shortened string leaf (``dropped`` and ``total`` count characters)."""
REDACTION_FAILED: Final = "[flowra_otel: redaction failed; content withheld]"
"""Put in place of a leaf when ``redact=`` raised on it: without a working redactor nothing is shown."""
OMITTED_ITEMS: Final = "…[flowra_otel: {count} more items omitted]"
"""Last item of a list (or value of ``OMITTED_KEY`` in a dict) that lost items to the budget."""
OMITTED_KEY: Final = "flowra_otel.omitted"
TOO_DEEP: Final = "…[flowra_otel: nested deeper than {depth} levels]"
CIRCULAR: Final = "…[flowra_otel: circular reference to a {kind}]"
OVER_BUDGET: Final = "…[flowra_otel: omitted, over max_content_length]"

MAX_DEPTH: Final = 64
"""Containers nested deeper than this become a marker: far below the interpreter's recursion
limit (the encoder recurses too), far above any real tool input."""
SCRUB_MARGIN: Final = 8_192
"""Characters beyond the cut that are scrubbed with the kept part, so a secret straddling the cut
is matched whole (and its visible head replaced) rather than shown in part: any secret up to this
long that starts in the kept part ends inside the scrubbed window. 8 192 covers a PEM private key
(an RSA 4096 one is about 3 300 characters; the margin was 256 before, and a key straddling the
cut reached ``redact=`` without its END line and was shown in part). A constant, so a long leaf
still costs its budget plus this, never its own length."""
_WORK_SLACK: Final = 256
"""``stop_at``'s allowance beyond ``WORK_FACTOR`` budgets (a few short leaves past the limit)."""
USEFUL_LEAF: Final = 64
"""Below this many characters per leaf, ``fit`` prefers showing fewer items whole."""
MEMO_FROM: Final = 4_096
"""Strings at least this long are remembered by identity for the run (``MEMO_SIZE`` of them)."""
MEMO_SIZE: Final = 32
_MAX_WINDOWS: Final = 8
"""A leaf cut to the budget is scrubbed over at most this many budgets (plus margins) of its head."""
WORK_FACTOR: Final = 4
"""A tree stops growing after ``WORK_FACTOR * budget`` characters: ``fit`` only ever removes."""

_UTF8_DECODER: Final = codecs.getincrementaldecoder("utf-8")


class Blob(bytes):
    """Media data (an image, a document) inside a structured value: recorded as base64, like the
    ``blob`` parts of a message, and not scrubbed (binary media is not text)."""

    __slots__ = ()


class TextBlob(Blob):
    """Media whose bytes are text (``text/*``, JSON, XML, YAML, CSV: ``textual_media``): recorded as
    base64 too, but of the text scrubbed like any other leaf."""

    __slots__ = ()


_TEXT_SUBTYPES: Final = frozenset({"json", "xml", "yaml", "x-yaml", "csv", "javascript", "x-ndjson", "sql"})


def textual_media(media_type: object) -> bool:
    """Whether a MIME type names text (``text/plain``, ``application/json``, ``…+xml``): its bytes
    are content to scrub, not opaque media."""
    if not isinstance(media_type, str):
        return False
    kind, _, subtype = media_type.partition(";")[0].strip().lower().partition("/")
    if kind == "text":
        return True
    return kind == "application" and (subtype in _TEXT_SUBTYPES or subtype.endswith(("+json", "+xml", "+yaml")))


def _base64_of(value: str | Cut, total: int) -> str | Cut:
    """A scrubbed text (or the kept part of a cut one) as a blob part's base64 of its UTF-8;
    ``total``: the base64 length of the whole original."""
    if isinstance(value, Cut):
        return Cut(base64.b64encode(value.kept.encode("utf-8")).decode("ascii"), total)
    return base64.b64encode(value.encode("utf-8")).decode("ascii")


type Scrub = Callable[[str], str]
"""One leaf's cleaning (the user's ``redact=`` then the built-in patterns); may raise."""


class Cut:
    """A string leaf shortened to ``kept`` out of ``total`` characters; serialised with the marker.

    Kept apart from the marker so ``fit`` can shorten it again and still report the original size.
    """

    __slots__ = ("kept", "total")

    def __init__(self, kept: str, total: int) -> None:
        self.kept = kept
        self.total = total

    def text(self) -> str:
        return self.kept + TRUNCATION_MARKER.format(dropped=self.total - len(self.kept), total=self.total)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cut) and (self.kept, self.total) == (other.kept, other.total)

    def __hash__(self) -> int:
        return hash((self.kept, self.total))

    def __repr__(self) -> str:
        return f"Cut({len(self.kept)} of {self.total})"


def _encode_cut(obj: object) -> str:
    if isinstance(obj, Cut):
        return obj.text()
    msg = f"not a JSON tree node: {type(obj).__name__}"  # a bug in Walk: trees hold nothing else
    raise TypeError(msg)


_ENCODER: Final = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=_encode_cut, check_circular=False, allow_nan=False
)


_C_MAKE_ENCODER: Final[Any] = getattr(json.encoder, "c_make_encoder", None)  # not in typeshed
_C_ENCODE: Final[Any] = (
    None
    if _C_MAKE_ENCODER is None
    else _C_MAKE_ENCODER(
        None,  # no circularity markers (check_circular=False: ``Walk`` trees have no cycles)
        _encode_cut,
        json.encoder.encode_basestring,  # ensure_ascii=False
        None,  # no indent
        ":",
        ",",
        False,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan
    )
)
"""``_ENCODER``'s C encoder, made once: ``JSONEncoder.encode`` builds it again on every call."""


def dumps_tree(tree: Any) -> str:
    """Compact JSON of a tree built by ``Walk`` (UTF-8 text as is, no NaN, cuts with markers)."""
    if _C_ENCODE is None:  # an interpreter without json's C accelerator
        return _ENCODER.encode(tree)
    return "".join(_C_ENCODE(tree, 0))


def leaf_text(value: str | Cut) -> str:
    return value.text() if isinstance(value, Cut) else value


class Walk:
    """One rendering pass: value -> tree, scrubbing each leaf, bounded by ``cap``.

    ``cap`` is the character budget of the whole attribute (None: unbounded); a single leaf keeps
    at most ``cap`` characters. ``failure`` holds the first exception ``scrub`` raised (the leaf
    became ``REDACTION_FAILED``); the caller logs it once per attribute.
    """

    __slots__ = ("_path", "cap", "failure", "memo", "scrub", "spent", "stop_at")

    def __init__(self, scrub: Scrub | None, cap: int | None, memo: dict[int, Any] | None = None) -> None:
        self.scrub = scrub
        self.memo = memo
        self.cap = cap
        self.failure: BaseException | None = None
        self.spent = 0
        self.stop_at = None if cap is None else WORK_FACTOR * cap + _WORK_SLACK
        self._path: set[int] = set()

    # ------------------------------------------------------------------ leaves
    def clean(self, text: str) -> str:
        """Scrub one piece of text; a raising scrubber withholds it."""
        if self.scrub is not None:
            try:
                text = self.scrub(text)
            except Exception as exc:
                if self.failure is None:
                    self.failure = exc
                return REDACTION_FAILED
        return utf8_safe(text)

    def string(self, text: str) -> str | Cut:
        total = len(text)
        if self.scrub is None and total < MEMO_FROM and (self.cap is None or total <= self.cap):
            # The common leaf, inline: nothing to scrub, short, within the budget (``_string``'s
            # first case without its calls); lone surrogates are possible only in non-ASCII text.
            if not text.isascii():
                text = utf8_safe(text)
            self.spent += total
            return text
        memo = self.memo
        if memo is None or total < MEMO_FROM:
            return self._string(text, total)
        hit = memo.get(id(text))
        if hit is not None and hit[0] is text:  # the same big str object again (a result, then its history copy)
            self.spent += len(leaf_text(hit[1]))
            return hit[1]  # type: ignore[no-any-return]
        value = self._string(text, total)
        if len(memo) >= MEMO_SIZE:
            del memo[next(iter(memo))]
        memo[id(text)] = (text, value)  # holds the str: its id cannot be reused while cached
        return value

    def _string(self, text: str, total: int) -> str | Cut:
        """``text`` (``total`` characters long, or the head of a value that long) scrubbed and
        bounded. Cut first, then scrub: a 10 MB leaf costs what its kept part costs."""
        cap = self.cap
        if cap is None or (total <= cap and len(text) >= total):
            cleaned = self.clean(text)
            self.spent += len(cleaned)
            return cleaned
        # Scrubbed over a margin beyond the cut, so a secret straddling the cut is matched whole.
        # What the scrubber made of the margin's end is never kept: a secret that straddles the
        # end of the scrubbed window is still raw there (and a scrubber that shortens the text
        # would otherwise pull it inside the cut): the window grows instead, a few times at most.
        window = cap + SCRUB_MARGIN
        while True:
            cleaned = self.clean(text[:window])
            if cleaned is REDACTION_FAILED:
                self.spent += len(cleaned)
                return cleaned
            whole = window >= len(text) and len(text) >= total  # the whole value was scrubbed
            if whole:
                kept = cleaned
                break
            if len(cleaned) >= cap + SCRUB_MARGIN or window >= _MAX_WINDOWS * (cap + SCRUB_MARGIN):
                kept = cleaned[: max(0, len(cleaned) - SCRUB_MARGIN)]
                break
            window *= 2
        if whole and len(kept) <= cap:
            self.spent += len(kept)
            return kept
        self.spent += cap
        return Cut(kept[:cap], max(total, len(cleaned)))

    def key(self, key: object) -> str:
        """Dict keys are content too (``{"alice@example.com": 3}``): scrubbed, and cut when huge."""
        if type(key) is str:
            value = self.string(key)
            return value if type(value) is str else leaf_text(value)
        if isinstance(key, str):
            text = key
        elif key is None or isinstance(key, bool):
            text = json.dumps(key)
        elif isinstance(key, int | float):
            text = _number_text(key)
        else:
            text = str(key) if _has_own_str(key) else f"<{type(key).__qualname__}>"
        return leaf_text(self.string(text))

    def number(self, value: int | float) -> int | float | str | Cut:
        """A number whose text a scrubber changes (a card number stored as an int) becomes the
        scrubbed string; other numbers stay numbers."""
        if isinstance(value, float) and not math.isfinite(value):
            return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        text = _number_text(value)
        self.spent += len(text)
        if self.scrub is None:
            return value if text[:1] != "<" else text
        cleaned = self.clean(text)
        if cleaned == text and text[:1] != "<":
            return value
        return cleaned

    def data(self, data: bytes, *, media: bool = False) -> str | Cut:
        """Bytes that are not media (a tool's raw output, a key read from a file) are a leaf like
        any other, scrubbed: UTF-8 text is recorded as that text, and so is text in UTF-16 or
        UTF-32 with its byte order mark (``_marked_text``, the BOM left out); anything else as base64, whose
        text goes through the scrubber too, unless the scrubber finds something in the bytes read
        as text (each invalid byte a U+FFFD): then that text is recorded, scrubbed, since a key in
        a file with one stray byte would otherwise leave in base64, where no pattern sees it.
        Decoded or encoded only as far as the budget keeps.

        ``media``: the data of a text document that is not UTF-8 (``media``): that scrubbed text
        goes out as base64 too, of its UTF-8 (a UTF-16 document's too: one encoding for every
        scrubbed text a backend decodes), since a blob part's content is base64 whatever it holds
        (recorded as plain text, a backend decoding the part got garbage or an error)."""
        size = len(data)
        chars = None if self.cap is None else _MAX_WINDOWS * (self.cap + SCRUB_MARGIN)  # scrubbed at most
        whole = chars is None or size <= 4 * chars  # at most 4 bytes a character
        try:
            if whole:
                decoded = data.decode("utf-8")
                return self._string(decoded, len(decoded))
            assert chars is not None
            head = _UTF8_DECODER(errors="strict").decode(data[: 4 * chars], final=False)
        except UnicodeDecodeError:
            total = 4 * ((size + 2) // 3)
            marked = self._marked_text(data, chars)
            if marked is not None:  # UTF-16 or UTF-32 with its byte order mark: text too
                value = self._string(*marked)
                return _base64_of(value, total) if media else value
            chunk = data if chars is None or total <= chars else data[: chars // 4 * 3 + 3]
            if self.scrub is not None:
                text = chunk.decode("utf-8", "replace")
                if self.clean(text) != utf8_safe(text):  # the scrubber takes something out of it
                    value = self._string(text, len(text) if len(chunk) == size else size)  # read whole: its characters
                    return _base64_of(value, total) if media else value
            return self._string(base64.b64encode(chunk).decode("ascii"), total)
        return self._string(head, size)  # ``size`` bytes: at most that many characters

    @staticmethod
    def _marked_text(data: bytes, chars: int | None) -> tuple[str, int] | None:
        """(text, ``_string``'s total) of bytes that start with a UTF-16 or UTF-32 byte order mark
        and decode strictly in it (the BOM itself left out), decoding at most ``chars``
        characters' worth; None for any other bytes. Called for bytes that are not UTF-8 only (a
        UTF-8 BOM's reading fails here too). The rule of ``text_encoding``: a document saved as
        UTF-16 holds a NUL beside every ASCII character, so no pattern saw a key in it read as UTF-8."""
        for bom, codec in bom_codecs(data):
            body = data[len(bom) :]
            try:
                if chars is None or len(body) <= 4 * chars:  # at most 4 bytes a character
                    text = body.decode(codec)
                    return text, len(text)
                head = codecs.getincrementaldecoder(codec)(errors="strict").decode(body[: 4 * chars], final=False)
            except UnicodeDecodeError:
                continue  # FF FE 00 00 that is no UTF-32: UTF-16 LE beginning with a NUL, maybe
            return head, len(body)  # at most that many characters
        return None

    def media(self, data: bytes, *, textual: bool) -> str | Cut:
        """A media part's data as base64: of the text, scrubbed, when the media is text
        (``textual_media``) and decodes as UTF-8; a text document that does not (UTF-16 or UTF-32
        with a byte order mark, Windows-1252, a stray byte) as ``data`` treats bytes, always
        base64; other media as the bytes are (``binary``)."""
        if not textual or self.scrub is None:
            return self.binary(data)
        size = len(data)
        chars = None if self.cap is None else _MAX_WINDOWS * (self.cap + SCRUB_MARGIN)
        whole = chars is None or size <= 4 * chars
        try:
            if whole:
                text = data.decode("utf-8")
            else:
                assert chars is not None
                text = _UTF8_DECODER(errors="strict").decode(data[: 4 * chars], final=False)
        except UnicodeDecodeError:  # not UTF-8: base64 of the bytes, or of their text scrubbed
            return self.data(data, media=True)
        value = self._string(text, len(text) if whole else size)
        return _base64_of(value, 4 * ((size + 2) // 3))

    def binary(self, data: bytes) -> str | Cut:
        """Base64 of media data (``Blob``), encoding only what the budget keeps (not scrubbed:
        an image is not text)."""
        total = 4 * ((len(data) + 2) // 3)
        cap = self.cap
        if cap is None or total <= cap:
            self.spent += total
            return base64.b64encode(data).decode("ascii")
        self.spent += cap
        return Cut(base64.b64encode(data[: cap // 4 * 3]).decode("ascii"), total)

    # ------------------------------------------------------------------ any value
    def node(self, value: Any, depth: int = 0) -> Any:
        """Any value -> tree node. Never raises for odd values: unknown objects become a type tag."""
        if self.stop_at is not None and self.spent > self.stop_at:
            return OVER_BUDGET
        cls = type(value)
        if cls is str:
            return self.string(value)
        if cls is dict:
            return self._container(value, depth, "dict")
        if isinstance(value, str):
            return self.string(str(value))
        if value is None or isinstance(value, bool):
            self.spent += 5
            return value
        if isinstance(value, int | float):
            return self.number(value)
        if isinstance(value, bytes | bytearray | memoryview):
            if isinstance(value, Blob):
                return self.media(value, textual=isinstance(value, TextBlob))
            return self.data(value if type(value) is bytes else bytes(value))
        if isinstance(value, Mapping):
            return self._container(value, depth, "dict")
        if isinstance(value, list | tuple | set | frozenset):
            return self._container(value, depth, type(value).__name__)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._container(value, depth, type(value).__qualname__)
        return f"<{type(value).__qualname__}>"

    def _container(self, value: Any, depth: int, kind: str) -> Any:
        if depth >= MAX_DEPTH:
            return TOO_DEEP.format(depth=MAX_DEPTH)
        ident = id(value)
        if ident in self._path:
            return CIRCULAR.format(kind=kind)
        self._path.add(ident)
        try:
            if type(value) is dict or isinstance(value, Mapping):
                return self._mapping(value.items(), depth)
            if dataclasses.is_dataclass(value):
                return self._mapping(((f.name, getattr(value, f.name)) for f in dataclasses.fields(value)), depth)
            return self._sequence(value, depth)
        finally:
            self._path.discard(ident)

    def _room(self, count: int) -> bool:
        """Whether one more item fits: no budget can show more items than it has characters."""
        if self.cap is not None and count >= self.cap:
            return False
        return self.stop_at is None or self.spent <= self.stop_at

    def _mapping(self, items: Any, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        omitted = 0
        for k, v in items:
            if not self._room(len(out)):
                omitted += 1
                continue
            name = self.key(k)
            if name in out:  # two keys scrubbed (or stringified) to the same text: keep both
                n = 2
                while f"{name} #{n}" in out:
                    n += 1
                name = f"{name} #{n}"
            self.spent += len(name) + 4
            out[name] = self.node(v, depth + 1)
        if omitted:
            out[OMITTED_KEY] = OMITTED_ITEMS.format(count=omitted)
        return out

    def _sequence(self, items: Any, depth: int) -> list[Any]:
        out: list[Any] = []
        omitted = 0
        for item in items:
            if not self._room(len(out)):
                omitted += 1
                continue
            self.spent += 1
            out.append(self.node(item, depth + 1))
        if omitted:
            out.append(OMITTED_ITEMS.format(count=omitted))
        return out


def _number_text(value: int | float) -> str:
    try:
        return repr(value) if isinstance(value, float) else str(int(value))
    except ValueError:  # an int beyond sys.get_int_max_str_digits()
        return f"<int of about {int(int(value).bit_length() * 0.30103)} digits>"


def _has_own_str(obj: object) -> bool:
    """Whether ``str(obj)`` says something of its own (not ``<object at 0x…>``)."""
    return type(obj).__str__ is not object.__str__ or type(obj).__repr__ is not object.__repr__


# ------------------------------------------------------------------------------------ fit
def fit(tree: Any, budget: int, *, prune_from: int) -> Any | None:
    """Shrink ``tree`` until its JSON is at most ``budget`` characters, or None if it cannot be.

    First every string leaf is capped at the largest length that fits (short leaves stay whole,
    the longest lose most). If that leaves less than ``USEFUL_LEAF`` characters per leaf (many
    mid-sized leaves), containers at depth ``prune_from`` or deeper keep only their first items,
    whole, followed by a marker item; failing that, fewer items with every leaf a bare marker.
    Containers above ``prune_from`` are the caller's schema (message lists, parts): the caller
    decides what a marker looks like there, when this returns None.
    """
    if len(dumps_tree(tree)) <= budget:
        return tree
    longest = _longest_leaf(tree)
    cap, by_leaves = _search(lambda c: _recut(tree, c, None, prune_from, 0), longest, budget)
    widest = _widest(tree, prune_from, 0)
    if by_leaves is not None and (cap >= USEFUL_LEAF or widest == 0):
        return by_leaves
    if widest == 0:
        return None
    _, by_items = _search(lambda n: _recut(tree, longest, n, prune_from, 0), widest - 1, budget)
    if by_items is not None:
        return by_items
    if by_leaves is not None:
        return by_leaves
    return _search(lambda n: _recut(tree, 0, n, prune_from, 0), widest - 1, budget)[1]


def dumps_fitted(tree: Any, budget: int | None, *, prune_from: int, otherwise: Callable[[], Any]) -> str:
    """``dumps_tree(fit(tree, budget, prune_from=...))``, or of ``otherwise()`` when it cannot fit,
    with a tree that fits already (the usual case) encoded once rather than twice (``fit``'s own
    first test encodes it). ``budget`` None: no bound."""
    text = dumps_tree(tree)
    if budget is None or len(text) <= budget:
        return text
    fitted = fit(tree, budget, prune_from=prune_from)
    return dumps_tree(fitted if fitted is not None else otherwise())


def _search(build: Callable[[int], Any], high: int, budget: int) -> tuple[int, Any | None]:
    """Largest ``k`` in ``[0, high]`` whose ``build(k)`` fits (size grows with ``k``)."""
    low, best, best_k = 0, None, -1
    while low <= high:
        mid = (low + high) // 2
        candidate = build(mid)
        if len(dumps_tree(candidate)) <= budget:
            best, best_k, low = candidate, mid, mid + 1
        else:
            high = mid - 1
    return best_k, best


def _marker_len(total: int) -> int:
    return len(TRUNCATION_MARKER.format(dropped=total, total=total))


def _recut(node: Any, cap: int, items: int | None, prune_from: int, depth: int) -> Any:
    if isinstance(node, str | Cut):
        text = node.kept if isinstance(node, Cut) else node
        total = node.total if isinstance(node, Cut) else len(node)
        if len(text) > cap and cap + _marker_len(total) < len(leaf_text(node)):
            return Cut(text[:cap], total)
        return node
    if isinstance(node, dict):
        pairs = list(node.items())
        if items is not None and depth >= prune_from and len(pairs) > items:
            dropped = len(pairs) - items
            pairs = [*pairs[:items], (OMITTED_KEY, OMITTED_ITEMS.format(count=dropped))]
        return {k: _recut(v, cap, items, prune_from, depth + 1) for k, v in pairs}
    if isinstance(node, list):
        seq = node
        if items is not None and depth >= prune_from and len(seq) > items:
            seq = [*seq[:items], OMITTED_ITEMS.format(count=len(seq) - items)]
        return [_recut(v, cap, items, prune_from, depth + 1) for v in seq]
    return node


def _longest_leaf(node: Any) -> int:
    if isinstance(node, str):
        return len(node)
    if isinstance(node, Cut):
        return len(node.kept)
    if isinstance(node, dict):
        return max((_longest_leaf(v) for v in node.values()), default=0)
    if isinstance(node, list):
        return max((_longest_leaf(v) for v in node), default=0)
    return 0


def _widest(node: Any, prune_from: int, depth: int) -> int:
    if isinstance(node, dict | list):
        own = len(node) if depth >= prune_from else 0
        children = node.values() if isinstance(node, dict) else node
        return max(own, max((_widest(v, prune_from, depth + 1) for v in children), default=0))
    return 0
