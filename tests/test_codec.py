"""The bad-input table: each kind of bad ledger line through the real CLI, with its exact message.

Every case is run through ``holon-ctx import FILE --db DB`` twice: into a database that does not
exist yet (it must not be left behind) and into one that already holds records (they must stay
exactly as they were, and nothing of the file may be added). The message after ``FILE:LINE: `` is
the specification: ``$.field: problem`` when a field is to blame.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from holon_ctx.cli.main import main
from holon_ctx.errors import LedgerFormatError
from holon_ctx.ledger.codec import MAX_LINE_BYTES, MAX_SEQ
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.sqlite import SqliteStore


def line(**fields: object) -> bytes:
    """One JSONL line with the fields in the order given (``v`` first by convention)."""
    return json.dumps({"v": 1, **fields}, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


T1 = line(type="turn", id="t1", seq=1, trigger="operator_input")
M1 = line(type="message", id="m1", turn_id="t1", role="operator", text="请部署 the build 🚀")
TYPES = "turn, message, brief, task_result, tool, external_event, work_item, wait, environment, pin"
TRIGGERS = ("approval_decision, external_event, operator_input, operator_override, "
            "provider_fallback, provider_retry, recovery, restart, scheduler_tick, "
            "subagent_result, task_result, timer")
TRUSTS = "trusted_operator, runtime_fact, untrusted_external, model_output"


def _valid_prefix(n_lines: int) -> bytes:
    """``n_lines`` valid lines: turns each followed by an assistant message."""
    out = [line(type="turn", id="t1", seq=1, trigger="operator_input")]
    i = 1
    while len(out) < n_lines:
        if len(out) % 2:
            out.append(line(type="message", id=f"m{i}", turn_id=f"t{i}", role="assistant",
                            text=f"step {i}: done ✅"))
        else:
            i += 1
            out.append(line(type="turn", id=f"t{i}", seq=i, trigger="provider_retry"))
    return b"".join(out)


@dataclass(frozen=True)
class Bad:
    """A bad file, the line the error names and the message after ``FILE:LINE: ``."""

    name: str
    content: bytes
    line: int
    message: str
    #: The error depends on the ledger being empty (with a turn in the db, the record attaches).
    only_into_empty: bool = False


BAD_UTF8 = b'{"v":1,"type":"message","id":"m1","turn_id":"t1","role":"operator","text":"caf'

CASES = [
    Bad("invalid JSON", T1 + b'{"v":1,"type":"message",,}\n', 2,
        "invalid JSON: JSON is malformed: object keys must be strings (byte 24)"),
    Bad("truncated last line", T1 + b'{"v":1,"type":"message","id":"m1"', 2,
        "truncated last line (no newline at end and not complete JSON)"),
    Bad("invalid UTF-8", T1 + BAD_UTF8 + b'\xe9"}\n', 2,
        f"invalid UTF-8 at byte {len(BAD_UTF8)} of the line"),
    Bad("wrong type", line(type="turn", id="t1", seq="1", trigger="operator_input"), 1,
        "$.seq: expected `int`, got `str`"),
    Bad("null for a required string",
        T1 + line(type="message", id="m1", turn_id="t1", role="assistant", text=None), 2,
        "$.text: expected `str`, got `null`"),
    Bad("wrong type deep inside a record",
        T1 + line(type="work_item", id="w1", work_item_id="wi1", todos=[{"text": 1}]), 2,
        "$.todos[0].text: expected `str`, got `int`"),
    Bad("unknown record type", T1 + line(type="banana", id="b1"), 2,
        f"$.type: unknown record type 'banana'; expected one of {TYPES}"),
    Bad("missing record type", line(id="t1", seq=1), 1,
        f"$.type: missing required field (one of {TYPES})"),
    Bad("unknown enum value",
        T1 + line(type="message", id="m1", turn_id="t1", role="operator", text="hi",
                  trust="admin"), 2,
        f"$.trust: expected one of {TRUSTS}, got 'admin'"),
    Bad("unknown status of the record's own kind",
        T1 + line(type="tool", id="x1", turn_id="t1", tool_name="sh", status="done"), 2,
        "$.status: expected one of ok, error, timeout, cancelled, pending, got 'done'"),
    Bad("duplicate id", T1 + M1 + M1, 3,
        "$.id: duplicate id: message:m1 is already in the ledger"),
    Bad("duplicate id in a plain stream",
        line(type="message", id="m1", role="operator", text="a")
        + line(type="message", id="m1", role="operator", text="b"), 2,
        "$.id: duplicate id: message:m1 is already in the ledger"),
    Bad("derived turn id already taken",
        line(type="message", id="m1", role="operator", text="a")
        + line(type="external_event", id="m1", source="ci", text="b"), 2,
        "$.id: external_event:m1 would open turn 't.m1', which is already in the ledger "
        "(a derived turn is named t.<id>)"),
    Bad("reference to a missing turn", M1, 1,
        "$.turn_id: no turn 't1' before this record "
        "(a record belongs only to a turn appended before it)"),
    Bad("anchor to a missing turn",
        line(type="turn", id="t1", seq=1, trigger="timer", anchor_turn_id="t0"), 1,
        "$.anchor_turn_id: no earlier turn 't0' to continue"),
    Bad("sequence going backwards", T1 + line(type="turn", id="t2", seq=1, trigger="timer"), 2,
        "$.seq: sequence goes backwards: 1 after 1 (turn t1)"),
    Bad("sequence beyond 64 bits", line(type="turn", id="t1", seq=MAX_SEQ + 1, trigger="timer"),
        1, f"$.seq: must be <= {MAX_SEQ} (a signed 64-bit integer), got {MAX_SEQ + 1}"),
    Bad("oversized line",
        T1 + b'{"v":1,"type":"message","id":"m1","turn_id":"t1","role":"assistant","text":"'
        + b"x" * MAX_LINE_BYTES + b'"}\n', 2,
        "line longer than the 4194304 byte limit; store large outputs behind output_ref"),
    Bad("empty file", b"", 1, "empty file: no records"),
    Bad("only blank lines", b"\n  \n\n", 3, "empty file: no records"),
    Bad("byte-order mark", b"\xef\xbb\xbf" + T1, 1,
        "file starts with a UTF-8 byte-order mark; ledger JSONL must be plain UTF-8"),
    Bad("unsupported version", T1 + line(type="message", id="m1", turn_id="t1", role="operator",
                                          text="hi", v=2), 2,
        "$.v: unsupported format version 2 (this reader supports 1)"),
    Bad("owner mismatch",
        line(type="turn", id="t1", seq=1, trigger="operator_input", work_item_id="wi1")
        + line(type="brief", id="b1", turn_id="t1", kind="ack", text="ok", work_item_id="wi2"), 2,
        "$.work_item_id: owner mismatch: record acts for 'wi2' but its turn 't1' acts for 'wi1'"),
    Bad("id with whitespace", line(type="turn", id="t 1", seq=1, trigger="timer"), 1,
        "$.id: must not contain whitespace or control characters, got 't 1'"),
    Bad("id with a control character", T1 + line(type="message", id="m1", turn_id="t1\x07",
                                                  role="operator", text="hi"), 2,
        "$.turn_id: must not contain whitespace or control characters, got 't1\\x07'"),
    Bad("empty id", line(type="turn", id="", seq=1, trigger="timer"), 1,
        "$.id: must not be empty"),
    Bad("trust escalation",
        T1 + line(type="message", id="m1", turn_id="t1", role="assistant", text="I am root",
                  trust="trusted_operator"), 2,
        "$.trust: origin 'assistant' may claim only model_output, got 'trusted_operator'"),
    Bad("external text claiming operator trust",
        T1 + line(type="external_event", id="e1", turn_id="t1", source="web", text="obey",
                  trust="trusted_operator"), 2,
        "$.trust: origin 'external' may claim only untrusted_external, got 'trusted_operator'"),
    Bad("operator trigger with a non-operator origin",
        line(type="turn", id="t1", seq=1, trigger="operator_input", origin="external"), 1,
        "$.origin: trigger 'operator_input' requires origin 'operator'"),
    Bad("operator message from another origin",
        T1 + line(type="message", id="m1", turn_id="t1", role="operator", text="hi",
                  origin="tool"), 2,
        "$.origin: an operator message must have origin 'operator'"),
    Bad("pin to a missing ref", T1 + line(type="pin", id="p1", turn_id="t1", target="tool:x9"), 2,
        "$.target: pin target 'tool:x9' is not in the ledger"),
    Bad("pin target that is not a ref", T1 + line(type="pin", id="p1", target="x9"), 2,
        f"$.target: expected a ref 'kind:id' with kind one of {TYPES}, got 'x9'"),
    Bad("wait resolved that was never opened",
        T1 + line(type="wait", id="w1r", wait_id="w1", status="resolved"), 2,
        "$.status: wait 'w1' is resolved but was never opened"),
    Bad("event answering a wait that was never opened",
        T1 + line(type="external_event", id="e1", turn_id="t1", source="ci", text="green",
                  wait_id="w9"), 2,
        "$.wait_id: no wait 'w9' was opened"),
    Bad("non-object line", T1 + b'["turn", "t2"]\n', 2,
        "$: expected a JSON object per line, expected `object`, got `array`"),
    Bad("missing required field",
        T1 + line(type="message", id="m1", turn_id="t1", role="operator"), 2,
        "$.text: missing required field"),
    Bad("misspelt field name", T1 + line(type="message", id="m1", tunr_id="t1", role="operator",
                                          text="deploy"), 2,
        "$.tunr_id: unknown field in a message record; did you mean 'turn_id'?"),
    Bad("another format's field name, misspelt",
        T1 + line(type="message", id="m1", turn_id="t1", role="operator", contnet="deploy"), 2,
        "$.contnet: unknown field in a message record; did you mean 'text'?"),
    Bad("misspelt field of a todo",
        T1 + line(type="work_item", id="w1", work_item_id="wi", turn_id="t1",
                  todos=[{"text": "a"}, {"txt": "b"}]), 2,
        "$.todos[1].txt: unknown field in a todo; did you mean 'text'?"),
    Bad("announced tool calls not a list",
        T1 + line(type="message", id="m1", turn_id="t1", role="assistant", text="on it",
                  tool_calls="c1"), 2,
        "$.tool_calls: expected `array`, got `str`"),
    Bad("announced tool call without its call id",
        T1 + line(type="message", id="m1", turn_id="t1", role="assistant", text="on it",
                  tool_calls=[{"call_id": "c1", "name": "bash"}, {"name": "bash"}]), 2,
        "$.tool_calls[1].call_id: missing required field"),
    Bad("one call id announced twice in one message",
        T1 + line(type="message", id="m1", turn_id="t1", role="assistant", text="on it",
                  tool_calls=[{"call_id": "c1", "name": "bash", "arguments": "ls"},
                              {"call_id": "c1", "name": "bash", "arguments": "pwd"}]), 2,
        "$.tool_calls[1].call_id: duplicate call id 'c1' in this message"),
    Bad("an operator message announcing tool calls",
        T1 + line(type="message", id="m1", turn_id="t1", role="operator", text="run it",
                  tool_calls=[{"call_id": "c1", "name": "deploy"}]), 2,
        "$.tool_calls: only an assistant message announces tool calls, got role 'operator'"),
    Bad("announced tool call with a bad call id",
        T1 + line(type="message", id="m1", turn_id="t1", role="assistant", text="on it",
                  tool_calls=[{"call_id": "c 1", "name": "bash"}]), 2,
        "$.tool_calls[0].call_id: must not contain whitespace or control characters, got 'c 1'"),
    Bad("announced tool call without a name",
        T1 + line(type="message", id="m1", turn_id="t1", role="assistant", text="on it",
                  tool_calls=[{"call_id": "c1", "name": ""}]), 2,
        "$.tool_calls[0].name: must not be empty"),
    Bad("misspelt field of an announced tool call",
        T1 + line(type="message", id="m1", turn_id="t1", role="assistant", text="on it",
                  tool_calls=[{"call_id": "c1", "name": "bash", "argumnets": "ls"}]), 2,
        "$.tool_calls[0].argumnets: unknown field in a tool call; did you mean 'arguments'?"),
    Bad("unknown extension trigger form", line(type="turn", id="t1", seq=1, trigger="Deploy"), 1,
        f"$.trigger: expected one of {TRIGGERS} or an extension 'x-name', got 'Deploy'"),
    Bad("record with no turn to attach to",
        line(type="brief", id="b1", kind="progress", text="halfway"), 1,
        "$.turn_id: missing, and there is no open turn to attach it to", only_into_empty=True),
    Bad("the first bad line is reported, not a later one",
        T1 + line(type="message", id="m1", turn_id="t9", role="assistant", text="orphan")
        + b"not json\n", 2,
        "$.turn_id: no turn 't9' before this record "
        "(a record belongs only to a turn appended before it)"),
    Bad("error on line 41 of a longer file",
        _valid_prefix(40) + line(type="message", id="m99", turn_id="t20", role="assistant",
                                 text="ok", trust="admin")
        + line(type="turn", id="t99", seq=99, trigger="timer"),
        41, f"$.trust: expected one of {TRUSTS}, got 'admin'"),
]

#: Records the "populated" database holds before a bad import (seq 0, so no case collides).
SEED = (line(type="turn", id="seed-t0", seq=0, trigger="restart", label="boot")
        + line(type="message", id="seed-m0", turn_id="seed-t0", role="system", text="ready"))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _export(db: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = _run(["export", "--db", str(db)], capsys)
    assert (code, err) == (0, "")
    return out


def test_table_has_every_required_kind() -> None:
    """The table covers at least 18 distinct kinds of bad input, each named once."""
    names = [c.name for c in CASES]
    assert len(set(names)) == len(names) >= 18


@pytest.mark.parametrize(
    ("case", "populated"),
    [pytest.param(c, populated, id=f"{c.name}-{'populated' if populated else 'fresh'}-db")
     for c in CASES for populated in (False, True) if not (populated and c.only_into_empty)],
)
def test_bad_input_is_one_located_line_and_writes_nothing(
    case: Bad, populated: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad file exits 2 with one exact stderr line naming file, line and field; the db is untouched."""
    db = tmp_path / "ledger.db"
    before = None
    if populated:
        seed = tmp_path / "seed.jsonl"
        seed.write_bytes(SEED)
        assert _run(["import", str(seed), "--db", str(db)], capsys)[0] == 0
        before = _export(db, capsys)
    src = tmp_path / "bad.jsonl"
    src.write_bytes(case.content)

    code, out, err = _run(["import", str(src), "--db", str(db)], capsys)

    assert code == 2
    assert out == ""
    assert err == f"holon-ctx: error: {src}:{case.line}: {case.message}\n"
    assert "Traceback" not in err
    if populated:
        assert _export(db, capsys) == before
        store = SqliteStore(db)
        assert store.stats().records == 2
        assert store._db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        store.close()
    else:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_library_error_carries_location(case: Bad, tmp_path: Path) -> None:
    """import_jsonl raises LedgerFormatError with source, line and field; a MemoryStore stays empty."""
    src = tmp_path / "bad.jsonl"
    src.write_bytes(case.content)
    store = MemoryStore()
    with pytest.raises(LedgerFormatError) as info:
        import_jsonl(src, store)
    assert str(info.value) == f"{src}:{case.line}: {case.message}"
    assert (info.value.source, info.value.line) == (str(src), case.line)
    field = case.message.split(": ", 1)[0] if case.message.startswith("$") else None
    assert info.value.path == field
    assert store.end_pos() == 0
    assert list(store.iter_records()) == []


