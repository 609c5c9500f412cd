"""What a PostgresStore answers at its edges, beyond the conformance suite (issue 23: tests that
pin the session path): which session tables hold rows, a session deleted under an open store, and
a ledger read in more than one page (a counter switched mid-session is in the conformance suite)."""

from __future__ import annotations

import contextlib

import psycopg
import pytest
from test_store_conformance import LEDGER

from holon_ctx.errors import StoreError
from holon_ctx.ledger.records import Message, MessageRole, Turn, record_ref
from holon_ctx.postgres import PostgresStore
from holon_ctx.postgres.schema import delete_session


def test_holds_says_which_session_tables_have_rows(pg_url: str, pg_session_key: str) -> None:
    """A new session holds nothing; after an append its records and turns are held and its
    episodes are not; a name that is not a session table is refused, not queried."""
    store = PostgresStore(pg_url, session=pg_session_key)
    try:
        assert not store.holds("holon_records")
        store.append(LEDGER)
        assert store.holds("holon_records")
        assert store.holds("holon_turns")
        assert not store.holds("holon_episodes")
        assert not store.holds("holon_continuity_envelopes")
        for name in ("pg_class", "holon_records; DROP TABLE holon_turns", "holon_sessions"):
            with pytest.raises(ValueError, match="not a session table"):
                store.holds(name)
    finally:
        store.close()


def test_a_session_deleted_under_an_open_store_is_said(pg_url: str, pg_session_key: str) -> None:
    """Another connection deleted the session: the store's next read and append say so (with
    the session's key), rather than answer an empty ledger or make the session again."""
    store = PostgresStore(pg_url, session=pg_session_key)
    admin = psycopg.connect(pg_url, autocommit=True)
    try:
        store.append(LEDGER)
        assert delete_session(admin, pg_session_key)
        with pytest.raises(StoreError, match=f"session '{pg_session_key}' was deleted"):
            store.end_pos()
        with pytest.raises(StoreError, match="was deleted"):
            store.append([Turn(id="late", seq=99, trigger="operator_input")])
    finally:
        admin.close()
        store.close()


def test_every_record_is_read_back_across_pages(pg_url: str, pg_session_key: str) -> None:
    """``iter_records`` reads a page of positions per round trip: a ledger of more than two
    pages comes back whole, in order, each record once."""
    records = [Turn(id="big", seq=1, trigger="operator_input"),
               *(Message(id=f"m{i}", turn_id="big", role=MessageRole.ASSISTANT, text=f"{i}")
                 for i in range(4500))]
    store = PostgresStore(pg_url, session=pg_session_key)
    try:
        store.append(records)
        assert [record_ref(r) for r in store.iter_records()] == [record_ref(r) for r in records]
    finally:
        store.close()


def _session_numbered(pg_url: str, key: str, sid: int) -> PostgresStore:
    """A new session whose ``sid`` is ``sid``: the identity restarted there for one insert."""
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"ALTER TABLE holon_sessions ALTER COLUMN sid RESTART WITH {int(sid)}")
    store = PostgresStore(pg_url, session=key)
    assert store.sid == sid
    return store


def test_sessions_numbered_past_int4_take_their_own_compaction_locks(
        pg_url: str, pg_session_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compaction lock is ``pg_advisory_lock(HOLC, sid mod 2**31)`` (its two keys are int4).
    Sessions numbered past 2**31, and sessions whose numbers differ by a small amount or by
    2**30, each take their own lock while the others hold theirs; the same session twice waits.
    Every other test's session is numbered below 100, where a wrong modulus (``2 ^ 31``, 29; or
    2**30) keys the lock the same: its sessions would take turns, and those whose key no longer
    fits an int4 would fail to compact at all."""
    monkeypatch.setenv("HOLON_CTX_LOCK_TIMEOUT", "0.3")
    base = PostgresStore(pg_url, session=pg_session_key)  # the schema, and the identity to restore
    seq = base._one("SELECT pg_get_serial_sequence('holon_sessions', 'sid')", ())[0]
    last, called = base._one(f"SELECT last_value, is_called FROM {seq}", ())
    high = 2**31 + 2**30 + 7
    numbers = [high, high + 29, high - 2**30]
    stores = [_session_numbered(pg_url, f"{pg_session_key}-{n}", n) for n in numbers]
    # Advisory locks are the server's: other databases' (other test processes) show too.
    query = ("SELECT objid::bigint FROM pg_locks WHERE locktype='advisory' AND granted "
             "AND classid::bigint = %s AND database = "
             "(SELECT oid FROM pg_database WHERE datname = current_database())")
    try:
        with psycopg.connect(pg_url, autocommit=True) as other, contextlib.ExitStack() as held:
            for store in stores:
                held.enter_context(store.compaction_lock())
            keys = sorted(k for (k,) in other.execute(query, (0x484F4C43,)).fetchall())
            assert keys == sorted(n % 2**31 for n in numbers)
            again = PostgresStore(pg_url, session=stores[0].session)
            try:
                with pytest.raises(StoreError), again.compaction_lock():
                    pass
            finally:
                again.close()
    finally:
        for store in stores:
            store.close()
        base._one("SELECT setval(%s, %s, %s)", (seq, last, called))
        base.close()
