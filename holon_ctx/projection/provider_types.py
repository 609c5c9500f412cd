"""Typed shapes of the provider requests built in :mod:`holon_ctx.projection.providers`.

TypedDicts rather than classes: a request is the plain ``dict``/``list`` a provider SDK or
``json.dumps`` takes, so typing it changes nothing at run time (the JSON is byte-identical), while
``mypy --strict`` on a caller's code checks the keys it reads and narrows a message on its
``role``. One TypedDict per message role, joined in a union, so native tool-call messages (an
assistant message with ``tool_calls``, a ``tool`` message; Anthropic ``tool_use`` and
``tool_result`` blocks) can be added as new members without changing the existing ones.

Only what holon_ctx builds is declared; the provider APIs accept more (images, names, metadata).
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "AnthropicContentBlock",
    "AnthropicMessage",
    "AnthropicRequest",
    "AnthropicTextBlock",
    "AnthropicUserMessage",
    "CacheControl",
    "OpenAIMessage",
    "OpenAISystemMessage",
    "OpenAIUserMessage",
]


class OpenAISystemMessage(TypedDict):
    """The stable part (environment), when it may sit in the system role."""

    role: Literal["system"]
    content: str


class OpenAIUserMessage(TypedDict):
    """Everything after the stable part, fenced and labelled as the projection rendered it."""

    role: Literal["user"]
    content: str


#: A chat-completions message built here; ``to_openai_messages`` returns a list of them.
OpenAIMessage: TypeAlias = OpenAISystemMessage | OpenAIUserMessage


class CacheControl(TypedDict):
    """Anthropic's prompt-cache breakpoint."""

    type: Literal["ephemeral"]


class AnthropicTextBlock(TypedDict):
    type: Literal["text"]
    text: str
    #: Set on the block that ends the stable part (the one cache breakpoint).
    cache_control: NotRequired[CacheControl]


#: A content block built here (text only; tool blocks would join this union).
AnthropicContentBlock: TypeAlias = AnthropicTextBlock


class AnthropicUserMessage(TypedDict):
    role: Literal["user"]
    content: list[AnthropicContentBlock]


#: A Messages API message built here.
AnthropicMessage: TypeAlias = AnthropicUserMessage


class AnthropicRequest(TypedDict):
    """The ``system`` and ``messages`` fields of a Messages request body (the caller adds
    ``model``, ``max_tokens`` and the rest)."""

    system: list[AnthropicTextBlock]
    messages: list[AnthropicMessage]
