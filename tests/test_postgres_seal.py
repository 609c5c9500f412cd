"""A compaction's seal on PostgreSQL in few round trips (issue 29, RFC 0026 decision 9).

The governed writes of a seal (facts, journal, envelope, event, control snapshot) are kept by
``PostgresContinuityBackend.batch()`` and sent as one statement, its reads answered from one
pipeline: what it writes must be what the write-by-write path writes, byte for byte; an error
inside must leave nothing; and the round trips of a compaction that seals must not grow with
the range it archives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from pg_round_trips import RoundTrips

import holon_ctx
from holon_ctx.continuity.exceptions import DuplicateRecordError
from holon_ctx.postgres import PostgresStore
from holon_ctx.postgres.continuity import PostgresContinuityBackend
from holon_ctx.session_upkeep import CompactionPolicy

#: The governed tables, and what of their rows a seal decides (no sid, no time, no number).
_GOVERNED = {
    "holon_continuity_facts": "kind, key, scope, body",
    "holon_continuity_journal": "envelope_id, step, body",
    "holon_continuity_envelopes": "envelope_id, session_id, body",
    "holon_continuity_events": "event_type, envelope_id, session_id, payload",
}
_MANUAL = CompactionPolicy(every_turns=10_000, binding_turns=10_000)


def _governed_rows(store: PostgresStore) -> dict[str, list[tuple[Any, ...]]]:
    """The governed rows; the journal's last step names its event by the store-wide number,
    so it is checked against the event here and compared as ``"the event's seq"``."""
    conn = store.connection
    order = {"holon_continuity_journal": "envelope_id, step"}
    found = {table: [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                     for row in conn.execute(
                         f"SELECT {cols} FROM {table} WHERE sid=%s ORDER BY "
                         f"{order.get(table, 'seq')}", (store.sid,)).fetchall()]
             for table, cols in _GOVERNED.items()}
    events = dict(conn.execute("SELECT envelope_id, seq FROM holon_continuity_events WHERE "
                               "sid=%s", (store.sid,)).fetchall())
    journal = []
    for envelope_id, step, body in found["holon_continuity_journal"]:
        if step == "compaction_event":
            assert json.loads(body) == {"event_seq": events[envelope_id]}
            body = b"the event's seq"
        journal.append((envelope_id, step, body))
    found["holon_continuity_journal"] = journal
    return found


def _story(session: holon_ctx.Session, turns: int, start: int = 0) -> None:
    """Turns with what a seal governs: a pin (a constraint), a deploy of unknown outcome (a side
    effect that blocks), a call left pending (an obligation), then ``turns`` plain turns."""
    if start == 0:
        session.operator_message("Deploy the billing fix, and never touch the ledger schema.")
        session.pin(session.current_turn or "", "the operator's rule")
        session.assistant_message("Deploying.",
                                  tool_calls=[holon_ctx.ToolCall("c1", "deploy", {})])
        session.tool_result("c1", "timed out", status="timeout", side_effect="unknown")
        session.assistant_message("Checking.", tool_calls=[holon_ctx.ToolCall("c2", "bash", {})])
    for k in range(start, start + turns):
        session.operator_message(f"Next request {k}: look at module_{k} and report.")
        session.assistant_message(f"Module {k} looks fine.")


@contextmanager
def _without_batch() -> Iterator[None]:
    """The write-by-write path: the backend without its batch (as before RFC 0026 decision 9)."""
    saved = PostgresContinuityBackend.batch
    del PostgresContinuityBackend.batch
    try:
        yield
    finally:
        PostgresContinuityBackend.batch = saved  # type: ignore[method-assign]


def test_a_batched_seal_writes_what_the_write_by_write_seal_writes(pg_url: str,
                                                                   pg_session_key: str) -> None:
    """Two sessions, the same turns and compactions (a first seal, then one after the pending
    call's result closes its obligation): one seals through the batch, one write by write; every
    governed row is the same, in the same order."""
    written = []
    for batched in (True, False):
        store = PostgresStore(pg_url, session=f"{pg_session_key}-{batched}")
        session = holon_ctx.open_session(store, compaction=_MANUAL)
        try:
            with _without_batch() if not batched else _nothing():
                _story(session, 40)
                assert session.compact().envelope_id is not None
                session.assistant_message("The deploy went out after all.")
                session.tool_result("c2", "deployed: billing 1.4.2")
                _story(session, 30, start=40)
                assert session.compact().envelope_id is not None
            written.append(_governed_rows(store))
        finally:
            session.close()
            store.close()
    batched_rows, one_by_one = written
    assert batched_rows == one_by_one
    assert len(batched_rows["holon_continuity_envelopes"]) == 2
    assert len(batched_rows["holon_continuity_events"]) == 2
    kinds = {row[0] for row in batched_rows["holon_continuity_facts"]}
    assert {"obligation", "constraint", "side_effect", "control_snapshot"} <= kinds


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _seal_round_trips(pg_url: str, key: str, turns: int) -> int:
    store = PostgresStore(pg_url, session=key)
    session = holon_ctx.open_session(store, compaction=_MANUAL)
    try:
        _story(session, 40)
        session.compact()  # the first seal: the session's identity, policy and budget
        _story(session, turns, start=40)
        trips = RoundTrips(store.connection)
        assert session.compact().envelope_id is not None
        return trips.count
    finally:
        session.close()
        store.close()


def test_a_seal_takes_a_few_round_trips_whatever_it_archives(pg_url: str,
                                                            pg_session_key: str) -> None:
    """A compaction that archives 20 turns and seals them takes a few round trips (86 before
    RFC 0026 decision 9 on this session, ~60 of them the governed writes and the reads between
    them, one each; 28 after; 22 since RFC 0026 decision 13 read the archive's reads ahead);
    one that archives ten times as many takes at most a few more:
    the governed seal's are the same, the archive's differ by the pages of new episodes read
    (a page twice as large each time: 30 at 200 turns)."""
    small = _seal_round_trips(pg_url, f"{pg_session_key}-small", 20)
    large = _seal_round_trips(pg_url, f"{pg_session_key}-large", 200)
    assert small <= 24, small
    assert large - small <= 4, (small, large)


def test_a_batch_that_raises_writes_nothing(pg_url: str, pg_session_key: str) -> None:
    """Writes kept by a batch that raises are never sent; a duplicate the batch can see is
    refused at once, as the write alone refuses it."""
    backend = PostgresContinuityBackend(pg_url, session=pg_session_key)
    at = datetime(2026, 12, 5, tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    try:
        backend.append_envelope("ce-1", "s1", b"{}", at)

        def seen_then_raise() -> None:
            with backend.batch():
                backend.append_fact("policy", "t1", "t1", b"{}", at)
                backend.append_step("ce-2", "boundary", b"{}", at)
                assert backend.latest_fact("policy", "t1") == b"{}"
                assert backend.steps("ce-2") == {"boundary": b"{}"}
                raise RuntimeError("stop")

        def duplicate() -> None:
            with backend.batch():
                backend.append_fact("policy", "t1", "t1", b"{}", at)
                backend.append_envelope("ce-1", "s1", b"{}", at)

        with pytest.raises(RuntimeError, match="stop"):
            seen_then_raise()
        assert backend.latest_fact("policy", "t1") is None
        assert backend.steps("ce-2") == {}
        with pytest.raises(DuplicateRecordError, match="ce-1"):
            duplicate()
        assert backend.latest_fact("policy", "t1") is None
        with backend.batch():
            backend.append_step("ce-1", "boundary", b"{}", at)
            seq = backend.append_event("context_compaction", "ce-1", "s1", b"{}", at)
            assert [e.seq for e in backend.events(envelope_id="ce-1", session_id="s1")] == [seq]
        assert backend.steps("ce-1") == {"boundary": b"{}"}
        assert [e.seq for e in backend.events(envelope_id="ce-1", session_id="s1")] == [seq]
        assert backend.last_recorded_at() == at
    finally:
        backend.close()
