"""SQLite backend of the governed store (stdlib ``sqlite3``).

Every table is prefixed ``continuity_`` so the store can share a database file, or an open
connection, with the ledger without colliding. Append-only tables are guarded by triggers that
abort UPDATE and DELETE: the guard is not a security boundary (whoever can drop a trigger can
rewrite a row, which is why rehydration re-verifies everything), but it stops accidental rewrites.

Transactions: writes run inside a SAVEPOINT. On a connection this backend opened itself
(autocommit mode), each write is therefore its own committed transaction, which is what the
step-by-step compaction protocol needs. On a connection passed in by the caller, writes join the
caller's open transaction, if any, and become durable when the caller commits.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Final

from holon_ctx.continuity.backend import StoredEvent
from holon_ctx.continuity.exceptions import DuplicateRecordError
from holon_ctx.errors import StoreError, quote_value

__all__ = ["SCHEMA_VERSION", "SQLiteBackend", "file_name"]


def file_name(path: str) -> str:
    """What to give ``sqlite3.connect`` to open the file ``path``, as written.

    SQLite built with URI file names on (Debian's and most distributions' are) reads a name that
    starts with ``file:`` as a URI even when Python passes ``uri=False``: ``file:x.db`` opened
    ``x.db``, so a database built under ``file:x.db.new-…`` went into another file and an empty
    one was published. ``./`` before it makes it a plain relative path again."""
    return f"./{path}" if path.startswith("file:") else path

#: Version of the ``continuity_*`` table layout; a database with another version is refused.
SCHEMA_VERSION: Final = "1"
#: A connection this backend opens checkpoints as the ledger's do (see ``__init__``).
_WAL_AUTOCHECKPOINT: Final = 2000
_WAL_SIZE_LIMIT: Final = 64 * 1024 * 1024

_APPEND_ONLY: Final = ("continuity_envelopes", "continuity_journal", "continuity_events")

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS continuity_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS continuity_facts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, key TEXT NOT NULL,
    scope TEXT NOT NULL, body BLOB NOT NULL, recorded_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS continuity_facts_by_key ON continuity_facts (kind, key, seq);
CREATE INDEX IF NOT EXISTS continuity_facts_by_scope ON continuity_facts (kind, scope, seq);
CREATE TABLE IF NOT EXISTS continuity_envelopes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, envelope_id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL, body BLOB NOT NULL, recorded_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS continuity_envelopes_by_session
    ON continuity_envelopes (session_id, seq);
CREATE TABLE IF NOT EXISTS continuity_journal (
    envelope_id TEXT NOT NULL, step TEXT NOT NULL, body BLOB NOT NULL, recorded_at TEXT NOT NULL,
    PRIMARY KEY (envelope_id, step));
CREATE TABLE IF NOT EXISTS continuity_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, event_type TEXT NOT NULL, envelope_id TEXT NOT NULL,
    session_id TEXT NOT NULL, payload BLOB NOT NULL, recorded_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS continuity_events_by_envelope ON continuity_events (envelope_id, seq);
CREATE INDEX IF NOT EXISTS continuity_events_by_session ON continuity_events (session_id, seq);
"""


def _statements() -> list[str]:
    # One statement at a time: executescript() would COMMIT a borrowed connection's open
    # transaction, i.e. the caller's half-done work.
    statements = [s for s in _SCHEMA.split(";\n") if s.strip()]
    for table in _APPEND_ONLY:
        statements.extend(
            f"CREATE TRIGGER IF NOT EXISTS {table}_no_{op.lower()} BEFORE {op} ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
            for op in ("UPDATE", "DELETE")
        )
    return statements


def _blob(value: object) -> bytes:
    # A tampered row may hold TEXT, a number or NULL instead of a BLOB; hand back bytes anyway
    # and let the strict decoder upstream report it.
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8", "surrogatepass")


def _int(value: object) -> int:
    if not isinstance(value, int):
        raise StoreError(f"corrupt sequence number {quote_value(value)}")
    return value


