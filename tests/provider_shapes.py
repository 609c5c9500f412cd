"""Checks that provider requests have exactly the declared TypedDict shapes (shared by tests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from holon_ctx.projection.base.provider_types import (
    AnthropicTextBlock,
    AnthropicToolResultBlock,
    AnthropicToolUseBlock,
    OpenAIAssistantMessage,
    OpenAISystemMessage,
    OpenAIToolMessage,
    OpenAIUserMessage,
)

#: msgspec converts into one TypedDict at a time, so a message or block is checked against the
#: member of its union that its own tag names.
OPENAI_BY_ROLE: dict[str, type] = {"system": OpenAISystemMessage, "user": OpenAIUserMessage,
                                   "assistant": OpenAIAssistantMessage, "tool": OpenAIToolMessage}
ANTHROPIC_BY_TYPE: dict[str, type] = {"text": AnthropicTextBlock,
                                      "tool_result": AnthropicToolResultBlock,
                                      "tool_use": AnthropicToolUseBlock}


def assert_declared(value: object, shape: type) -> None:
    """``value`` decodes strictly into ``shape`` and encodes back to the same JSON."""
    typed = msgspec.convert(value, shape, strict=True)
    assert msgspec.json.encode(typed) == msgspec.json.encode(value)


def assert_anthropic_declared(request: Mapping[str, Any]) -> None:
    """An Anthropic request holds only declared keys, messages and blocks."""
    assert set(request) == {"system", "messages"}
    for block in request["system"]:
        assert_declared(block, AnthropicTextBlock)
    for msg in request["messages"]:
        assert set(msg) == {"role", "content"}
        assert msg["role"] in ("user", "assistant")
        for block in msg["content"]:
            assert_declared(block, ANTHROPIC_BY_TYPE[block["type"]])
