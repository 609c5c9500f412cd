"""Native provider messages: a history laid out as the provider's own conversation (RFC 0010).

Theory of operation. The session projection (:mod:`.session`) builds a request from *parts*. A
part has a role and two renderings of the same content: ``text``, as the text layout shows it
(labels and fences, block-safe, so token counts add), and ``content``, as a provider message holds
it. Most parts are the same in both: a user-role part is the text (operator words under their
``operator (trusted)`` label, runtime facts, and untrusted text fenced and labelled exactly as in
the text layout). Two kinds differ:

* an **assistant** part is the model's own reply: in a message it is the assistant's content
  (its words, fence-neutralised, no label or fence — the role says who wrote it) with the tool
  calls it made as ``tool_calls`` (OpenAI) or ``tool_use`` blocks (Anthropic);
* a **tool** part is a call's result: a ``tool`` message (OpenAI) or a ``tool_result`` block first
  in the next user message (Anthropic), holding the call's label line and its fenced output.

A call is native only when the ledger says so: the tool record has a provider ``call_id``, comes
right after the assistant message of its turn (or that message's other results), its id and
name are valid for both APIs, and no earlier native call of the same request has its id (a
runtime may reuse ids across replies, ``call_0`` in every one; Anthropic refuses a request whose
``tool_use`` ids repeat, and OpenAI's pairing of results by id becomes ambiguous: RFC 0008,
decision 9). Anything else — a tool the runtime ran itself, a call whose reply was compacted
away, a reused id — stays a labelled user-role part (the call's label line and its fenced
result, as the text layout shows them), so no request built here can hold a call without its
result, a result without its call, or two calls under one id.

Token accounting (the session's ``parts_cost``, and the reply priming) is
:func:`~holon_ctx.projection.base.framing.measure_request`'s under the session's framing rule
(RFC 0022): content tokens, each message's role and markers, each
call's id, type, name and arguments, each result's call id, and the reply priming. It is computed
per part as the parts are laid out, so a session knows a request's size without measuring it;
tests re-measure every request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence, Set
from typing import Any, Final

import msgspec

from holon_ctx.ledger.fieldcheck import unicode_error
from holon_ctx.ledger.records import Message, MessageRole, Tool
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.base.framing import Framing, Role, arguments_json
from holon_ctx.projection.base.items import Block, BlockKind, Rendered
from holon_ctx.projection.base.provider_types import (
    AnthropicAssistantBlock,
    AnthropicContentBlock,
    AnthropicMessage,
    AnthropicRequest,
    AnthropicTextBlock,
    OpenAIMessage,
    OpenAIToolCall,
)
from holon_ctx.projection.base.spans import Span, blocks_of, spans_of
from holon_ctx.projection.provider_formats.providers import CACHE_CONTROL
from holon_ctx.tokens import seam_tokens

__all__ = ["Call", "Part", "Role", "anthropic_request", "call_ids", "framing_between",
           "openai_messages", "parts_of_blocks", "system_part", "text_part"]

#: Ids and names both APIs accept (Anthropic's tool_use id pattern; OpenAI's function name).
_CALL_ID: Final = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Call(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call an assistant part made, with its arguments as a JSON object."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    #: ``arguments`` encoded once (:func:`~holon_ctx.projection.provider_formats.providers.arguments_json`).
    arguments_json: str
    tokens: int


class Part(msgspec.Struct, frozen=True, kw_only=True):
    """One piece of a request (see the module docstring). A Struct: a session persists the parts
    it froze (:mod:`holon_ctx.ledger.epochs`)."""

    role: Role
    text: str
    text_tokens: int
    content: str
    content_tokens: int
    calls: tuple[Call, ...] = ()
    #: The call a tool part answers.
    call_id: str | None = None
    refs: tuple[str, ...] = ()
    #: Set on the last part of the stable prefix: a cache breakpoint goes after it.
    stable_end: bool = False
    #: The blocks ``text`` was laid out from, as data (:mod:`holon_ctx.projection.base.spans`): the
    #: preview tags a part's lines from them, never from its fences.
    spans: tuple[Span, ...] = ()

    @property
    def call_tokens(self) -> int:
        return sum(c.tokens for c in self.calls)

    def blocks(self) -> tuple[Block, ...]:
        """The blocks this part sends, for a reader that tags its lines (the CLI's preview): the
        model's reply is model output (its role says who wrote it, and the text is
        fence-neutralised), with the calls it made; any other part's content is its text, block
        by block as the renderer made it (:func:`~holon_ctx.projection.base.spans.blocks_of`)."""
        if self.role is Role.ASSISTANT:
            calls = "".join(f"tool call {c.name} {c.arguments_json} (id {c.call_id})\n"
                            for c in self.calls)
            return (Block(head="", body=self.content, tail=calls, refs=self.refs,
                          kind=BlockKind.TRUSTED, trust="model_output"),)
        return blocks_of(self.content, self.spans)


def text_part(text: str, tokens: int, refs: Iterable[str] = (), *, stable_end: bool = False,
              spans: tuple[Span, ...] = ()) -> Part:
    """A user-role part whose content is its text (made of the blocks ``spans`` describe)."""
    return Part(role=Role.USER, text=text, text_tokens=tokens, content=text, content_tokens=tokens,
                refs=tuple(refs), stable_end=stable_end, spans=spans)


def system_part(text: str, tokens: int, refs: Iterable[str] = (),
                spans: tuple[Span, ...] = ()) -> Part:
    """Runtime configuration for the system role (the environment, when it may sit there)."""
    return Part(role=Role.SYSTEM, text=text, text_tokens=tokens, content=text,
                content_tokens=tokens, refs=tuple(refs), stable_end=True, spans=spans)


def _call(tool: Tool, framing: Framing) -> Call | None:
    """The native call of a tool record, or None when it cannot be one (see the module doc)."""
    if (tool.call_id is None or tool.pending or not _CALL_ID.match(tool.call_id)
            or not _TOOL_NAME.match(tool.tool_name)):
        return None
    try:
        parsed = json.loads(tool.args_preview) if tool.args_preview.strip() else {}
    except ValueError:
        parsed = None
    arguments: dict[str, Any] = (parsed if isinstance(parsed, dict)
                                    else {"input": tool.args_preview})
    encoded = arguments_json(arguments)
    if unicode_error(encoded) is not None:
        # Valid JSON can escape half a surrogate pair ("\ud800"): decoded, it is text no UTF-8
        # request body holds (an SDK's encoder raises). The stored text is valid; send that.
        arguments = {"input": tool.args_preview}
        encoded = arguments_json(arguments)
    tokens = framing.call(tool.call_id, tool.tool_name, encoded)
    return Call(call_id=tool.call_id, name=tool.tool_name, arguments=arguments,
                arguments_json=encoded, tokens=tokens)


def _is_assistant(stored: StoredRecord | None) -> bool:
    return (stored is not None and isinstance(stored.record, Message)
            and stored.record.role is MessageRole.ASSISTANT)


def call_ids(parts: Iterable[Part]) -> set[str]:
    """The ids of the native calls ``parts`` make (what :func:`parts_of_blocks` takes as ``used``)."""
    return {c.call_id for part in parts for c in part.calls}


def parts_of_blocks(blocks: Iterable[Block], records: Mapping[str, StoredRecord],
                    framing: Framing, *, previous: Part | None = None,
                    used: Set[str] = frozenset()) -> list[Part]:
    """The parts of a run of rendered blocks, in order.

    ``records`` maps refs to the records the blocks show (a block shows the record of its first
    ref). ``previous`` is the part just before these blocks, when a tool result may still attach
    to it. ``used`` holds the ids of the native calls the request makes before these blocks: a
    call under one of them, or under an id an earlier call of this run took, stays text (the
    first call of an id in a request is the native one, so a request stays a prefix of the
    next). A turn heading (a label line showing only a ``turn:`` ref) is in the text layout only:
    in messages the roles and the records' own labels say what it would, and a part's place in
    messages never depends on what comes after it (a request must stay a prefix of the next).
    """
    counter = framing.counter
    parts: list[Part] = []
    taken: set[str] = set()  # ids this run's calls took
    last = previous
    for block in blocks:
        ref = block.ref
        stored = records.get(ref) if ref is not None else None
        text = block.text
        spans = spans_of((block,))
        if _is_assistant(stored):
            # The body's tokens are the block's less its label lines (blocks are additive).
            body_tokens = (block.tokens - counter.count(block.head) - counter.count(block.tail)
                           - seam_tokens(counter, block.head, block.body) if block.body else 0)
            part = Part(role=Role.ASSISTANT, text=text, text_tokens=block.tokens,
                        content=block.body, content_tokens=body_tokens, refs=block.refs,
                        spans=spans)
        elif stored is not None and isinstance(stored.record, Tool) and last is not None and (
                last.role is Role.ASSISTANT or last.role is Role.TOOL) and (
                call := _call(stored.record, framing)) is not None and _same_turn(
                    stored, last, records):
            if call.call_id in used or call.call_id in taken or _attach(parts, call) is None:
                part = text_part(text, block.tokens, block.refs, spans=spans)
            else:
                taken.add(call.call_id)
                part = Part(role=Role.TOOL, text=text, text_tokens=block.tokens, content=text,
                            content_tokens=block.tokens, call_id=call.call_id, refs=block.refs,
                            spans=spans)
        elif (ref is not None and ref.startswith("turn:") and block.kind is BlockKind.HEADING
              and not block.body):
            part = Part(role=Role.USER, text=text, text_tokens=block.tokens, content="",
                        content_tokens=0, refs=block.refs, spans=spans)
        else:
            part = text_part(text, block.tokens, block.refs, spans=spans)
        parts.append(part)
        last = part
    return parts


def _same_turn(tool: StoredRecord, last: Part, records: Mapping[str, StoredRecord]) -> bool:
    owner = next((records[r] for r in last.refs if r in records), None)
    return owner is not None and owner.turn_seq == tool.turn_seq


def _attach(parts: list[Part], call: Call) -> Part | None:
    """Add ``call`` to the assistant part that the run ends with (or whose results it ends with)."""
    for i in range(len(parts) - 1, -1, -1):
        part = parts[i]
        if part.role is Role.ASSISTANT:
            parts[i] = msgspec.structs.replace(part, calls=(*part.calls, call))
            return parts[i]
        if part.role is not Role.TOOL:
            return None
    return None  # the assistant part is in an earlier run: frozen, so the call stays text


def framing_between(framing: Framing, previous: Role | None, part: Part) -> int:
    """Framing tokens ``part`` adds after a part of role ``previous`` (None: the first part):
    nothing for an empty part, else what ``framing`` says (a new message, or a block of the
    current one; a result's call id)."""
    if not part.content and not part.calls:
        return 0
    return framing.between(previous, part.role, call_id=part.call_id)


def openai_messages(parts: Iterable[Part]) -> list[OpenAIMessage]:
    """Chat-completions messages: consecutive user parts share one message."""
    out: list[OpenAIMessage] = []
    for part in parts:
        if not part.content and not part.calls:
            continue
        if part.role is Role.SYSTEM:
            out.append({"role": "system", "content": part.content})
        elif part.role is Role.USER:
            prev = out[-1] if out else None
            if prev is not None and prev["role"] == "user":
                prev["content"] += part.content
            else:
                out.append({"role": "user", "content": part.content})
        elif part.role is Role.TOOL:
            assert part.call_id is not None
            out.append({"role": "tool", "tool_call_id": part.call_id, "content": part.content})
        else:
            calls: list[OpenAIToolCall] = [
                {"id": c.call_id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments_json}}
                for c in part.calls]
            if calls:
                out.append({"role": "assistant", "content": part.content or None,
                            "tool_calls": calls})
            else:
                out.append({"role": "assistant", "content": part.content})
    return out


