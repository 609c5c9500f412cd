"""Ledger JSONL v1: one record per line, decoded against its type and checked on its own.

Reading is streaming and strict about bytes: a byte-order mark, invalid UTF-8, an oversized or
truncated line, a non-object, an unknown type or enum value each become a
:class:`~holon_ctx.errors.LedgerFormatError` naming ``FILE:LINE: $.field``. Checks that need the
rest of the ledger (duplicate ids, missing turns, sequence order, ownership) live in the append
path, :mod:`holon_ctx.ledger.writer`.

Writing is canonical: ``{"v":1,"type":...}`` followed by the record's fields in declaration order,
defaults omitted, compact separators. Export → import → export is therefore byte-identical.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import IO, Any, Final

import msgspec

from holon_ctx.errors import LedgerFormatError, quote_value
from holon_ctx.ledger.body import id_problem
from holon_ctx.ledger.jsoninput import CUT_SHORT, MAX_JSON_DEPTH, decode_problem, nesting_offset
from holon_ctx.ledger.records import (
    EXTENSION_TRIGGER,
    FORMAT_VERSION,
    KNOWN_TRIGGERS,
    OPERATOR_TRIGGERS,
    AnnouncedCall,
    Brief,
    BriefKind,
    Environment,
    ExternalEvent,
    Message,
    MessageRole,
    Origin,
    Outcome,
    Pin,
    Record,
    SideEffect,
    TaskResult,
    TaskStatus,
    Todo,
    Tool,
    ToolStatus,
    Trust,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
    WorkItemStatus,
)

__all__ = [
    "MAX_EXIT_CODE",
    "MAX_ID_CHARS",
    "MAX_LINE_BYTES",
    "MAX_SEQ",
    "MIN_EXIT_CODE",
    "check_record",
    "decode_line",
    "encode_record",
    "id_error",
    "iter_jsonl",
    "provenance_defaults",
    "write_jsonl",
]

#: Longest accepted line. Large tool outputs belong behind ``output_ref``; a line past this is
#: refused rather than truncated, because truncating would silently lose data.
MAX_LINE_BYTES: Final = 4 * 1024 * 1024
MAX_ID_CHARS: Final = 256
#: Largest turn sequence number: SQLite stores integers as signed 64-bit, and JSON decoding would
#: otherwise accept any size and fail only at insert, with a traceback instead of a located error.
MAX_SEQ: Final = 2**63 - 1
#: ``exit_code`` range: a signed or an unsigned 32-bit exit status (negative for a signal, as
#: Python reports it; Windows statuses such as 0xC0000005 are unsigned).
MIN_EXIT_CODE: Final = -(2**31)
MAX_EXIT_CODE: Final = 2**32 - 1
#: RFC 3339 ``date-time`` (section 5.6): full date, ``T``, time with seconds, optional fraction,
#: and an offset (``Z`` or ``±hh:mm``). The ranges are checked apart, with the calendar.
_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?"
                      r"(?:[Zz]|[+-](\d{2}):(\d{2}))$", re.ASCII)

_decoder = msgspec.json.Decoder(Record)
_encoder = msgspec.json.Encoder()
_BAD_ID = re.compile(r"[\x00-\x1f\x7f\s]")
#: An ASCII id without these needs no further look (markup, escapes, brackets of a label).
_ID_SLOW = re.compile(r"[\x00-\x20\x7f\"'<>&`\\(\[{]")
_ENUM_FIELDS: dict[str, type] = {
    "origin": Origin,
    "trust": Trust,
    "outcome": Outcome,
    "role": MessageRole,
    "kind": BriefKind,
    "side_effect": SideEffect,
}
_STATUS_BY_TYPE: dict[str, type] = {
    "task_result": TaskStatus,
    "tool": ToolStatus,
    "work_item": WorkItemStatus,
    "wait": WaitStatus,
}
_TYPES = ("turn", "message", "brief", "task_result", "tool", "external_event", "work_item",
          "wait", "environment", "pin")
_CLASS_OF_TYPE: dict[str, type[msgspec.Struct]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in (Turn, Message, Brief, TaskResult, Tool, ExternalEvent, WorkItem, Wait, Environment,
                Pin)
}
#: Field names of chat and tool formats a ledger line may be written from, and the ledger's own.
_FOREIGN_NAMES: Final = {"content": "text", "message": "text", "body": "text", "name": "tool_name",
                         "tool": "tool_name", "kind": "type", "timestamp": "at", "time": "at"}
_MSGSPEC_PATH = re.compile(r"^(?P<msg>.*?)(?: - at `(?P<path>[^`]+)`)?$", re.DOTALL)

# Default provenance by record kind: what a runtime appending the record asserts when it does
# not say. Trust defaults never exceed what the origin may claim (see _ALLOWED_TRUST).
_TRIGGER_ORIGIN: dict[str, Origin] = {
    "operator_input": Origin.OPERATOR,
    "operator_override": Origin.OPERATOR,
    "approval_decision": Origin.OPERATOR,
    "task_result": Origin.TASK,
    "subagent_result": Origin.TASK,
    "external_event": Origin.EXTERNAL,
    "timer": Origin.SCHEDULER,
    "scheduler_tick": Origin.SCHEDULER,
    "provider_fallback": Origin.PROVIDER,
    "provider_retry": Origin.PROVIDER,
    "recovery": Origin.RUNTIME,
    "restart": Origin.RUNTIME,
}
_ORIGIN_TRUST: dict[Origin, Trust] = {
    Origin.OPERATOR: Trust.TRUSTED_OPERATOR,
    Origin.ASSISTANT: Trust.MODEL_OUTPUT,
    Origin.RUNTIME: Trust.RUNTIME_FACT,
    Origin.TASK: Trust.RUNTIME_FACT,
    Origin.TOOL: Trust.UNTRUSTED_EXTERNAL,
    Origin.EXTERNAL: Trust.UNTRUSTED_EXTERNAL,
    Origin.SCHEDULER: Trust.RUNTIME_FACT,
    Origin.PROVIDER: Trust.RUNTIME_FACT,
}
#: Which trust each origin may claim. Only the operator is ever trusted as an instructor; a record
#: may always claim *less* trust than its origin allows, never more.
_ALLOWED_TRUST: dict[Origin, frozenset[Trust]] = {
    Origin.OPERATOR: frozenset({Trust.TRUSTED_OPERATOR}),
    Origin.ASSISTANT: frozenset({Trust.MODEL_OUTPUT}),
    Origin.RUNTIME: frozenset({Trust.RUNTIME_FACT, Trust.UNTRUSTED_EXTERNAL}),
    Origin.TASK: frozenset({Trust.RUNTIME_FACT, Trust.MODEL_OUTPUT, Trust.UNTRUSTED_EXTERNAL}),
    Origin.TOOL: frozenset({Trust.UNTRUSTED_EXTERNAL, Trust.RUNTIME_FACT}),
    Origin.EXTERNAL: frozenset({Trust.UNTRUSTED_EXTERNAL}),
    Origin.SCHEDULER: frozenset({Trust.RUNTIME_FACT}),
    Origin.PROVIDER: frozenset({Trust.RUNTIME_FACT}),
}


def provenance_defaults(record: Record) -> tuple[Origin, Trust]:
    """The origin and trust a record gets when its line leaves them out."""
    match record:
        case Turn():
            origin = _TRIGGER_ORIGIN.get(record.trigger, Origin.RUNTIME)
        case Message():
            origin = {
                MessageRole.OPERATOR: Origin.OPERATOR,
                MessageRole.ASSISTANT: Origin.ASSISTANT,
                MessageRole.SYSTEM: Origin.RUNTIME,
            }[record.role]
        case Brief():
            origin = Origin.ASSISTANT
        case TaskResult():
            origin = Origin.TASK
        case Tool():
            origin = Origin.TOOL
        case ExternalEvent():
            origin = Origin.EXTERNAL
        case Pin():
            origin = Origin.OPERATOR
        case WorkItem() | Wait() | Environment():
            origin = Origin.RUNTIME
    origin = record.origin or origin
    return origin, record.trust or _ORIGIN_TRUST[origin]


def id_error(value: str) -> str | None:
    """Why ``value`` is not a valid ledger id (the whole rule, docs/ledger-format.md), or None."""
    if not value:
        return "must not be empty"
    if len(value) > MAX_ID_CHARS:
        return f"longer than {MAX_ID_CHARS} characters"
    if _BAD_ID.search(value):
        return f"must not contain whitespace or control characters, got {quote_value(value)}"
    # Ids are rendered unescaped in labels and fences: no markup, invisibles or lookalike tags.
    problem = id_problem(value)
    return f"{problem}, got {quote_value(value)}" if problem else None


def _check_id(value: str | None, path: str) -> str | None:
    problem = None if value is None else id_error(value)
    return f"{path}: {problem}" if problem else None


def _id_needs_check(value: str) -> bool:
    """False for the common, valid id (fast path); True when _check_id must look closer."""
    return (not value or len(value) > MAX_ID_CHARS or not value.isascii()
            or _ID_SLOW.search(value) is not None)


_ID_FIELDS = ("id", "turn_id", "anchor_turn_id", "work_item_id", "spawned_by_turn_id", "wait_id",
              "task_id", "call_id")
# The id fields each record type has, in _ID_FIELDS order: every line is checked twice on import
# (here and on append), so the check skips fields its type does not have.
_ID_FIELDS_OF: dict[type, tuple[str, ...]] = {
    cls: tuple(name for name in _ID_FIELDS if name in cls.__struct_fields__)
    for cls in (Turn, Message, Brief, TaskResult, Tool, ExternalEvent, WorkItem, Wait, Environment,
                Pin)
}


def check_record(record: Record) -> str | None:
    """Context-free rules; returns ``"$.field: problem"`` or None. Fills no defaults."""
    if record.v != FORMAT_VERSION:
        return f"$.v: unsupported format version {record.v} (this reader supports {FORMAT_VERSION})"
    problem = _check_ids(record)
    if problem is None and record.at is not None:
        problem = _check_at(record.at)
    if problem is not None:
        return problem
    origin, trust = provenance_defaults(record)
    if trust not in _ALLOWED_TRUST[origin]:
        allowed = ", ".join(sorted(_ALLOWED_TRUST[origin]))
        return (f"$.trust: origin {quote_value(origin.value)} may claim only {allowed}, "
                f"got {quote_value(trust.value)}")
    kind_check = _KIND_CHECKS.get(type(record))
    return None if kind_check is None else kind_check(record, origin)


def _check_ids(record: Record) -> str | None:
    for name in _ID_FIELDS_OF[type(record)]:
        value = getattr(record, name)
        # Fast path for the common, valid id; _check_id words the problem otherwise.
        if value is not None and _id_needs_check(value):
            problem = _check_id(value, f"$.{name}")
            if problem:
                return problem
    return None


# The rules of one record kind each (given the record and its origin, defaults filled): a table
# rather than one match statement, so each kind's rules read alone.
def _check_turn(record: Turn, origin: Origin) -> str | None:
    if record.seq < 0:
        return f"$.seq: must be >= 0, got {record.seq}"
    if record.seq > MAX_SEQ:
        return f"$.seq: must be <= {MAX_SEQ} (a signed 64-bit integer), got {record.seq}"
    if record.trigger not in KNOWN_TRIGGERS and not EXTENSION_TRIGGER.match(record.trigger):
        known = ", ".join(sorted(KNOWN_TRIGGERS))
        return (f"$.trigger: expected one of {known} or an extension 'x-name', "
                f"got {quote_value(record.trigger)}")
    if record.trigger in OPERATOR_TRIGGERS and origin is not Origin.OPERATOR:
        return f"$.origin: trigger {quote_value(record.trigger)} requires origin 'operator'"
    return None


def _check_message(record: Message, origin: Origin) -> str | None:
    if record.role is MessageRole.OPERATOR and origin is not Origin.OPERATOR:
        return "$.origin: an operator message must have origin 'operator'"
    if record.role is not MessageRole.OPERATOR and origin is Origin.OPERATOR:
        return ("$.role: a message from the operator must have role 'operator', "
                f"got {quote_value(record.role.value)}")
    return _check_calls(record) if record.tool_calls else None


def _check_calls(record: Message) -> str | None:
    """Only the model announces tool calls, each under its own id (its result is matched by it)."""
    if record.role is not MessageRole.ASSISTANT:
        return (f"$.tool_calls: only an assistant message announces tool calls, got role "
                f"{quote_value(record.role.value)}")
    seen: set[str] = set()
    for i, call in enumerate(record.tool_calls):
        problem = _check_id(call.call_id, f"$.tool_calls[{i}].call_id")
        if problem:
            return problem
        if call.call_id in seen:
            return (f"$.tool_calls[{i}].call_id: duplicate call id {quote_value(call.call_id)} "
                    "in this message")
        seen.add(call.call_id)
        if not call.name:
            return f"$.tool_calls[{i}].name: must not be empty"
    return None


def _check_tool(record: Tool, _origin: Origin) -> str | None:
    if record.exit_code is not None and not MIN_EXIT_CODE <= record.exit_code <= MAX_EXIT_CODE:
        return (f"$.exit_code: must be between {MIN_EXIT_CODE} and {MAX_EXIT_CODE} "
                f"(a 32-bit exit status), got {record.exit_code}")
    return None


def _check_pin(record: Pin, origin: Origin) -> str | None:
    if origin is not Origin.OPERATOR:
        return "$.origin: only the operator can pin"
    return _check_ref_syntax(record.target, "$.target")


def _check_wait(record: Wait, _origin: Origin) -> str | None:
    return _check_id(record.wait_id, "$.wait_id")


def _check_work_item(record: WorkItem, _origin: Origin) -> str | None:
    for index, wait_id in enumerate(record.waits or ()):
        problem = _check_id(wait_id, f"$.waits[{index}]")
        if problem:
            return problem
    return _check_id(record.work_item_id, "$.work_item_id")


_KIND_CHECKS: dict[type, Callable[[Any, Origin], str | None]] = {
    Turn: _check_turn, Message: _check_message, Tool: _check_tool, Pin: _check_pin,
    Wait: _check_wait, WorkItem: _check_work_item,
}


def _check_at(at: str) -> str | None:
    match = _RFC3339.match(at)
    if match is not None:
        year, month, day, hour, minute, second, off_h, off_m = (
            int(g) if g is not None else 0 for g in match.groups())
        try:
            # Second 60 is a leap second (RFC 3339 allows it); the calendar check ignores it.
            datetime(year, month, day, hour, minute, min(second, 59))
            if second <= 60 and off_h <= 23 and off_m <= 59:
                return None
        except ValueError:
            pass
    return (f"$.at: expected an RFC 3339 date-time with an offset, such as "
            f"2026-11-30T08:02:32Z or 2026-11-30T16:02:32.5+08:00, got {quote_value(at)}")


def _check_ref_syntax(ref: str, path: str) -> str | None:
    kind, sep, ident = ref.partition(":")
    if not sep or kind not in _TYPES or not ident:
        return (f"{path}: expected a ref 'kind:id' with kind one of {', '.join(_TYPES)}, "
                f"got {quote_value(ref)}")
    return _check_id(ident, path)


def _translate(exc: msgspec.ValidationError, raw: bytes) -> tuple[str, str]:
    """Turn a msgspec message into ``(path, message)`` in our ``expected …, got …`` voice."""
    match = _MSGSPEC_PATH.match(str(exc))
    msg = match.group("msg") if match else str(exc)
    path = (match.group("path") if match else None) or "$"
    if msg.startswith(("Invalid enum value", "Invalid value")):
        got = msg.split(" ", 3)[-1]
        field = path.rsplit(".", 1)[-1]
        if path == "$.type":
            return path, f"unknown record type {got}; expected one of {', '.join(_TYPES)}"
        enum = _ENUM_FIELDS.get(field)
        if field == "status":
            try:
                kind = msgspec.json.decode(raw).get("type", "")
            except (msgspec.DecodeError, AttributeError):
                kind = ""
            enum = _STATUS_BY_TYPE.get(kind)
        if enum is not None:
            allowed = ", ".join(str(m.value) for m in enum)  # type: ignore[attr-defined]
            return path, f"expected one of {allowed}, got {got}"
        return path, f"unexpected value {got}"
    if msg.startswith("Object missing required field"):
        field = msg.split("`")[1] if "`" in msg else "?"
        return (f"{path}.{field}" if path != "$" else f"$.{field}"), "missing required field"
    if msg.startswith("Expected"):
        return path, msg[0].lower() + msg[1:]
    return path, msg


#: How close (difflib's ratio) an unknown field's name must be to a field its record has and the
#: line lacks to be refused as a misspelling of it: one letter dropped, doubled or swapped in a
#: name of four letters or more ("tunr_id", "txt", "contnet"). Other unknown fields are read
#: past, as the house style asks of ledger records (forward compatibility).
_MISSPELT: Final = 0.8


class _Misspelt(Exception):
    """An unknown field taken for a misspelling: where, and what it was likely meant to be."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _misspelling(obj: dict[str, Any], known: tuple[str, ...], path: str,
                 what: str) -> _Misspelt | None:
    """The first field of ``obj`` that is not in ``known`` and looks like a misspelling of a
    known field ``obj`` lacks (or of another format's name for one: ``content`` for ``text``)."""
    for field in obj:
        if field in known or field.startswith("x-"):
            continue
        meant = difflib.get_close_matches(field, known, n=1, cutoff=_MISSPELT)
        if not meant:
            alias = difflib.get_close_matches(field, _FOREIGN_NAMES, n=1, cutoff=_MISSPELT)
            meant = [m for m in (_FOREIGN_NAMES[a] for a in alias) if m in known]
        if meant and meant[0] not in obj:
            return _Misspelt(f"{path}.{field}",
                             f"unknown field in {what}; did you mean {quote_value(meant[0])}?")
    return None


