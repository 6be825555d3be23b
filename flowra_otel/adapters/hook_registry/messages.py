"""flowra 0.0.3 - 0.0.8's messages and blocks, read for the core's content pipeline.

On this line the system prompt travels inside ``LLMRequest.messages`` (``SystemMessage``), a tool
result's ``content`` is a string (or whatever a tool returned), and images are ``ImageBlock``.
"""

from __future__ import annotations

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

from ...core.content import Part
from ...core.leaf_spec import Leaves


class HookRegistryMessages:
    """``content.MessageReader`` for flowra 0.0.3 - 0.0.8 (stateless: one shared instance)."""

    __slots__ = ()

    @staticmethod
    def split_request(request: Any) -> tuple[list[Any], list[Any]]:
        system: list[Any] = []
        conversation: list[Any] = []
        for message in getattr(request, "messages", None) or ():
            (system if isinstance(message, SystemMessage) else conversation).append(message)
        return system, conversation

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

    @staticmethod
    def part(block: Any) -> Part:
        if isinstance(block, TextBlock):
            return Part("text", block.text)
        if isinstance(block, ToolUseBlock):
            return Part("tool_call", block)
        if isinstance(block, ToolResultBlock):
            return Part("tool_call_response", block.content, block.tool_use_id)
        if isinstance(block, ThinkingBlock):
            return Part("reasoning", block.text)
        if isinstance(block, ImageBlock):
            return Part("blob", block.data, media=("image", block.media_type))
        return Part(type(block).__name__)

    @staticmethod
    def result_value(result: Any) -> Any:
        return getattr(result, "content", "")

    @staticmethod
    def spec(message: Any) -> Any:
        """What the renderer reads of ``message`` (``leaf_spec``), or None: this line hands the
        same message objects to every call, and a hook may have edited one in place since."""
        return LEAVES.spec(message)

    @staticmethod
    def unchanged(messages: list[Any], specs: list[Any]) -> int:
        """How many of ``messages``, from the first, still are what ``specs`` were taken of."""
        return LEAVES.unchanged(messages, specs)


LEAVES: Final = Leaves(
    (UserMessage, AssistantMessage),
    {
        TextBlock: ("text",),
        ThinkingBlock: ("text",),
        ToolUseBlock: ("id", "name", "input"),
        ToolResultBlock: ("tool_use_id", "content"),
        ImageBlock: ("data", "media_type"),
    },
)
"""What the renderer reads of each block (``part``); the role of a user or assistant message
comes from its type."""


MESSAGES: Final = HookRegistryMessages()


def text_result_content(text: str) -> Any:
    """What a tool's text answer is in ``ToolResultBlock.content`` on this line: the text itself."""
    return text
