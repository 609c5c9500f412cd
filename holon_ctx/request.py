"""The request a session hands the runtime before each model call.

A :class:`Request` is everything a runtime needs to call a model: the prompt ``text``, the
``manifest`` that explains it, and the same content laid out for OpenAI chat completions and for
Anthropic Messages. It deliberately says nothing about *how* the content was chosen: the engine
behind it is a detail of the session (today the projector of RFC 0002, one text split at its
stable prefix; later a cache-stable session projection with native role messages), and a runtime
written against this class does not change when the engine does.

Token accounting: ``budget_tokens`` is the whole request as a provider counts it, message framing
included; ``used_tokens`` is the prompt text alone; ``request_tokens`` adds the framing of the
messages actually built. ``request_tokens <= budget_tokens`` always holds.
"""

from __future__ import annotations

from typing import Any

import attrs
import msgspec

from holon_ctx.projection.projector import Projection
from holon_ctx.projection.provider_types import AnthropicRequest, OpenAIMessage
from holon_ctx.projection.providers import framing_tokens, to_anthropic_messages, to_openai_messages

__all__ = ["Request"]


@attrs.frozen(eq=False)
class Request:
    """The next model call's input, under a token budget (see the module docstring)."""

    #: The whole request's budget (text plus message framing), as asked for.
    budget_tokens: int
    _projection: Projection = attrs.field(alias="projection", repr=False)

    @property
    def text(self) -> str:
        """The prompt as one text, exactly as the model reads it."""
        return self._projection.text

    @property
    def used_tokens(self) -> int:
        """Tokens of :attr:`text` under the session's counter."""
        return self._projection.used_tokens

    @property
    def request_tokens(self) -> int:
        """Tokens of the request as sent: the text plus the framing of its messages."""
        return self.used_tokens + framing_tokens(len(self.openai_messages))

    @property
    def current_turn(self) -> str:
        """The ref of the turn the request answers (``turn:t41``)."""
        return self._projection.current_turn

    @property
    def manifest(self) -> dict[str, Any]:
        """What went in, what was folded, archived or left out, and why (a fresh JSON object;
        keys as in ``holon-ctx project --json``, docs/projection.md)."""
        decoded: dict[str, Any] = msgspec.json.decode(self.manifest_json())
        return decoded

    def manifest_json(self) -> bytes:
        """The manifest as JSON bytes."""
        return self._projection.manifest_json()

    @property
    def openai_messages(self) -> list[OpenAIMessage]:
        """Chat-completions ``messages`` (a fresh list): the stable part first, where the
        provider's prefix cache finds it (docs/providers.md; shapes in
        :mod:`holon_ctx.projection.provider_types`)."""
        return to_openai_messages(self._projection)

    @property
    def anthropic_request(self) -> AnthropicRequest:
        """A Messages request body fragment: ``{"system": [...], "messages": [...]}`` (fresh),
        with one cache breakpoint at the end of the stable part."""
        return to_anthropic_messages(self._projection)
