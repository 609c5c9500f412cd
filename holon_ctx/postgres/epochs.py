"""The session projection's re-plan state in PostgreSQL, beside the session's ledger.

The same two tables as the SQLite store (:mod:`holon_ctx.ledger.epochs_sqlite`), keyed by ``sid``
first (schema version 4): ``holon_session_epochs`` logs each epoch's start, ``holon_session_state``
keeps each key's latest epoch. ``clear()`` without a key forgets every key *of this session*: the
database holds a fleet, and a session never touches another's rows.

Each write is one statement (the two tables through a data-modifying ``WITH``): atomic on an
autocommit connection without a ``BEGIN``/``COMMIT`` round trip, and part of the caller's
transaction if the shared connection is inside one. Two processes that save the same key at once
need nothing more: the upserts serialise on the key's row, and the later epoch is kept whichever
commits first (the walk is deterministic, so two saves of one epoch carry the same bytes).

A save does not wait for the server's disk (``synchronous_commit`` off for its own transaction):
the state is derived data, rebuilt from the ledger when it is missing, as SQLite's store keeps
it (``synchronous=NORMAL``, no flush per commit). A server crash can lose only the newest saves,
since the ledger's next durable commit flushes the WAL written before it (RFC 0026 decision 4,
amended 2026-12-06). A save inside the caller's transaction is part of it and commits as it does.
"""

from __future__ import annotations

from typing import Any

import msgspec

from holon_ctx.ledger.epochs import EpochStart, EpochState, decode_starts, decode_state
from holon_ctx.postgres.session import SessionHandle

#: No transaction open on the connection (psycopg's ``TransactionStatus.IDLE``).
_IDLE = 0

__all__ = ["PostgresEpochStore"]

_encode = msgspec.json.encode

_SAVE = (
    "WITH kept AS (INSERT INTO holon_session_state VALUES (%(sid)s, %(key)s, %(epoch)s, %(state)s) "
    "ON CONFLICT (sid, key) DO UPDATE SET epoch = excluded.epoch, state = excluded.state "
    "WHERE holon_session_state.epoch <= excluded.epoch) "
    "INSERT INTO holon_session_epochs VALUES (%(sid)s, %(key)s, %(epoch)s, %(start)s) "
    "ON CONFLICT (sid, key, epoch) DO UPDATE SET start = excluded.start")
_CLEAR = ("WITH gone AS (DELETE FROM holon_session_state WHERE sid=%(sid)s AND {where}) "
          "DELETE FROM holon_session_epochs WHERE sid=%(sid)s AND {where}")


class PostgresEpochStore:
    """``EpochStore`` for a session: ``PostgresEpochStore(url_or_connection, session=KEY)``, or
    ``PostgresStore.epoch_store()`` for one on the ledger's connection. A connection passed in
    stays the caller's (``close`` leaves it open), as for the session's other stores."""

    def __init__(self, source: str | Any, *, session: str, create: bool = True) -> None:
        self._h = SessionHandle(source, session, create=create)

    def load(self, key: str) -> EpochState | None:
        row = self._h.one("SELECT state FROM holon_session_state WHERE sid=%(sid)s AND key=%(key)s",
                          {"key": key})
        return None if row is None else decode_state(row[0])

    def save(self, state: EpochState) -> None:
        args = {"sid": self._h.sid, "key": state.key, "epoch": state.start.epoch,
                "state": _encode(state), "start": _encode(state.start)}

        def run() -> None:
            conn = self._h.conn
            if conn.info.transaction_status != _IDLE:
                conn.execute(_SAVE, args)
                return
            # BEGIN, the setting, the save and COMMIT in one round trip (psycopg's transaction()
            # syncs at its entry and exit: four); a failed save is rolled back.
            try:
                with conn.pipeline():
                    conn.execute("BEGIN")
                    conn.execute("SET LOCAL synchronous_commit TO off")
                    conn.execute(_SAVE, args)
                    conn.execute("COMMIT")
            except BaseException:
                if not conn.closed and conn.info.transaction_status != _IDLE:
                    conn.execute("ROLLBACK")
                raise
        self._h.call(run)

    def starts(self, key: str, limit: int = 1000) -> list[EpochStart]:
        rows = self._h.rows("SELECT start FROM holon_session_epochs WHERE sid=%(sid)s AND "
                            "key=%(key)s ORDER BY epoch DESC LIMIT %(n)s",
                            {"key": key, "n": max(limit, 0)})
        return decode_starts(raw for (raw,) in reversed(rows))

    def clear(self, key: str | None = None) -> None:
        if key is None:
            self._h.rows(_CLEAR.format(where="true"), {})
        else:
            self._h.rows(_CLEAR.format(where="key=%(key)s"), {"key": key})

    def close(self) -> None:
        self._h.close()
