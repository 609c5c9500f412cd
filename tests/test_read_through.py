"""The request a runtime would send, made by a reader (projection/session/read_through.py): the
messages or the text layout of the same position, the cached share a runtime sees, nothing
written to the ledger's database."""

from __future__ import annotations

import gc
import hashlib
from pathlib import Path

import holon_ctx
from holon_ctx.ledger.epochs import MemoryEpochStore
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.projection.session.read_through import read_through_request, save_epoch
from holon_ctx.projection.session.session import Layout, SessionProjector

BUDGET = 1500


def _ledger(path: Path, turns: int) -> None:
    with holon_ctx.open_session(path, compaction=None) as session:
        session.operator_message("Port the importer to the new schema; keep the old CLI flags.")
        for i in range(turns):
            session.assistant_message(f"Step {i}: checking the importer. " * 4,
                                      tool_calls=[holon_ctx.ToolCall(f"c{i}", "bash", "{}")])
            session.tool_result(f"c{i}", f"ran case {i}\n" * 12)
            session.operator_message(f"Looks right; go on with case {i + 1}.")


def _files(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.is_file()}


def test_a_read_through_request_is_the_runtimes_and_writes_nothing(tmp_path: Path) -> None:
    """The messages request is the one a fresh walk makes right after the turn before's (so its
    cached share is a runtime's, not none); the text layout is of the same ledger position; the
    database and the files beside it are unchanged, the epoch it saved included."""
    db = tmp_path / "agent.db"
    _ledger(db, 8)
    store = SqliteStore(db)
    save_epoch(store, budget_tokens=BUDGET, episodes=None, control=None)
    store.close()
    gc.collect()
    before = _files(tmp_path)
    store = SqliteStore(db)
    try:
        messages = read_through_request(store, budget_tokens=BUDGET, at=None, episodes=None,
                                        control=None)
        text = read_through_request(store, budget_tokens=BUDGET, at=None, episodes=None,
                                    control=None, text=True)
        walk = SessionProjector(store, layout=Layout.MESSAGES, epochs=MemoryEpochStore())
        latest = store.latest_turn(store.end_pos())
        assert latest is not None
        assert latest.turn_seq is not None
        [previous] = store.turns_before(latest.turn_seq, 1, store.end_pos())
        walk.request(budget_tokens=BUDGET, at=previous.ref)
        expected = walk.request(budget_tokens=BUDGET)
        alone = SessionProjector(store, layout=Layout.MESSAGES,
                                 epochs=MemoryEpochStore()).request(budget_tokens=BUDGET)
    finally:
        store.close()
    gc.collect()
    assert (messages.layout, text.layout) == (Layout.MESSAGES, Layout.TEXT)
    assert messages.openai_messages() == expected.openai_messages()
    assert messages.cached_tokens == expected.cached_tokens > 0 == alone.cached_tokens
    assert text.limit_pos == messages.limit_pos
    assert _files(tmp_path) == before


def test_the_turn_before_is_found_when_it_holds_no_record_but_itself(tmp_path: Path) -> None:
    """The turn before the one shown may be a bare turn record (a scheduler tick that found
    nothing) right before it in the ledger, and the only one before it: the read-through still
    makes that turn's request first, so the shown request's cached share is the runtime's."""
    from holon_ctx.ledger.records import Message, MessageRole, Turn

    store = SqliteStore(tmp_path / "agent.db")
    try:
        store.append([Turn(id="tick", seq=1, trigger="scheduler_tick"),
                      Turn(id="next", seq=2, trigger="operator_input"),
                      Message(id="next-m", turn_id="next", role=MessageRole.OPERATOR,
                              text="Port the importer to the new schema; keep the old flags.")])
        messages = read_through_request(store, budget_tokens=BUDGET, at=None, episodes=None,
                                        control=None)
        walk = SessionProjector(store, layout=Layout.MESSAGES, epochs=MemoryEpochStore())
        walk.request(budget_tokens=BUDGET, at="turn:tick")
        expected = walk.request(budget_tokens=BUDGET)
    finally:
        store.close()
    assert messages.openai_messages() == expected.openai_messages()
    assert messages.cached_tokens == expected.cached_tokens > 0