#: The lists of nested objects a record kind holds: the fields read past in each item as in the
#: record itself, and what an item is called in an error.
_NESTED: Final[dict[str, tuple[type[msgspec.Struct], str]]] = {
    "todos": (Todo, "a todo"), "tool_calls": (AnnouncedCall, "a tool call")}


def _read_past_unknown(raw: bytes) -> bytes | None:
    """The line with the fields its record kind does not have left out (a later release's, a
    runtime's own ``x-…``), or None when it is no record object; raises :class:`_Misspelt` when
    one looks like a misspelt field. Only a line the strict decoder refused comes here, so a line
    of known fields pays nothing for the rule."""
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    cls = _CLASS_OF_TYPE.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return None
    known = ("type", *cls.__struct_fields__)
    typo = _misspelling(value, known, "$", f"a {kind} record")
    nested = [(field, items, item_cls) for field, (item_cls, _) in _NESTED.items()
              if field in known and isinstance(items := value.get(field), list)]
    for field, items, item_cls in nested:
        for i, item in enumerate(items):
            if typo is None and isinstance(item, dict):
                typo = _misspelling(item, item_cls.__struct_fields__, f"$.{field}[{i}]",
                                    _NESTED[field][1])
    if typo is not None:
        raise typo
    kept = {k: v for k, v in value.items() if k in known}
    for field, items, item_cls in nested:
        kept[field] = [{k: v for k, v in item.items() if k in item_cls.__struct_fields__}
                       if isinstance(item, dict) else item for item in items]
    return _encoder.encode(kept)


