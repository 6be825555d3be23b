"""flowra 0.0.47 - 0.0.93's messages and blocks, read for the core's content pipeline.

On this line the system prompt is ``LLMRequest.system`` (beside ``messages``), a tool result's
``content`` is a list of ``TextBlock`` / ``MediaBlock`` (0.0.86; text before), media of any kind is a
``MediaBlock``, and every request carries deep copies of the conversation (``LLMCaller`` copies
it per attempt): ``spec`` / ``matches`` let the renderer recognise an unchanged copy cheaply.
"""

from __future__ import annotations

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
from ...core.leaf_spec import ATOMS, BLOCKS, Leaves


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
    def spec(message: Any) -> Any:
        """What the renderer reads of ``message`` (``leaf_spec``), or None when it holds anything
        a spec cannot describe (it is then rendered on every call). The usual messages of a tool
        loop (one text, one call with plain arguments, one text result) get a flat spec of their
        own, checked in a few steps; any other, ``LEAVES``'s block by block. flowra deep-copies the
        conversation into every request: a copy keeps the leaves, so it is ``unchanged`` against
        the spec taken of the message it copies, unless something changed it."""
        kind = type(message)
        blocks = getattr(message, "blocks", None)
        if (kind is UserMessage or kind is AssistantMessage) and type(blocks) is list and len(blocks) == 1:
            flat = _flat_spec(kind, blocks[0])
            if flat is not None:
                return flat
        return LEAVES.spec(message)

    @staticmethod
    def unchanged(messages: list[Any], specs: list[Any]) -> int:
        """How many of ``messages``, from the first, still are what ``specs`` (by position) were
        taken of: copies of them, untouched (every leaf the same object). One call for the whole
        history, its loops inline: this runs over every message of every LLM request."""
        count = 0
        for message, spec in zip(messages, specs, strict=False):  # the messages may be more
            if spec is None or type(message) is not spec[1]:
                return count
            shape = spec[0]
            if shape is BLOCKS:  # a spec of ``LEAVES``
                if not LEAVES.same(message, spec):
                    return count
                count += 1
                continue
            blocks = message.blocks  # a flat spec: one block
            if len(blocks) != 1:
                return count
            block = blocks[0]
            if shape is _TEXT:
                if type(block) is not TextBlock or block.text is not spec[2]:
                    return count
            elif shape is _RESULT:
                if type(block) is not ToolResultBlock or block.tool_use_id is not spec[2]:
                    return count
                content = block.content
                if type(content) is not list or len(content) != 1:
                    return count
                part = content[0]
                if type(part) is not TextBlock or part.text is not spec[3]:
                    return count
            else:  # _CALL
                if type(block) is not ToolUseBlock or block.id is not spec[2] or block.name is not spec[3]:
                    return count
                arguments = block.input
                keys = spec[4]
                if type(arguments) is not dict or len(arguments) != len(keys):
                    return count
                values = spec[5]
                j = 0  # an index, not zip(): it costs half as much on this hot path
                for key in arguments:
                    if key is not keys[j] or arguments[key] is not values[j]:
                        return count
                    j += 1  # noqa: SIM113
            count += 1
        return count


LEAVES: Final = Leaves(
    (UserMessage, AssistantMessage),
    {
        TextBlock: ("text",),
        ThinkingBlock: ("text",),
        ToolUseBlock: ("id", "name", "input"),
        ToolResultBlock: ("tool_use_id", "content"),
        MediaBlock: ("data", "media_type"),
    },
)
"""What the renderer reads of each block (``part``, ``result_value``); the role of a user or
assistant message comes from its type."""

_TEXT: Final = "text"
_RESULT: Final = "result"
_CALL: Final = "call"
"""The flat shapes of a one-block message's spec: a text, a text result, a call whose arguments
are a dict of plain leaves."""


def _flat_spec(kind: type, block: Any) -> tuple[Any, ...] | None:
    t = type(block)
    if t is TextBlock:
        text = block.text
        return (_TEXT, kind, text) if type(text) is str else None
    if t is ToolResultBlock:
        content = block.content
        if type(block.tool_use_id) is not str or type(content) is not list or len(content) != 1:
            return None
        part = content[0]
        if type(part) is not TextBlock or type(part.text) is not str:
            return None
        return (_RESULT, kind, block.tool_use_id, part.text)
    if t is ToolUseBlock:
        arguments = block.input
        if type(block.id) is not str or type(block.name) is not str or type(arguments) is not dict:
            return None
        keys = tuple(arguments)
        values = tuple(arguments.values())
        if not all(type(v) in ATOMS for v in (*keys, *values)):
            return None
        return (_CALL, kind, block.id, block.name, keys, values)
    return None


MESSAGES: Final = RuntimeHooksMessages()

RESULT_BLOCKS: Final = "list" in str(ToolResultBlock.__dataclass_fields__["content"].type)
"""0.0.86+: ``ToolResultBlock.content`` is a list of blocks (text before)."""


def text_result_content(text: str) -> Any:
    """What a tool's text answer is in ``ToolResultBlock.content`` on this release: the text
    itself before 0.0.86, else one ``TextBlock`` holding it (the ledger digests that form)."""
    return [TextBlock(text=text)] if RESULT_BLOCKS else text
