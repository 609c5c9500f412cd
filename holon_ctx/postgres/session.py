"""What every PostgreSQL store of a session shares: its connection, its ``sid``, one-line errors.

A store is opened from a URL (it connects, and closes the connection when closed) or from a
psycopg connection in autocommit mode (borrowed: several stores of a session, or sessions served
from a caller's pool, share it; closing the store leaves it open). Opening checks the schema
version (creating or migrating it on first use) and finds, or creates, the session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from holon_ctx.errors import StoreError
from holon_ctx.postgres.connection import connect, describe, psycopg_module, store_error
from holon_ctx.postgres.schema import create_session, ensure_schema, find_session

__all__ = ["SessionHandle"]

_T = TypeVar("_T")
#: Up to this many rows an append's inserts are pipelined INSERTs (one round trip for all tables);
#: more go through COPY, a round trip or two per table but far less work per row.
_PIPELINED_ROWS = 64


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
        self.conn = connect(source, durable=durable) if isinstance(source, str) else source
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
                    raise StoreError(f"{self.where}: no session {session!r} "
                                     "(holon_ctx.postgres.list_sessions lists them, and so does "
                                     "`holon-ctx db sessions`)")
                self.sid, self.created = found, False
        except BaseException:
            if self.owned:
                self.conn.close()
            raise

    def call(self, fn: Callable[[], _T]) -> _T:
        if self.closed:
            raise StoreError(f"{self.where}: the store is closed")
        try:
            return fn()
        except self._error as exc:
            raise store_error(self.where, exc) from None

    def rows(self, sql: str, args: dict[str, Any] | tuple[Any, ...], *,
             binary: bool = False) -> list[tuple[Any, ...]]:
        """Run one statement; a dict of arguments gets ``sid`` added. Rows, or [] for none."""
        if isinstance(args, dict):
            args = {"sid": self.sid, **args}
        if self.closed:
            raise StoreError(f"{self.where}: the store is closed")
        try:
            cur = self.conn.execute(sql, args, binary=binary)
            return [] if cur.description is None else list(cur.fetchall())
        except self._error as exc:
            raise store_error(self.where, exc) from None

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

    def batch(self, statements: Sequence[tuple[str, tuple[Any, ...] | dict[str, Any]]]
              ) -> list[list[tuple[Any, ...]]]:
        """Several independent statements in one round trip (pipeline mode); their rows. A
        dict of arguments gets ``sid`` added, as in ``rows``."""
        def run() -> list[list[tuple[Any, ...]]]:
            with self.conn.pipeline():
                cursors = [self.conn.execute(sql, {"sid": self.sid, **args}
                                             if isinstance(args, dict) else args)
                           for sql, args in statements]
            # Read once the block has sent them all with its one sync: fetching inside it syncs
            # there too, and the exit waits for a second answer (two round trips, not one).
            return [list(cur.fetchall()) for cur in cursors]
        return self.call(run) if statements else []

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
