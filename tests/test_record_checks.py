"""Field checks: ``at`` is RFC 3339, integers stay in their documented ranges (issue 10, item 9),
and records built in Python are type-checked when appended (item 10).

Each failure is a ``LedgerFormatError`` (an ``InputError``) naming the field, and nothing of the
batch is appended.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from holon_ctx.errors import InputError, LedgerFormatError
from holon_ctx.ledger.codec import decode_line
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import (
    Environment,
    Message,
    MessageRole,
    Record,
    TaskResult,
    TaskStatus,
    Todo,
    Tool,
    ToolStatus,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
)
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore

TURN = '{"v":1,"type":"turn","id":"t1","seq":1,"trigger":"timer"'
AT_EXPECTED = ("expected an RFC 3339 date-time with an offset, such as 2026-11-30T08:02:32Z or "
               "2026-11-30T16:02:32.5+08:00, got ")


@pytest.mark.parametrize("at", ["2026-11-30T08:02:32Z", "2026-11-30t08:02:32z",
                                "2026-11-30T08:02:32.123456+08:00", "2026-11-30T08:02:32-00:30",
                                "2016-12-31T23:59:60Z", "2024-02-29T00:00:00Z"])
def test_rfc3339_times_are_accepted(at: str) -> None:
    record = decode_line(f'{TURN},"at":"{at}"}}'.encode(), source="x.jsonl", line=1)
    assert record.at == at


@pytest.mark.parametrize("at", ["yesterday", "", "2026-11-30", "2026-11-30 08:02:32Z",
                                "2026-11-30T08:02:32", "2026-11-30T08:02Z", "2026-02-30T00:00:00Z",
                                "2025-02-29T00:00:00Z", "2026-11-30T24:00:00Z",
                                "2026-11-30T08:61:00Z", "2026-11-30T08:02:61Z",
                                "2026-11-30T08:02:32+24:00", "2026-11-30T08:02:32+0800",
                                "1763510060", "２０２６-11-30T08:02:32Z"])
def test_other_times_are_refused_with_the_field_named(at: str) -> None:
    with pytest.raises(LedgerFormatError) as caught:
        decode_line(f'{TURN},"at":"{at}"}}'.encode(), source="x.jsonl", line=7)
    assert str(caught.value) == f"x.jsonl:7: $.at: {AT_EXPECTED}{at!r}"


@pytest.mark.parametrize(("code", "ok"), [(0, True), (-9, True), (255, True),
                                          (3221225477, True), (-(2**31), True), (2**32 - 1, True),
                                          (2**32, False), (-(2**31) - 1, False), (10**30, False)])
def test_exit_code_range(code: int, ok: bool) -> None:
    line = ('{"v":1,"type":"tool","id":"x1","turn_id":"t1","tool_name":"sh","status":"ok",'
            f'"exit_code":{code}}}').encode()
    if ok:
        assert decode_line(line, source="x.jsonl", line=1).exit_code == code  # type: ignore[union-attr]
        return
    with pytest.raises(LedgerFormatError) as caught:
        decode_line(line, source="x.jsonl", line=2)
    assert str(caught.value) == (f"x.jsonl:2: $.exit_code: must be between -2147483648 and "
                                 f"4294967295 (a 32-bit exit status), got {code}")


def test_a_bad_time_in_a_file_is_located(tmp_path: Path) -> None:
    from holon_ctx.ledger.importer import import_jsonl
    src = tmp_path / "l.jsonl"
    src.write_text(f'{TURN}}}\n{{"v":1,"type":"turn","id":"t2","seq":2,"trigger":"timer",'
                   '"at":"noon"}\n', encoding="utf-8")
    store = MemoryStore()
    with pytest.raises(LedgerFormatError, match=r"l\.jsonl:2: \$\.at: expected an RFC 3339"):
        import_jsonl(src, store)
    assert store.end_pos() == 0


# -- records built in Python ---------------------------------------------------------------------
T = Turn(id="t1", seq=0, trigger="timer")
BAD: list[tuple[str, Any, str]] = [
    ("role-str", Message(id="m1", turn_id="t1", role="operator", text="hi"),  # type: ignore[arg-type]
     "$.role: expected a MessageRole (one of operator, assistant, system), got str 'operator' "
     "(use MessageRole('operator'))"),
    ("text-none", Message(id="m1", turn_id="t1", role=MessageRole.ASSISTANT, text=None),  # type: ignore[arg-type]
     "$.text: expected a str, got NoneType None"),
    ("id-int", Message(id=7, turn_id="t1", role=MessageRole.ASSISTANT, text="x"),  # type: ignore[arg-type]
     "$.id: expected a str, got int 7"),
    ("seq-str", Turn(id="t2", seq="1", trigger="timer"),  # type: ignore[arg-type]
     "$.seq: expected an int, got str '1'"),
    ("exit-bool", Tool(id="x1", turn_id="t1", tool_name="sh", status=ToolStatus.OK, exit_code=True),
     "$.exit_code: expected an int, got bool True"),
    ("exit-range", Tool(id="x1", turn_id="t1", tool_name="sh", status=ToolStatus.OK,
                        exit_code=2**40),
     "$.exit_code: must be between -2147483648 and 4294967295 (a 32-bit exit status), got "
     "1099511627776"),
    ("status-str", Wait(id="w1", wait_id="ci", status="open", turn_id="t1"),  # type: ignore[arg-type]
     "$.status: expected a WaitStatus (one of open, resolved, cancelled, expired), got str 'open' "
     "(use WaitStatus('open'))"),
    ("task-status-str", TaskResult(id="r1", turn_id="t1", task_id="k", status="success"),  # type: ignore[arg-type]
     "$.status: expected a TaskStatus (one of success, failure, cancelled, timeout, partial), got "
     "str 'success' (use TaskStatus('success'))"),
    ("todo-dict", WorkItem(id="w1", work_item_id="wi", todos=[Todo(text="a"), {"text": "b"}]),  # type: ignore[list-item]
     "$.todos[1]: expected a Todo, got dict {'text': 'b'}"),
    ("todo-done", WorkItem(id="w1", work_item_id="wi", todos=[Todo(text="a", done="no")]),  # type: ignore[arg-type]
     "$.todos[0].done: expected a bool, got str 'no'"),
    ("capabilities-str", Environment(id="e1", capabilities="shell"),  # type: ignore[arg-type]
     "$.capabilities: expected a list, got str 'shell'"),
    ("surrogate", Message(id="m1", turn_id="t1", role=MessageRole.ASSISTANT, text="a\ud800"),
     "$.text: a lone UTF-16 surrogate '\\ud800' at character 1: text must be valid Unicode"),
    ("bad-at", Message(id="m1", turn_id="t1", role=MessageRole.ASSISTANT, text="x", at="now"),
     f"$.at: {AT_EXPECTED}'now'"),
    ("not-a-record", {"type": "message", "id": "m1"},
     "$: expected a ledger record (Turn, Message, Brief, TaskResult, Tool, ExternalEvent, "
     "WorkItem, Wait, Environment, Pin), got dict {'type': 'message', 'id': 'm1'}"),
]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> LedgerStore:
    return MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "l.db")


@pytest.mark.parametrize(("name", "record", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_wrongly_typed_record_is_refused_naming_the_field(store: LedgerStore, name: str,
                                                            record: Any, message: str) -> None:
    store.append([T])
    with pytest.raises(InputError) as caught:
        store.append([Message(id="ok", turn_id="t1", role=MessageRole.ASSISTANT, text="fine"),
                      record])
    text = str(caught.value)
    assert text.startswith(f"<append>: {message}"), text
    assert "; record 2 of the batch, a " in text
    assert "\n" not in text
    assert store.end_pos() == 1  # nothing of the batch
    store.close()


def test_well_typed_records_pass(store: LedgerStore) -> None:
    batch: list[Record] = [
        Turn(id="t1", seq=0, trigger="timer", at="2026-11-30T08:02:32Z"),
        Tool(id="x1", turn_id="t1", tool_name="sh", status=ToolStatus.ERROR, exit_code=-9,
             files_written=["a.py"]),
        WorkItem(id="w1", work_item_id="wi", todos=[Todo(text="a", done=True)], plan=None),
        TaskResult(id="r1", turn_id="t1", task_id="k", status=TaskStatus.SUCCESS),
        Wait(id="wt", wait_id="ci", status=WaitStatus.OPEN, turn_id="t1"),
    ]
    assert store.append(batch) == 5
    store.close()
