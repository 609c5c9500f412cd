"""Checks that provider requests have exactly the declared TypedDict shapes (shared by tests)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
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


def assert_openai_pairing(messages: Sequence[Any]) -> None:
    """Every tool call is answered by a tool message right after its assistant message, every
    tool message answers a call made just before it, and no two calls of the request share an
    id (a result is paired with its call by id: RFC 0008, decision 9)."""
    waiting: list[str] = []
    ids: list[str] = []
    for msg in messages:
        role = msg["role"]
        if role == "tool":
            assert waiting, msg
            assert msg["tool_call_id"] == waiting.pop(0), msg
            continue
        assert not waiting, f"calls {waiting} unanswered before a {role} message"
        if role == "assistant":
            waiting = [c["id"] for c in msg.get("tool_calls", [])]
            ids.extend(waiting)
    assert not waiting
    assert len(ids) == len(set(ids)), f"tool call ids repeat: {sorted(ids)}"


def assert_anthropic_order(request: Mapping[str, Any]) -> None:
    """Roles alternate starting and ending with the user; each tool_use is answered first thing
    in the next user message; every tool_use id is the request's only one (Anthropic refuses a
    repeat); at most four cache breakpoints."""
    messages = request["messages"]
    assert messages[0]["role"] == "user"
    assert messages[-1]["role"] == "user"
    marks = sum("cache_control" in b for b in request["system"])
    for before, after in itertools.pairwise(messages):
        assert before["role"] != after["role"]
    for i, msg in enumerate(messages):
        marks += sum("cache_control" in b for b in msg["content"])
        if msg["role"] != "assistant":
            continue
        uses = [b["id"] for b in msg["content"] if b["type"] == "tool_use"]
        answers = [b["tool_use_id"] for b in messages[i + 1]["content"][:len(uses)]
                   if b["type"] == "tool_result"]
        assert answers == uses
    results = [b["tool_use_id"] for m in messages for b in m["content"] if b["type"] == "tool_result"]
    calls = [b["id"] for m in messages for b in m["content"] if b["type"] == "tool_use"]
    assert len(calls) == len(set(calls)), f"tool_use ids repeat: {sorted(calls)}"
    assert sorted(results) == sorted(calls)
    assert 1 <= marks <= 4
