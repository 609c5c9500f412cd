"""A PostgresStore reconnects after its connection dies; appends are idempotent by record id
(issue 23 defect 5, RFC 0027).

The connection is killed as a server restart or a network fault kills it: the test terminates
the store's backend from a second connection (``pg_terminate_backend``), never the shared server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from test_store_conformance import LEDGER

import holon_ctx
from holon_ctx.errors import LedgerFormatError, StoreError
from holon_ctx.ledger.records import Message, MessageRole, Turn
from holon_ctx.postgres import PostgresStore
from holon_ctx.postgres.session import ConnectionLost


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    conn = psycopg.connect(pg_url, autocommit=True)
    yield conn
    conn.close()


def kill(admin: psycopg.Connection[Any], conn: Any) -> None:
    """Terminate ``conn``'s server process, as a server restart would."""
    admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))


def _turn(n: int) -> list[Turn | Message]:
    return [Turn(id=f"r{n}", seq=1000 + n, trigger="operator_input"),
            Message(id=f"rm{n}", turn_id=f"r{n}", role=MessageRole.OPERATOR, text=f"step {n}")]


def test_reads_and_appends_go_on_after_the_backend_is_terminated(
        pg_url: str, pg_session_key: str, admin: psycopg.Connection[Any]) -> None:
    """The call after the connection died reconnects: a read answers, an append lands once."""
    store = PostgresStore(pg_url, session=pg_session_key)
    try:
        store.append(LEDGER)
        end = store.end_pos()
        kill(admin, store.connection)
        assert store.end_pos() == end  # a read: reconnected and run again
        kill(admin, store.connection)
        assert store.append(_turn(1)) == 2  # the fast path's statement met the dead connection
        kill(admin, store.connection)
        store.append([*_turn(2), Message(id="rx", turn_id="r2", role=MessageRole.ASSISTANT,
                                         text="x" * 10)])
        assert store.end_pos() == end + 5
        assert [r.ref for r in store.records_between(end, end + 5)] == [
            "turn:r1", "message:rm1", "turn:r2", "message:rm2", "message:rx"]
    finally:
        store.close()


def test_an_append_given_again_is_not_appended_twice(pg_url: str, pg_session_key: str) -> None:
    """A batch already committed, given again, succeeds and adds nothing; a different record
    under a taken id is still refused, and nothing of its batch is written."""
    store = PostgresStore(pg_url, session=pg_session_key)
    try:
        store.append(LEDGER)
        store.append(_turn(1))
        end = store.end_pos()
        assert store.append(_turn(1)) == 2
        assert store.end_pos() == end
        # A prefix already in, the rest new: only the rest is appended.
        assert store.append([*_turn(1), *_turn(2)]) == 4
        assert store.end_pos() == end + 2
        changed = Message(id="rm2", turn_id="r2", role=MessageRole.OPERATOR, text="other words")
        with pytest.raises(LedgerFormatError, match="duplicate id: message:rm2"):
            store.append([changed])
        with pytest.raises(LedgerFormatError, match="duplicate id"):
            store.append([*_turn(3), changed])
        assert store.end_pos() == end + 2
        assert store.turn("r3") is None
    finally:
        store.close()


