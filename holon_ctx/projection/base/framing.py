"""Framing: the tokens a provider's request format puts around its contents (RFC 0022).

A provider does not bill the text of a request alone. Each message has a role and separators, a
tool call its id, type, name and arguments, a tool result the id of the call it answers, and the
reply is primed after the last message. A :class:`FramingRule` states that overhead for one
provider's formats as data; :class:`Framing` binds a rule to a token counter and prices the parts
of a request (:mod:`.native`) and the request bodies built here (:func:`measure_request`).

The rules and their sources (``docs/providers.md`` has the table):

``openai``     OpenAI's token-counting guide (the cookbook's ``num_tokens_from_messages``): 3
               tokens per message, the *values* of its fields counted as text — the role, the
               content, a ``name`` (plus 1), a tool message's ``tool_call_id`` — and 3 to prime
               the reply. Tool calls are not in the guide; each is counted as its fields are (its
               ``id``, its type, the function's ``name`` and ``arguments``) plus 3 for their
               separators. One rule covers the Responses API too: its input items are the same
               conversation (an item per message, ``function_call`` and ``function_call_output``
               items for calls and results), so where the two formats label a thing differently
               (a result's role ``tool`` or item type ``function_call_output``; a call's type
               ``function`` or ``function_call``) the longer label is counted. The rule therefore
               bounds both formats from above and equals the guide's count for text messages.
``anthropic``  Anthropic publishes no tokenizer and no framing (its ``count_tokens`` endpoint is
               online). Its request is content blocks in alternating user and assistant
               messages: a tool result is a ``tool_result`` block of the next user message, a
               call a ``tool_use`` block (``id``, ``name``, ``input``). The rule counts what the
               blocks carry the same way (role, block type, ids, names, arguments) plus 3 per
               message, 1 per further block and 3 for the reply; ``cache_control`` markers are
               request metadata, not text. The estimate is then *calibrated* against reported
               usage (:mod:`holon_ctx.calibration`).

Every rule is additive over parts: what a part costs depends only on the part and the role of the
part before it, so a session adds part costs as records join (RFC 0010) and the sum is what
:func:`measure_request` gives the finished request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

import attrs

from holon_ctx.tokens import TokenCounter

__all__ = ["ANTHROPIC", "OPENAI", "RULES", "Framing", "FramingRule", "Payload", "Role",
           "arguments_json", "default_framing", "measure_request"]


class Role(StrEnum):
    """The role of a part of a request (:mod:`.native`)."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@attrs.frozen
class FramingRule:
    """One provider's request framing, in tokens (see the module docstring)."""

    name: str
    #: Fixed tokens around every message (start, end and separator markers).
    per_message: int
    #: Fixed tokens for every content block of a message after its first (0: a message's text
    #: parts are one string).
    per_block: int
    #: Fixed tokens per tool call besides the fields counted as text.
    per_call: int
    #: Tokens that prime the reply, once per request.
    reply: int
    #: How a message's role is labelled (the longest label of a role counts).
    role_labels: tuple[tuple[Role, tuple[str, ...]], ...]
    #: How a call is typed (``function``; ``function_call``; ``tool_use``).
    call_labels: tuple[str, ...]
    #: How a result block is typed where results are blocks of a user message (Anthropic).
    result_labels: tuple[str, ...] = ()
    #: True when a tool result is a block of the next user message, not a message of its own.
    results_in_user: bool = False

    def labels(self, role: Role) -> tuple[str, ...]:
        return next((labels for r, labels in self.role_labels if r is role), (role.value,))


OPENAI: Final = FramingRule(
    name="openai", per_message=3, per_block=0, per_call=3, reply=3,
    role_labels=((Role.SYSTEM, ("system", "developer")), (Role.USER, ("user",)),
                 (Role.ASSISTANT, ("assistant",)), (Role.TOOL, ("tool", "function_call_output"))),
    call_labels=("function", "function_call"))
ANTHROPIC: Final = FramingRule(
    name="anthropic", per_message=3, per_block=1, per_call=3, reply=3,
    role_labels=((Role.SYSTEM, ("system",)), (Role.USER, ("user",)),
                 (Role.ASSISTANT, ("assistant",)), (Role.TOOL, ("user",))),
    call_labels=("tool_use",), result_labels=("tool_result",), results_in_user=True)
#: The rules by name.
RULES: Final = {rule.name: rule for rule in (OPENAI, ANTHROPIC)}


class Framing:
    """A rule bound to a counter: what each piece of framing costs (label counts computed once)."""

    def __init__(self, rule: FramingRule, counter: TokenCounter) -> None:
        self.rule = rule
        self.counter = counter
        self._role = {role: max(counter.count(label) for label in rule.labels(role))
                      for role in Role}
        self._call = rule.per_call + max(counter.count(label) for label in rule.call_labels)
        self._result = max((counter.count(label) for label in rule.result_labels), default=0)

    @property
    def identity(self) -> str:
        """Names the rule and the counter (part of a session's state key)."""
        return f"{self.rule.name}@{self.counter.identity}"

    @property
    def reply(self) -> int:
        return self.rule.reply

    def _group(self, role: Role) -> Role:
        return Role.USER if role is Role.TOOL and self.rule.results_in_user else role

    def between(self, previous: Role | None, role: Role, *, call_id: str | None = None) -> int:
        """Tokens a part of ``role`` (a result: answering ``call_id``) adds after a part of role
        ``previous`` (None: the first part): a new message, or a block of the current one."""
        group = self._group(role)
        continues = (previous is not None and group is Role.USER
                     and self._group(previous) is Role.USER
                     and (role is Role.USER or self.rule.results_in_user)
                     and (previous is Role.USER or self.rule.results_in_user))
        cost = self.rule.per_block if continues else self.rule.per_message + self._role[group]
        if role is Role.TOOL and call_id is not None:
            cost += self._result + self.counter.count(call_id)
        return cost

    def call(self, call_id: str, name: str, arguments: str) -> int:
        """Tokens of one tool call: its fields as text and the rule's overhead."""
        count = self.counter.count
        return self._call + count(call_id) + count(name) + count(arguments)

    def message(self, role: Role) -> int:
        """A message of its own (the stateless layout: system and user messages only)."""
        return self.rule.per_message + self._role[role]

    def stateless(self, messages: int) -> int:
        """The framing of a stateless request of ``messages`` messages (system first, then user:
        both labels at their longest), reply priming included."""
        if messages <= 0:
            return self.rule.reply
        one = max(self.message(Role.SYSTEM), self.message(Role.USER))
        return one * messages + self.rule.reply


