"""A compaction's reads in one round trip on PostgreSQL (RFC 0026 decision 13,
holon_ctx/postgres/compaction_ahead.py).

A compaction that archives and seals nothing runs on the answers of one statement alone, without
the compaction lock; one that would write runs again under the lock. So: such a compaction is one
round trip and a sealing one fewer than before; a compacting runtime writes the same episodes and
governed rows, byte for byte, and is given the same requests as the same runtime with every read
asked of the server one by one (the code path before); each of its requests is the one a rebuild
from the ledger gives; and a compaction whose episode store is on another connection is never run
without the lock.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest
from chaos_scenarios import rebuilt_digest
from generated_turns import agent_turn
from pg_round_trips import RoundTrips
from session_procs import messages_digest

import holon_ctx
from holon_ctx.memory import ArchivePolicy, Archiver
from holon_ctx.postgres import PostgresStore
from holon_ctx.postgres.episodes import PostgresEpisodeStore

_MANUAL = holon_ctx.CompactionPolicy(every_turns=10_000, binding_turns=10_000)
_NOW = datetime(2026, 12, 6, tzinfo=UTC)
#: What of each derived table a compaction decides (no sid, no time; envelopes, facts and
#: events in the order written).
_DERIVED = {
    "holon_episodes": ("num, id, first_seq, last_seq, owner, digest, length, body", "num"),
    "holon_episodes_open": ("num, key, kind, pinned, last_seq, episode_id, resolved_pos, exact",
                            "num, key"),
    "holon_episodes_runs": ("first_num, pos", "first_num"),
    "holon_episodes_meta": ("key, value", "key"),
    "holon_continuity_facts": ("kind, key, scope, body", "seq"),
    "holon_continuity_envelopes": ("envelope_id, session_id, body", "seq"),
    "holon_continuity_journal": ("envelope_id, step, body", "envelope_id, step"),
    "holon_continuity_events": ("event_type, envelope_id, session_id, payload", "seq"),
}


def _derived_rows(store: PostgresStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every derived row; the journal's last step names its event by the store-wide number,
    compared here as the event's place among the session's events."""
    conn = store.connection
    found = {table: [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                     for row in conn.execute(f"SELECT {cols} FROM {table} WHERE sid=%s "
                                             f"ORDER BY {order}", (store.sid,)).fetchall()]
             for table, (cols, order) in _DERIVED.items()}
    place = {seq: i for i, (seq,) in enumerate(conn.execute(
        "SELECT seq FROM holon_continuity_events WHERE sid=%s ORDER BY seq",
        (store.sid,)).fetchall())}
    found["holon_continuity_journal"] = [
        (envelope_id, step, place[json.loads(body)["event_seq"]]
         if step == "compaction_event" else body)
        for envelope_id, step, body in found["holon_continuity_journal"]]
    return found


