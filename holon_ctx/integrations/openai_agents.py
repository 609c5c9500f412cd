"""OpenAI Agents SDK: a ``Session`` whose history is a holon_ctx ledger (``holon-ctx[openai-agents]``).

``Runner.run(agent, input, session=LedgerSession(session, budget_tokens=N))`` then gets a budgeted
projection of the whole ledger instead of the whole history, and every item the run produces is
appended to the ledger with its provenance:

========================================  =====================================================
SDK item                                  ledger (through the library helpers)
========================================  =====================================================
user message                              ``operator_message`` (trusted, opens a turn)
system / developer message                environment guidance before the first turn, else a
                                          runtime note
assistant message + its ``function_call``  ``assistant_message(text, tool_calls=…)`` (model
items                                     output; a reply after tool results opens a step turn)
``function_call_output``                  ``tool_result`` (untrusted), one record with its call
other tool items (hosted tools, shell …)  ``tool_run`` named after the item type
``reasoning``                             not recorded (providers drop it from history; its ids
                                          go stale)
========================================  =====================================================

``get_items()`` returns the request as input items, one for one with
``request.openai_messages``: a ``system`` message first (the environment, the cache prefix), the
history in its own items (messages, ``function_call`` and ``function_call_output``), and the
current state as the last ``user`` message (once the history outgrows the budget: before that
the request is the whole history, RFC 0025). The SDK appends the new input after it and,
inside one run, its own items of that run. :meth:`LedgerSession.run_config` adds a
``call_model_input_filter`` that replaces the whole model input by a fresh request before *every*
model call — so a long run with many tool calls stays under the budget too (the SDK saves each
turn's items before the next model call, so the ledger already holds them). The agent's
``instructions`` and tool schemas are sent by the SDK as usual, outside the budget.

The ledger is append-only: ``pop_item`` and ``clear_session`` raise
:class:`~holon_ctx.errors.InputError` (record a correction instead; start a new ledger file to
start over).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, cast

from holon_ctx.errors import InputError
from holon_ctx.extras import missing_extra
from holon_ctx.integrations.held import Key, LedgerKeys, ledger_keys, new_positions
from holon_ctx.request import Request
from holon_ctx.session import Session, ToolCall
from holon_ctx.session_args import check_positive, check_text

try:
    from agents import RunConfig, RunHooks
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings
    from agents.run_config import CallModelData, ModelInputData
except ImportError as _exc:
    # One line naming the pip command that works for this install (holon_ctx.extras).
    raise missing_extra(__name__, "openai-agents", _exc) from None

__all__ = ["LedgerSession", "append_items", "input_items"]

#: Content part types whose text the model reads.
_TEXT_PARTS = ("input_text", "output_text", "text")
_PLACEHOLDERS = {"input_image": "[image]", "input_file": "[file]", "input_audio": "[audio]"}
_CALL_TYPES = ("function_call", "custom_tool_call")
_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")
#: The keys these items append (held.py): hosted tools' runs included.
_ROLES = frozenset({"user", "assistant", "tool", "note", "run"})


class LedgerSession:
    """An Agents SDK session (the ``agents.memory.Session`` protocol) over a holon_ctx session."""

    session_settings: SessionSettings | None = None

    def __init__(self, session: Session, *, budget_tokens: int,
                 session_id: str = "holon-ctx") -> None:
        if not isinstance(session, Session):
            raise InputError(f"expected a holon_ctx.Session, got {type(session).__name__}",
                             source="LedgerSession", path="session")
        self.session = session
        self.budget_tokens = check_positive("LedgerSession", "budget_tokens", budget_tokens)
        self.session_id = check_text("LedgerSession", "session_id", session_id, required=True)
        #: The last request handed to the SDK (for logging: its manifest says what went in).
        self.last_request: Request | None = None
        #: What the ledger held when the first items came (read then, once).
        self._held: LedgerKeys | None = None

    def _request_items(self) -> list[TResponseInputItem]:
        if self.session.current_turn is None:
            return []
        self.last_request = self.session.next_request(self.budget_tokens)
        return input_items(self.last_request.openai_messages)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The budgeted projection of the ledger as input items (the newest ``limit`` of them)."""
        items = self._request_items()
        return items[-limit:] if limit else items

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the run's new items to the ledger (see the module docstring for the mapping).

        The first call on a ledger that holds a history already (a restart, or a history moved
        over from another session store) appends only what the ledger does not hold yet
        (:mod:`holon_ctx.integrations.held`); a system message whose text the ledger holds is
        never appended again."""
        units = _units(items)
        if self._held is None:
            self._held = ledger_keys(self.session)
            fresh = set(new_positions(self._held, [key for key, _, _ in units],
                                      [text for _, text, _ in units], roles=_ROLES))
        else:
            fresh = {i for i, (_, text, _) in enumerate(units)
                     if text is None or text not in self._held.system}
        for i, (_, text, apply) in enumerate(units):
            if i in fresh:
                apply(self.session)
                if text is not None:
                    self._held.system.add(text)

    async def pop_item(self) -> TResponseInputItem | None:
        raise InputError("the ledger is append-only: an item cannot be popped (append a "
                         "correction instead)", source="LedgerSession.pop_item")

    async def clear_session(self) -> None:
        raise InputError("the ledger is append-only: it cannot be cleared (open a new ledger "
                         "file to start over)", source="LedgerSession.clear_session")

    def model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """A ``call_model_input_filter``: the model input becomes a fresh request, counted for
        the agent's model when it names one (RFC 0022)."""
        name = getattr(data.agent, "model", None)
        if isinstance(name, str) and name:
            self.session.use_model(name)
        return ModelInputData(input=self._request_items(),
                              instructions=data.model_data.instructions)

    def observe(self, input_tokens: int) -> None:
        """The provider's input tokens of the call made with the last request (the SDK's
        ``ModelResponse.usage.input_tokens``), recorded beside its estimate; :meth:`hooks` calls
        it after every model call. The SDK sends the agent's instructions and tool schemas
        outside the budget: they are in the provider's count, so the factor learnt makes the
        whole call fit."""
        if self.last_request is not None and input_tokens > 0:
            self.session.observe_usage(input_tokens, request=self.last_request)
            self.last_request = None

    def hooks(self) -> RunHooks[Any]:
        """``RunHooks`` (``Runner.run(..., hooks=ledger.hooks())``) that pass each model call's
        reported usage to :meth:`observe`."""
        ledger = self

        class _Usage(RunHooks[Any]):
            async def on_llm_end(self, context: Any, agent: Any,  # noqa: ARG002 - the SDK's
                                 response: Any) -> None:
                ledger.observe(int(getattr(response.usage, "input_tokens", 0) or 0))

        return _Usage()

    def run_config(self, **kwargs: Any) -> RunConfig:
        """A ``RunConfig`` (with any other settings given) that re-projects before every call."""
        return RunConfig(call_model_input_filter=self.model_input_filter, **kwargs)


