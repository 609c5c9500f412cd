"""What every PostgreSQL store of a session shares: its connection, its ``sid``, one-line errors.

A store is opened from a URL (it connects, and closes the connection when closed) or from a
psycopg connection in autocommit mode (borrowed: several stores of a session, or sessions served
from a caller's pool, share it; closing the store leaves it open). Opening checks the schema
version (creating or migrating it on first use) and finds, or creates, the session.

Reconnecting (RFC 0027). A connection opened from a URL is held in a :class:`Link` with the URL,
and every store given that connection (a ledger's episode, continuity, epoch and usage stores)
finds the same link. When the server restarts or the connection dies, the call that meets the
dead connection reconnects and runs again once if it only reads; a write is not run again here
(its commit may have landed): the error says the connection was lost, and the next call
reconnects. The ledger's appends are idempotent by record id, so the ledger retries its own
append (:meth:`~holon_ctx.postgres.ledger.PostgresStore.append_lines`). A connection passed in
by the caller is the caller's: it is never replaced.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from holon_ctx.errors import StoreError, quote_value
from holon_ctx.postgres.connection import connect, describe, psycopg_module, store_error
from holon_ctx.postgres.schema import create_session, ensure_schema, find_session

__all__ = ["MISSING", "ConnectionLost", "Link", "NotAnswered", "SessionHandle"]

_T = TypeVar("_T")
#: Up to this many rows an append's inserts are pipelined INSERTs (one round trip for all tables);
#: more go through COPY, a round trip or two per table but far less work per row.
_PIPELINED_ROWS = 64
#: No answer was read ahead (``SessionHandle.ahead``): ask the server.
MISSING: Any = object()


class ConnectionLost(StoreError):
    """The connection died during a call (a server restart, an administrator's termination, a
    network fault); the next call reconnects. A write's commit may or may not have landed."""


class NotAnswered(Exception):
    """A statement was about to be sent while its link was ``dry``: the work run on answers read
    ahead needs the server (``holon_ctx.postgres.compaction_ahead.run_alone``)."""


class Link:
    """A connection, and, when it was opened from a URL, how to open it again: what every store
    sharing the connection holds, so one reconnection serves them all."""

    def __init__(self, conn: Any, url: str | None = None, *, durable: bool = True) -> None:
        self.conn = conn
        self.url = url
        self.durable = durable
        #: Answers a request read ahead on this connection (``holon_ctx.postgres.ahead``), by
        #: the read, its session's ``sid`` and its arguments: every store sharing the connection
        #: looks here before asking the server. Emptied by any statement that is not a read.
        self.ahead: dict[tuple[Any, ...], Any] = {}
        #: Nothing may reach the server: every call raises :class:`NotAnswered` before sending
        #: (a compaction tried on its answers read ahead alone, ``compaction_ahead.run_alone``).
        self.dry = False
        _LINKS[conn] = self

    @classmethod
    def of(cls, source: str | Any, *, durable: bool = True) -> Link:
        """The link of a URL (a new connection) or of a connection (the link it was opened
        with, when a store opened it from a URL; else a link that never reconnects)."""
        if isinstance(source, str):
            return cls(connect(source, durable=durable), source, durable=durable)
        found = _LINKS.get(source)
        return found if found is not None else cls(source)

    @property
    def dead(self) -> bool:
        return bool(self.conn.closed)

    def revive(self, where: str) -> None:
        """A new connection in place of a dead one; one line saying what to do when the server
        cannot be reached (or when the connection was the caller's, which is never replaced)."""
        if self.url is None:
            raise StoreError(f"{where}: the connection passed in is closed (the server restarted "
                             "or dropped it): open a new connection and a new store on it")
        try:
            conn = connect(self.url, durable=self.durable)
        except StoreError as exc:
            raise StoreError(f"{exc}; the connection was lost and reconnecting failed: check "
                             "that the server is up and reachable (the next call tries again)"
                             ) from None
        self.conn = conn
        self.ahead.clear()
        _LINKS[conn] = self


