"""The content code of flowra-otel 0.1.0 before the structure-aware pipeline, frozen for paired
negative checks only: it serialised first, then scrubbed and cut the *text*, which broke the JSON.
Nothing in the package uses it; tests/test_content_pipeline.py shows the validator rejects its output.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from flowra.llm import (
    AssistantMessage,
    ImageBlock,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

type Redactor = Callable[[str], str]

logger = logging.getLogger("flowra_otel")

REDACTION_FAILED: Final = "[flowra_otel: redaction failed; content withheld]"
"""Put in place of content when ``redact=`` raised: without a working redactor nothing is shown."""

TRUNCATION_MARKER: Final = "…[flowra_otel: truncated {dropped} of {total} chars]"
DEFAULT_MAX_CONTENT_LENGTH: Final = 32_768

BUILTIN_SECRET_PATTERNS: Final[Mapping[str, str]] = {
    "api_key": r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}\b|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}\b"
    r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}\b|\bAIza[0-9A-Za-z_\-]{35}\b",
    "bearer_token": r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{12,}=*",
    "email": r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b",
    "card_number": r"\b(?:\d[ \-]?){12,18}\d\b",
}
"""Common secret shapes, replaced by ``[REDACTED:<name>]`` when ``redact_secrets=True``."""


def _compile_patterns(names: Iterable[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((name, re.compile(BUILTIN_SECRET_PATTERNS[name])) for name in names)


@dataclasses.dataclass(frozen=True, slots=True)
class ContentPolicy:
    """How content is cleaned and bounded before it is set on a span."""

    redact: Redactor | None = None
    secret_patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()
    max_length: int | None = DEFAULT_MAX_CONTENT_LENGTH

    @classmethod
    def build(
        cls, *, redact: Redactor | None, redact_secrets: bool | Iterable[str], max_length: int | None
    ) -> ContentPolicy:
        if redact_secrets is True:
            patterns = _compile_patterns(BUILTIN_SECRET_PATTERNS)
        elif redact_secrets is False:
            patterns = ()
        else:
            names = list(redact_secrets)
            unknown = [n for n in names if n not in BUILTIN_SECRET_PATTERNS]
            if unknown:
                msg = f"redact_secrets: unknown pattern(s) {unknown}; known: {sorted(BUILTIN_SECRET_PATTERNS)}"
                raise ValueError(msg)
            patterns = _compile_patterns(names)
        return cls(redact=redact, secret_patterns=patterns, max_length=max_length)

    def clean(self, text: str) -> str:
        """Scrub one string: the user's callable first, then the built-in patterns."""
        if self.redact is not None:
            cleaned: object = self.redact(text)
            if not isinstance(cleaned, str):
                msg = f"redact= must return str, got {type(cleaned).__name__}"
                raise TypeError(msg)
            text = cleaned
        for name, pattern in self.secret_patterns:
            text = pattern.sub(f"[REDACTED:{name}]", text)
        return text

    def render(self, value: Any) -> str:
        """The one way content becomes an attribute value: JSON (unless already a string),
        scrubbed, then truncated with a visible marker."""
        text = value if isinstance(value, str) else dumps(value)
        try:
            text = self.clean(text)
        except Exception:
            # The user's redactor failed: it cannot vouch for this value, so it is withheld, and the
            # span still ends normally (a raise here would leave it open).
            logger.exception("flowra_otel: redact= raised; the content is withheld from the span")
            return REDACTION_FAILED
        return utf8_safe(self.truncate(text))

    def truncate(self, text: str) -> str:
        limit = self.max_length
        if limit is None or len(text) <= limit:
            return text
        return text[:limit] + TRUNCATION_MARKER.format(dropped=len(text) - limit, total=len(text))


_SURROGATES: Final = re.compile("[\ud800-\udfff]")


def utf8_safe(text: str) -> str:
    """Lone surrogates (from ``surrogateescape`` decoding, or sliced emoji) cannot be encoded as
    UTF-8, so OTLP exporters fail on them: each becomes U+FFFD, the rest is kept as is."""
    return _SURROGATES.sub("\ufffd", text) if _SURROGATES.search(text) else text


def _default(obj: Any) -> Any:
    if isinstance(obj, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(obj)).decode("ascii")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    return f"<{type(obj).__qualname__}>"


def dumps(value: Any) -> str:
    """Compact JSON that never raises on odd values (bytes -> base64, unknown -> type name)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_default)
    except (ValueError, RecursionError):  # circular or absurdly deep structures
        return json.dumps(f"<unserialisable {type(value).__qualname__}>")


def canonical_json(value: Any) -> str:
    """Stable JSON for lengths and HMACs in the redaction ledger (sorted keys, compact)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=_default)
    except (ValueError, RecursionError):
        return json.dumps(f"<unserialisable {type(value).__qualname__}>")


# --- flowra messages -> semconv parts ------------------------------------------------------------


def _part(block: Any, tool_uses: Mapping[str, ToolUseBlock] | None = None) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "content": block.text}
    if isinstance(block, ToolUseBlock):
        final = tool_uses.get(block.id, block) if tool_uses else block
        return {"type": "tool_call", "id": final.id, "name": final.name, "arguments": final.input}
    if isinstance(block, ToolResultBlock):
        return {"type": "tool_call_response", "id": block.tool_use_id, "response": block.content}
    if isinstance(block, ThinkingBlock):
        return {"type": "reasoning", "content": block.text}
    if isinstance(block, ImageBlock):
        return {
            "type": "blob",
            "modality": "image",
            "mime_type": block.media_type,
            "content": base64.b64encode(block.data).decode("ascii"),
        }
    return {"type": type(block).__name__}


def split_messages(messages: Iterable[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """flowra request messages -> (``gen_ai.system_instructions``, ``gen_ai.input.messages``).

    System messages become instructions (providers send them apart from the history); tool
    results, which flowra carries in user messages, become ``tool`` messages as the
    conventions expect, keeping their order.
    """
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            system.extend(_part(b) for b in message.blocks)
        elif isinstance(message, UserMessage):
            pending_role: str | None = None
            parts: list[dict[str, Any]] = []
            for block in message.blocks:
                role = "tool" if isinstance(block, ToolResultBlock) else "user"
                if role != pending_role and parts:
                    out.append({"role": pending_role, "parts": parts})
                    parts = []
                pending_role = role
                parts.append(_part(block))
            if parts:
                out.append({"role": pending_role, "parts": parts})
        elif isinstance(message, AssistantMessage):
            out.append({"role": "assistant", "parts": [_part(b) for b in message.blocks]})
        else:
            out.append({"role": str(getattr(message, "role", "user")), "parts": []})
    return system, out