def anthropic_request(parts: Sequence[Part], *, rolling_after: int | None) -> AnthropicRequest:
    """A Messages request: the system part in ``system``; one content block per part, messages
    alternating user and assistant; a tool result first in the user message after its call.

    Cache breakpoints: after the system part and after the part marked ``stable_end`` (the end
    of the stable prefix), and a rolling one after part index ``rolling_after`` (the last part
    of the history) — at most three, under Anthropic's limit of four.
    """
    system: list[AnthropicTextBlock] = []
    messages: list[AnthropicMessage] = []
    for i, part in enumerate(parts):
        if not part.content and not part.calls:
            continue
        mark = part.stable_end or i == rolling_after
        if part.role is Role.SYSTEM:
            block: AnthropicTextBlock = {"type": "text", "text": part.content}
            if mark:
                block["cache_control"] = CACHE_CONTROL.copy()
            system.append(block)
            continue
        if part.role is Role.ASSISTANT:
            blocks: list[AnthropicAssistantBlock] = []
            if part.content:
                blocks.append({"type": "text", "text": part.content})
            blocks.extend({"type": "tool_use", "id": c.call_id, "name": c.name,
                           "input": c.arguments} for c in part.calls)
            if mark:
                blocks[-1]["cache_control"] = CACHE_CONTROL.copy()
            prev = messages[-1] if messages else None
            if prev is not None and prev["role"] == "assistant":
                prev["content"].extend(blocks)
            else:
                messages.append({"role": "assistant", "content": blocks})
            continue
        user_block: AnthropicContentBlock
        if part.role is Role.TOOL:
            assert part.call_id is not None
            user_block = {"type": "tool_result", "tool_use_id": part.call_id,
                          "content": part.content}
        else:
            user_block = {"type": "text", "text": part.content}
        if mark:
            user_block["cache_control"] = CACHE_CONTROL.copy()
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "user":
            last["content"].append(user_block)
        else:
            messages.append({"role": "user", "content": [user_block]})
    return {"system": system, "messages": messages}


def render_parts(form: Rendered, records: Mapping[str, StoredRecord], framing: Framing,
                 *, previous: Part | None = None, used: Set[str] = frozenset()) -> list[Part]:
    """:func:`parts_of_blocks` over a rendered form."""
    return parts_of_blocks(form.blocks, records, framing, previous=previous, used=used)