def input_items(messages: Sequence[Mapping[str, Any]]) -> list[TResponseInputItem]:
    """Chat-completions messages as Responses input items: a message per role and text, an
    assistant's ``tool_calls`` as ``function_call`` items, a ``tool`` message as its
    ``function_call_output``."""
    items: list[dict[str, Any]] = []
    for m in messages:
        text = _content_text(m.get("content"))
        if m["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"],
                          "output": text})
            continue
        if text or not m.get("tool_calls"):
            items.append({"role": m["role"], "content": text})
        for call in m.get("tool_calls") or ():
            items.append({"type": "function_call", "call_id": call["id"],
                          "name": call["function"]["name"],
                          "arguments": call["function"]["arguments"]})
    return [cast(TResponseInputItem, item) for item in items]


#: One record an item (or an assistant reply with its calls) appends: its key
#: (:mod:`holon_ctx.integrations.held`), its system text (system messages, matched by content),
#: and the helper call that appends it.
_Unit: TypeAlias = tuple[Key, str | None, Callable[[Session], Any]]


def append_items(session: Session, items: list[Any]) -> None:
    """Append Agents SDK input items (dicts or SDK models) to the ledger, in order."""
    for _, _, apply in _units(items):
        apply(session)


def _units(items: list[Any]) -> list[_Unit]:
    """What ``items`` append, record by record (the mapping of the module docstring)."""
    units: list[_Unit] = []
    reply: list[str] = []
    calls: list[ToolCall] = []
    replying = False

    def flush() -> None:
        nonlocal replying
        if replying:
            text, made = "\n".join(t for t in reply if t), list(calls)
            units.append((("assistant", text), None,
                          _call("assistant_message", text, tool_calls=made)))
        reply.clear()
        calls.clear()
        replying = False

    for raw in items:
        item = _as_dict(raw)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            text = _content_text(item.get("content"))
            if role == "assistant":
                replying = True
                reply.append(text)
                continue
            flush()
            if role == "user":
                units.append((("user", text), None, _call("operator_message", text)))
            else:
                units.append((("note", text), text, _call("", text)))
        elif kind in _CALL_TYPES:
            replying = True
            calls.append(ToolCall(str(item["call_id"]), str(item["name"]),
                                  str(item.get("arguments", item.get("input", "")))))
        elif kind in _OUTPUT_TYPES:
            flush()
            call_id, output = str(item["call_id"]), _content_text(item.get("output"))
            units.append((("tool", call_id), None, _call("tool_result", call_id, output)))
        elif kind == "reasoning":
            continue
        else:
            flush()
            failed = item.get("status") in ("failed", "incomplete")
            details = json.dumps({k: v for k, v in item.items()
                                  if k not in ("id", "type", "status")},
                                 sort_keys=True, default=str)
            units.append((("run", str(kind)), None, _call(
                "tool_run", str(kind), details, status="error" if failed else "ok")))
    flush()
    return units


def _call(helper: str, *args: Any, **kwargs: Any) -> Callable[[Session], Any]:
    """The session helper ``helper`` called with these arguments; "" for a system or developer
    message: guidance before the first turn, else a runtime note."""
    def apply(session: Session) -> Any:
        if helper:
            return getattr(session, helper)(*args, **kwargs)
        if session.current_turn is None:
            return session.set_environment(guidance=args[0])
        return session.runtime_note(args[0] or "(empty system message)")
    return apply


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return cast(dict[str, Any], dump(exclude_unset=True))
    raise InputError(f"expected an input item (a dict), got {type(item).__name__}",
                     source="LedgerSession.add_items", path="items")


def _content_text(content: Any) -> str:
    """The text of a message content or tool output: a string, or parts (non-text as
    placeholders)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    out: list[str] = []
    for part in content:
        part = _as_dict(part)
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            out.append(str(part.get("text", "")))
        elif kind == "refusal":
            out.append(str(part.get("refusal", "")))
        else:
            out.append(_PLACEHOLDERS.get(str(kind), f"[{kind}]"))
    return "\n".join(out)
