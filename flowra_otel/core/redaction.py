"""The redaction ledger: which hook changed a tool's arguments or result, never what it was.

When a handler replaces ``BeforeToolCallEvent.tool_use`` or ``AfterToolCallEvent.result``, the
``execute_tool`` span gets, per changed field (``arguments`` or ``result``):

* ``flowra.redaction.applied = true`` and ``flowra.redaction.fields`` (e.g. ``["result"]``);
* ``flowra.redaction.<field>.handlers``: qualified names of the handlers that changed it, in order;
* ``flowra.redaction.<field>.original_length`` / ``.final_length``: characters of the canonical form;
* ``flowra.redaction.<field>.original_hmac_sha256``: only when the user configured a key,
  HMAC-SHA256(key, canonical form of the original), hex, so the original can later be proven
  without being stored.

Canonical form: the result is ``ToolResultBlock.content`` as is when it is text (flowra 0.0.3 -
0.0.8 and 0.0.47 - 0.0.85; 0.0.57 gives a list of blocks: its ``ToolResultBlock``), else the
canonical JSON of its content blocks (0.0.86 and later: each block's dataclass fields,
``json.dumps([dataclasses.asdict(b) for b in content], sort_keys=True, separators=(",", ":"),
ensure_ascii=False)``); the arguments are
``json.dumps(tool_use.input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``.
The ledger is recorded whether or not content capture is on: it holds no content.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from typing import Any, Final

from opentelemetry.util.types import AttributeValue

from .content import canonical_json
from .safety import utf8_safe

FIELD_ARGUMENTS: Final = "arguments"
FIELD_RESULT: Final = "result"

APPLIED: Final = "flowra.redaction.applied"
FIELDS: Final = "flowra.redaction.fields"


def key(field: str, leaf: str) -> str:
    return f"flowra.redaction.{field}.{leaf}"


def handler_name(handler: Any) -> str:
    """A stable, readable name for a hook handler: ``module.Qualname``."""
    target = handler
    while isinstance(target, functools.partial):
        target = target.func
    func = getattr(target, "__func__", target)  # bound method -> function
    qual = getattr(func, "__qualname__", None) or type(func).__qualname__
    module = getattr(func, "__module__", None) or type(func).__module__
    return utf8_safe(f"{module}.{qual}" if module else str(qual))


def canonical(field: str, value: Any) -> str:
    """The text a field's length and HMAC are computed over (see module docstring)."""
    if field == FIELD_RESULT:
        if isinstance(value, list):  # a result given as a list of blocks (flowra 0.0.57): its result block
            value = next((b for b in value if hasattr(b, "tool_use_id")), None)
        content = getattr(value, "content", "")
        return content if isinstance(content, str) else canonical_json(content)
    return canonical_json(getattr(value, "input", None))


def hmac_hex(secret: bytes, text: str) -> str:
    return hmac.new(secret, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


class FieldChange:
    """One field of one tool call, as hooks changed it during one event's emit.

    The original's canonical text is taken when the first change is seen, before any later
    handler runs: a later hook that edits the same object in place cannot make the ledger's
    length and HMAC describe the redacted value.
    """

    __slots__ = ("field", "handlers", "original", "original_text")

    def __init__(self, field: str, original: Any, original_text: str | None = None) -> None:
        self.field = field
        self.original = original
        self.original_text = canonical(field, original) if original_text is None else original_text
        self.handlers: list[str] = []

    def differs_from(self, final: Any) -> bool:
        """Whether ``final`` is not the original (by canonical text: an edit that was undone, or a
        replacement by an equal value, leaves no ledger entry)."""
        return canonical(self.field, final) != self.original_text

    def attributes(self, final: Any, secret: bytes | None) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {
            key(self.field, "handlers"): list(self.handlers),
            key(self.field, "original_length"): len(self.original_text),
            key(self.field, "final_length"): len(canonical(self.field, final)),
        }
        if secret is not None:
            attrs[key(self.field, "original_hmac_sha256")] = hmac_hex(secret, self.original_text)
        return attrs
