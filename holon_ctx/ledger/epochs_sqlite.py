"""Session-projection state in the ledger's SQLite file (see :mod:`holon_ctx.ledger.epochs`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec

from holon_ctx.continuity.sqlite_backend import file_name
from holon_ctx.errors import StoreError
from holon_ctx.ledger.epochs import (
    EpochStart,
    EpochState,
    EpochStore,
    MemoryEpochStore,
    decode_starts,
    decode_state,
)
from holon_ctx.ledger.walpolicy import tune_wal

__all__ = ["SqliteEpochStore", "epoch_store_for"]

_encode = msgspec.json.encode

_SCHEMA = """
CREATE TABLE IF NOT EXISTS session_epochs (
    key TEXT NOT NULL, epoch INTEGER NOT NULL, start BLOB NOT NULL, PRIMARY KEY (key, epoch)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS session_state (
    key TEXT PRIMARY KEY, epoch INTEGER NOT NULL, state BLOB NOT NULL
) WITHOUT ROWID;
"""


class SqliteEpochStore:
    """Epoch state in the ledger's SQLite file (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            self._db = sqlite3.connect(file_name(self.path), isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA busy_timeout=10000")
            # Derived data, as the ledger's own tables and the episodes (synchronous=NORMAL in
            # WAL): a re-plan lost to a power cut is walked again from the checkpoint, the same
            # bytes (RFC 0024 decision 4), so its commit need not wait for a disk flush.
            self._db.execute("PRAGMA synchronous=NORMAL")
            tune_wal(self._db)
            self._created = False
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open session state ({exc})") from None

    def _ensure(self) -> None:
        if self._created:
            return
        try:
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot create session state tables ({exc})") from None
        self._created = True

    def _has_tables(self) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='session_state'").fetchone()
        return row is not None

    def load(self, key: str) -> EpochState | None:
        try:
            if not self._created and not self._has_tables():
                return None
            row = self._db.execute("SELECT state FROM session_state WHERE key=?", (key,)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot read session state ({exc})") from None
        return None if row is None else decode_state(row[0])

    def save(self, state: EpochState) -> None:
        self._ensure()
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("INSERT INTO session_state VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE "
                           "SET epoch=excluded.epoch, state=excluded.state "
                           "WHERE excluded.epoch >= session_state.epoch",
                           (state.key, state.start.epoch, _encode(state)))
                db.execute("INSERT OR REPLACE INTO session_epochs VALUES (?, ?, ?)",
                           (state.key, state.start.epoch, _encode(state.start)))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot write session state ({exc})") from None

    def starts(self, key: str, limit: int = 1000) -> list[EpochStart]:
        try:
            if not self._created and not self._has_tables():
                return []
            rows = self._db.execute(
                "SELECT start FROM session_epochs WHERE key=? ORDER BY epoch DESC LIMIT ?",
                (key, max(limit, 0))).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot read session state ({exc})") from None
        return decode_starts(r[0] for r in reversed(rows))

    def clear(self, key: str | None = None) -> None:
        try:
            if not self._created and not self._has_tables():
                return
            if key is None:
                self._db.execute("DELETE FROM session_state")
                self._db.execute("DELETE FROM session_epochs")
            else:
                self._db.execute("DELETE FROM session_state WHERE key=?", (key,))
                self._db.execute("DELETE FROM session_epochs WHERE key=?", (key,))
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot clear session state ({exc})") from None

    def close(self) -> None:
        self._db.close()


def epoch_store_for(ledger: object) -> EpochStore:
    """Where a session projection over ``ledger`` keeps its re-plans: the SQLite file of a SQLite
    ledger, the session's rows of a PostgreSQL one, else memory (an in-memory ledger's state
    lives as long as it does)."""
    from holon_ctx.ledger.sqlite import SqliteStore  # noqa: PLC0415 - avoids an import cycle

    if isinstance(ledger, SqliteStore) and ledger.path != ":memory:":
        return SqliteEpochStore(ledger.path)
    make = getattr(ledger, "epoch_store", None)
    if callable(make):
        found: EpochStore = make()
        return found
    return MemoryEpochStore()