def test_a_commit_that_landed_while_the_connection_died_is_retried_without_a_duplicate(
        pg_url: str, pg_session_key: str, admin: psycopg.Connection[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch commits, then the connection dies before the caller hears of it (the case the
    issue saw reported as an error but committed): the store's retry finds it in the ledger."""
    store = PostgresStore(pg_url, session=pg_session_key)
    try:
        store.append(LEDGER)
        end = store.end_pos()
        real = store._append_once
        calls: list[int] = []

        def commit_then_die(*args: Any, **kwargs: Any) -> int:
            calls.append(1)
            n = real(*args, **kwargs)
            if len(calls) == 1:
                kill(admin, store.connection)
                raise ConnectionLost("the connection was lost")
            return n
        monkeypatch.setattr(store, "_append_once", commit_then_die)
        assert store.append(_turn(1)) == 2
        assert store.end_pos() == end + 2
        assert len(calls) == 1  # nothing was left to append again
        assert [r.ref for r in store.records_between(end, end + 2)] == ["turn:r1", "message:rm1"]
    finally:
        store.close()


def test_a_session_and_its_stores_on_one_connection_go_on(
        pg_url: str, pg_session_key: str, admin: psycopg.Connection[Any]) -> None:
    """A session's ledger, episodes and governed store share the connection: after it dies, the
    session appends, compacts and answers requests as before."""
    with holon_ctx.open_session(pg_url, session_key=pg_session_key) as session:
        session.operator_message("Upgrade the payments service.")
        for i in range(6):
            session.tool_run("bash", f"pytest -k case{i}", "ok\n" * 20)
        before = session.next_request(budget_tokens=4096).text
        kill(admin, session.store.connection)  # type: ignore[attr-defined]
        assert session.next_request(budget_tokens=4096).text == before
        kill(admin, session.store.connection)  # type: ignore[attr-defined]
        session.tool_run("bash", "pytest", "passed")
        kill(admin, session.store.connection)  # type: ignore[attr-defined]
        session.compact()
        assert "pytest" in session.next_request(budget_tokens=4096).text


def test_an_unreachable_server_is_one_line_that_says_what_to_do(
        pg_url: str, pg_session_key: str, admin: psycopg.Connection[Any]) -> None:
    """The connection died and the server cannot be reached: one line naming the server (no
    password) and what to do; once the server answers again, the store goes on."""
    store = PostgresStore(pg_url, session=pg_session_key)
    try:
        store.append(LEDGER)
        link = store._h.link
        url = link.url
        link.url = "postgresql://holon:secret@127.0.0.1:1/nowhere?connect_timeout=2"
        kill(admin, store.connection)
        with pytest.raises(StoreError) as err:
            store.end_pos()
        message = str(err.value)
        assert "\n" not in message
        assert "secret" not in message
        assert "check that the server is up and reachable" in message
        with pytest.raises(StoreError, match="check that the server is up"):
            store.append(_turn(1))
        link.url = url
        assert store.append(_turn(1)) == 2
    finally:
        store.close()


def test_a_connection_passed_in_is_never_replaced(pg_url: str, pg_session_key: str,
                                                  admin: psycopg.Connection[Any]) -> None:
    """The caller's connection is the caller's: when it dies the store says to open a new one."""
    conn = psycopg.connect(pg_url, autocommit=True)
    store = PostgresStore(conn, session=pg_session_key)
    try:
        store.append(LEDGER)
        kill(admin, conn)
        with pytest.raises(StoreError, match="open a new connection and a new store on it"):
            store.end_pos()
        with pytest.raises(StoreError, match="open a new connection and a new store on it"):
            store.end_pos()
        assert store.connection is conn
    finally:
        store.close()
        conn.close()


def _records(n: int) -> list[Turn | Message]:
    """``n`` records: a turn and ``n - 1`` messages of it."""
    return [Turn(id="big", seq=5000, trigger="operator_input"),
            *(Message(id=f"big{i}", turn_id="big", role=MessageRole.ASSISTANT, text=f"line {i}")
              for i in range(n - 1))]


def _dies_once(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The store's first batch meets a dead connection before anything is written; the calls
    made, counted."""
    real = store._append_once
    calls: list[int] = []

    def die_first(*args: Any, **kwargs: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionLost("the connection was lost")
        return real(*args, **kwargs)
    monkeypatch.setattr(store, "_append_once", die_first)
    return calls


@pytest.mark.parametrize(("size", "retried"), [(4096, True), (4097, False)])
def test_a_batch_is_retried_up_to_4096_records(
        pg_url: str, pg_session_key: str, monkeypatch: pytest.MonkeyPatch, size: int,
        retried: bool) -> None:
    """RFC 0027's bound: a batch of up to 4,096 records whose connection dies is held and
    retried, and lands once; a larger one (a bulk import) is not held to be read twice: the
    error reaches its caller, and nothing of it is in the ledger."""
    store = PostgresStore(pg_url, session=pg_session_key)
    try:
        calls = _dies_once(store, monkeypatch)
        if retried:
            assert store.append(_records(size)) == size
            assert store.end_pos() == size
            assert len({r.ref for r in store.records_between(0, size)}) == size
        else:
            with pytest.raises(ConnectionLost):
                store.append(_records(size))
            assert store.end_pos() == 0
        assert len(calls) == (2 if retried else 1)
    finally:
        store.close()
