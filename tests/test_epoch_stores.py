"""One conformance suite for every EpochStore (memory, SQLite, PostgreSQL), and the session
projection continuing across processes on PostgreSQL.

The ``backend`` fixture yields each implementation in turn with two hooks the Protocol has no word
for: ``reopen`` (another store object over the same storage, as a second process would open it;
memory has no storage beyond its object, so it is absent there) and ``spoil`` (write bytes that no
longer decode over a key's persisted rows, as a bad disk or an older layout would leave them).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from projection_builders import memory_store, random_ledger
from session_helpers import turn_ids, walk

from holon_ctx import open_session
from holon_ctx.errors import StoreError
from holon_ctx.ledger.epochs import EpochStart, EpochState, EpochStore, MemoryEpochStore
from holon_ctx.ledger.epochs_sqlite import SqliteEpochStore, epoch_store_for
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.postgres import PostgresStore
from holon_ctx.postgres.epochs import PostgresEpochStore
from holon_ctx.projection.session.session import Layout, SessionProjector, SessionRequest

GARBAGE = b"\xff{not an epoch"


@attrs.define
class Backend:
    name: str
    store: EpochStore
    reopen: Callable[[], EpochStore] | None
    spoil: Callable[[str], None]
    #: The ledger the store came from, when it must outlive the store (it owns the connection).
    ledger: PostgresStore | None = None


def _memory() -> Backend:
    store = MemoryEpochStore()

    def spoil(key: str) -> None:
        store._states[key] = GARBAGE
        store._starts[key] = dict.fromkeys(store._starts.get(key, {}), GARBAGE)

    return Backend("memory", store, None, spoil)


def _sqlite(path: Path) -> Backend:
    def spoil(key: str) -> None:
        with sqlite3.connect(path) as db:
            db.execute("UPDATE session_state SET state=? WHERE key=?", (GARBAGE, key))
            db.execute("UPDATE session_epochs SET start=? WHERE key=?", (GARBAGE, key))
        db.close()

    # The file's ledger first, as a runtime opens it: the store beside it comes from it.
    ledger = SqliteStore(path)
    store = epoch_store_for(ledger)
    ledger.close()
    return Backend("sqlite", store, lambda: SqliteEpochStore(path), spoil)


def _postgres(url: str, session: str) -> Backend:
    import psycopg

    def spoil(key: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            sid = "(SELECT sid FROM holon_sessions WHERE key=%s)"
            conn.execute(f"UPDATE holon_session_state SET state=%s WHERE sid={sid} AND key=%s",
                         (GARBAGE, session, key))
            conn.execute(f"UPDATE holon_session_epochs SET start=%s WHERE sid={sid} AND key=%s",
                         (GARBAGE, session, key))

    ledger = PostgresStore(url, session=session)
    # Through the ledger, as epoch_store_for does; the ledger stays open (it owns the connection).
    store = epoch_store_for(ledger)
    assert isinstance(store, PostgresEpochStore)
    return Backend("postgres", store, lambda: PostgresEpochStore(url, session=session), spoil,
                   ledger)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "memory":
        made = _memory()
    elif request.param == "sqlite":
        made = _sqlite(tmp_path / "ledger.db")
    else:
        made = _postgres(request.getfixturevalue("pg_url"),
                         request.getfixturevalue("pg_session_key"))
    yield made
    made.store.close()
    if made.ledger is not None:
        made.ledger.close()


def state(key: str, epoch: int, frozen: bytes = b"{}", *, reason: str = "over_budget") -> EpochState:
    start = EpochStart(epoch=epoch, turn_id=f"t{epoch}", turn_seq=epoch // 2, limit_pos=epoch,
                       reason=reason)
    return EpochState(key=key, start=start, frozen=frozen)


def epochs_of(starts: list[EpochStart]) -> list[int]:
    return [s.epoch for s in starts]


# -- the Protocol --------------------------------------------------------------------------------
def test_save_then_load_round_trips(backend: Backend) -> None:
    """A saved state loads equal, field for field; other keys stay empty."""
    store = backend.store
    assert store.load("k") is None
    assert store.starts("k") == []
    saved = state("k", 12, b'{"parts":["\xe4\xbf\xae\xe5\xa4\x8d CI \xf0\x9f\x9a\x80"]}',
                  reason="first_turn")
    store.save(saved)
    assert store.load("k") == saved
    assert store.starts("k") == [saved.start]
    assert store.load("other") is None
    assert store.starts("other") == []


def test_a_later_epoch_is_never_replaced_by_an_earlier_one(backend: Backend) -> None:
    """Saving an earlier epoch logs its start but keeps the later one as the key's state; the
    same or a later epoch replaces it; saving twice changes nothing."""
    store = backend.store
    store.save(state("k", 40, b"forty"))
    store.save(state("k", 10, b"ten"))
    assert store.load("k") == state("k", 40, b"forty")
    assert epochs_of(store.starts("k")) == [10, 40]
    store.save(state("k", 40, b"forty again"))
    assert store.load("k") == state("k", 40, b"forty again")
    store.save(state("k", 70, b"seventy"))
    store.save(state("k", 70, b"seventy"))
    assert store.load("k") == state("k", 70, b"seventy")
    assert epochs_of(store.starts("k")) == [10, 40, 70]


def test_starts_are_the_newest_oldest_first(backend: Backend) -> None:
    """starts(key, n): the newest n epochs by epoch (not by when they were saved), oldest first;
    n past the count gives them all, n of 0 none; each key has its own."""
    store = backend.store
    for epoch in (30, 10, 50, 20, 40):
        store.save(state("k", epoch, reason=f"r{epoch}"))
    store.save(state("j", 5))
    assert epochs_of(store.starts("k")) == [10, 20, 30, 40, 50]
    assert [s.reason for s in store.starts("k")] == ["r10", "r20", "r30", "r40", "r50"]
    assert epochs_of(store.starts("k", 2)) == [40, 50]
    assert epochs_of(store.starts("k", 1)) == [50]
    assert epochs_of(store.starts("k", 99)) == [10, 20, 30, 40, 50]
    assert store.starts("k", 0) == []
    assert epochs_of(store.starts("j")) == [5]


def test_clear_forgets_one_key_or_all(backend: Backend) -> None:
    """clear(key) forgets that key's state and starts only; clear() forgets every key; a cleared
    store takes new saves."""
    store = backend.store
    for key in ("a", "b", "c"):
        store.save(state(key, 3))
        store.save(state(key, 8))
    store.clear("a")
    assert (store.load("a"), store.starts("a")) == (None, [])
    assert store.load("b") == state("b", 8)
    assert epochs_of(store.starts("b")) == [3, 8]
    store.clear("missing")
    store.clear()
    assert [store.load(k) for k in "abc"] == [None, None, None]
    assert [store.starts(k) for k in "abc"] == [[], [], []]
    # The earlier epoch is kept now: nothing later is.
    store.save(state("b", 2))
    assert store.load("b") == state("b", 2)


def test_rows_that_no_longer_decode_are_treated_as_absent(backend: Backend) -> None:
    """A state or a start that does not decode is never returned and never raises: the walk
    rebuilds it. A later save replaces the state."""
    store = backend.store
    store.save(state("k", 10))
    store.save(state("k", 20))
    store.save(state("j", 7))
    backend.spoil("k")
    assert store.load("k") is None
    assert store.starts("k") == []
    assert store.load("j") == state("j", 7)
    store.save(state("k", 30))
    assert store.load("k") == state("k", 30)
    assert epochs_of(store.starts("k")) == [30]


def test_two_stores_on_one_storage_see_each_others_saves(backend: Backend) -> None:
    """Two store objects over one file or database (two processes) read each other's saves and
    clears, and the later-epoch rule holds across them."""
    if backend.reopen is None:
        pytest.skip("a MemoryEpochStore's state lives in its object only")
    a, b = backend.store, backend.reopen()
    try:
        a.save(state("k", 20, b"from a"))
        assert b.load("k") == state("k", 20, b"from a")
        b.save(state("k", 10, b"from b"))
        assert a.load("k") == state("k", 20, b"from a")
        assert epochs_of(a.starts("k")) == [10, 20]
        b.save(state("k", 30, b"from b"))
        assert a.load("k") == state("k", 30, b"from b")
        a.clear("k")
        assert (b.load("k"), b.starts("k")) == (None, [])
    finally:
        b.close()


def test_a_closed_store_raises_one_line(backend: Backend) -> None:
    """Using a closed SQLite or PostgreSQL store is a one-line StoreError, not a driver's
    traceback (memory has nothing to close)."""
    if backend.name == "memory":
        pytest.skip("MemoryEpochStore.close releases nothing")
    backend.store.close()
    uses: list[Callable[[EpochStore], object]] = [
        lambda s: s.load("k"), lambda s: s.save(state("k", 1)), lambda s: s.starts("k"),
        lambda s: s.clear()]
    for use in uses:
        with pytest.raises(StoreError) as raised:
            use(backend.store)
        assert "\n" not in str(raised.value)


# -- PostgreSQL only -----------------------------------------------------------------------------
def test_postgres_sessions_keep_their_own_state(pg_url: str, pg_session_key: str) -> None:
    """The same state key in two sessions of one database: separate rows; clear() empties only
    its own session."""
    a = PostgresEpochStore(pg_url, session=pg_session_key + "a")
    b = PostgresEpochStore(pg_url, session=pg_session_key + "b")
    try:
        a.save(state("k", 5, b"a"))
        b.save(state("k", 9, b"b"))
        assert (a.load("k"), b.load("k")) == (state("k", 5, b"a"), state("k", 9, b"b"))
        a.clear()
        assert a.load("k") is None
        assert b.load("k") == state("k", 9, b"b")
        assert epochs_of(b.starts("k")) == [9]
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize(("first", "second"), [(30, 10), (10, 30)])
def test_postgres_concurrent_saves_keep_the_later_epoch(pg_url: str, pg_session_key: str,
                                                        first: int, second: int) -> None:
    """A save inside a caller's open transaction is that transaction's: other connections do not
    see it until it commits, and a save racing it waits, then keeps the later epoch whichever of
    the two came first."""
    import psycopg

    conn = psycopg.connect(pg_url, autocommit=True)
    a = PostgresEpochStore(conn, session=pg_session_key)
    b = PostgresEpochStore(pg_url, session=pg_session_key)
    errors: list[BaseException] = []

    def save_b() -> None:
        try:
            b.save(state("k", second, b"b"))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    try:
        b.save(state("k", 5, b"old"))
        racer = threading.Thread(target=save_b)
        with conn.transaction():
            a.save(state("k", first, b"a"))
            assert b.load("k") == state("k", 5, b"old")
            racer.start()
            racer.join(0.3)
            # Still waiting on the row a's transaction holds (unless it never got to run yet).
            assert racer.is_alive() or errors
        racer.join()
        assert errors == []
        later = max(first, second)
        assert a.load("k") == state("k", later, b"a" if later == first else b"b")
        assert epochs_of(b.starts("k")) == sorted([5, first, second])
    finally:
        a.close()
        b.close()
        conn.close()


def test_postgres_epoch_store_shares_the_ledgers_connection(pg_url: str,
                                                            pg_session_key: str) -> None:
    """PostgresStore.epoch_store() works on the ledger's own connection and session; closing it
    leaves the ledger usable. A missing session is refused in one line."""
    ledger = PostgresStore(pg_url, session=pg_session_key)
    epochs = ledger.epoch_store()
    epochs.save(state("k", 3))
    epochs.close()
    assert not ledger.connection.closed
    assert ledger.end_pos() == 0
    other = PostgresEpochStore(pg_url, session=pg_session_key, create=False)
    assert other.load("k") == state("k", 3)
    other.close()
    ledger.close()
    with pytest.raises(StoreError, match=f"no session '{pg_session_key}x'") as raised:
        PostgresEpochStore(pg_url, session=pg_session_key + "x", create=False)
    assert "\n" not in str(raised.value)


def test_a_postgres_save_skips_the_flush_for_itself_alone(pg_url: str,
                                                         pg_session_key: str) -> None:
    """A save is one round trip with ``synchronous_commit`` off for its own transaction (derived
    data, RFC 0026 decision 4): the connection stays durable after it, a save inside the
    caller's transaction is part of it (rolled back with it), and a failed save leaves the
    connection idle and usable."""
    from pg_round_trips import RoundTrips

    ledger = PostgresStore(pg_url, session=pg_session_key)
    conn = ledger.connection
    epochs = ledger.epoch_store()
    seen: list[str] = []
    inner = conn.execute

    def execute(query: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(query))
        return inner(query, *args, **kwargs)
    conn.execute = execute  # type: ignore[method-assign]
    try:
        trips = RoundTrips(conn)
        epochs.save(state("k", 3))
        assert trips.count == 1
        assert seen[:2] == ["BEGIN", "SET LOCAL synchronous_commit TO off"]
        assert inner("SHOW synchronous_commit").fetchone() == ("on",)
        assert epochs.load("k") == state("k", 3)
        with conn.transaction(force_rollback=True):
            seen.clear()
            epochs.save(state("k", 5))
            assert "SET LOCAL synchronous_commit TO off" not in seen
        assert epochs.load("k") == state("k", 3)
        with pytest.raises(StoreError):
            epochs.save(state("k\x00", 7))  # text cannot hold NUL: the save fails
        assert conn.info.transaction_status == 0
        assert epochs.load("k") == state("k", 3)
    finally:
        conn.execute = inner  # type: ignore[method-assign]
        ledger.close()


# -- the session projection, continued by another process, on PostgreSQL ------------------------
Signature = tuple[str, object, int, bool, str | None]


def _signature(request: SessionRequest) -> Signature:
    """What a restart must reproduce: the bytes sent and the epoch they belong to."""
    messages = request.openai_messages() if request.layout is Layout.MESSAGES else None
    return (request.text, messages, request.epoch, request.replanned, request.replan_reason)


@pytest.mark.parametrize("layout", [Layout.TEXT, Layout.MESSAGES])
def test_session_projection_restarts_on_postgres(pg_url: str, pg_session_key: str,
                                                 layout: Layout) -> None:
    """Half a ledger walked with the state in PostgreSQL, then a fresh store and projector over
    the same session walk the rest: every request equals an uninterrupted walk's, byte for byte,
    epoch for epoch. The same again after the state is spoiled: it is rebuilt, never trusted."""
    records = random_ledger(5, 120).records
    budget = 3500
    whole = [_signature(r) for r in walk(SessionProjector(memory_store(records), layout=layout),
                                         budget)]
    assert sum(sig[3] for sig in whole) >= 3, "the budget binds: the walk re-plans"
    first = PostgresStore(pg_url, session=pg_session_key)
    first.append(records)
    ids = turn_ids(first)
    # Resume where the uninterrupted walk merely appended: a projector that had not loaded the
    # epoch would re-plan there, and say so.
    half = next(i for i in range(len(ids) // 2, len(ids)) if not whole[i][3])
    projector = SessionProjector(first, layout=layout, epochs=first.epoch_store())
    head = [_signature(projector.request(budget_tokens=budget, at=t)) for t in ids[:half]]
    key = projector.state_key(budget)
    assert projector.epochs.starts(key), "the re-plans were persisted"
    projector.epochs.close()
    first.close()

    def resumed() -> list[Signature]:
        again = PostgresStore(pg_url, session=pg_session_key, create=False)
        fresh = SessionProjector(again, layout=layout, epochs=again.epoch_store())
        try:
            return [_signature(fresh.request(budget_tokens=budget, at=t)) for t in ids[half:]]
        finally:
            fresh.epochs.close()
            again.close()

    assert head + resumed() == whole
    spoiled = PostgresEpochStore(pg_url, session=pg_session_key, create=False)
    assert spoiled.load(key) is not None
    _postgres_spoil_state(pg_url, pg_session_key, key)
    assert spoiled.load(key) is None
    spoiled.close()
    assert head + resumed() == whole


def _postgres_spoil_state(url: str, session: str, key: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE holon_session_state SET state=%s WHERE key=%s AND sid=(SELECT sid "
                     "FROM holon_sessions WHERE key=%s)", (GARBAGE, key, session))


def test_open_session_on_postgres_continues_the_same_epoch(pg_url: str,
                                                           pg_session_key: str) -> None:
    """``open_session(PostgresStore(...))`` keeps its re-plans in the session's rows: a second
    Session over the same session (another process) continues the epoch the first one was in,
    appending to its request instead of re-planning."""
    import psycopg

    budget = 1500
    ledger = PostgresStore(pg_url, session=pg_session_key)
    with open_session(ledger, compaction=None) as s:
        for i in range(24):
            s.operator_message(f"step {i}: run the migration for shard {i} and report the "
                               "row counts it printed, then check the replica lag")
            s.tool_run("shell", f"migrate --shard {i}", f"shard {i}: {1000 + i} rows migrated")
            s.assistant_message(f"Shard {i} migrated; lag is under a second.")
        before = s.next_request(budget)
        before_text = before.text  # the text view is made when read: before the session closes
    ledger.close()
    session = before.manifest["session"]
    assert session["epoch_reason"] == "over_budget", "the budget binds before the last turn"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        kept = conn.execute("SELECT count(*) FROM holon_session_state WHERE sid=(SELECT sid FROM "
                            "holon_sessions WHERE key=%s)", (pg_session_key,)).fetchone()
    assert kept is not None
    assert kept[0] >= 1
    ledger = PostgresStore(pg_url, session=pg_session_key, create=False)
    with open_session(ledger, compaction=None) as again:
        same = again.next_request(budget)
        assert (same.text, same.openai_messages) == (before_text, before.openai_messages)
        assert same.manifest["session"]["epoch"] == session["epoch"]
        assert same.manifest["session"]["replanned"] is False
        again.assistant_message("Shard 23 verified.")
        after = again.next_request(budget)
    ledger.close()
    continued = after.manifest["session"]
    assert (continued["epoch"], continued["replanned"]) == (session["epoch"], False)
    assert continued["cached_tokens"] > 0


def test_a_read_through_store_reads_the_persisted_epochs_and_writes_none(tmp_path: Path) -> None:
    """What the CLI reads a runtime's epochs with (RFC 0024): the persisted state and starts are
    read; saves and clears stay in memory; the newer of the two states is loaded."""
    from holon_ctx.ledger.epochs import ReadThroughEpochs

    persisted = SqliteEpochStore(tmp_path / "e.db")
    first, second, third = (EpochStart(epoch=n, turn_id=f"t{n}", turn_seq=n, limit_pos=n,
                                       reason="checkpoint") for n in (4, 9, 12))
    persisted.save(EpochState(key="k", start=first, frozen=b"one"))
    persisted.save(EpochState(key="k", start=second, frozen=b"two"))
    reader = ReadThroughEpochs(SqliteEpochStore(tmp_path / "e.db"))
    loaded = reader.load("k")
    assert loaded is not None
    assert loaded.frozen == b"two"
    reader.save(EpochState(key="k", start=third, frozen=b"three"))
    mine = reader.load("k")
    assert mine is not None
    assert mine.frozen == b"three"
    assert [s.epoch for s in reader.starts("k")] == [4, 9, 12]
    assert [s.epoch for s in reader.starts("k", 2)] == [9, 12]
    # Nothing of the reader's reached the database.
    assert [s.epoch for s in persisted.starts("k")] == [4, 9]
    stored = persisted.load("k")
    assert stored is not None
    assert stored.frozen == b"two"
    reader.clear("k")
    assert reader.load("k") is None
    assert reader.starts("k") == []
    assert persisted.load("k") is not None
    reader.close()
    persisted.close()
