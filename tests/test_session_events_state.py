"""The state a session's helpers keep between calls (issue 23, "tests that pin the session
path"): which work item new turns act for after each transition, who owns a wait, which calls
wait for a result (in this session and in a session reopened on the ledger), the ids minted
where an imported history took the plain ones, and a call refused against this session's state
made again once another writer appended what it refers to.

Each is checked on both sides of its condition (the item done is the current one or another; a
call id waiting in this reply or in an earlier one), so an inverted test or a branch taken for
the other case fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import holon_ctx
from holon_ctx import ToolCall, open_session
from holon_ctx.errors import InputError
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import (
    ExternalEvent,
    Message,
    MessageRole,
    TaskResult,
    Turn,
    Wait,
    WorkItem,
)
from holon_ctx.ledger.sqlite import SqliteStore


def _last(store: MemoryStore, kind: type) -> object:
    return [r for r in store.iter_records() if isinstance(r, kind)][-1]


def test_the_work_item_new_turns_act_for_follows_each_transition() -> None:
    store = MemoryStore()
    s = open_session(store, compaction=None)
    s.operator_message("start")
    assert s.work_item is None
    s.set_work_item("a", objective="the importer")
    assert s.work_item == "a"
    s.set_work_item("b", status="done")  # another item finished: the current one stays
    assert s.work_item == "a"
    s.set_work_item("c", status="blocked", blocker="waiting on review")
    assert s.work_item == "c"
    s.set_work_item("b", status="abandoned")  # another item, sorting before the current one
    assert s.work_item == "c"
    s.set_work_item("c", status="abandoned")
    assert s.work_item is None
    s.set_work_item("d", status="active")
    s.set_work_item("d", status="done")
    assert s.work_item is None
    s.wake("timer")
    assert _last(store, Turn).work_item_id is None  # type: ignore[attr-defined]
    record = _last(store, WorkItem)
    assert (record.work_item_id, record.status) == ("d", "done")  # type: ignore[attr-defined]


def test_a_turn_named_for_a_work_item_makes_it_current_and_records_carry_it() -> None:
    store = MemoryStore()
    s = open_session(store, compaction=None)
    s.operator_message("start", work_item="billing")
    assert s.work_item == "billing"
    s.task_result("job-1", "success", "migrated", verification=True)
    result = _last(store, TaskResult)
    assert (result.work_item_id, result.verification) == ("billing", True)  # type: ignore[attr-defined]
    s.external_event("ci", "green", work_item="payments")
    event = _last(store, ExternalEvent)
    assert event.work_item_id == "payments"  # type: ignore[attr-defined]
    assert s.work_item == "payments"
    s.open_wait("ci-1", "the build finishes")
    s.open_wait("rev-1", "a review", work_item="docs")
    waits = [r for r in store.iter_records() if isinstance(r, Wait)]
    assert [(w.wait_id, w.work_item_id) for w in waits] == [("ci-1", "payments"),
                                                             ("rev-1", "docs")]
    by = s.external_event("ci", "build 12 passed", wait="ci-1")
    s.close_wait("ci-1", resolved_by=by)
    closed = _last(store, Wait)
    assert (closed.wait_id, closed.status, closed.resolved_by) == (  # type: ignore[attr-defined]
        "ci-1", "resolved", by)


def test_a_call_id_still_waiting_from_an_earlier_reply_is_refused() -> None:
    s = open_session(MemoryStore(), compaction=None)
    s.operator_message("go")
    s.assistant_message("one", tool_calls=[ToolCall("c1", "bash", "ls")])
    with pytest.raises(InputError, match="duplicate call id 'c1'") as caught:
        s.assistant_message("two", tool_calls=[ToolCall("c2", "bash", "pwd"),
                                               ToolCall("c1", "bash", "ls")])
    assert caught.value.path == "tool_calls[1].call_id"
    s.tool_result("c1", "a.txt")
    # Answered: the id may be used again, and a second result for it is refused.
    s.assistant_message("three", tool_calls=[ToolCall("c1", "bash", "ls -a")])
    s.tool_result("c1", ".\n..\na.txt")
    with pytest.raises(InputError, match=r"call 'c1' has its result already \(tool:x"):
        s.tool_result("c1", "again")


def test_tool_call_arguments_given_as_a_mapping_are_canonical_json() -> None:
    call = ToolCall("c1", "edit", {"path": "é.txt", "after": 2, "before": 1})
    assert call.arguments == '{"after": 2, "before": 1, "path": "é.txt"}'
    assert json.loads(call.arguments) == {"path": "é.txt", "after": 2, "before": 1}
    assert ToolCall("c2", "bash").arguments == ""


def test_a_reopened_session_knows_which_calls_still_wait(tmp_path: Path) -> None:
    """Reopened on the ledger: a call written as pending and answered since waits no more; one
    still pending takes its result; a turn whose reply was given makes the next reply a step."""
    db = tmp_path / "agent.db"
    with open_session(db, compaction=None) as s:
        s.operator_message("deploy both")
        s.assistant_message("deploying", tool_calls=[ToolCall("a", "deploy", "eu"),
                                                     ToolCall("b", "deploy", "us")])
    with open_session(db, compaction=None) as s:
        s.tool_result("a", "eu done")
    with open_session(db, compaction=None) as s:
        with pytest.raises(InputError, match=r"call 'a' has its result already \(tool:x"):
            s.tool_result("a", "eu again")
        s.tool_result("b", "us done")
        s.assistant_message("both deployed")
        turns = [r for r in s.store.iter_records() if isinstance(r, Turn)]
        assert [t.trigger for t in turns] == ["operator_input", "x-agent-step"]
    with open_session(db, compaction=None) as s:
        s.operator_message("thanks")
    with open_session(db, compaction=None) as s:
        s.assistant_message("you are welcome")  # the turn's first reply belongs to it
    with open_session(db, compaction=None) as s:
        s.assistant_message("anything else?")  # it has its reply: this one is a step
        turns = [r for r in s.store.iter_records() if isinstance(r, Turn)]
        assert [t.trigger for t in turns] == ["operator_input", "x-agent-step",
                                              "operator_input", "x-agent-step"]
        owner = {r.text: r.turn_id for r in s.store.iter_records() if isinstance(r, Message)}
        assert owner["you are welcome"] == owner["thanks"] == turns[2].id
        assert owner["anything else?"] == turns[3].id


def test_ids_taken_by_an_imported_history_get_a_suffix() -> None:
    """A helper mints ids from ledger positions (``m3``); where a record already holds that id
    (an importer names records after their source) the helper's record is ``m3.2``, and from
    then on the session checks each id it mints (a free one keeps its plain id), never a clash."""
    store = MemoryStore()
    store.append([Turn(id="t0", seq=0, trigger="operator_input"),
                   Message(id="m3", turn_id="t0", role=MessageRole.OPERATOR, text="imported"),
                   Message(id="m4", turn_id="t0", role=MessageRole.OPERATOR, text="imported")])
    s = open_session(store, compaction=None)
    ref = s.operator_message("clashes")  # t3 then m4: taken, so m4.2
    assert ref == "message:m4.2"
    assert s._check_ids
    later = s.operator_message("checked from now on")  # t5, m6: free, no suffix
    assert later == "message:m6"
    messages = [r.id for r in store.iter_records() if isinstance(r, Message)]
    assert messages == ["m3", "m4", "m4.2", "m6"]


def test_a_call_refused_against_this_sessions_state_is_made_again_after_another_writer(
        tmp_path: Path) -> None:
    """Session B, its end known, closes a wait session A opened after B's last append: refused
    against B's state, then made again from the ledger as it is, and stored once."""
    db = tmp_path / "shared.db"
    a = open_session(db, compaction=None)
    b = open_session(db, compaction=None)
    b.operator_message("from b")
    a.open_wait("ci-9", "the build finishes")
    ref = b.close_wait("ci-9", status="cancelled")
    waits = [r for r in holon_ctx.open_session(db, compaction=None).store.iter_records()
             if isinstance(r, Wait)]
    assert [(w.wait_id, w.status) for w in waits] == [("ci-9", "open"), ("ci-9", "cancelled")]
    assert ref.startswith("wait:")
    # A refusal no other writer explains is not retried: it is raised as it is.
    with pytest.raises(InputError, match="no wait 'ci-404' was opened"):
        b.close_wait("ci-404")
    a.close()
    b.close()


def test_a_session_made_directly_on_a_store_leaves_it_open(tmp_path: Path) -> None:
    """``Session(store)`` does not own the store it is given (only ``open_session`` on a path or
    URL opens one): closing the session leaves the caller's store usable."""
    store = SqliteStore(tmp_path / "given.db")
    with holon_ctx.Session(store, compaction=None) as s:
        s.operator_message("hello")
    assert store.end_pos() == 2  # a closed connection would raise here
    store.close()
