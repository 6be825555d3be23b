"""Find a secret in a span's text however the text encodes it: the one scanner behind
``flowra_otel.testing.find_leaks`` and ``python -m flowra_otel audit``.

Why this exists: content attributes are JSON (``gen_ai.input.messages``, tool results that are
JSON documents inside JSON strings...), so a secret with a ``"``, a ``\\``, a newline (a PEM key)
or a non-ASCII character is never present as such in the raw text, only escaped. Decoding the
text as JSON finds it -- unless the text is not valid JSON, which is exactly what a truncated
attribute is (``…[flowra_otel: truncated …]`` cuts the document). A scanner that only decodes
what parses then reports "not found" for a secret that is right there. So every text is searched
in several *views*, and a secret in any of them counts:

1. the raw text, as exported;
2. when it parses as JSON: every string in the decoded document (keys included), each of them
   again in all its views (a JSON document inside a JSON string is decoded layer by layer);
3. when it does not parse but holds backslash escapes: the text with its JSON escapes undone
   (``\\"``, ``\\\\``, ``\\n``, ``\\uXXXX`` with surrogate pairs...), again in all its views, so a
   doubly escaped secret in a cut document is found too;
4. otherwise, each run of base64 in it (``BASE64_FROM`` characters or more, standard or URL-safe
   alphabet, read from its start; a cut run up to its last whole group) whose bytes are text, again
   in all its views: a ``blob`` part (a text document, bytes) carries base64 of what it holds, and
   text is told as the audit tells its input files (``text_input.decode_text``: a byte order mark
   names UTF-8, UTF-16 or UTF-32; NULs at every other byte, UTF-16; else strict UTF-8). A document
   a tool read in UTF-16 holds a NUL beside every ASCII character, so no reading as UTF-8 shows a
   key in it. A run cut inside a character (the budget's cut) loses that character only.

Layers are bounded (``MAX_LAYERS``) so a hostile value cannot make the scan recurse without end.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from .text_input import UnreadableTextError, decode_text

__all__ = ["BASE64_FROM", "MAX_LAYERS", "Finding", "base64_texts", "json_unescape", "scan_text", "text_views"]

MAX_LAYERS: Final = 8
"""How many encoding layers (JSON in a JSON string in ...) are undone."""
BASE64_FROM: Final = 16
"""Characters a base64 run needs before it is decoded (12 bytes: a shorter run is a word or an id
more often than anything encoded)."""
_BASE64_RUN: Final = re.compile(rf"[A-Za-z0-9+/_-]{{{BASE64_FROM},}}")
"""A run of base64 characters, without its padding (put back as its length needs)."""

_ESCAPE: Final = re.compile(r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})|\\(.)")
_SIMPLE: Final = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """One secret or pattern found in one text."""

    kind: str
    """``given_secret`` for an exact string, else the pattern's name."""
    index: int
    """Position of the secret in ``secrets``, or of the pattern in ``patterns``."""
    match: str
    """What matched (the secret itself, or the pattern's match): mask it before printing."""
    decoded: bool
    """True when it was found only after undoing JSON encoding (not in the raw text)."""


def json_unescape(text: str) -> str:
    """``text`` with JSON string escapes undone; anything that is not a valid escape is kept.

    Meant for text that is not (or no longer, once cut) a valid JSON document.
    """

    def replace(match: re.Match[str]) -> str:
        high, low, single, simple = match.groups()
        if high is not None:
            return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
        if single is not None:
            return chr(int(single, 16))
        return _SIMPLE.get(simple, match.group(0))

    return _ESCAPE.sub(replace, text) if "\\" in text else text


def text_views(text: str) -> Iterator[tuple[str, bool]]:
    """``(view, decoded)`` for ``text`` itself (``decoded`` False) and each text hidden in it
    by JSON encoding (see the module docstring); every distinct view once."""
    yield text, False
    seen = {text}
    for view in _hidden(text, 0):
        if view not in seen:
            seen.add(view)
            yield view, True


def _hidden(text: str, layer: int) -> Iterator[str]:
    if layer >= MAX_LAYERS:
        return
    stripped = text.strip()
    if stripped[:1] in ("{", "[", '"'):
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):
            pass
        else:
            for string in _json_strings(value):
                yield string
                yield from _hidden(string, layer + 1)
            return
    unescaped = json_unescape(text)
    if unescaped != text:
        yield unescaped
        yield from _hidden(unescaped, layer + 1)
        return
    for decoded in base64_texts(text):
        yield decoded
        yield from _hidden(decoded, layer + 1)


def base64_texts(text: str) -> Iterator[str]:
    """The text each base64 run in ``text`` encodes, for the runs whose bytes are text (see the
    module docstring); a run that decodes to no text (an image, an id, a word) gives nothing."""
    for match in _BASE64_RUN.finditer(text):
        run = match.group(0)
        run = run[: len(run) - 1] if len(run) % 4 == 1 else run  # a run cut by the budget ends anywhere
        try:  # "-" and "_" read as "+" and "/": either alphabet (a mix decodes to bytes no text is)
            data = base64.b64decode(run + "=" * (-len(run) % 4), altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):  # cannot happen with the run's characters; never an error
            continue
        for end in range(len(data), max(len(data) - 4, 0), -1):  # a cut inside a character: without it
            try:
                yield decode_text(data[:end])
            except UnreadableTextError:
                continue
            break


def _json_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _json_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_strings(item)


def scan_text(
    text: str, *, secrets: Sequence[str] = (), patterns: Sequence[tuple[str, re.Pattern[str]]] = ()
) -> list[Finding]:
    """Each of ``secrets`` (substring match) and ``patterns`` (``(name, compiled regex)``) found
    anywhere in ``text``, in any view, at most once each; ``decoded`` says whether the raw text
    alone would have shown it. Empty secrets are the caller's error (they would match everything)."""
    found: dict[tuple[str, int], Finding] = {}
    wanted = len(secrets) + len(patterns)
    for view, decoded in text_views(text):
        for index, secret in enumerate(secrets):
            if ("given_secret", index) not in found and secret in view:
                found["given_secret", index] = Finding("given_secret", index, secret, decoded)
        for index, (name, pattern) in enumerate(patterns):
            if (name, index) in found:
                continue
            match = pattern.search(view)
            if match:
                found[name, index] = Finding(name, index, match.group(0), decoded)
        if len(found) == wanted:
            break
    return sorted(found.values(), key=lambda f: (f.kind != "given_secret", f.index))