def _old_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compaction as before: under the lock, every read asked of the server."""
    monkeypatch.setattr(PostgresStore, "compact_alone", None, raising=False)
    monkeypatch.setattr(PostgresStore, "compaction_reads", None, raising=False)


def _plain_turns(session: holon_ctx.Session, start: int, count: int) -> None:
    """Turns with nothing left open (no wait, no pending call): their archive has no open item,
    so a compaction that finds nothing to archive has nothing of the ledger to ask either."""
    for k in range(start, start + count):
        session.operator_message(f"Request {k}: look at module_{k % 7} and report.")
        session.assistant_message(f"Step {k}.", tool_calls=[
            holon_ctx.ToolCall(f"c{k}", "bash", {"command": f"pytest -q tests/m{k % 7}"})])
        session.tool_result(f"c{k}", f"{k % 5 + 3} passed\n" * (k % 9 + 1))


def _compaction_round_trips(pg_url: str, key: str) -> tuple[list[int], list[int]]:
    """Round trips of the compactions of a 60-turn session compacted after every turn from turn
    40 on: (those that wrote nothing, those that sealed)."""
    store = PostgresStore(pg_url, session=key)
    session = holon_ctx.open_session(store, compaction=_MANUAL)
    noop: list[int] = []
    sealed: list[int] = []
    try:
        _plain_turns(session, 0, 40)
        assert session.compact().envelope_id is not None
        trips = RoundTrips(store.connection)
        for k in range(40, 60):
            _plain_turns(session, k, 1)
            before = trips.count
            result = session.compact()
            if result.envelope_id is not None:
                sealed.append(trips.count - before)
            elif not result.archive.archived:
                noop.append(trips.count - before)
        return noop, sealed
    finally:
        session.close()
        store.close()


def test_a_compaction_that_writes_nothing_is_one_round_trip(pg_url: str,
                                                            pg_session_key: str) -> None:
    """Compacting after every turn: most compactions archive nothing (no range closed yet) and
    are one round trip (15 before RFC 0026 decision 13: the lock, the archive's reads one by
    one, the governed read ahead, the unsealed episodes, the snapshot check, the unlock); one
    that seals is 20 (26 before: its reads before its first write are that one statement)."""
    noop, sealed = _compaction_round_trips(pg_url, pg_session_key)
    assert noop, "no compaction archived nothing: the session no longer shows the case"
    assert sealed, "no compaction sealed: the session no longer shows the case"
    assert set(noop) == {1}, noop
    assert max(sealed) <= 21, sealed


def _runtime(pg_url: str, key: str, seed: int) -> tuple[list[str], dict[str, Any], list[str]]:
    """A runtime under the default policy with a tight budget (so it compacts every few turns,
    mostly finding nothing), open waits, pending calls and unknown side effects: its requests'
    digests, its derived rows, and the rebuild's digest of each request."""
    store = PostgresStore(pg_url, session=key)
    # One moment for every write: both runs stamp the same times (a store's clock never goes
    # below the newest time it holds, so a constant clock is accepted).
    session = holon_ctx.open_session(store, clock=lambda: _NOW,
                                     compaction=holon_ctx.CompactionPolicy(
                                         recent_turns=4, every_turns=6, binding_turns=2))
    rng, waits = random.Random(seed), list[str]()
    made: list[str] = []
    asked: list[tuple[int, int]] = []
    try:
        for i in range(36):
            if i % 3:
                _plain_turns(session, 1000 + i, 1)
            else:
                agent_turn(session, i, rng, waits)
            request = session.next_request(1500)
            messages = request._messages
            made.append(messages_digest(messages))
            asked.append((request.planned_tokens, messages.limit_pos))
            json.dumps(request.openai_messages)
        rebuilt = [rebuilt_digest(PostgresStore(pg_url, session=key), planned, pos)
                   for planned, pos in asked]
        return made, _derived_rows(store), rebuilt
    finally:
        session.close()
        store.close()


