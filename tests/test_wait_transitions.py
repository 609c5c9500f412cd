"""A wait's transitions after it opened: repeated, contradictory and reopening ones are accepted
and the latest is the state (RFC 0001, *Waits*; docs/ledger-format.md, *Work items and waits*)."""

from __future__ import annotations

from pathlib import Path

import holon_ctx
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import WaitStatus


def test_a_redelivered_transition_is_stored_again_and_changes_nothing() -> None:
    """At-least-once delivery: the same open and the same close twice never fail, and the
    second of each leaves the wait's state as the first made it."""
    with holon_ctx.open_session(":memory:") as session:
        session.operator_message("Deploy when CI is green.")
        session.open_wait("ci-1", "CI run 1 passes")
        first = session.store.wait_state("ci-1")
        again = session.open_wait("ci-1", "CI run 1 passes")
        state = session.store.wait_state("ci-1")
        assert first is not None
        assert state is not None
        assert (state.ref, state.status, state.condition) == (again, WaitStatus.OPEN,
                                                              "CI run 1 passes")
        event = session.external_event("ci", "run 1 passed", wait="ci-1")
        closed = [session.close_wait("ci-1", resolved_by=event) for _ in range(2)]
        state = session.store.wait_state("ci-1")
        assert state is not None
        assert closed[0] != closed[1] == state.ref  # stored again, as a record of its own
        assert (state.status, state.resolved_by, state.opened_ref) == (
            WaitStatus.RESOLVED, event, first.ref)
        assert session.store.open_waits(session.store.end_pos()) == []


def test_a_contradictory_close_is_accepted_and_the_latest_wins() -> None:
    """Resolved by one event, then by another, then cancelled: each is stored, the state is the
    last, and the prompt states every transition with its ref."""
    with holon_ctx.open_session(":memory:") as session:
        session.operator_message("Deploy when CI is green.")
        session.open_wait("ci-1", "CI run 1 passes")
        e1 = session.external_event("ci", "run 1 passed", wait="ci-1")
        by_e1 = session.close_wait("ci-1", resolved_by=e1)
        e2 = session.external_event("ci", "run 1 passed (again)", wait="ci-1")
        by_e2 = session.close_wait("ci-1", resolved_by=e2)
        assert session.store.wait_state("ci-1").resolved_by == e2  # type: ignore[union-attr]
        cancelled = session.close_wait("ci-1", status="cancelled")
        state = session.store.wait_state("ci-1")
        assert state is not None
        assert (state.ref, state.status, state.resolved_by) == (cancelled, WaitStatus.CANCELLED,
                                                                None)
        text = session.next_request(8000, text=True).text
        assert text is not None
        lines = [f"wait ci-1 resolved by {e1} ({by_e1})", f"wait ci-1 resolved by {e2} ({by_e2})",
                 f"wait ci-1 cancelled ({cancelled})"]
        assert [text.index(line) for line in lines] == sorted(text.index(line) for line in lines)


def test_open_restates_an_open_wait_and_reopens_a_closed_one() -> None:
    """open on an open wait replaces its condition; open after a close makes it open again,
    still remembering its first opening."""
    with holon_ctx.open_session(":memory:") as session:
        session.operator_message("Deploy when CI is green.")
        opened = session.open_wait("ci-1", "CI run 1 passes")
        session.open_wait("ci-1", "CI run 2 passes")
        assert session.store.wait_state("ci-1").condition == "CI run 2 passes"  # type: ignore[union-attr]
        session.close_wait("ci-1", status="expired")
        assert session.store.open_waits(session.store.end_pos()) == []
        session.open_wait("ci-1", "CI run 3 passes")
        [state] = session.store.open_waits(session.store.end_pos())
        assert (state.wait_id, state.opened_ref, state.condition) == ("ci-1", opened,
                                                                      "CI run 3 passes")


def test_a_ledger_with_such_transitions_imports(tmp_path: Path) -> None:
    """The format accepts them too: ledger JSONL with a wait resolved, cancelled, expired and
    resolved again by a late event imports, and the last transition is the state."""
    src = tmp_path / "run.jsonl"
    src.write_text("\n".join([
        '{"v":1,"type":"turn","id":"t1","seq":0,"trigger":"operator_input"}',
        '{"v":1,"type":"wait","id":"w1","wait_id":"ci","turn_id":"t1","status":"open"}',
        '{"v":1,"type":"external_event","id":"e1","turn_id":"t1","source":"ci","text":"ok",'
        '"wait_id":"ci"}',
        '{"v":1,"type":"wait","id":"w2","wait_id":"ci","status":"resolved",'
        '"resolved_by":"external_event:e1"}',
        '{"v":1,"type":"wait","id":"w3","wait_id":"ci","status":"cancelled"}',
        '{"v":1,"type":"wait","id":"w4","wait_id":"ci","status":"expired"}',
        '{"v":1,"type":"wait","id":"w5","wait_id":"ci","status":"resolved",'
        '"resolved_by":"external_event:e1"}',
    ]) + "\n", encoding="utf-8")
    store = MemoryStore()
    assert import_jsonl(src, store) == 7
    state = store.wait_state("ci")
    assert state is not None
    assert (state.ref, state.status, state.resolved_by) == ("wait:w5", WaitStatus.RESOLVED,
                                                            "external_event:e1")