#: What makes a statement more than a read.
_WRITES = re.compile(r"\b(?:INSERT|UPDATE|DELETE|pg_advisory)", re.IGNORECASE)


@functools.lru_cache(maxsize=512)
def _reads(sql: str) -> bool:
    """Whether ``sql`` only reads (a query that neither writes nor locks), so running it again
    on a new connection is safe. Cached: a turn asks it of the same few statements every time,
    and the search over a long statement cost more client CPU than sending it."""
    return (sql.lstrip()[:6].upper().startswith(("SELECT", "WITH"))
            and _WRITES.search(sql) is None)
#: Connections opened from a URL, to their links (weak: a link lives as long as its stores).
_LINKS: weakref.WeakKeyDictionary[Any, Link] = weakref.WeakKeyDictionary()


def _dsn(conn: Any) -> str:
    try:
        return str(conn.info.dsn)
    except Exception:
        return "postgresql://"


class SessionHandle:
    """A session's connection and number, with helpers that turn psycopg errors into one line."""

    def __init__(self, source: str | Any, session: str, *, create: bool,
                 durable: bool = True) -> None:
        self._error: type[Exception] = psycopg_module().Error
        self.owned = isinstance(source, str)
        self.where = describe(source if isinstance(source, str) else _dsn(source))
        self.session = session
        # A borrowed connection keeps the caller's settings; ``durable`` is for one opened here.
        self.link = Link.of(source, durable=durable)
        self.closed = False
        try:
            if not self.conn.autocommit:
                raise StoreError(f"{self.where}: pass a connection in autocommit mode (the store "
                                 "opens its own transactions)")
            self.call(lambda: ensure_schema(self.conn, self.where))
            if create:
                self.sid, self.created = self.call(lambda: create_session(self.conn, session))
            else:
                found = self.call(lambda: find_session(self.conn, session))
                if found is None:
                    raise StoreError(f"{self.where}: no session {quote_value(session)} "
                                     "(holon_ctx.postgres.list_sessions lists them, and so does "
                                     "`holon-ctx db sessions`)")
                self.sid, self.created = found, False
        except BaseException:
            if self.owned:
                self.conn.close()
            raise

    @property
    def conn(self) -> Any:
        """The live connection (a new one after the server dropped the last: see the module
        docstring)."""
        return self.link.conn

    def call(self, fn: Callable[[], _T], *, reads: bool = False) -> _T:
        """``fn()`` on a live connection; a psycopg error as one line. ``reads``: ``fn`` only
        reads, so it runs again once on a new connection when the one it met was dead."""
        if self.closed:
            raise StoreError(f"{self.where}: the store is closed")
        if self.link.dry:
            raise NotAnswered(self.where)
        if not reads:
            # A write (or a lock) may change what was read ahead: nothing is answered from it
            # after (a compaction before a request's walk reads the server again).
            self.link.ahead.clear()
        if self.link.dead:
            self.link.revive(self.where)
        # Outside a transaction (a statement of a write runs inside one: never run again here).
        idle = self.conn.info.transaction_status == 0
        try:
            return fn()
        except self._error as exc:
            if not self.link.dead:
                raise store_error(self.where, exc) from None
            if reads and idle:
                self.link.revive(self.where)
                try:
                    return fn()
                except self._error as again:
                    raise store_error(self.where, again) from None
            raise self.failed(exc) from None

    def failed(self, exc: BaseException) -> StoreError:
        """A psycopg error as one line: :class:`ConnectionLost` when the connection died (the
        caller may go on: the next call reconnects), else a plain StoreError. Every path that
        meets a psycopg error outside :meth:`call` (a transaction's BEGIN or COMMIT) uses this,
        so a lost connection is named the same way wherever it is met."""
        if not self.link.dead:
            return store_error(self.where, exc)
        return ConnectionLost(f"{store_error(self.where, exc)} (the connection was lost; "
                              "the next call reconnects)")

    def ahead(self, *key: Any) -> Any:
        """The answer read ahead for ``key`` (this session's), or :data:`MISSING`."""
        return self.link.ahead.get((self.sid, *key), MISSING)

    def rows(self, sql: str, args: dict[str, Any] | tuple[Any, ...], *,
             binary: bool = False) -> list[tuple[Any, ...]]:
        """Run one statement; a dict of arguments gets ``sid`` added. Rows, or [] for none."""
        if isinstance(args, dict):
            args = {"sid": self.sid, **args}

        def run() -> list[tuple[Any, ...]]:
            cur = self.conn.execute(sql, args, binary=binary)
            # ``pgresult.nfields``, not ``description``: the description builds a Column object
            # per column on every call (a sixth of psycopg's client CPU for a request's reads).
            result = cur.pgresult
            return [] if result is None or not result.nfields else list(cur.fetchall())
        # A statement inside a transaction is part of a write; alone, a SELECT only reads.
        return self.call(run, reads=_reads(sql))

    def one(self, sql: str, args: dict[str, Any] | tuple[Any, ...]) -> Any:
        found = self.rows(sql, args)
        return found[0] if found else None

    def many(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """``executemany`` (one pipelined round trip), nothing for no rows."""
        if not rows:
            return
        def run() -> None:
            with self.conn.cursor() as cur:
                cur.executemany(sql, rows)
        self.call(run)

    def batch(self, statements: Sequence[tuple[str, tuple[Any, ...] | dict[str, Any]]], *,
              binary: bool = False) -> list[list[tuple[Any, ...]]]:
        """Several independent statements in one round trip (pipeline mode); their rows. A
        dict of arguments gets ``sid`` added, as in ``rows``."""
        def run() -> list[list[tuple[Any, ...]]]:
            with self.conn.pipeline():
                cursors = [self.conn.execute(sql, {"sid": self.sid, **args}
                                             if isinstance(args, dict) else args, binary=binary)
                           for sql, args in statements]
            # Read once the block has sent them all with its one sync: fetching inside it syncs
            # there too, and the exit waits for a second answer (two round trips, not one).
            return [list(cur.fetchall()) for cur in cursors]
        reads = all(_reads(sql) for sql, _ in statements)
        return self.call(run, reads=reads) if statements else []

    def insert(self, inserts: Sequence[tuple[str, str, Sequence[tuple[Any, ...]]]],
               after: Sequence[tuple[str, tuple[Any, ...]]] = ()) -> None:
        """``(table, INSERT statement, rows)`` for several tables, then the ``after``
        statements: a few rows go in one pipelined round trip with them, many with COPY (several
        times faster than INSERT for an import)."""
        inserts = [(table, sql, rows) for table, sql, rows in inserts if rows]
        if sum(len(rows) for _, _, rows in inserts) > _PIPELINED_ROWS:
            # COPY cannot skip conflicts: an INSERT … ON CONFLICT stays an INSERT.
            for table, sql, rows in inserts:
                if "ON CONFLICT" not in sql:
                    self.copy(table, rows)
            inserts = [i for i in inserts if "ON CONFLICT" in i[1]]
        if not inserts and not after:
            return

        def pipelined() -> None:
            with self.conn.pipeline(), self.conn.cursor() as cur:
                for _, sql, rows in inserts:
                    cur.executemany(sql, rows)
                for sql, args in after:
                    cur.execute(sql, args)
        self.call(pipelined)

    def copy(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert rows with COPY: several times faster than ``executemany`` for an import, and
        as cheap for a turn's few rows (one round trip)."""
        if not rows:
            return
        def run() -> None:
            with self.conn.cursor() as cur, cur.copy(f"COPY {table} FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        self.call(run)

    def transaction(self, fn: Callable[[], _T]) -> _T:
        """``fn()`` in one transaction: committed when it returns, rolled back when it raises."""
        def run() -> _T:
            with self.conn.transaction():
                return fn()
        return self.call(run)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.owned:
            self.conn.close()