def default_framing(counter: TokenCounter) -> Framing:
    """The OpenAI rule on ``counter``: what requests are counted with when no model is named."""
    return Framing(OPENAI, counter)


#: What :func:`measure_request` reads: chat messages, Responses input items, or a body with
#: ``system`` and ``messages`` (Anthropic) — a request built here or one shaped like it.
Payload = Sequence[Mapping[str, Any]] | Mapping[str, Any]


def arguments_json(value: object) -> str:
    """A tool call's arguments as the one JSON text both providers' shapes agree on (compact,
    keys in their given order), so a call costs the same tokens in either format."""
    import json  # noqa: PLC0415 - one use, on a cold path

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _role(value: object) -> Role:
    try:
        return Role(str(value))
    except ValueError:
        return Role.SYSTEM if value == "developer" else Role.USER


def measure_request(payload: Payload, framing: Framing) -> int:
    """Tokens of a request as ``framing`` counts it: every text content (a message's, or a
    block's), every call and result field, and the framing around them (see the module
    docstring)."""
    meter = _Meter(framing)
    if isinstance(payload, Mapping):
        system = payload.get("system") or []
        if isinstance(system, str):
            system = [{"type": "text", "text": system}]
        for block in system:
            meter.part(Role.SYSTEM, block["text"])
        messages: Sequence[Mapping[str, Any]] = payload.get("messages", [])
    else:
        messages = payload
    for msg in messages:
        meter.message(msg)
    # Each content on its own: a provider frames messages (and Anthropic's blocks) apart, so no
    # token runs from one into the next (which o200k's pre-tokeniser would do across "\n/").
    count = framing.counter.count
    return meter.total + sum(count(text) for text in meter.texts)


class _Meter:
    """A request's framing tokens so far, the role of its last part, and its texts (counted at
    the end)."""

    def __init__(self, framing: Framing) -> None:
        self.framing = framing
        self.total = framing.reply
        self.previous: Role | None = None
        self.texts: list[str] = []

    def part(self, role: Role, text: str, call_id: str | None = None) -> None:
        self.total += self.framing.between(self.previous, role, call_id=call_id)
        self.texts.append(text)
        self.previous = role

    def call(self, call_id: str, name: str, arguments: str, *, turn: bool = True) -> None:
        """An assistant's tool call; ``turn``: it opens an assistant turn unless one is open."""
        if turn and self.previous is not Role.ASSISTANT:
            self.total += self.framing.between(self.previous, Role.ASSISTANT)
            self.previous = Role.ASSISTANT
        self.total += self.framing.call(call_id, name, arguments)

    def message(self, msg: Mapping[str, Any]) -> None:
        kind = msg.get("type")
        if kind in ("function_call", "custom_tool_call"):  # a Responses call item
            self.total += self.framing.between(self.previous, Role.ASSISTANT)
            self.previous = Role.ASSISTANT
            self.call(str(msg["call_id"]), str(msg["name"]),
                      str(msg.get("arguments", msg.get("input", ""))), turn=False)
            return
        if kind in ("function_call_output", "custom_tool_call_output"):
            self.part(Role.TOOL, str(msg.get("output", "")), str(msg["call_id"]))
            return
        role = _role(msg.get("role"))
        content = msg.get("content")
        if role is Role.TOOL:
            self.part(Role.TOOL, content or "", msg.get("tool_call_id"))
            return
        if isinstance(content, str):
            self.part(role, content)
        elif content is not None:
            self.blocks(role, content)
        elif not msg.get("tool_calls"):
            self.part(role, "")
        for call in msg.get("tool_calls") or ():
            function = call["function"]
            self.call(str(call["id"]), str(function["name"]), str(function["arguments"]))

    def blocks(self, role: Role, content: Sequence[Mapping[str, Any]]) -> None:
        """A message's content blocks (Anthropic's and the Responses API's)."""
        first = True
        for block in content:
            btype = block.get("type")
            if btype == "tool_result":
                result = block.get("content", "")
                self.part(Role.TOOL, result if isinstance(result, str) else "".join(
                    b.get("text", "") for b in result), str(block["tool_use_id"]))
            elif btype == "tool_use":
                if first:
                    self.total += self.framing.between(self.previous, Role.ASSISTANT)
                    self.previous = Role.ASSISTANT
                self.call(str(block["id"]), str(block["name"]), arguments_json(block["input"]),
                          turn=False)
            elif btype in ("text", "input_text", "output_text"):
                self.part(role, block["text"])
            first = False
