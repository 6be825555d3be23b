"""Helpers for your redaction hooks and for auditors, the same on every supported flowra release.

    from flowra_otel.redaction import map_result_text, result_digest

    def redact_result(event):                       # an AfterToolCallEvent handler
        event.data.result = map_result_text(event.data.result, scrub)

    result_digest("Sunny in Oslo", KEY) == span.attributes["flowra.redaction.result.original_hmac_sha256"]

Why they exist: a tool's result does not have one shape across flowra's releases.
``ToolResultBlock.content`` is text on 0.0.3 - 0.0.8 and 0.0.47 - 0.0.85 and a list of content blocks
(``TextBlock``, ``MediaBlock``) from 0.0.86; on 0.0.57 ``AfterToolCallEvent.result`` is a list holding
the ``ToolResultBlock`` and whatever other hooks appended. A hook written for one shape breaks on
another (``re.sub`` on a list raises ``TypeError`` and fails the agent's run), and the ledger's HMAC is
over a canonical form that follows the shape (the JSON of the blocks from 0.0.86), so an auditor
holding the original text cannot recompute it without knowing that form. These two do it for you.

``map_result_text`` is duck-typed (it reads ``content``, ``text``, ``data`` and ``media_type``, the
fields every release's blocks have) and never imports flowra; ``result_digest`` given plain text
asks the installed flowra's adapter what a tool's text answer becomes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from . import adapters
from .core.bounded_json import textual_media
from .core.content import canonical_json
from .core.redaction import FIELD_ARGUMENTS, FIELD_RESULT, canonical, hmac_hex
from .core.text_encoding import document_encoding

__all__ = ["arguments_digest", "map_result_text", "result_digest"]


def map_result_text(result: Any, change: Callable[[str], str]) -> Any:
    """``result`` with ``change`` applied to every text in it, in the same shape.

    ``result`` is what ``AfterToolCallEvent.result`` holds on the installed release: a
    ``ToolResultBlock`` whose ``content`` is text or a list of content blocks, 0.0.57's list of blocks,
    or a plain string or list of content blocks. Every ``TextBlock`` is changed, and the bytes of a
    ``MediaBlock`` whose type is text (``text/*``, JSON, XML, YAML, CSV: a document a tool read), read
    in the encoding its byte order mark or ``charset=`` names, else UTF-8, else Latin-1 (every byte
    one character: the ASCII of a secret is found in any 8-bit encoding), and written back in it
    (a character it cannot hold becomes ``?``); images and other media are kept as they are, as is
    anything else. Blocks
    are replaced (``dataclasses.replace``), never edited in place, so the redaction ledger sees the
    change.

    Raises:
        TypeError: ``change`` returned something that is not a ``str`` (the hook's own bug, shown
            where it happens rather than as a malformed tool result later).
    """
    if isinstance(result, str):
        return _changed(change, result)
    if isinstance(result, list | tuple):
        return type(result)(map_result_text(item, change) for item in result)
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        return result
    block: Any = result
    fields = {f.name for f in dataclasses.fields(block)}
    content = getattr(block, "content", None)
    if "content" in fields and isinstance(content, str | list | tuple):  # a ToolResultBlock
        return dataclasses.replace(block, content=map_result_text(content, change))
    text = getattr(block, "text", None)
    if "text" in fields and isinstance(text, str):  # a TextBlock
        return dataclasses.replace(block, text=_changed(change, text))
    data = getattr(block, "data", None)
    media_type = getattr(block, "media_type", None)
    if "data" in fields and isinstance(data, bytes) and textual_media(media_type):
        bom, codec = document_encoding(data, media_type)
        decoded = data[len(bom) :].decode(codec)  # every byte decodes in the last resort, Latin-1
        changed = _changed(change, decoded)
        if changed == decoded:
            return block  # the same bytes: no re-encoding that could differ from the original
        return dataclasses.replace(block, data=bom + changed.encode(codec, errors="replace"))
    return block


def _changed(change: Callable[[str], str], text: str) -> str:
    changed: object = change(text)
    if not isinstance(changed, str):
        msg = f"the function given to map_result_text must return a str, got {type(changed).__name__}"
        raise TypeError(msg)
    return changed


def result_digest(result: Any, key: bytes | str) -> str:
    """The ledger's ``flowra.redaction.result.original_hmac_sha256`` for ``result``: hex
    HMAC-SHA256 with ``key`` (``OtelHooks(redaction_hmac_key=...)``'s key; a ``str`` is UTF-8) over
    the canonical form the ledger uses on the installed release.

    ``result``: the text a tool answered (what its audit log, a ticket or a user holds: the
    installed flowra's adapter turns it into what a tool's text answer is there, one ``TextBlock``
    from 0.0.86), or a result as a hook saw it (a ``ToolResultBlock``, 0.0.57's list, a list of
    content blocks). Compare with ``hmac.compare_digest``.

    Raises:
        TypeError: ``key`` is not bytes or str.
        UnsupportedFlowraError: ``result`` is text and the installed flowra is not a supported one.
    """
    secret = _key_bytes(key)
    if isinstance(result, str):
        result = adapters.current().text_result_content(result)
    if isinstance(result, list | tuple) and not any(hasattr(item, "tool_use_id") for item in result):
        return hmac_hex(secret, canonical_json(list(result)))  # content blocks, without their ToolResultBlock
    if isinstance(result, str):  # the text releases: the content is the canonical form itself
        return hmac_hex(secret, result)
    return hmac_hex(secret, canonical(FIELD_RESULT, result))


def arguments_digest(arguments: Any, key: bytes | str) -> str:
    """The ledger's ``flowra.redaction.arguments.original_hmac_sha256`` for a tool call's
    ``arguments``: the input mapping the model sent (or the ``ToolUseBlock`` holding it), digested
    as the ledger does (sorted-key compact JSON)."""
    secret = _key_bytes(key)
    if isinstance(arguments, Mapping) or not hasattr(arguments, "input"):
        return hmac_hex(secret, canonical_json(dict(arguments) if isinstance(arguments, Mapping) else arguments))
    return hmac_hex(secret, canonical(FIELD_ARGUMENTS, arguments))


def _key_bytes(key: object) -> bytes:
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, bytes | bytearray):
        return bytes(key)
    msg = f"the key must be bytes or str (as OtelHooks(redaction_hmac_key=...) takes it), got {type(key).__name__}"
    raise TypeError(msg)
