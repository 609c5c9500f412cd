"""What a PostgresStore answers at its edges, beyond the conformance suite (issue 23: tests that
pin the session path): which session tables hold rows, a session deleted under an open store, and
a ledger read in more than one page (a counter switched mid-session is in the conformance suite)."""

from __future__ import annotations

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