def test_a_compacting_runtime_writes_and_is_given_what_it_was_before(
        pg_url: str, pg_session_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same runtime twice, compacting ~a turn in three: with the compaction read ahead (and
    run alone when it writes nothing), and with every compaction under the lock, each read asked
    of the server. Same requests, same episodes, resolutions, runs and governed rows, byte for
    byte; and every request is the one a rebuild from the ledger gives at its position."""
    made, derived, rebuilt = _runtime(pg_url, f"{pg_session_key}-ahead", 11)
    with monkeypatch.context() as patch:
        _old_path(patch)
        made_before, derived_before, _ = _runtime(pg_url, f"{pg_session_key}-before", 11)
    assert made == made_before
    assert derived == derived_before
    assert len(derived["holon_continuity_envelopes"]) >= 2
    assert any(row[6] is None for row in derived["holon_episodes_open"])  # items left open
    assert made == rebuilt


def test_a_compaction_that_archives_runs_under_the_lock_and_writes_what_it_did(
        pg_url: str, pg_session_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction that would write is not run alone: tried on the answers, it stops at its
    first write having sent nothing, and runs again under the lock; what it writes is what the
    old path writes."""
    found = []
    for ahead in (True, False):
        with monkeypatch.context() as patch:
            if not ahead:
                _old_path(patch)
            store = PostgresStore(pg_url, session=f"{pg_session_key}-{ahead}")
            session = holon_ctx.open_session(store, compaction=_MANUAL,
                                             clock=lambda: _NOW)
            try:
                _plain_turns(session, 0, 40)
                first = session.compact()
                _plain_turns(session, 40, 40)
                second = session.compact()
                assert first.envelope_id is not None
                assert second.envelope_id is not None
                found.append((first, second, _derived_rows(store)))
            finally:
                session.close()
                store.close()
    assert found[0] == found[1]


def test_episodes_on_another_connection_are_never_compacted_without_the_lock(
        pg_url: str, pg_session_key: str) -> None:
    """Run alone, a compaction writes nothing only because its connection refuses to send: an
    episode store on another connection could be written to outside the lock, so such a
    compaction always runs under it (the lock and its release: more than one round trip)."""
    store = PostgresStore(pg_url, session=pg_session_key)
    episodes = PostgresEpisodeStore(pg_url, session=pg_session_key)
    session = holon_ctx.open_session(store, compaction=_MANUAL, episodes=episodes)
    try:
        _plain_turns(session, 0, 40)
        assert session.compact().envelope_id is not None
        trips = RoundTrips(store.connection)
        result = session.compact()
        assert result.envelope_id is None
        assert not result.archive.archived
        assert trips.count >= 3  # the lock, its governed reads, the unlock at least
    finally:
        session.close()
        episodes.close()
        store.close()


def test_a_compaction_that_writes_nothing_does_not_wait_for_anothers_lock(
        pg_url: str, pg_session_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """While another process holds the session's compaction lock, a compaction with nothing to
    write returns (it takes no lock); one with something to write waits for the lock, as before
    (here past a short timeout: one line saying who held it)."""
    monkeypatch.setenv("HOLON_CTX_LOCK_TIMEOUT", "0.3")
    store = PostgresStore(pg_url, session=pg_session_key)
    other = PostgresStore(pg_url, session=pg_session_key, create=False)
    session = holon_ctx.open_session(store, compaction=_MANUAL)
    try:
        _plain_turns(session, 0, 40)
        assert session.compact().envelope_id is not None
        with other.compaction_lock():
            trips = RoundTrips(store.connection)
            result = session.compact()
            assert result.envelope_id is None
            assert not result.archive.archived
            assert trips.count == 1
            _plain_turns(session, 40, 40)
            with pytest.raises(holon_ctx.StoreError, match="held the lock"):
                session.compact()
        assert session.compact().envelope_id is not None
    finally:
        session.close()
        other.close()
        store.close()


def test_episodes_another_compaction_left_unsealed_are_sealed_under_the_lock(
        pg_url: str, pg_session_key: str) -> None:
    """Another process archived episodes and stopped before sealing them (a crash, or a
    compaction still running): a compaction finds them unsealed in its read ahead, so it does
    not return from there but seals them under the lock."""
    store = PostgresStore(pg_url, session=pg_session_key)
    session = holon_ctx.open_session(store, compaction=_MANUAL)
    other = PostgresStore(pg_url, session=pg_session_key, create=False)
    episodes = PostgresEpisodeStore(other.connection, session=pg_session_key)
    try:
        _plain_turns(session, 0, 40)
        assert session.compact().envelope_id is not None
        _plain_turns(session, 40, 40)
        archived = Archiver(other, episodes, policy=ArchivePolicy(recent_turns=16)).archive()
        assert archived.archived
        result = session.compact()
        assert not result.archive.archived  # the other process archived them
        assert result.envelope_id is not None
        newest = episodes.last()
        assert newest is not None
        assert result.envelope_id.endswith("-" + newest.span.last_turn.removeprefix("turn:"))
    finally:
        session.close()
        episodes.close()
        other.close()
        store.close()
