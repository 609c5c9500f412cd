"""OpenAI- and Anthropic-style chat transcripts → ledger records.

Turn structure (both formats): a user message with text opens an ``operator_input`` turn and the
assistant's first reply belongs to it; every later assistant message of the same exchange (the
model called again after tool results) opens an ``x-agent-step`` turn anchored to that operator
turn. So each turn is one model activation, and a tool result is owned by the turn whose
assistant message made the call (one ``tool`` record holds both, with ``call_id``).

Trust: system/developer text is runtime configuration (environment guidance before the first
user message, a runtime note after it); user text is the operator's (trusted); assistant text is
model output; tool results are untrusted tool output. Anthropic user messages that hold only
``tool_result`` blocks are tool output, not operator input.
"""

from __future__ import annotations

import json
from typing import Any, Final

from holon_ctx.errors import LedgerFormatError, quote_value
from holon_ctx.ledger.records import Origin, Record, ToolStatus, Trust
from holon_ctx.ledger.transcript_build import LedgerBuilder, expect, required

__all__ = ["read_anthropic", "read_openai"]

_PLACEHOLDER: Final = {"image_url": "[image]", "input_image": "[image]", "image": "[image]",
                       "input_audio": "[audio]", "file": "[file]", "input_file": "[file]",
                       "document": "[document]"}
_TEXT_PARTS: Final = ("text", "input_text", "output_text")


def _messages(data: Any, source: str, *,
              allow_system: bool) -> tuple[list[Any], Any, str]:
    """The message list of a transcript given as a list or as an object with ``messages``, its
    system field, and the list's JSON path (``$`` for a bare list: an error's path must exist in
    the input it names)."""
    if isinstance(data, list):
        return data, None, "$"
    obj = expect(data, (dict, list), "$", source)
    if "messages" not in obj:
        raise LedgerFormatError("missing required field", source=source, path="$.messages")
    system = obj.get("system") if allow_system else None
    return expect(obj["messages"], list, "$.messages", source), system, "$.messages"