class SQLiteBackend:
    """``ContinuityBackend`` over a database path or an existing ``sqlite3.Connection``."""

    def __init__(self, source: str | os.PathLike[str] | sqlite3.Connection, *,
                 timeout: float = 5.0) -> None:
        self._owned = not isinstance(source, sqlite3.Connection)
        self._closed = False
        try:
            if isinstance(source, sqlite3.Connection):
                self._conn = source
            else:
                # ``timeout``: how long a write waits for another writer's lock (the ledger's
                # commands pass their own, so the governed store waits as long as the ledger does).
                self._conn = sqlite3.connect(file_name(os.fspath(source)), isolation_level=None,
                                             timeout=timeout)
                # Beside a ledger, the file's checkpoint settings (holon_ctx.ledger.walpolicy:
                # this package imports nothing of the ledger, so the values are repeated, and
                # tests/test_wal_policy.py holds them equal): SQLite checkpoints from whichever
                # connection commits past its own threshold, so this one must not keep the
                # default. (secure_delete is left as built: this store's rows are tiny.)
                self._conn.execute(f"PRAGMA wal_autocheckpoint={_WAL_AUTOCHECKPOINT}")
                self._conn.execute(f"PRAGMA journal_size_limit={_WAL_SIZE_LIMIT}")
            with self._write():
                for statement in _statements():
                    self._conn.execute(statement)
                row = self._conn.execute(
                    "SELECT value FROM continuity_meta WHERE key = 'schema_version'"
                ).fetchone()
                if row is None:
                    self._conn.execute(
                        "INSERT INTO continuity_meta (key, value) VALUES ('schema_version', ?)",
                        (SCHEMA_VERSION,),
                    )
                elif row[0] != SCHEMA_VERSION:
                    raise StoreError(
                        f"continuity tables have schema version {quote_value(row[0])}, "
                        f"this holon-ctx reads {quote_value(SCHEMA_VERSION)}"
                    )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open continuity store: {exc}") from exc

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("continuity store is closed")

    @contextmanager
    def _write(self) -> Iterator[None]:
        self._check_open()
        try:
            self._conn.execute("SAVEPOINT continuity_write")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK TO continuity_write")
                self._conn.execute("RELEASE continuity_write")
                raise
            self._conn.execute("RELEASE continuity_write")
        except sqlite3.IntegrityError as exc:
            raise DuplicateRecordError(f"record already exists: {exc}") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"continuity store write failed: {exc}") from exc

    @contextmanager
    def batch(self) -> Iterator[None]:
        """The writes inside the block in one transaction: one commit (one disk flush) for a
        compaction's governed facts, journal and envelope, where each write alone was its own
        (RFC 0024). The write lock is taken on entry (``BEGIN IMMEDIATE``, waiting as long as
        a write does): a transaction that read first could not take it later without failing
        at once when another process wrote meanwhile. Inside another transaction, a savepoint.
        An exception leaves nothing of the block, as a killed process does."""
        if self._conn.in_transaction:
            with self._write():
                yield
            return
        self._check_open()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"continuity store write failed: {exc}") from exc
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._conn.execute("ROLLBACK")
            raise StoreError(f"continuity store write failed: {exc}") from exc

    def database_file(self) -> str | None:
        """The file this backend writes to, None in memory (ledger.compaction_lock's
        SameFileWriter: a control snapshot stamped where the ledger's appends wait)."""
        self._check_open()
        rows = self._conn.execute("PRAGMA database_list").fetchall()
        return next((str(file) or None for _, name, file in rows if name == "main"), None)

    def write_transaction(self) -> AbstractContextManager[None]:
        """:meth:`batch`: the write lock from its start (SameFileWriter)."""
        return self.batch()

    def _read(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        self._check_open()
        try:
            return list(self._conn.execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            raise StoreError(f"continuity store read failed: {exc}") from exc

    def _touch(self, at: str) -> None:
        self._conn.execute(
            "INSERT INTO continuity_meta (key, value) VALUES ('last_recorded_at', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)",
            (at,),
        )

    def append_fact(self, kind: str, key: str, scope: str, body: bytes, at: str) -> None:
        with self._write():
            self._conn.execute(
                "INSERT INTO continuity_facts (kind, key, scope, body, recorded_at) VALUES (?, ?, ?, ?, ?)",
                (kind, key, scope, bytes(body), at),
            )
            self._touch(at)

    def latest_fact(self, kind: str, key: str) -> bytes | None:
        rows = self._read(
            "SELECT body FROM continuity_facts WHERE kind = ? AND key = ? ORDER BY seq DESC LIMIT 1",
            (kind, key),
        )
        return _blob(rows[0][0]) if rows else None

    def latest_facts_in_scope(self, kind: str, scope: str) -> list[bytes]:
        rows = self._read(
            "SELECT f.body FROM continuity_facts AS f "
            "WHERE f.kind = ? AND f.scope = ? AND f.seq = (SELECT max(g.seq) "
            "FROM continuity_facts AS g WHERE g.kind = f.kind AND g.key = f.key) ORDER BY f.seq",
            (kind, scope),
        )
        return [_blob(row[0]) for row in rows]

    def append_envelope(self, envelope_id: str, session_id: str, body: bytes, at: str) -> None:
        with self._write():
            self._conn.execute(
                "INSERT INTO continuity_envelopes (envelope_id, session_id, body, recorded_at) "
                "VALUES (?, ?, ?, ?)",
                (envelope_id, session_id, bytes(body), at),
            )
            self._touch(at)

    def envelope(self, envelope_id: str) -> bytes | None:
        rows = self._read("SELECT body FROM continuity_envelopes WHERE envelope_id = ?", (envelope_id,))
        if not rows:
            return None
        return _blob(rows[0][0])

    def envelope_ids(self, session_id: str) -> list[str]:
        rows = self._read(
            "SELECT envelope_id FROM continuity_envelopes WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        return [str(row[0]) for row in rows]

    def append_step(self, envelope_id: str, step: str, body: bytes, at: str) -> None:
        with self._write():
            self._conn.execute(
                "INSERT INTO continuity_journal (envelope_id, step, body, recorded_at) VALUES (?, ?, ?, ?)",
                (envelope_id, step, bytes(body), at),
            )
            self._touch(at)

    def steps(self, envelope_id: str) -> dict[str, bytes]:
        rows = self._read("SELECT step, body FROM continuity_journal WHERE envelope_id = ?", (envelope_id,))
        return {str(step): _blob(body) for step, body in rows}

    def append_event(
        self, event_type: str, envelope_id: str, session_id: str, payload: bytes, at: str
    ) -> int:
        with self._write():
            cursor = self._conn.execute(
                "INSERT INTO continuity_events (event_type, envelope_id, session_id, payload, "
                "recorded_at) VALUES (?, ?, ?, ?, ?)",
                (event_type, envelope_id, session_id, bytes(payload), at),
            )
            self._touch(at)
        seq = cursor.lastrowid
        if seq is None:  # pragma: no cover - sqlite always sets it after an INSERT
            raise StoreError("continuity store did not number the event")
        return seq

    def events(self, *, envelope_id: str | None, session_id: str | None) -> list[StoredEvent]:
        rows = self._read(
            "SELECT seq, event_type, envelope_id, session_id, payload, recorded_at "
            "FROM continuity_events WHERE (?1 IS NULL OR envelope_id = ?1) "
            "AND (?2 IS NULL OR session_id = ?2) ORDER BY seq",
            (envelope_id, session_id),
        )
        return [
            StoredEvent(_int(s), str(t), str(e), str(sid), _blob(p), str(at)) for s, t, e, sid, p, at in rows
        ]

    def last_recorded_at(self) -> str | None:
        rows = self._read("SELECT value FROM continuity_meta WHERE key = 'last_recorded_at'", ())
        return str(rows[0][0]) if rows else None

    def close(self) -> None:
        # A borrowed connection belongs to the caller (e.g. the ledger): stop using it, but never
        # close it.
        self._closed = True
        if self._owned:
            try:
                self._conn.close()
            except sqlite3.Error as exc:  # pragma: no cover - close of a healthy handle
                raise StoreError(f"cannot close continuity store: {exc}") from exc
