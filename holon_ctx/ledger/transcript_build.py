"""Shared machinery of the transcript readers: ids, turns, provenance, located errors.

A reader walks a transcript once, in order, and calls :class:`LedgerBuilder` to open turns and add
records. The builder numbers turns from ``first_seq`` (0 by default: :func:`import_any` appends
with ``renumber_turns=True``, so the store gives them the ledger's next numbers inside its write
transaction), names every record after the source message it came from (``m12`` is
``$.messages[12]``, ``x12.0`` its first tool call), and states provenance explicitly on every
record, so the mapping is visible in the ledger itself rather than left to defaults.

Tool calls wait in ``pending`` until their result arrives; then *one* ``tool`` record, owned by the
turn of the call, holds both (call id, name, arguments, status, output). A call whose result never
arrives is written with status ``pending`` when its turn closes.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any, Final

import attrs

from holon_ctx.errors import LedgerFormatError, quote_value
from holon_ctx.ledger.codec import id_error
from holon_ctx.ledger.records import (
    Environment,
    Message,
    MessageRole,
    Origin,
    Record,
    Tool,
    ToolStatus,
    Trust,
    Turn,
)

__all__ = ["AGENT_STEP", "LedgerBuilder", "PendingCall", "digest", "expect", "required", "rfc3339"]

#: Trigger of a turn in which the runtime asks the model for its next step after tool results
#: (an extension trigger: the engine treats it as a runtime wake that continues its anchor).
AGENT_STEP: Final = "x-agent-step"
_ID_SAFE = re.compile(r"[^A-Za-z0-9_.:-]")


def digest(text: str) -> str:
    """``sha256:<hex>`` of the exact text (the tool-arguments digest). A lone surrogate is hashed
    as it is (``surrogatepass``) rather than raising here: the record's own field check refuses
    that text with one line naming the field, which a ``UnicodeEncodeError`` from a hash would
    pre-empt."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def rfc3339(value: Any) -> str | None:
    """A Unix timestamp as RFC 3339 UTC, or None when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return datetime.fromtimestamp(value, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None


def expect(value: Any, kind: type | tuple[type, ...], path: str, source: str) -> Any:
    """``value`` if it has the JSON type wanted, else a located ``expected …, got …`` error."""
    if isinstance(value, kind) and not isinstance(value, bool):
        return value
    names = {str: "a string", list: "an array", dict: "an object", int: "an integer"}
    want = (" or ".join(names.get(k, k.__name__) for k in kind) if isinstance(kind, tuple)
            else names.get(kind, kind.__name__))
    raise LedgerFormatError(f"expected {want}, got {_json_type(value)}", source=source, path=path)


def required(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], path: str,
             source: str) -> Any:
    """``obj[key]`` checked by :func:`expect`; a key that is not there is a ``missing required
    field`` at ``path.key``, not a null: a log that dropped the field is not one that said null."""
    if key not in obj:
        raise LedgerFormatError("missing required field", source=source, path=f"{path}.{key}")
    return expect(obj[key], kind, f"{path}.{key}", source)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)


@attrs.define
class PendingCall:
    """A tool call seen in an assistant message, waiting for its result."""

    call_id: str
    record_id: str
    turn_id: str
    name: str
    arguments: str
    path: str


@attrs.define
class LedgerBuilder:
    """Collects the records of one transcript, in ledger order."""

    source: str
    first_seq: int = 0
    prefix: str = ""
    records: list[Record] = attrs.Factory(list)
    turn_id: str | None = None
    #: The newest turn opened by the operator: what agent steps continue.
    operator_turn_id: str | None = None
    #: True once the current turn holds an assistant message (the next one opens a step turn).
    turn_has_reply: bool = False
    pending: dict[str, PendingCall] = attrs.Factory(dict)
    answered: dict[str, str] = attrs.Factory(dict)
    #: Calls whose turn closed before a result came: call id → path of the call.
    unanswered: dict[str, str] = attrs.Factory(dict)
    _seq: int = 0
    _used: set[str] = attrs.Factory(set)

    def __attrs_post_init__(self) -> None:
        self._seq = self.first_seq
        # Every id built here starts with the prefix: refuse a bad one before reading anything.
        problem = id_error(f"{self.prefix}t0") if self.prefix else None
        if problem:
            raise LedgerFormatError(f"id prefix {quote_value(self.prefix)}: {problem}", source=self.source)

    def fail(self, path: str, message: str) -> LedgerFormatError:
        return LedgerFormatError(message, source=self.source, path=path)

    def rid(self, kind: str, key: str) -> str:
        """A ledger id for kind letter + source key (``m12``), unique within the transcript."""
        base = f"{self.prefix}{kind}{_ID_SAFE.sub('_', key)}"
        rid, n = base, 1
        while rid in self._used:
            n += 1
            rid = f"{base}.{n}"
        self._used.add(rid)
        return rid

    # -- turns -----------------------------------------------------------------------------
    def open_turn(self, key: str, trigger: str, *, origin: Origin, trust: Trust,
                  anchor: str | None = None, work_item_id: str | None = None,
                  at: str | None = None, label: str | None = None) -> str:
        """Close the current turn (pending calls become ``pending`` tools) and open a new one."""
        self.close_turn()
        tid = self.rid("t", key)
        self.records.append(Turn(id=tid, seq=self._seq, trigger=trigger, origin=origin,
                                 trust=trust, anchor_turn_id=anchor, work_item_id=work_item_id,
                                 at=at, label=label))
        self._seq += 1
        self.turn_id = tid
        self.turn_has_reply = False
        if trigger == "operator_input":
            self.operator_turn_id = tid
        return tid

    def open_step(self, key: str, *, at: str | None = None,
                  work_item_id: str | None = None) -> str:
        """A turn in which the runtime asks the model for its next step (anchored to the task)."""
        return self.open_turn(key, AGENT_STEP, origin=Origin.RUNTIME, trust=Trust.RUNTIME_FACT,
                              anchor=self.operator_turn_id, work_item_id=work_item_id, at=at)

    def close_turn(self) -> None:
        """Write calls of the closing turn that never got a result, as ``pending`` tools."""
        for call in list(self.pending.values()):
            self.unanswered[call.call_id] = call.path
            self.records.append(Tool(
                id=call.record_id, turn_id=call.turn_id, tool_name=call.name,
                args_digest=digest(call.arguments), args_preview=call.arguments,
                status=ToolStatus.PENDING, call_id=call.call_id, origin=Origin.TOOL,
                trust=Trust.UNTRUSTED_EXTERNAL))
        self.pending.clear()

    # -- records ---------------------------------------------------------------------------
    def environment(self, key: str, *, guidance: str, workspace: str = "",
                    capabilities: list[str] | None = None) -> None:
        self.records.append(Environment(id=self.rid("e", key), workspace=workspace,
                                        capabilities=capabilities or [], guidance=guidance,
                                        origin=Origin.RUNTIME, trust=Trust.RUNTIME_FACT))

    def operator(self, key: str, text: str, at: str | None = None) -> None:
        self.records.append(Message(id=self.rid("m", key), turn_id=self.turn_id,
                                    role=MessageRole.OPERATOR, text=text, at=at,
                                    origin=Origin.OPERATOR, trust=Trust.TRUSTED_OPERATOR))

    def assistant(self, key: str, text: str, at: str | None = None) -> None:
        self.records.append(Message(id=self.rid("m", key), turn_id=self.turn_id,
                                    role=MessageRole.ASSISTANT, text=text, at=at,
                                    origin=Origin.ASSISTANT, trust=Trust.MODEL_OUTPUT))
        self.turn_has_reply = True

    def runtime_note(self, key: str, text: str) -> None:
        """Text the runtime (not the operator, not the model) put into the conversation."""
        self.records.append(Message(id=self.rid("n", key), turn_id=self.turn_id,
                                    role=MessageRole.SYSTEM, text=text, origin=Origin.RUNTIME,
                                    trust=Trust.RUNTIME_FACT))

    def call(self, key: str, call_id: str, name: str, arguments: str, path: str) -> None:
        """Register a tool call of the current turn; its record is written with its result."""
        assert self.turn_id is not None
        problem = id_error(call_id)
        if problem:
            # The provider's id goes into the ledger as is (call_id), under the ledger's id rule.
            raise self.fail(path, f"tool call id: {problem}")
        if call_id in self.pending:
            raise self.fail(path, f"duplicate tool call id {quote_value(call_id)}")
        # An id is a call's while it waits for its result: a runtime may reuse it once the call
        # is answered or its turn closed (``call_0`` in every reply; RFC 0008, decision 9), and
        # a later result pairs with the newest call of its id, so the older call leaves the books.
        self.answered.pop(call_id, None)
        self.unanswered.pop(call_id, None)
        self.pending[call_id] = PendingCall(call_id=call_id, record_id=self.rid("x", key),
                                            turn_id=self.turn_id, name=name,
                                            arguments=arguments, path=path)
        self.turn_has_reply = True

    def result(self, call_id: str, output: str, path: str, *, status: ToolStatus = ToolStatus.OK,
               exit_code: int | None = None, files_written: list[str] | None = None) -> None:
        """The result of an earlier call: one tool record, owned by the call's turn."""
        call = self.pending.pop(call_id, None)
        if call is None:
            if call_id in self.answered:
                raise self.fail(path, f"a second result for tool call {quote_value(call_id)} "
                                      f"(first at {self.answered[call_id]})")
            if call_id in self.unanswered:
                raise self.fail(path, f"tool call {quote_value(call_id)} ({self.unanswered[call_id]}) was "
                                      "left without a result when its turn ended; a result "
                                      "must come before the next user or assistant turn")
            raise self.fail(path, f"no tool call {quote_value(call_id)} before this result")
        self.answered[call_id] = path
        self.records.append(Tool(
            id=call.record_id, turn_id=call.turn_id, tool_name=call.name,
            args_digest=digest(call.arguments), args_preview=call.arguments, status=status,
            exit_code=exit_code, output=output, call_id=call.call_id,
            files_written=files_written or [], origin=Origin.TOOL,
            trust=Trust.UNTRUSTED_EXTERNAL))

    def executed(self, key: str, name: str, command: str, *, status: ToolStatus,
                 exit_code: int | None, output: str, files_written: list[str]) -> None:
        """A command the runtime ran in the current turn, with its result (no provider call id)."""
        self.records.append(Tool(
            id=self.rid("x", key), turn_id=self.turn_id, tool_name=name,
            args_digest=digest(command), args_preview=command, status=status,
            exit_code=exit_code, output=output, files_written=files_written,
            origin=Origin.TOOL, trust=Trust.UNTRUSTED_EXTERNAL))

    def finish(self) -> list[Record]:
        self.close_turn()
        if not any(isinstance(r, Turn) for r in self.records):
            raise self.fail("$", "no conversation: the transcript holds no user or assistant "
                                 "message")
        return self.records
