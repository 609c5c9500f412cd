"""Transcript import: chat transcripts and agent trajectories in, ledger records out.

Three source formats besides ledger JSONL v1 (see ``docs/import.md`` for the full mapping):

* ``openai`` — a chat-completions message list (``role``, ``content`` as text or parts,
  ``tool_calls``, ``tool_call_id``), bare or as ``{"messages": [...]}``;
* ``anthropic`` — a Messages transcript (top-level ``system``, content blocks ``text``,
  ``tool_use``, ``tool_result``);
* ``swe-traj`` — a mini-swe-agent trajectory (``*.traj.json``).

:func:`detect_format` decides from the file name and content and says why. A guess is never
allowed to raise trust: a guessed chat format that would make more than one user message trusted
operator input is refused until the caller names the format. Errors say how in the caller's
terms (``option``: the library's ``format="…"`` by default, the CLI's ``--from …``). Reading is
all-or-nothing: the whole transcript is parsed into records first (any problem raises a
:class:`~holon_ctx.errors.LedgerFormatError` naming the file, the line and the JSON path, e.g.
``x.json:40: $.messages[12].tool_call_id: no tool call 'call_9' before this result``), and only
then appended through the store's ordinary append path, in one transaction. The readers work on
the decoded document and know only the path; the line is found in the source text once an error
is raised (:mod:`holon_ctx.ledger.jsonlocate`), so a successful import pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec

from holon_ctx.errors import DuplicateIdError, InputError, LedgerFormatError, quote_value
from holon_ctx.ledger.dbpath import sqlite_file
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.jsoninput import (
    MAX_JSON_DEPTH,
    checked_path,
    decode_problem,
    nesting_offset,
    read_capped,
)
from holon_ctx.ledger.jsonlocate import line_of
from holon_ctx.ledger.records import Message, MessageRole, Record, record_ref
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.ledger.transcript_build import LedgerBuilder
from holon_ctx.ledger.transcript_chat import read_anthropic, read_openai
from holon_ctx.ledger.transcript_swe import read_swe_traj

__all__ = [
    "LIBRARY_OPTION",
    "LIBRARY_PREFIX_OPTION",
    "MAX_TRANSCRIPT_BYTES",
    "Detection",
    "TranscriptFormat",
    "detect_format",
    "import_any",
    "load_json",
    "not_a_database",
    "read_transcript",
    "refuse_database",
    "sniff_ledger",
]

#: Largest transcript read (a JSON document is parsed whole; ledger JSONL streams instead).
MAX_TRANSCRIPT_BYTES: Final = 256 * 1024 * 1024
#: How errors tell a caller to name the format (``{}`` is the format): the library's argument
#: by default; a tool passes its own spelling as ``option=`` (the CLI's ``--from``). A library
#: call must never be told about a flag it cannot pass.
LIBRARY_OPTION: Final = 'format="{}"'
#: How errors tell a caller to give an id prefix, as LIBRARY_OPTION does the format.
LIBRARY_PREFIX_OPTION: Final = 'id_prefix="{}"'
_FORMAT_NAMES: Final = "ledger|openai|anthropic|swe-traj"
_LEDGER_TYPES: Final = frozenset({"turn", "message", "brief", "task_result", "tool",
                                  "external_event", "work_item", "wait", "environment", "pin"})


class TranscriptFormat(StrEnum):
    LEDGER = "ledger"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    SWE_TRAJ = "swe-traj"


@attrs.frozen
class Detection:
    """The format a file was read as, and why (``"given with --from openai"`` when named)."""

    format: TranscriptFormat
    reason: str


_READERS: dict[TranscriptFormat, Callable[[Any, LedgerBuilder], list[Record]]] = {
    TranscriptFormat.OPENAI: read_openai,
    TranscriptFormat.ANTHROPIC: read_anthropic,
    TranscriptFormat.SWE_TRAJ: read_swe_traj,
}


def _read_bytes(path: Path) -> bytes:
    # Capped by what is read: a device or FIFO says size 0 and may never end.
    return read_capped(path, MAX_TRANSCRIPT_BYTES, "transcript")


def load_json(path: Path, raw: bytes | None = None) -> Any:
    """Parse a JSON transcript; errors name the file and line (``x.json:3: invalid JSON: …``)."""
    raw = _read_bytes(path) if raw is None else raw
    source = str(path)
    if raw.startswith(b"\xef\xbb\xbf"):
        raise LedgerFormatError("file starts with a UTF-8 byte-order mark; transcripts must be "
                                "plain UTF-8", source=source, line=1)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LedgerFormatError(f"invalid UTF-8 at byte {exc.start}", source=source,
                                line=raw.count(b"\n", 0, exc.start) + 1) from None
    if not raw.strip():
        raise LedgerFormatError("empty file: no transcript", source=source, line=1)
    deep = nesting_offset(raw)
    if deep is not None:
        raise LedgerFormatError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels",
                                source=source, line=raw.count(b"\n", 0, deep) + 1)
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        message, offset, where = decode_problem(raw, str(exc))
        line = None if offset is None else raw.count(b"\n", 0, offset) + 1
        raise LedgerFormatError(message, source=source, line=line, path=where) from None


def _looks_like_ledger(raw: bytes) -> bool:
    first = raw.lstrip().split(b"\n", 1)[0]
    if not first.startswith(b"{") or nesting_offset(first) is not None:
        return False
    try:
        obj = msgspec.json.decode(first)
    except msgspec.DecodeError:
        return False
    # A JSON value may be a list or an object (unhashable): only a string names a record type.
    kind = obj.get("type") if isinstance(obj, dict) else None
    return isinstance(kind, str) and kind in _LEDGER_TYPES and "messages" not in obj


def _message_markers(messages: list[Any]) -> tuple[str | None, str | None]:
    """The first OpenAI-only and the first Anthropic-only feature seen, as descriptions."""
    openai = anthropic = None
    for msg in messages[:512]:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if openai is None and role in ("system", "developer", "tool"):
            openai = f"a {quote_value(role)} role"
        if openai is None and ("tool_calls" in msg or "tool_call_id" in msg):
            openai = "tool_calls / tool_call_id fields"
        content = msg.get("content")
        if isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if anthropic is None and kind in ("tool_use", "tool_result", "thinking",
                                                  "redacted_thinking"):
                    anthropic = f"{quote_value(kind)} content blocks"
                if openai is None and kind in ("image_url", "input_text", "refusal"):
                    openai = f"{quote_value(kind)} content parts"
    return openai, anthropic


def detect_format(path: Path, data: Any | None = None, raw: bytes | None = None, *,
                  option: str = LIBRARY_OPTION) -> Detection:
    """Which format ``path`` is in, from its name and content (see the module docstring)."""
    name = path.name.lower()
    if data is None:
        raw = _read_bytes(path) if raw is None else raw
        if name.endswith(".jsonl") or _looks_like_ledger(raw):
            why = "the .jsonl extension" if name.endswith(".jsonl") else "ledger records per line"
            return Detection(TranscriptFormat.LEDGER, why)
        data = load_json(path, raw)
    if isinstance(data, dict):
        fmt = data.get("trajectory_format")
        if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
            return Detection(TranscriptFormat.SWE_TRAJ, f"trajectory_format {quote_value(fmt)}")
        if name.endswith(".traj.json") and "messages" in data:
            return Detection(TranscriptFormat.SWE_TRAJ, "the .traj.json extension")
        if "system" in data and "messages" in data:
            return Detection(TranscriptFormat.ANTHROPIC, "a top-level 'system' field")
        messages = data.get("messages")
    else:
        messages = data
    if not isinstance(messages, list):
        raise LedgerFormatError(
            "cannot tell the format: expected ledger JSONL, a list of chat messages, or an "
            f"object with 'messages'; choose one with {option.format(_FORMAT_NAMES)}",
            source=str(path), path="$")
    openai, anthropic = _message_markers(messages)
    if anthropic and not openai:
        return Detection(TranscriptFormat.ANTHROPIC, anthropic)
    if openai:
        return Detection(TranscriptFormat.OPENAI, openai)
    return Detection(TranscriptFormat.OPENAI,
                     "plain user/assistant text (the anthropic reading is the same)")


def read_transcript(path: str | Path, fmt: TranscriptFormat | str = "auto", *,
                    first_seq: int = 0, id_prefix: str = "",
                    option: str = LIBRARY_OPTION) -> tuple[Detection, list[Record]]:
    """Parse a transcript (not ledger JSONL) into records, without touching any store."""
    path = Path(path)
    raw = _read_bytes(path)
    data = None
    try:
        if fmt == "auto":
            if not path.name.lower().endswith(".jsonl") and not _looks_like_ledger(raw):
                data = load_json(path, raw)
            detection = detect_format(path, data=data, raw=raw, option=option)
        else:
            detection = Detection(TranscriptFormat(fmt), f"given with {option.format(fmt)}")
        if detection.format is TranscriptFormat.LEDGER:
            raise InputError("ledger JSONL is imported with import_jsonl, not read as a "
                             "transcript", source=str(path))
        if data is None:
            data = load_json(path, raw)
        builder = LedgerBuilder(source=str(path), first_seq=first_seq, prefix=id_prefix)
        records = _READERS[detection.format](data, builder)
    except LedgerFormatError as exc:
        # The readers know the JSON path of a bad value, not its line: found in the text now,
        # on the error path only (holon_ctx.ledger.jsonlocate).
        if exc.line is None and exc.path is not None and exc.source == str(path):
            line = line_of(raw, exc.path)
            if line is not None:
                exc.at_line(line)
        raise
    if fmt == "auto":
        _refuse_guessed_trust(path, detection, records, data, option)
    return detection, records


def _refuse_guessed_trust(path: Path, detection: Detection, records: list[Record],
                          data: Any, option: str) -> None:
    """A guess may not hand operator trust to more than the first user message.

    In a chat transcript every user message becomes the operator's (trusted) words. That is right
    for a chat, and wrong for a harness that writes tool output into the user role (mini-swe-agent
    does): guessed wrong, a detection would make tool output operator instructions. So a guessed
    format that trusts more than one user message is refused; naming the format says it
    knowingly.
    """
    operator = [r for r in records if isinstance(r, Message) and r.role is MessageRole.OPERATOR]
    if len(operator) <= 1:
        return
    fmt = detection.format.value
    hint = ""
    if _looks_like_swe_agent(data):
        hint = ("; it looks like a mini-swe-agent trajectory (harness replies in the user role): "
                + option.format("swe-traj"))
    raise InputError(
        f"read as {fmt} by a guess ({detection.reason}), which would make "
        f"{'both' if len(operator) == 2 else f'all {len(operator)}'} user messages trusted "
        f"operator input; if a harness or a tool wrote any of them, it "
        f"would get the operator's authority. Say which format it is with {option.format(fmt)} "
        f"(every user message is the operator's{hint})", source=str(path))


def _looks_like_swe_agent(data: Any) -> bool:
    messages = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(messages, list):
        return False
    return any(isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str)
               and "<returncode>" in m["content"] for m in messages[2:64])


def sniff_ledger(path: str | Path) -> bool:
    """True when ``path`` is ledger JSONL by name or by its first line (cheap: one line read).
    A database is not, and none of its bytes is read (:func:`sqlite_file`)."""
    path = Path(path)
    if path.name.lower().endswith(".jsonl"):
        return True
    if sqlite_file(path) is True:
        return False
    try:
        with path.open("rb") as f:
            head = f.read(1 << 16)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None
    return _looks_like_ledger(head)


_SQLITE_HEADER: Final = b"SQLite format 3\x00"


def not_a_database(path: str | Path) -> str | None:
    """What a file given where a database belongs holds instead, when it is a ledger or a
    transcript (``"ledger JSONL"``, ``"a JSON transcript"``); None for an SQLite file, an empty or
    missing one, and anything else (the store's own error says it is not a database). Reads the
    file's head only, and only once SQLite says it is not a database: reading a database this
    process has open would release its connections' locks (:func:`sqlite_file`). A FIFO or a
    device is never read here: sqlite_file says False for it, yet opening a FIFO with no writer
    blocks for ever, and a read takes its bytes from whoever reads it next."""
    path = Path(path)
    if not path.is_file() or sqlite_file(path) is not False:
        return None
    try:
        with path.open("rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return None
    if not head.strip() or head.startswith(_SQLITE_HEADER):
        return None
    if path.name.lower().endswith(".jsonl") or _looks_like_ledger(head):
        return "ledger JSONL"
    if head.lstrip()[:1] in (b"{", b"["):
        return "a JSON transcript"
    return None


def refuse_database(path: Path) -> None:
    """Refuse an SQLite database given as a history before any of its bytes is read (reading
    one this process has open would release its connections' locks: :func:`sqlite_file`)."""
    if sqlite_file(path) is True:
        raise InputError("an SQLite database, not ledger JSONL or a transcript: open it as the "
                         "ledger instead of importing it", source=str(path))


def import_any(path: str | Path, store: LedgerStore, fmt: TranscriptFormat | str = "auto", *,
               id_prefix: str = "", option: str = LIBRARY_OPTION,
               prefix_option: str = LIBRARY_PREFIX_OPTION,
               before: Sequence[Record] = ()) -> tuple[Detection, int]:
    """Import ledger JSONL or a transcript into ``store``, all-or-nothing; ``(how, stored)``.
    ``before``: records appended first, in the same append (a session's calls still waiting),
    and counted in ``stored``. ``prefix_option``: how an error names the id prefix (as
    ``option`` names the format)."""
    path = checked_path(path, "import")
    refuse_database(path)
    if fmt == TranscriptFormat.LEDGER or (fmt == "auto" and sniff_ledger(path)):
        why = f"given with {option.format(fmt)}" if fmt != "auto" else (
            "the .jsonl extension" if path.name.lower().endswith(".jsonl")
            else "ledger records per line")
        return Detection(TranscriptFormat.LEDGER, why), import_jsonl(path, store, before=before)
    detection, records = read_transcript(path, fmt, id_prefix=id_prefix, option=option)
    # The turns are numbered by the store, inside its write transaction, after whatever is in the
    # ledger by then: numbers read before it would race with other writers (RFC 0006).
    try:
        return detection, store.append([*before, *records], source=str(path),
                                       renumber_turns=True)
    except DuplicateIdError as exc:
        # A transcript's ids name its messages (m12, t12), so a second transcript without a
        # prefix clashes with the first at its first record: say how to import it beside.
        if id_prefix or all(exc.ref != record_ref(r) for r in records):
            raise
        raise DuplicateIdError(exc.ref, source=exc.source, line=exc.line, hint=(
            "a transcript's ids name its messages, so this one was imported already, or another "
            f"one was: give this one its own ids with {prefix_option.format('b.')}")) from None
