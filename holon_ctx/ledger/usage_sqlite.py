"""Usage observations in the ledger's SQLite file (see :mod:`holon_ctx.ledger.usage`).

One table, created on first write with ``IF NOT EXISTS`` (the ledger's own schema keeps its
version, as the session-state tables do): ``usage_observations`` (seq, model, turn, observation
as msgspec JSON), indexed by model and by turn. A ledger never observed has no such table, and
reading it then finds nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from holon_ctx.continuity.sqlite_backend import file_name
from holon_ctx.errors import StoreError
from holon_ctx.ledger.usage import WINDOW, MemoryUsageStore, Observation, UsageStore
from holon_ctx.ledger.walpolicy import tune_wal

__all__ = ["SqliteUsageStore", "usage_store_for"]

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS usage_observations (
    seq INTEGER PRIMARY KEY, model TEXT NOT NULL, turn TEXT NOT NULL, observation BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS usage_observations_by_model ON usage_observations(model, seq);
CREATE INDEX IF NOT EXISTS usage_observations_by_turn ON usage_observations(turn, seq);
"""
_decode = msgspec.json.Decoder(Observation).decode
_encode = msgspec.json.encode
#: Turns per ``IN (…)`` query (under SQLite's default bound-parameter limit).
_IN_CHUNK: Final = 900


class SqliteUsageStore:
    """Observations in the ledger's SQLite file (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            self._db = sqlite3.connect(file_name(self.path), isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA busy_timeout=10000")
            tune_wal(self._db)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open usage observations ({exc})") from None
        self._created = False

    def _exists(self) -> bool:
        if not self._created:
            self._created = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='usage_observations'"
            ).fetchone() is not None
        return self._created

    def add(self, observation: Observation) -> None:
        try:
            if not self._created:
                self._db.executescript(_SCHEMA)
                self._created = True
            self._db.execute("INSERT INTO usage_observations (model, turn, observation) "
                             "VALUES (?, ?, ?)",
                             (observation.model, observation.turn, _encode(observation)))
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot record usage ({exc})") from None

    def recent(self, model: str, limit: int = WINDOW) -> list[Observation]:
        try:
            if not self._exists():
                return []
            rows = self._db.execute(
                "SELECT observation FROM usage_observations WHERE model=? ORDER BY seq DESC "
                "LIMIT ?", (model, max(limit, 0))).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot read usage ({exc})") from None
        return [_decode(raw) for (raw,) in reversed(rows)]

    def of_turns(self, turns: Sequence[str]) -> list[Observation]:
        wanted = list(dict.fromkeys(turns))
        found: list[tuple[int, bytes]] = []
        try:
            if not self._exists():
                return []
            for i in range(0, len(wanted), _IN_CHUNK):
                part = wanted[i:i + _IN_CHUNK]
                marks = ",".join("?" * len(part))
                found.extend(self._db.execute(
                    f"SELECT seq, observation FROM usage_observations WHERE turn IN ({marks})",
                    part).fetchall())
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot read usage ({exc})") from None
        return [_decode(raw) for _, raw in sorted(found)]

    def close(self) -> None:
        self._db.close()


def usage_store_for(ledger: object) -> UsageStore:
    """Where a session over ``ledger`` keeps usage observations: the SQLite file of a SQLite
    ledger, the session's rows of a PostgreSQL one, else memory."""
    from holon_ctx.ledger.sqlite import SqliteStore  # noqa: PLC0415 - avoids an import cycle

    if isinstance(ledger, SqliteStore) and ledger.path != ":memory:":
        return SqliteUsageStore(ledger.path)
    make = getattr(ledger, "usage_store", None)
    if callable(make):
        found: UsageStore = make()
        return found
    return MemoryUsageStore()
