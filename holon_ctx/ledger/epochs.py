"""Where a session projection keeps its re-plan state: beside the ledger, derived, rebuildable.

A session projection (RFC 0010) walks the ledger turn by turn; at a re-plan it freezes a stable
prefix and a history, and starts an *epoch*. What an epoch froze is derived data — walking the
ledger again from its first turn re-creates it byte for byte — but re-creating it costs a walk of
the whole history, so it is persisted: a new process loads the current epoch and renders only the
records appended since it began.

Two tables in the ledger's SQLite file, created on first use with ``IF NOT EXISTS`` (the ledger's
own schema keeps its version; dropping these tables loses nothing the ledger cannot rebuild):

``session_epochs``  (key, epoch) → the turn it started at and its ledger position: one small row
                    per re-plan, so ``preview``, ``explain`` and ``replay`` can say which epoch a
                    turn belongs to.
``session_state``   key → the latest epoch's frozen state (:class:`EpochState`, msgspec JSON).

``key`` digests everything the walk depends on besides the ledger (budget, format, policy, counter,
engine version), so states of different settings never mix. Writes happen at re-plans only.
Two processes walking the same ledger with the same key write identical rows (the walk is
deterministic), so concurrent writers need no coordination beyond SQLite's own locking.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final, Protocol

import msgspec

from holon_ctx.errors import StoreError

__all__ = ["EPOCH_FORMAT", "EpochStart", "EpochState", "EpochStore", "MemoryEpochStore",
           "SqliteEpochStore", "epoch_store_for"]

#: Version of the persisted :class:`EpochState` layout; part of every key, so a new layout starts
#: afresh instead of misreading an old one.
EPOCH_FORMAT: Final = 1


class EpochStart(msgspec.Struct, frozen=True, kw_only=True):
    """Where an epoch began: the turn the re-plan was made for and the ledger position limit."""

    epoch: int
    turn_id: str
    turn_seq: int
    limit_pos: int
    #: Why the re-plan happened (``first_turn``, ``over_budget``, ``environment_changed``, …).
    reason: str


class EpochState(msgspec.Struct, frozen=True, kw_only=True):
    """What the current epoch froze, encoded by the session projection (its parts, their token
    counts, what they show); opaque here."""

    key: str
    start: EpochStart
    frozen: bytes


class EpochStore(Protocol):
    """Persistence for session projections; every store offers one (see ``epoch_store_for``)."""

    def load(self, key: str) -> EpochState | None: ...

    def save(self, state: EpochState) -> None:
        """Log ``state``'s start, and keep it as the key's current epoch unless a later epoch is
        already kept (a request for an earlier turn re-plans an old epoch; it must not replace
        the current one). Idempotent."""
        ...

    def starts(self, key: str, limit: int = 1000) -> list[EpochStart]:
        """The newest ``limit`` epoch starts of ``key``, oldest first."""
        ...

    def clear(self, key: str | None = None) -> None:
        """Forget the state of ``key`` (or of every key): the next request rebuilds it."""
        ...

    def close(self) -> None: ...


_encode = msgspec.json.encode
_state_decoder = msgspec.json.Decoder(EpochState)
_start_decoder = msgspec.json.Decoder(EpochStart)


class MemoryEpochStore:
    """Epoch state in a dict: for in-memory ledgers and tests."""

    def __init__(self) -> None:
        self._states: dict[str, bytes] = {}
        self._starts: dict[str, dict[int, bytes]] = {}

    def load(self, key: str) -> EpochState | None:
        raw = self._states.get(key)
        return None if raw is None else _state_decoder.decode(raw)

    def save(self, state: EpochState) -> None:
        # Stored encoded, as the SQLite store does: a caller can never mutate what was saved.
        kept = self.load(state.key)
        if kept is None or kept.start.epoch <= state.start.epoch:
            self._states[state.key] = _encode(state)
        self._starts.setdefault(state.key, {})[state.start.epoch] = _encode(state.start)

    def starts(self, key: str, limit: int = 1000) -> list[EpochStart]:
        rows = self._starts.get(key, {})
        return [_start_decoder.decode(rows[n]) for n in sorted(rows)[-limit:]]

    def clear(self, key: str | None = None) -> None:
        if key is None:
            self._states.clear()
            self._starts.clear()
        else:
            self._states.pop(key, None)
            self._starts.pop(key, None)

    def close(self) -> None:
        """Nothing to release (the state lives as long as the object)."""


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
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA busy_timeout=10000")
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
        if row is None:
            return None
        try:
            return _state_decoder.decode(row[0])
        except msgspec.DecodeError:
            # Derived data that no longer decodes is rebuilt, never trusted.
            return None

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
                (key, limit)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot read session state ({exc})") from None
        return [_start_decoder.decode(r[0]) for r in reversed(rows)]

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