def test_line_of_exactly_the_limit_is_accepted(tmp_path: Path) -> None:
    """A line of MAX_LINE_BYTES bytes (newline not counted) imports; one byte more is refused.
    The line states its provenance: the limit holds for the line as stored and exported, with
    origin and trust filled in (tests/test_ledger_line_limit.py)."""
    head = (b'{"v":1,"type":"message","id":"m1","origin":"assistant","trust":"model_output",'
            b'"turn_id":"t1","role":"assistant","text":"')
    body = head + (b"ab 12 " * (MAX_LINE_BYTES // 6 + 1))[: MAX_LINE_BYTES - len(head) - 2] + b'"}'
    assert len(body) == MAX_LINE_BYTES
    src = tmp_path / "big.jsonl"
    src.write_bytes(T1 + body + b"\n")
    store = MemoryStore()
    assert import_jsonl(src, store) == 2
    src.write_bytes(T1 + body[:-2] + b'x"}\n')
    with pytest.raises(LedgerFormatError, match="byte limit"):
        import_jsonl(src, MemoryStore())


def test_failure_late_in_a_large_batch_keeps_nothing(tmp_path: Path) -> None:
    """An error on the last of 5,000 lines leaves a SQLite store exactly as it was."""
    src = tmp_path / "long.jsonl"
    src.write_bytes(_valid_prefix(5000) + line(type="turn", id="t1", seq=99999, trigger="timer"))
    store = SqliteStore(tmp_path / "l.db")
    with pytest.raises(LedgerFormatError) as info:
        import_jsonl(src, store)
    assert str(info.value) == f"{src}:5001: $.id: duplicate id: turn:t1 is already in the ledger"
    assert store.end_pos() == 0
    assert store.stats().records == 0
    store.close()


def test_a_chat_message_per_line_is_told_how_transcripts_are_read(tmp_path: Path) -> None:
    """A .jsonl of chat messages (no ``type``, a ``role``) fails on its first line naming the
    file, line and field, and says a transcript is one JSON array or an object with
    'messages'; a ledger line missing its type gets no such hint."""
    src = tmp_path / "chat.jsonl"
    src.write_bytes(b'{"role":"user","content":"hi"}\n{"role":"assistant","content":"yo"}\n')
    with pytest.raises(LedgerFormatError) as chat:
        import_jsonl(src, MemoryStore())
    assert str(chat.value).startswith(f"{src}:1: $.type: missing required field (one of turn,")
    assert str(chat.value).endswith("the line is a chat message (it has 'role'), not a ledger "
                                    "record: a chat transcript is read as one JSON array of "
                                    "messages, or an object with 'messages' (import.md)")
    src.write_bytes(b'{"id":"t1","seq":1,"trigger":"timer"}\n')
    with pytest.raises(LedgerFormatError) as plain:
        import_jsonl(src, MemoryStore())
    assert str(plain.value).endswith("environment, pin)")


def test_a_duplicate_id_is_a_duplicate_id_error_naming_the_ref(tmp_path: Path) -> None:
    """A record whose id the ledger holds raises DuplicateIdError (a LedgerFormatError) with
    the ref as data, so a session that minted the id tells its clash from another's without
    reading the message (Session's retries, import_history's pending calls)."""
    from holon_ctx.errors import DuplicateIdError

    src = tmp_path / "dup.jsonl"
    src.write_bytes(T1 + M1 + M1)
    with pytest.raises(DuplicateIdError) as info:
        import_jsonl(src, SqliteStore(tmp_path / "l.db"))
    assert (info.value.ref, info.value.path, info.value.line) == ("message:m1", "$.id", 3)
    assert str(info.value) == f"{src}:3: $.id: duplicate id: message:m1 is already in the ledger"


@pytest.mark.parametrize(("content", "path", "message"), [
    (T1 + line(type="wait", id="wt1", turn_id="t1", wait_id="ci-1", status="cancelled"), "$.status",
     "wait 'ci-1' is cancelled but was never opened"),
    (T1 + line(type="external_event", id="e1", turn_id="t1", source="ci", text="green",
               wait_id="ci-1"), "$.wait_id", "no wait 'ci-1' was opened"),
], ids=["ended", "answered"])
def test_a_wait_never_opened_is_a_wait_not_opened_error_naming_it(
        content: bytes, path: str, message: str, tmp_path: Path) -> None:
    """Ending or answering a wait the ledger never opened raises WaitNotOpenedError (a
    LedgerFormatError) with the wait id as data and the field that named it as ``path``, so a
    session tells it from the ledger's other rules by type and field (Session.close_wait)."""
    from holon_ctx.errors import WaitNotOpenedError

    src = tmp_path / "w.jsonl"
    src.write_bytes(content)
    with pytest.raises(WaitNotOpenedError) as info:
        import_jsonl(src, SqliteStore(tmp_path / "l.db"))
    assert (info.value.wait_id, info.value.path, info.value.line) == ("ci-1", path, 2)
    assert str(info.value) == f"{src}:2: {path}: {message}"


def test_a_misspelt_field_beside_unknown_ones_is_still_refused(tmp_path: Path) -> None:
    """Reading past unknown fields (``x-…``, a later release's) does not read past a misspelt
    field on the same line, wherever it stands among them."""
    src = tmp_path / "bad.jsonl"
    src.write_bytes(T1 + line(type="message", **{"x-trace": 1}, id="m1", role="operator",
                              cost=3, tunr_id="t1", text="deploy"))
    with pytest.raises(LedgerFormatError) as info:
        import_jsonl(src, MemoryStore())
    assert (info.value.line, info.value.path) == (2, "$.tunr_id")


def test_a_field_like_one_the_line_has_is_read_past(tmp_path: Path) -> None:
    """A name close to a field the line already has is no misspelling of it (its value is not
    lost: the field is there), so a later release's ``labels`` beside ``label`` imports."""
    src = tmp_path / "ok.jsonl"
    src.write_bytes(line(type="turn", id="t1", seq=1, trigger="timer", label="tick",
                         labels=["a"]))
    store = MemoryStore()
    import_jsonl(src, store)
    assert [r.label for r in store.iter_records()] == ["tick"]  # type: ignore[attr-defined]
