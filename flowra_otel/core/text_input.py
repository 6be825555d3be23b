"""Every file the audit reads, read as the text it is, or refused, naming what it looks like.

Why: an audit that reads a file wrongly reports "clean". A secrets file saved as UTF-16 LE
without a byte order mark is valid UTF-8 (a NUL after every character): read as UTF-8, each
secret is ``"s\\x00e\\x00c\\x00..."``, matches nothing, and the verdict is ``result: clean`` with
the secret in a span. So a file is decoded by what its bytes are, not by what we hope they are:

* a byte order mark says it (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE), and is never part of the text;
* without one, NUL bytes give UTF-16 and UTF-32 away: NULs at every other byte, on one side, are
  UTF-16 (LE when the NULs follow the characters, BE when they lead), two NULs out of every four
  UTF-32 (likewise); the file is decoded as that, strictly;
* anything else must be strict UTF-8.

A file that still fails (invalid bytes, NULs in no such pattern, a NUL left after decoding) is
refused with `UnreadableTextError`, whose message names what the bytes look like, and the audit
exits 2: never a verdict from text it could not read.
"""

from __future__ import annotations

from pathlib import Path

from .text_encoding import BOMS

__all__ = ["UnreadableTextError", "decode_text", "read_text_file"]


class UnreadableTextError(ValueError):
    """The bytes are not text in an encoding the audit can tell; the message says which they
    look like and how to fix the file."""


def read_text_file(path: str | Path) -> str:
    """The text of the file at ``path`` (`decode_text`).

    Raises ``FileNotFoundError`` and ``OSError`` as ``read_bytes`` does, `UnreadableTextError` when
    the bytes are no text it can tell."""
    return decode_text(Path(path).read_bytes())


def decode_text(data: bytes) -> str:
    """``data`` as text (see the module docstring), or `UnreadableTextError`."""
    for bom, codec, label in BOMS:
        if data.startswith(bom):
            return _strict(data[len(bom) :], codec, f"{label} (with a byte order mark)")
    if b"\x00" not in data:
        return _strict(data, "utf-8", "UTF-8")
    guess = _wide_encoding(data)
    if guess is None:
        msg = (
            "holds NUL bytes in no pattern of UTF-16 or UTF-32: not a text file "
            "(save it as UTF-8, or UTF-16 with a byte order mark)"
        )
        raise UnreadableTextError(msg)
    codec, label = guess
    return _strict(data, codec, f"{label} without a byte order mark")


def _wide_encoding(data: bytes) -> tuple[str, str] | None:
    """UTF-32 / UTF-16 and byte order told by where the NULs are; None if by no such pattern."""
    if len(data) % 4 == 0:
        if not data[2::4].strip(b"\x00") and not data[3::4].strip(b"\x00"):
            return "utf-32-le", "UTF-32 LE"
        if not data[0::4].strip(b"\x00") and not data[1::4].strip(b"\x00"):
            return "utf-32-be", "UTF-32 BE"
    if len(data) % 2 == 0:
        odd_nuls, even_nuls = data[1::2].count(0), data[0::2].count(0)
        if odd_nuls and not even_nuls:
            return "utf-16-le", "UTF-16 LE"
        if even_nuls and not odd_nuls:
            return "utf-16-be", "UTF-16 BE"
    return None


def _strict(data: bytes, codec: str, label: str) -> str:
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as exc:
        msg = f"not valid {label} text (a bad byte at offset {exc.start}): save it as UTF-8"
        raise UnreadableTextError(msg) from None
    if "\x00" in text:
        msg = f"read as {label}, it still holds NUL characters: not a text file"
        raise UnreadableTextError(msg)
    return text
