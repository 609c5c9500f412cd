"""Typed shapes of the provider requests built in :mod:`holon_ctx.projection.provider_formats.providers`.

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
    "AnthropicAssistantBlock",
    "AnthropicAssistantMessage",
    "AnthropicContentBlock",
    "AnthropicMessage",
    "AnthropicRequest",
    "AnthropicTextBlock",
    "AnthropicToolResultBlock",
    "AnthropicToolUseBlock",
    "AnthropicUserMessage",
    "CacheControl",
    "OpenAIAssistantMessage",
    "OpenAIFunction",
    "OpenAIMessage",
    "OpenAISystemMessage",
    "OpenAIToolCall",
    "OpenAIToolMessage",
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


class OpenAIFunction(TypedDict):
    name: str
    #: The call's arguments as a JSON object, encoded (the API's own shape).
    arguments: str


class OpenAIToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: OpenAIFunction


class OpenAIAssistantMessage(TypedDict):
    """A model reply in the history (session projection), with the tool calls it made."""

    role: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[OpenAIToolCall]]


class OpenAIToolMessage(TypedDict):
    """A tool's result, right after the assistant message that called it; fenced as data."""

    role: Literal["tool"]
    tool_call_id: str
    content: str


#: A chat-completions message built here; ``to_openai_messages`` returns a list of them.
OpenAIMessage: TypeAlias = (OpenAISystemMessage | OpenAIUserMessage | OpenAIAssistantMessage
                            | OpenAIToolMessage)


class CacheControl(TypedDict):
    """Anthropic's prompt-cache breakpoint."""

    type: Literal["ephemeral"]


class AnthropicTextBlock(TypedDict):
    type: Literal["text"]
    text: str
    #: Set on the block that ends the stable part (the one cache breakpoint).
    cache_control: NotRequired[CacheControl]


class AnthropicToolUseBlock(TypedDict):
    """A tool call in an assistant message (session projection)."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, object]
    cache_control: NotRequired[CacheControl]


class AnthropicToolResultBlock(TypedDict):
    """A tool's result, first in the user message after the call; its text fenced as data."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: str
    cache_control: NotRequired[CacheControl]


#: A user content block built here.
AnthropicContentBlock: TypeAlias = AnthropicTextBlock | AnthropicToolResultBlock
#: An assistant content block built here.
AnthropicAssistantBlock: TypeAlias = AnthropicTextBlock | AnthropicToolUseBlock


class AnthropicUserMessage(TypedDict):
    role: Literal["user"]
    content: list[AnthropicContentBlock]


class AnthropicAssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: list[AnthropicAssistantBlock]


#: A Messages API message built here.
AnthropicMessage: TypeAlias = AnthropicUserMessage | AnthropicAssistantMessage


class AnthropicRequest(TypedDict):
    """The ``system`` and ``messages`` fields of a Messages request body (the caller adds
    ``model``, ``max_tokens`` and the rest)."""

    system: list[AnthropicTextBlock]
    messages: list[AnthropicMessage]
