"""LangChain messages, both ways (``holon-ctx[langchain]``): holon_ctx in place of ``trim_messages``.

* :func:`append_messages` — LangChain messages into the ledger, through the library helpers:
  ``HumanMessage`` → operator message (trusted, opens a turn); ``AIMessage`` → assistant message
  with its ``tool_calls`` (model output); ``ToolMessage`` → the result of its call (untrusted; one
  ledger record with the call); ``SystemMessage`` → environment guidance before the first turn,
  else a runtime note.
* :func:`to_messages` — a :class:`~holon_ctx.Request` as LangChain messages, one for one with
  ``request.openai_messages``: a ``SystemMessage`` (the environment, the cache prefix), the
  history in its native roles (``HumanMessage``, ``AIMessage`` with ``tool_calls``,
  ``ToolMessage``), and the current state as the last ``HumanMessage`` (once the history outgrows
  the budget: before that the request is the whole history, RFC 0025). The ``langchain`` extra
  brings langchain-core only: a chat model that calls a provider needs its own package
  (langchain-openai, langchain-anthropic).
* :class:`LedgerHistory` — both at once for a loop that keeps its own message list (a LangGraph
  state, a chain's memory): each call appends only the messages not seen before and returns the
  budgeted request. A new ``LedgerHistory`` on a ledger that holds a history already (a
  restart with a persisted message list, the usual checkpointer set-up) appends only what the
  ledger does not hold yet (:mod:`holon_ctx.integrations.held`), and a re-sent
  ``SystemMessage`` whose text the ledger holds is never a new runtime note. Given the chat
  model (``model=``), requests are counted for it, and the input tokens a reply reports
  (``usage_metadata``) calibrate the budget (RFC 0022).
  ``history.pre_model_hook`` has the shape of LangGraph's ``pre_model_hook`` (``state`` in,
  ``{"llm_input_messages": [...]}`` out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from holon_ctx.errors import InputError
from holon_ctx.extras import missing_extra
from holon_ctx.integrations.held import Key, ledger_keys, new_positions
from holon_ctx.request import Request
from holon_ctx.session import Session, ToolCall
from holon_ctx.session_args import check_positive

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        convert_to_messages,
    )
except ImportError as _exc:
    # One line naming the pip command that works for this install (holon_ctx.extras).
    raise missing_extra(__name__, "langchain", _exc) from None

__all__ = ["LedgerHistory", "append_messages", "to_messages"]


def to_messages(request: Request) -> list[BaseMessage]:
    """The request's OpenAI-style messages as LangChain message objects (same roles, same text).

    Converted by LangChain's own reader of the chat-completions format, so assistant tool calls
    and ``tool`` messages convert too when a request carries them."""
    if not isinstance(request, Request):
        raise InputError(f"expected a holon_ctx.Request, got {type(request).__name__}",
                         source="to_messages", path="request")
    return convert_to_messages([dict(m) for m in request.openai_messages])


def append_messages(session: Session, messages: Sequence[BaseMessage]) -> None:
    """Append LangChain messages to the ledger in order (mapping in the module docstring)."""
    for i, message in enumerate(messages):
        text = message.text
        if isinstance(message, HumanMessage):
            session.operator_message(text)
        elif isinstance(message, AIMessage):
            calls = [ToolCall(str(c.get("id") or f"{message.id or 'ai'}.{j}"), c["name"],
                              dict(c.get("args") or {}))
                     for j, c in enumerate(message.tool_calls)]
            session.assistant_message(text, tool_calls=calls)
        elif isinstance(message, ToolMessage):
            session.tool_result(message.tool_call_id, text,
                                status="error" if message.status == "error" else "ok")
        elif isinstance(message, SystemMessage):
            if session.current_turn is None:
                session.set_environment(guidance=text)
            else:
                session.runtime_note(text or "(empty system message)")
        else:
            raise InputError(f"expected a Human, AI, Tool or System message, got "
                             f"{type(message).__name__}", source="append_messages",
                             path=f"messages[{i}]")


def _key(message: BaseMessage) -> Key | None:
    """The key of the record ``message`` appends (:mod:`holon_ctx.integrations.held`)."""
    if isinstance(message, HumanMessage):
        return ("user", message.text)
    if isinstance(message, AIMessage):
        return ("assistant", message.text)
    if isinstance(message, ToolMessage):
        return ("tool", message.tool_call_id)
    return ("note", message.text) if isinstance(message, SystemMessage) else None


class LedgerHistory:
    """A message list kept in step with the ledger; hands out budgeted requests (module doc)."""

    def __init__(self, session: Session, *, budget_tokens: int, model: Any = None) -> None:
        if not isinstance(session, Session):
            raise InputError(f"expected a holon_ctx.Session, got {type(session).__name__}",
                             source="LedgerHistory", path="session")
        self.session = session
        self.budget_tokens = check_positive("LedgerHistory", "budget_tokens", budget_tokens)
        # The chat model (or its name): requests are counted with its provider's tokenizer and
        # framing (RFC 0022); LangChain's chat models name it in ``model_name`` or ``model``.
        name = model if isinstance(model, str) else (
            getattr(model, "model_name", None) or getattr(model, "model", None))
        if isinstance(name, str) and name:
            session.use_model(name)
        #: The last request (its manifest says what went in and why).
        self.last_request: Request | None = None
        self._seen_ids: set[str] = set()
        self._seen_count = 0
        #: Whether the ledger was read for what it holds (the first sync does it).
        self._aligned = False
        #: System texts the ledger holds (guidance, runtime notes): not appended again.
        self._system: set[str] = set()

    def sync(self, messages: Sequence[BaseMessage]) -> int:
        """Append the messages not appended before (by ``id``; without one, by position; on the
        first call, those the ledger does not hold yet). Returns how many were new."""
        if not self._aligned:
            self._aligned = True
            held = ledger_keys(self.session)
            self._system = held.system
            fresh = set(new_positions(held, [_key(m) for m in messages],
                                      [m.text if isinstance(m, SystemMessage) else None
                                       for m in messages]))
            new = [m for i, m in enumerate(messages) if i in fresh]
        else:
            new = [m for i, m in enumerate(messages)
                   if (m.id not in self._seen_ids if m.id is not None else i >= self._seen_count)
                   and not (isinstance(m, SystemMessage) and m.text in self._system)]
        append_messages(self.session, new)
        self._system.update(m.text for m in new if isinstance(m, SystemMessage))
        self._observe(new)
        # Every message given is in the ledger now: appended, or held already.
        self._seen_ids.update(m.id for m in messages if m.id is not None)
        self._seen_count = max(self._seen_count, len(messages))
        return len(new)

    def _observe(self, new: Sequence[BaseMessage]) -> None:
        """The provider's input tokens of the reply to the last request, when the model reported
        them (``usage_metadata``; cache reads included), recorded beside its estimate."""
        replies = [m for m in new if isinstance(m, AIMessage) and m.usage_metadata]
        if self.last_request is None or not replies:
            return
        used = replies[0].usage_metadata
        assert used is not None
        if used.get("input_tokens"):
            self.session.observe_usage(int(used["input_tokens"]), request=self.last_request)
        self.last_request = None  # observed once

    def messages(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """Sync, then the next request as LangChain messages: use it where ``trim_messages``
        would go."""
        self.sync(messages)
        self.last_request = self.session.next_request(self.budget_tokens)
        return to_messages(self.last_request)

    def pre_model_hook(self, state: Mapping[str, Any]) -> dict[str, list[BaseMessage]]:
        """LangGraph's ``pre_model_hook`` shape: the model gets the request, the state's
        ``messages`` stay as they are."""
        return {"llm_input_messages": self.messages(state["messages"])}