def _text_of(content: Any, path: str, b: LedgerBuilder) -> str:
    """Text of OpenAI ``content``: a string, null, or a list of parts (non-text as placeholders)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = expect(content, (str, list), path, b.source)
    out: list[str] = []
    for k, part in enumerate(parts):
        ppath = f"{path}[{k}]"
        if isinstance(part, str):
            out.append(part)
            continue
        part = expect(part, dict, ppath, b.source)
        kind = expect(part.get("type"), str, f"{ppath}.type", b.source)
        if kind in _TEXT_PARTS:
            out.append(expect(part.get("text"), str, f"{ppath}.text", b.source))
        elif kind == "refusal":
            out.append(expect(part.get("refusal"), str, f"{ppath}.refusal", b.source))
        else:
            out.append(_PLACEHOLDER.get(kind, f"[{kind} part]"))
    return "\n".join(out)


def read_openai(data: Any, b: LedgerBuilder) -> list[Record]:
    """Records of an OpenAI chat-completions message list (see the module docstring)."""
    messages, _, at = _messages(data, b.source, allow_system=False)
    env: list[str] = []
    for i, msg in enumerate(messages):
        path = f"{at}[{i}]"
        msg = expect(msg, dict, path, b.source)
        role = required(msg, "role", str, path, b.source)
        key = str(i)
        if role in ("system", "developer"):
            text = _text_of(_content(msg, path, b), f"{path}.content", b)
            if b.turn_id is None:
                env.append(text)
            else:
                b.runtime_note(key, text)
        elif role == "user":
            _flush_env(b, env)
            b.open_turn(key, "operator_input", origin=Origin.OPERATOR,
                        trust=Trust.TRUSTED_OPERATOR)
            b.operator(key, _text_of(_content(msg, path, b), f"{path}.content", b))
        elif role == "assistant":
            _flush_env(b, env)
            if b.turn_id is None or b.turn_has_reply:
                b.open_step(key)
            calls = msg.get("tool_calls")
            calls = [] if calls is None else expect(calls, list, f"{path}.tool_calls", b.source)
            refusal = msg.get("refusal")
            if "content" not in msg and not calls and refusal is None:
                # The API's rule: content may be left out only beside tool calls (or a refusal).
                raise b.fail(f"{path}.content", "missing required field (an assistant message "
                                                "may leave it out only when it has tool_calls)")
            text = _text_of(msg.get("content"), f"{path}.content", b)
            if refusal is not None:
                text = "\n".join(t for t in (text, expect(refusal, str, f"{path}.refusal",
                                                          b.source)) if t)
            if text:
                b.assistant(key, text)
            for j, call in enumerate(calls):
                cpath = f"{path}.tool_calls[{j}]"
                call = expect(call, dict, cpath, b.source)
                call_id = expect(call.get("id"), str, f"{cpath}.id", b.source)
                fn = expect(call.get("function"), dict, f"{cpath}.function", b.source)
                name = expect(fn.get("name"), str, f"{cpath}.function.name", b.source)
                args = fn.get("arguments", "")
                if not isinstance(args, str):
                    args = json.dumps(expect(args, dict, f"{cpath}.function.arguments", b.source),
                                      ensure_ascii=False, sort_keys=True)
                b.call(f"{i}.{j}", call_id, name, args, cpath)
            if not text and not calls:
                b.assistant(key, "")
        elif role == "tool":
            call_id = expect(msg.get("tool_call_id"), str, f"{path}.tool_call_id", b.source)
            output = _text_of(_content(msg, path, b), f"{path}.content", b)
            b.result(call_id, output, f"{path}.tool_call_id")
        elif role == "function":
            raise b.fail(f"{path}.role", "legacy 'function' messages are not supported; "
                                         "use 'tool' messages with tool_call_id")
        else:
            raise b.fail(f"{path}.role", "expected one of system, developer, user, assistant, "
                                         f"tool, got {quote_value(role)}")
    _flush_env(b, env)
    return b.finish()


def _content(msg: dict[str, Any], path: str, b: LedgerBuilder) -> Any:
    """The ``content`` of a message whose role requires one (system, developer, user, tool): a
    missing or null content is refused, not read as empty text; an empty string is empty text, what
    was sent (docs/import.md)."""
    return required(msg, "content", (str, list), path, b.source)


def _flush_env(b: LedgerBuilder, env: list[str]) -> None:
    if env:
        b.environment("0", guidance="\n\n".join(t for t in env if t))
        env.clear()


def _blocks(content: Any, path: str, b: LedgerBuilder) -> list[tuple[str, dict[str, Any]]]:
    """Anthropic content as ``(path, block)`` pairs (a plain string is one text block)."""
    if isinstance(content, str):
        return [(path, {"type": "text", "text": content})]
    items = expect(content, (str, list), path, b.source)
    out = []
    for k, block in enumerate(items):
        bpath = f"{path}[{k}]"
        block = expect(block, dict, bpath, b.source)
        expect(block.get("type"), str, f"{bpath}.type", b.source)
        out.append((bpath, block))
    return out


def _block_text(path: str, block: dict[str, Any], b: LedgerBuilder) -> str:
    kind = block["type"]
    if kind == "text":
        return str(expect(block.get("text"), str, f"{path}.text", b.source))
    return _PLACEHOLDER.get(kind, f"[{kind} block]")


def _system_text(system: Any, b: LedgerBuilder) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "\n\n".join(_block_text(p, blk, b) for p, blk in _blocks(system, "$.system", b))


def read_anthropic(data: Any, b: LedgerBuilder) -> list[Record]:
    """Records of an Anthropic Messages transcript (see the module docstring)."""
    messages, system, at = _messages(data, b.source, allow_system=True)
    guidance = _system_text(system, b)
    if guidance:
        b.environment("0", guidance=guidance)
    for i, msg in enumerate(messages):
        path = f"{at}[{i}]"
        msg = expect(msg, dict, path, b.source)
        role = required(msg, "role", str, path, b.source)
        blocks = _blocks(required(msg, "content", (str, list), path, b.source), f"{path}.content",
                         b)
        key = str(i)
        if role == "user":
            texts: list[str] = []
            for bpath, block in blocks:
                if block["type"] == "tool_result":
                    _tool_result(bpath, block, b)
                else:
                    texts.append(_block_text(bpath, block, b))
            # Only tool results: tool output, no operator turn. No blocks at all: an empty
            # operator message, what was sent, as an empty string is (docs/import.md).
            if texts or not blocks:
                b.open_turn(key, "operator_input", origin=Origin.OPERATOR,
                            trust=Trust.TRUSTED_OPERATOR)
                b.operator(key, "\n\n".join(texts))
        elif role == "assistant":
            if b.turn_id is None or b.turn_has_reply:
                b.open_step(key)
            texts = []
            calls: list[tuple[str, dict[str, Any]]] = []
            for bpath, block in blocks:
                kind = block["type"]
                if kind == "tool_use":
                    calls.append((bpath, block))
                elif kind in ("thinking", "redacted_thinking"):
                    continue  # providers drop these from history; not imported (docs/import.md)
                else:
                    texts.append(_block_text(bpath, block, b))
            text = "\n\n".join(t for t in texts if t)
            if text or not calls:
                b.assistant(key, text)
            for j, (bpath, block) in enumerate(calls):
                call_id = expect(block.get("id"), str, f"{bpath}.id", b.source)
                name = expect(block.get("name"), str, f"{bpath}.name", b.source)
                args = json.dumps(expect(block.get("input", {}), dict, f"{bpath}.input",
                                         b.source), ensure_ascii=False, sort_keys=True)
                b.call(f"{i}.{j}", call_id, name, args, bpath)
        elif role == "system":
            raise b.fail(f"{path}.role", "Anthropic messages have no 'system' role; give the "
                                         "system prompt as the top-level 'system' field")
        else:
            raise b.fail(f"{path}.role", f"expected one of user, assistant, got {quote_value(role)}")
    return b.finish()


def _tool_result(path: str, block: dict[str, Any], b: LedgerBuilder) -> None:
    call_id = expect(block.get("tool_use_id"), str, f"{path}.tool_use_id", b.source)
    content = block.get("content", "")
    if isinstance(content, str):
        output = content
    else:
        output = "\n".join(_block_text(p, blk, b)
                           for p, blk in _blocks(content, f"{path}.content", b))
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise b.fail(f"{path}.is_error", f"expected a boolean, got {type(is_error).__name__}")
    b.result(call_id, output, f"{path}.tool_use_id",
             status=ToolStatus.ERROR if is_error else ToolStatus.OK)
