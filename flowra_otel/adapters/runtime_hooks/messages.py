"""flowra 0.0.47 - 0.0.93's messages and blocks, read for the core's content pipeline.

On this line the system prompt is ``LLMRequest.system`` (beside ``messages``), a tool result's
``content`` is a list of ``TextBlock`` / ``MediaBlock`` (0.0.86; text before), media of any kind is a
``MediaBlock``, and every request carries deep copies of the conversation (``LLMCaller`` copies
it per attempt): ``fingerprint`` lets the renderer's per-message cache recognise a copy.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Final

from flowra.llm import (
    AssistantMessage,
    MediaBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from ...core.bounded_json import Blob, TextBlob, textual_media
from ...core.content import Part, blob_modality


class RuntimeHooksMessages:
    """``content.MessageReader`` for flowra 0.0.47 - 0.0.93 (stateless: one shared instance)."""

    __slots__ = ()

    @staticmethod
    def split_request(request: Any) -> tuple[list[Any], list[Any]]:
        return list(getattr(request, "system", None) or ()), list(getattr(request, "messages", None) or ())

    @staticmethod
    def groups(message: Any) -> list[tuple[str, list[Any]]]:
        blocks = list(getattr(message, "blocks", None) or ())
        if isinstance(message, UserMessage):
            groups: list[tuple[str, list[Any]]] = []
            pending: list[Any] = []
            for block in blocks:
                if isinstance(block, ToolResultBlock):  # one tool message per result
                    if pending:
                        groups.append(("user", pending))
                        pending = []
                    groups.append(("tool", [block]))
                else:
                    pending.append(block)
            if pending or not groups:
                groups.append(("user", pending))
            return groups
        if isinstance(message, AssistantMessage):
            return [("assistant", blocks)]
        role = getattr(message, "role", None)
        return [(role if isinstance(role, str) and role else "user", blocks)]

    @classmethod
    def part(cls, block: Any) -> Part:
        if isinstance(block, TextBlock):
            return Part("text", block.text)
        if isinstance(block, ToolUseBlock):
            return Part("tool_call", block)
        if isinstance(block, ToolResultBlock):
            return Part("tool_call_response", cls.result_value(block), block.tool_use_id)
        if isinstance(block, ThinkingBlock):
            return Part("reasoning", block.text)
        if isinstance(block, MediaBlock):
            return Part("blob", block.data, media=(blob_modality(block.media_type), block.media_type))
        return Part(type(block).__name__)

    @staticmethod
    def result_value(result: Any) -> Any:
        """Text blocks alone: their text (one block as it is, several joined by a blank line, as
        providers send them); with media: a list of text and blob parts."""
        if not isinstance(result, ToolResultBlock) and not hasattr(result, "content"):
            return result  # a hook's own value in place of the result block: recorded as it is
        content = getattr(result, "content", None)
        if isinstance(content, str):  # a result before 0.0.86 (or stored then, or built by hand)
            return content
        blocks = list(content or ())
        if all(isinstance(b, TextBlock) for b in blocks):
            return blocks[0].text if len(blocks) == 1 else "\n\n".join(b.text for b in blocks)
        parts: list[Any] = []
        for block in blocks:
            if isinstance(block, TextBlock):
                parts.append({"type": "text", "content": block.text})
            elif isinstance(block, MediaBlock):
                media_type = block.media_type
                parts.append(
                    {
                        "type": "blob",
                        "modality": blob_modality(media_type),
                        "mime_type": media_type,
                        "content": (TextBlob if textual_media(media_type) else Blob)(block.data),
                    }
                )
            else:
                parts.append({"type": type(block).__name__})
        return parts

    @staticmethod
    def fingerprint(message: Any) -> Hashable | None:
        """The same for a message and its deep copies: ``copy.deepcopy`` keeps str objects, so the
        ids of each block's text and ids survive it (the renderer confirms a hit by equality)."""
        blocks = getattr(message, "blocks", None)
        if not blocks:
            return None
        return (type(message), tuple(map(_leaf_id, blocks)))


def _leaf_id(block: Any) -> int:
    if isinstance(block, ToolResultBlock):  # its ``text`` is a property: a new str on every read
        return id(block.tool_use_id)
    if isinstance(block, MediaBlock):
        return id(block.data)
    if isinstance(block, ToolUseBlock):
        return id(block.id)
    return id(getattr(block, "text", None))


MESSAGES: Final = RuntimeHooksMessages()

RESULT_BLOCKS: Final = "list" in str(ToolResultBlock.__dataclass_fields__["content"].type)
"""0.0.86+: ``ToolResultBlock.content`` is a list of blocks (text before)."""


def text_result_content(text: str) -> Any:
    """What a tool's text answer is in ``ToolResultBlock.content`` on this release: the text
    itself before 0.0.86, else one ``TextBlock`` holding it (the ledger digests that form)."""
    return [TextBlock(text=text)] if RESULT_BLOCKS else text