def _chat_hint(raw: bytes) -> str:
    """What to do when a line without ``type`` is a chat message: a ``.jsonl`` name makes the
    line a ledger record, and one chat message per line is no format holon-ctx reads."""
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return ""
    if not isinstance(value, dict) or not isinstance(value.get("role"), str):
        return ""
    return ("; the line is a chat message (it has 'role'), not a ledger record: a chat "
            "transcript is read as one JSON array of messages, or an object with 'messages' "
            "(import.md)")


def _decode_reading_past_unknown(raw: bytes) -> Record:
    try:
        return _decoder.decode(raw)
    except msgspec.ValidationError as exc:
        # The record types forbid unknown fields so that the fast path is the strict one; a
        # refused line is decoded again without the fields its kind does not have, once, unless
        # one looks like a misspelt field (RFC 0001, "Unknown fields").
        if not str(exc).startswith("Object contains unknown field"):
            raise
        known_only = _read_past_unknown(raw)
        if known_only is None:
            raise
        return _decoder.decode(known_only)


def decode_line(raw: bytes, *, source: str, line: int, check: bool = True) -> Record:
    """Decode and (unless ``check=False``) check one line; errors name source, line and field."""
    # Inline fast path (this runs per line of every import): a line with no more opening brackets
    # than the limit cannot nest deeper than it.
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and (deep := nesting_offset(raw)):
        raise LedgerFormatError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels (at byte {deep} "
                                "of the line)", source=source, line=line)
    try:
        record = _decode_reading_past_unknown(raw)
    except _Misspelt as typo:
        raise LedgerFormatError(typo.message, source=source, line=line, path=typo.path) from None
    except msgspec.ValidationError as exc:
        path, msg = _translate(exc, raw)
        if path == "$" and "expected `object`" in msg:
            msg = f"expected a JSON object per line, {msg}"
        if path == "$.type" and "missing required field" in msg:
            msg = f"missing required field (one of {', '.join(_TYPES)})" + _chat_hint(raw)
        raise LedgerFormatError(msg, source=source, line=line, path=path) from None
    except msgspec.DecodeError as exc:
        message, _, where = decode_problem(raw, str(exc))
        body = raw.rstrip(b"\r\n")
        if body != raw:
            # A line cut inside a string ends at its newline, which the decoder names as an
            # invalid character; without it the cut is seen as one, and the open field named.
            try:
                msgspec.json.decode(body)
            except msgspec.DecodeError as cut:
                if (cut_short := decode_problem(body, str(cut)))[0] == CUT_SHORT:
                    message, _, where = cut_short
        raise LedgerFormatError(message, source=source, line=line, path=where) from None
    problem = check_record(record) if check else None
    if problem:
        path, _, msg = problem.partition(": ")
        raise LedgerFormatError(msg, source=source, line=line, path=path)
    return record


