"""Independent provider counts and stand-in providers for the budget tests (issue 28, RFC 0022).

Written apart from ``holon_ctx.projection.base.framing`` on purpose: what a test compares a request's
budget with must not share the code it checks.

* :func:`cookbook_chat` — OpenAI's token-counting guide (``num_tokens_from_messages``): 3 per
  message, every string field's tokens (role, content, ``name`` plus 1, ``tool_call_id``), each
  tool call's id, type, function name and arguments, 3 for the reply.
* :func:`cookbook_items` — the same for Responses input items: 3 per item and every string field
  (its ``type`` too), 3 for the reply.
* :class:`StandIn` — a provider that is not holon_ctx: it counts with an encoding of its own and
  frames requests its own way, and reports what it counted, as a real provider's usage does.
* :func:`agent_loop` — a deterministic coding-agent loop (replies with tool calls under
  provider-style call ids, outputs in English, code, paths, JSON and Chinese), step by step.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

import holon_ctx
from holon_ctx import ToolCall
from holon_ctx.tokens import counter_for_encoding

Count = Callable[[str], int]


def cookbook_chat(messages: Sequence[Mapping[str, Any]], count: Count) -> int:
    """OpenAI's guide, extended to tool calls as the issue counts them (see the module doc)."""
    total = 3
    for message in messages:
        total += 3
        for key, value in message.items():
            if key == "tool_calls":
                for call in value or ():
                    total += (count(call["id"]) + count(call["type"])
                              + count(call["function"]["name"])
                              + count(call["function"]["arguments"]))
            elif isinstance(value, str):
                total += count(value)
                total += 1 if key == "name" else 0
    return total


def cookbook_items(items: Sequence[Mapping[str, Any]], count: Count) -> int:
    """Responses input items counted the guide's way (see the module doc)."""
    total = 3
    for item in items:
        total += 3 + sum(count(v) for v in item.values() if isinstance(v, str))
    return total


def _texts_of_anthropic(request: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    """``(role, block type, text)`` of every block of an Anthropic body, ids and names as text."""
    for block in request.get("system") or ():
        yield "system", "text", block["text"]
    for message in request["messages"]:
        for block in message["content"]:
            kind = block["type"]
            if kind == "text":
                yield message["role"], kind, block["text"]
            elif kind == "tool_use":
                yield message["role"], kind, (block["id"] + block["name"]
                                              + json.dumps(block["input"]))
            elif kind == "tool_result":
                yield message["role"], kind, block["tool_use_id"] + block["content"]


@attrs.frozen
class StandIn:
    """A provider that counts with its own tokenizer and framing (see the module docstring).

    ``tokens`` counts a text; ``per_message`` / ``per_block`` / ``reply`` are its framing;
    ``count_ids`` says whether ids and block types are text to it.
    """

    name: str
    tokens: Count
    per_message: int = 3
    per_block: int = 0
    reply: int = 3
    count_ids: bool = True

    def chat(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Its count of a chat-completions request."""
        total = self.reply
        for message in messages:
            total += self.per_message + self.tokens(message["role"])
            content = message.get("content")
            total += self.tokens(content) if isinstance(content, str) else 0
            if self.count_ids and message.get("tool_call_id"):
                total += self.tokens(message["tool_call_id"])
            for call in message.get("tool_calls") or ():
                total += self.per_block + self.tokens(call["function"]["name"]) + self.tokens(
                    call["function"]["arguments"])
                total += self.tokens(call["id"]) if self.count_ids else 0
        return total

    def anthropic(self, request: Mapping[str, Any]) -> int:
        """Its count of a Messages request: per message, per block, the blocks' texts."""
        total = self.reply
        role = None
        for message_role, kind, text in _texts_of_anthropic(request):
            if message_role != role:
                total += self.per_message + self.tokens(message_role)
                role = message_role
            else:
                total += self.per_block
            total += self.tokens(text) + (self.tokens(kind) if self.count_ids else 0)
        return total


def stand_in_tokenizer(encoding: str, *, split_long: int = 0) -> Count:
    """A tokenizer for a stand-in: ``encoding``'s count, with every token of more than
    ``split_long`` bytes counted twice when ``split_long`` is set (a less efficient vocabulary,
    as Anthropic's is reported to be, whose excess varies with the text)."""
    counter = counter_for_encoding(encoding)
    if not split_long:
        return counter.count
    # Which token ids are long, computed once per id (a request holds thousands of tokens).
    long_ids: dict[int, int] = {}

    def is_long(token: int) -> int:
        found = long_ids.get(token)
        if found is None:
            found = long_ids[token] = int(len(counter.decode_bytes([token])) > split_long)
        return found

    def count(text: str) -> int:
        tokens = counter.encode(text)
        return len(tokens) + sum(map(is_long, tokens))

    return count


_WORDS = ["the", "build", "passes", "after", "the", "retry;", "check", "the", "deploy", "log",
          "before", "merging", "and", "tell", "the", "owner", "which", "test", "failed", "and",
          "why", "it", "matters", "for", "the", "release"]
_CODE = ['def total(items, discount):\n    return sum(items) - discount\n',
         'if err != nil {\n\treturn fmt.Errorf("wrap: %w", err)\n}\n',
         "class Cart:\n    def __init__(self):\n        self.items = []\n"]
_CJK = "构建在重试后通过了。请在合并之前检查部署日志，并告诉负责人明天上午处理。"


def _output(rnd: random.Random, step: int) -> str:
    kind = step % 5
    if kind == 0:
        return "\n".join(f"/testbed/src/module_{rnd.randint(1, 99)}/file_{i}.py"
                         for i in range(rnd.randint(3, 30)))
    if kind == 1:
        return "".join(rnd.choice(_CODE) for _ in range(rnd.randint(2, 12)))
    if kind == 2:
        return json.dumps({"status": "ok", "items": [{"id": rnd.randint(1, 10**6),
                                                      "name": rnd.choice(_WORDS)}
                                                     for _ in range(rnd.randint(2, 25))]})
    if kind == 3:
        return _CJK * rnd.randint(1, 8)
    return " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(20, 300)))


def call_id(rnd: random.Random, style: str) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    prefix = "toolu_01" if style == "anthropic" else "call_"
    return prefix + "".join(rnd.choice(alphabet) for _ in range(24))


def agent_loop(session: holon_ctx.Session, steps: int, *, seed: int = 0,
               ids: str = "openai") -> Iterator[int]:
    """Run a coding agent's loop on ``session``, yielding after each step (a model call is due).
    Every 40 steps the operator says something; each step is one reply with one or two calls
    and their results."""
    rnd = random.Random(seed)
    session.set_environment(guidance="You fix failing tests. Run them before you say they pass.",
                            workspace="/testbed")
    session.operator_message("The checkout tests fail since this morning; find out why and fix "
                             "them. Keep the public API as it is.")
    for step in range(steps):
        if step and step % 40 == 0:
            session.operator_message(f"Status? Also check the {rnd.choice(_WORDS)} module.")
        calls = [ToolCall(call_id(rnd, ids), rnd.choice(["bash", "read_file", "edit_file"]),
                          {"command": f"pytest tests/test_{rnd.choice(_WORDS)}.py -q -k "
                                      f"{rnd.choice(_WORDS)}"})
                 for _ in range(rnd.randint(1, 2))]
        session.assistant_message(" ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(3, 40))),
                                  tool_calls=calls)
        for call in calls:
            session.tool_result(call.call_id, _output(rnd, step + rnd.randint(0, 4)),
                                status=rnd.choice(["ok", "ok", "error"]),
                                exit_code=rnd.choice([0, 0, 1]))
        yield step
