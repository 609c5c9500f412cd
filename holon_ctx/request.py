"""The request a session hands the runtime before each model call.

A :class:`Request` is everything a runtime needs to call a model: the provider's own messages
(OpenAI chat completions, Anthropic Messages), the ``manifest`` that explains them, and the same
content as one prompt ``text``. It says nothing about *how* the content was chosen: the engine is
the session projection (RFC 0010) — a stable prefix, an append-only history and a small tail,
re-planned only when the budget binds, so most of each request is a prefix the provider cached —
and a runtime written against this class does not change when the engine does.

Token accounting: ``budget_tokens`` is the whole request as a provider counts it, message framing
and tool calls included; ``request_tokens`` is what the messages built here measure under the
model's tokenizer and framing (:func:`holon_ctx.projection.provider_formats.providers.measure`),
never more than ``planned_tokens`` — the budget divided by the safety factor the model's reported
usage teaches
(RFC 0022; ``Session.observe_usage``), the budget itself until usage says otherwise. The manifest
and the cache figures describe the messages: they are the request a runtime sends.

``text`` is a view for text-only models: the ledger as of the same position laid out as one prompt
(operator words labelled, everything else fenced) under the same budget, ``used_tokens`` its count,
with the governed state and the episodes the messages were made with (the request's moment: a
compaction that runs after the request is not seen; RFC 0020).
It is made the first time it is read, not before (RFC 0024): a runtime that sends the messages pays
for one projection walk, not two. A request still unread when its session closes gets its text
made then, so it stays whole afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import msgspec

from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.projection.base.provider_types import AnthropicRequest, OpenAIMessage
from holon_ctx.projection.session.session import SessionRequest

__all__ = ["Request"]


@attrs.frozen(eq=False)
class Request:
    """The next model call's input, under a token budget (see the module docstring)."""

    #: The whole request's budget (content plus message framing), as asked for.
    budget_tokens: int
    _messages: SessionRequest = attrs.field(alias="messages", repr=False)
    #: Makes the text layout as of the messages' ledger position, on first use (see above).
    _make_text: Callable[[], SessionRequest] = attrs.field(alias="make_text", repr=False)
    #: The budget the request was planned under: ``budget_tokens / safety_factor`` (RFC 0022).
    planned_tokens: int = attrs.field(kw_only=True, default=0)
    #: The factor the model's observed usage asks for (1.0 where the count is an upper bound).
    safety_factor: float = attrs.field(kw_only=True, default=1.0)
    #: The model the request was counted for ("" when none was named) and the framing rule.
    model: str = attrs.field(kw_only=True, default="")
    framing: str = attrs.field(kw_only=True, default="openai")
    #: The counter identity of :attr:`request_tokens`.
    counter: str = attrs.field(kw_only=True, default="")
    #: Which observations this request's usage joins (the model, or its family's default).
    _calibration_key: str = attrs.field(kw_only=True, default="", repr=False,
                                        alias="calibration_key")
    _text_made: list[SessionRequest] = attrs.field(factory=list, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not self.planned_tokens:
            object.__setattr__(self, "planned_tokens", self.budget_tokens)

    def _settle_text(self) -> None:
        """Make the text view now (its session is closing). A budget too small for the text
        layout at this position is raised when the text is read, not by the closing session:
        a runtime that sends the messages never reads it."""
        try:
            self._text_request()
        except BudgetTooSmallError as exc:
            error = exc

            def fail() -> SessionRequest:
                raise error
            object.__setattr__(self, "_make_text", fail)

    def _text_request(self) -> SessionRequest:
        if not self._text_made:
            self._text_made.append(self._make_text())
        return self._text_made[0]

    @property
    def text(self) -> str:
        """The prompt as one text, exactly as a text-only model reads it (made on first read, as of
        the same ledger position as the messages)."""
        return self._text_request().text

    @property
    def used_tokens(self) -> int:
        """Tokens of :attr:`text` under the session's counter."""
        return self._text_request().used_tokens

    @property
    def request_tokens(self) -> int:
        """Tokens of the request as sent: its contents, tool calls and message framing."""
        return self._messages.request_tokens

    @property
    def current_turn(self) -> str:
        """The ref of the turn the request answers (``turn:t41``)."""
        return self._messages.manifest.current_turn

    @property
    def manifest(self) -> dict[str, Any]:
        """What went in, what was folded, archived or left out, and why (a fresh JSON object;
        keys as in ``holon-ctx project --json``, plus ``session``: the epoch and cache figures;
        docs/session.md)."""
        decoded: dict[str, Any] = msgspec.json.decode(self.manifest_json())
        return decoded

    def manifest_json(self) -> bytes:
        """The manifest as JSON bytes."""
        return self._messages.manifest_json()

    @property
    def openai_messages(self) -> list[OpenAIMessage]:
        """Chat-completions ``messages`` (a fresh list): the stable prefix first, then the
        history as the provider's own roles (replies with their ``tool_calls``, ``tool``
        results), the current state last (docs/providers.md)."""
        return self._messages.openai_messages()

    @property
    def anthropic_request(self) -> AnthropicRequest:
        """A Messages request body fragment ``{"system": [...], "messages": [...]}`` (fresh):
        ``tool_use`` / ``tool_result`` blocks, a cache breakpoint at the end of the stable
        prefix and a rolling one on the last history block."""
        return self._messages.anthropic_request()
