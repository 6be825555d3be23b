"""Which encoding a text document's bytes are in: the one rule behind every place that reads one.

Why one rule: a tool reads documents as they were saved (a UTF-16 text file with its byte order
mark, a spreadsheet's CSV export in Windows-1252), and each place that reads such bytes as text --
``flowra_otel.redaction.map_result_text`` in a user's hook, the recorder scrubbing a text
``MediaBlock`` (``bounded_json.Walk``), the audit reading a traces file or base64 inside one
(``text_input``, ``secret_scan``) -- once read them as UTF-8 alone: a UTF-16 document then holds
no secret any pattern sees (a NUL between every two characters), and it left unscrubbed.

* ``BOMS``: the byte order marks, UTF-32 before UTF-16 (UTF-32 LE's begins with UTF-16 LE's), so
  ``bom_codecs`` offers the longer reading first and the shorter one when that does not decode;
* ``document_encoding``: a document's BOM, else its media type's ``charset=``, else UTF-8,
  whichever decodes it and encodes back to the same bytes; else Latin-1 (every byte one character).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from typing import Final

__all__ = ["BOMS", "bom_codecs", "charset", "document_encoding"]

BOMS: Final = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32 LE"),  # before UTF-16 LE: its BOM begins with UTF-16 LE's
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32 BE"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16 LE"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16 BE"),
)
"""(byte order mark, Python codec, name for messages)."""
_NO_BOM: Final = {"utf-16": "utf-16-be", "utf-32": "utf-32-be"}
"""A charset that names no byte order, on a document without a BOM: big-endian (RFC 2781 4.3)."""


def bom_codecs(data: bytes) -> Iterator[tuple[bytes, str]]:
    """(byte order mark, codec) for each BOM ``data`` starts with, the longest first: ``FF FE 00 00``
    is UTF-32 LE's BOM, or UTF-16 LE's followed by a NUL character; the caller takes the first
    whose codec decodes the rest."""
    for bom, codec, _ in BOMS:
        if data.startswith(bom):
            yield bom, codec


def document_encoding(data: bytes, media_type: object) -> tuple[bytes, str]:
    """(byte order mark, codec) of a text document: its BOM, else the ``charset=`` of its media
    type, else UTF-8, whichever decodes it and encodes back to the same bytes; else Latin-1, which
    maps every byte to one character and back, so the ASCII a secret is usually made of (card
    numbers, keys, e-mail addresses) is found in any 8-bit encoding. A BOM whose codec does not
    decode the rest (UTF-16 cut at an odd byte) names nothing: the next rule is tried."""
    for bom, codec in bom_codecs(data):
        if _round_trips(data[len(bom) :], codec):
            return bom, codec
    candidates = ["utf-8"]
    named = charset(media_type)
    if named is not None:
        candidates.insert(0, _NO_BOM.get(named, named))
    for codec in candidates:
        if _round_trips(data, codec):
            return b"", codec
    return b"", "latin-1"


def _round_trips(data: bytes, codec: str) -> bool:
    try:
        return data.decode(codec).encode(codec) == data
    except (LookupError, UnicodeError, ValueError):
        return False


def charset(media_type: object) -> str | None:
    """The ``charset`` parameter of a media type, lower-cased, as Python names it (None: none, or
    one Python does not know)."""
    if not isinstance(media_type, str):
        return None
    for parameter in media_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            try:
                return codecs.lookup(value.strip().strip('"').strip()).name
            except LookupError:
                return None
    return None