def iter_jsonl(
    stream: IO[bytes], *, source: str, check: bool = True
) -> Iterator[tuple[int, Record]]:
    """Yield ``(line_number, record)`` for each non-blank line, streaming, one line in memory.

    ``check=False`` leaves :func:`check_record` to the consumer: the append path runs it on every
    record anyway, so the importer does not pay for it twice.
    """
    line_no = 0
    saw_record = False
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            break
        line_no += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            raise LedgerFormatError(
                f"line longer than the {MAX_LINE_BYTES} byte limit; store large outputs behind "
                "output_ref",
                source=source,
                line=line_no,
            )
        if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raise LedgerFormatError(
                "file starts with a UTF-8 byte-order mark; ledger JSONL must be plain UTF-8",
                source=source,
                line=1,
            )
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LedgerFormatError(
                f"invalid UTF-8 at byte {exc.start} of the line", source=source, line=line_no
            ) from None
        if not raw.strip():
            continue
        try:
            record = decode_line(raw, source=source, line=line_no, check=check)
        except LedgerFormatError as exc:
            if not raw.endswith(b"\n") and exc.message == CUT_SHORT:
                raise LedgerFormatError(
                    "truncated last line (no newline at end and not complete JSON)",
                    source=source,
                    line=line_no,
                    path=exc.path,
                ) from None
            raise
        saw_record = True
        yield line_no, record
    if not saw_record:
        raise LedgerFormatError("empty file: no records", source=source, line=max(line_no, 1))


def encode_record(record: Record) -> bytes:
    """The canonical line for a record, newline included."""
    body = _encoder.encode(record)
    # v is omitted as a default by msgspec; the interchange format always states it, first.
    return b'{"v":%d,' % record.v + body[1:] + b"\n"


def write_jsonl(records: Iterable[Record], out: IO[bytes]) -> int:
    """Write canonical lines; returns the number of records written."""
    n = 0
    for record in records:
        out.write(encode_record(record))
        n += 1
    return n
