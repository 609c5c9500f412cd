"""The SQLite store: the embedded default. WAL journal, one transaction per append batch.

Layout (schema version 3). ``records`` is the append-only truth: the canonical JSONL line of each
record by position. Every other table is derived from it at append time and can be rebuilt with
:meth:`SqliteStore.rebuild_derived`: ``turns`` (by sequence, with an operator-intent partial index
for the continuation anchor), ``token_counts`` (per counter identity), ``work_item_states`` and
``wait_states`` (folded transitions), and ``high_turns`` (v2: each turn marked high by a retention
fact, with the position of the record that marked it; see :mod:`holon_ctx.ledger.facts`) and
``calls`` (v3: each tool call's newest record, :mod:`holon_ctx.ledger.calls_sqlite`). The
high-turn index is rebuilt on open when it was built under another ``HIGH_INDEX_KEY`` (meta
``high_index``). Each projection read is an indexed range or point query.

Length: past the house's ~400 lines: one class over one connection (schema, migrations, the append
backend, every read of the Protocol); splitting it would split the transactions they share.

Durability: a batch is one ``BEGIN IMMEDIATE … COMMIT``. A writer killed mid-batch leaves nothing of
that batch (WAL rollback on next open); readers in other processes see only committed batches.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, cast

import msgspec

from holon_ctx.continuity.sqlite_backend import file_name
from holon_ctx.errors import StoreError
from holon_ctx.ledger import calls_sqlite, compaction_lock, locking, walpolicy
from holon_ctx.ledger.body import record_body
from holon_ctx.ledger.calls import call_marks, last_per_call
from holon_ctx.ledger.dbpath import missing_directory, not_a_database_file
from holon_ctx.ledger.facts import HIGH_INDEX_KEY, marks_high
from holon_ctx.ledger.readcache import DecodedRecords, OpenWaits
from holon_ctx.ledger.records import OPERATOR_TRIGGERS, Record, Turn
from holon_ctx.ledger.state import TurnInfo, WaitState, WorkItemState
from holon_ctx.ledger.store import CallRecord, LedgerStats, StoredRecord
from holon_ctx.ledger.writer import Row, append_records
from holon_ctx.tokens import TokenCounter, default_counter

__all__ = ["SCHEMA_VERSION", "SqliteStore", "missing_directory"]

SCHEMA_VERSION: Final = 3
_INTENT_TRIGGERS = tuple(sorted(OPERATOR_TRIGGERS - {"approval_decision"}))

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    pos INTEGER PRIMARY KEY,
    ref TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    trust TEXT NOT NULL,
    turn_seq INTEGER,
    line BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS records_by_turn ON records(turn_seq, pos) WHERE turn_seq IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_env_pin ON records(kind, pos)
    WHERE kind IN ('environment', 'pin');
CREATE TABLE IF NOT EXISTS turns (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    pos INTEGER NOT NULL UNIQUE,
    intent INTEGER NOT NULL,
    work_item_id TEXT
);
CREATE INDEX IF NOT EXISTS turns_intent ON turns(seq) WHERE intent = 1;
CREATE TABLE IF NOT EXISTS token_counts (
    counter TEXT NOT NULL,
    pos INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (counter, pos)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS work_item_states (
    pos INTEGER PRIMARY KEY, work_item_id TEXT NOT NULL, state BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS work_item_states_by_id ON work_item_states(work_item_id, pos);
CREATE TABLE IF NOT EXISTS wait_states (
    pos INTEGER PRIMARY KEY, wait_id TEXT NOT NULL, status TEXT NOT NULL, state BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS wait_states_by_id ON wait_states(wait_id, pos);
"""

#: v2: the high-turn index (filled by _rebuild_high_turns on the first open after migrating).
_SCHEMA_V2 = """
CREATE TABLE IF NOT EXISTS high_turns (seq INTEGER PRIMARY KEY, pos INTEGER NOT NULL);
"""

#: Migrations from version N to N+1. Version 0 is an empty file.
_MIGRATIONS: dict[int, str] = {0: _SCHEMA_V1, 1: _SCHEMA_V2, 2: calls_sqlite.SCHEMA_V3}
_DERIVED_TABLES = ("turns", "token_counts", "work_item_states", "wait_states", "high_turns",
                   "calls")
#: SQLite uses a partial index only when the query repeats the index's WHERE term verbatim; without
#: this prefix, latest_environment and pins walked back through every record (O(history)).
_ENV_PIN = "WHERE r.kind IN ('environment', 'pin') AND "
#: Rows of `records` and `token_counts` buffered for one executemany each: a statement per record
#: was ~25% of import time. Bounded, so memory stays flat however large the import.
_PENDING_ROWS: Final = 1024
#: Positions per ``IN (…)`` query (SQLite's default limit on bound parameters is 32,766).
_IN_CHUNK: Final = 900

_record_decoder = msgspec.json.Decoder(Record)
_wi_decoder = msgspec.json.Decoder(WorkItemState)
_wait_decoder = msgspec.json.Decoder(WaitState)
_encode = msgspec.json.encode


class SqliteStore:
    """A ledger in one SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path, counter: TokenCounter | None = None, *,
                 lock_timeout: float | None = None, durable: bool = False) -> None:
        """Open (or create) the ledger at ``path``.

        ``lock_timeout``: seconds an append waits for another writer's lock before failing with
        a :class:`StoreError` (default: ``$HOLON_CTX_LOCK_TIMEOUT``, else 30; see
        :mod:`holon_ctx.ledger.locking`).

        ``durable``: every commit waits for the disk (``synchronous=FULL``), so an acknowledged
        append survives a power loss or an operating-system crash too, as a PostgreSQL store's
        does by default. The default (``synchronous=NORMAL``) survives a crash of the runtime
        (kill -9 included) and may lose the newest commits on a power loss, never corrupting
        the file (RFC 0001, "The SQLite store").
        """
        self.path = str(path)
        self._counter = counter or default_counter()
        self.lock_timeout = locking.lock_timeout(lock_timeout)
        problem = missing_directory(path) or not_a_database_file(path)
        if problem is not None:
            raise StoreError(f"{self.path}: {problem}")
        try:
            self._db = sqlite3.connect(file_name(self.path), isolation_level=None, check_same_thread=False,
                                       timeout=self.lock_timeout)
            # Refuse a foreign database before touching it: even switching the journal mode
            # rewrites its header, and a refused file must stay byte-identical.
            self._refuse_foreign()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self._db.execute("PRAGMA foreign_keys=OFF")
            walpolicy.tune_wal(self._db)  # checkpoints: RFC 0001, "WAL checkpoints"
            self._migrate()
            self._check_high_index()
        except sqlite3.DatabaseError as exc:
            if locking.is_lock_error(exc):
                self._db.close()
                raise locking.lock_error(self.path, self.lock_timeout) from None
            raise StoreError(f"{self.path}: not a usable holon-ctx database ({exc})") from None
        except StoreError:
            self._db.close()
            raise
        self._counter_id = self._counter.identity

    @property
    def durable(self) -> bool:
        """Whether each commit waits for the disk (``durable=True``: ``synchronous=FULL``)."""
        # Read from the connection, not remembered: it is what the commits actually do.
        return int(self._db.execute("PRAGMA synchronous").fetchone()[0]) >= 2

    def _refuse_foreign(self) -> None:
        names = {row[0] for row in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
        if names and "meta" not in names:
            raise StoreError(f"{self.path}: an SQLite database, but not a holon-ctx ledger")
        self._pending_records: list[tuple[int, str, str, str, int | None, bytes]] = []
        self._pending_refs: set[str] = set()
        self._pending_counts: list[tuple[str, int, int]] = []
        self._pending_high: list[tuple[int, int]] = []
        self._pending_calls: list[tuple[str, int, str]] = []
        self._decoded = DecodedRecords(self._counter)
        self._open_waits = OpenWaits(self)

    def _migrate(self) -> None:
        db = self._db
        has_meta = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        version = 0
        if has_meta:
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            version = int(row[0]) if row else 0
        elif db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise StoreError(f"{self.path}: an SQLite database, but not a holon-ctx ledger")
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: schema version {version} is newer than this holon-ctx "
                f"supports ({SCHEMA_VERSION}); upgrade holon-ctx")
        while version < SCHEMA_VERSION:
            with locking.write_at_open(db, self.path):
                for stmt in _MIGRATIONS[version].split(";"):
                    if stmt.strip():
                        db.execute(stmt)
                if version == 2:  # the calls index of an existing ledger, from its records
                    calls_sqlite.fill(db)
                version += 1
                db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                           (str(version),))

    def _check_high_index(self) -> None:
        """Rebuild the high-turn index when it was built under other retention facts (or by a
        version before it existed): a stale index would silently drop or add high turns."""
        row = self._db.execute("SELECT value FROM meta WHERE key='high_index'").fetchone()
        if row is not None and row[0] == HIGH_INDEX_KEY:
            return
        db = self._db
        with locking.write_at_open(db, self.path):
            # Another process may have rebuilt it while this one waited for the lock.
            row = db.execute("SELECT value FROM meta WHERE key='high_index'").fetchone()
            if row is not None and row[0] == HIGH_INDEX_KEY:
                return
            db.execute("DELETE FROM high_turns")
            rows = db.execute("SELECT pos, turn_seq, line FROM records WHERE turn_seq IS NOT NULL "
                              "ORDER BY pos")
            while batch := rows.fetchmany(4096):
                db.executemany("INSERT OR IGNORE INTO high_turns VALUES (?,?)",
                               [(seq, pos) for pos, seq, line in batch
                                if marks_high(_record_decoder.decode(line))])
            db.execute("INSERT OR REPLACE INTO meta VALUES ('high_index', ?)", (HIGH_INDEX_KEY,))

    # -- append backend -------------------------------------------------------------------
    @property
    def counter_identity(self) -> str:
        return self._counter_id

    def use_counter(self, counter: TokenCounter) -> None:
        """Count with ``counter`` from now on (a session for another model, RFC 0022): appends
        store its counts, reads take its counts, and a record it has not counted yet is counted
        when first read and that count written with the next append (once per record per counter)."""
        if counter.identity == self._counter_id:
            return
        self._flush_pending()
        self._counter, self._counter_id = counter, counter.identity
        self._decoded = DecodedRecords(counter)

    def next_pos(self) -> int:
        self._flush_pending()
        row = self._db.execute("SELECT max(pos) FROM records").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def has_ref(self, ref: str) -> bool:
        if ref in self._pending_refs:
            return True
        return self._db.execute("SELECT 1 FROM records WHERE ref=?", (ref,)).fetchone() is not None

    def find_turn(self, turn_id: str) -> TurnInfo | None:
        row = self._db.execute(
            "SELECT id, seq, pos, work_item_id FROM turns WHERE id=?", (turn_id,)).fetchone()
        return None if row is None else TurnInfo(*row)

    def last_turn(self) -> TurnInfo | None:
        row = self._db.execute(
            "SELECT id, seq, pos, work_item_id FROM turns ORDER BY seq DESC LIMIT 1").fetchone()
        return None if row is None else TurnInfo(*row)

    def wait_state(self, wait_id: str) -> WaitState | None:
        row = self._db.execute(
            "SELECT state FROM wait_states WHERE wait_id=? ORDER BY pos DESC LIMIT 1",
            (wait_id,)).fetchone()
        return None if row is None else _wait_decoder.decode(row[0])

    def insert(self, row: Row, counter_identity: str) -> None:
        # Record rows are inserted _PENDING_ROWS at a time with executemany; until then has_ref
        # finds them in _pending_refs. The append path reads no other column of `records`.
        trust = row.record.trust.value if row.record.trust else ""
        self._pending_records.append((row.pos, row.ref, row.kind, trust, row.turn_seq, row.line))
        self._pending_refs.add(row.ref)
        self._insert_derived(row, counter_identity)

    def _insert_derived(self, row: Row, counter_identity: str) -> None:
        db = self._db
        # Nothing reads token counts while a batch is appended: they are batched the same way.
        self._pending_counts.append((counter_identity, row.pos, row.tokens))
        if len(self._pending_counts) >= _PENDING_ROWS:
            self._flush_pending()
        if row.marks_high and row.turn_seq is not None:
            # INSERT OR IGNORE in position order: the first record that marks the turn wins.
            self._pending_high.append((row.turn_seq, row.pos))
        rec = row.record
        self._pending_calls.extend((cid, row.pos, state.value) for cid, state in call_marks(rec))
        if row.turn is not None and isinstance(rec, Turn):
            db.execute("INSERT INTO turns VALUES (?,?,?,?,?)",
                       (rec.seq, rec.id, row.pos, int(rec.trigger in _INTENT_TRIGGERS),
                        rec.work_item_id))
        if row.work_item_state is not None:
            db.execute("INSERT INTO work_item_states VALUES (?,?,?)",
                       (row.pos, row.work_item_state.work_item_id, _encode(row.work_item_state)))
        if row.wait_state is not None:
            db.execute("INSERT INTO wait_states VALUES (?,?,?,?)",
                       (row.pos, row.wait_state.wait_id, row.wait_state.status.value,
                        _encode(row.wait_state)))

    def _flush_pending(self) -> None:
        if self._pending_records:
            self._db.executemany("INSERT INTO records VALUES (?,?,?,?,?,?)",
                                 self._pending_records)
        if self._pending_counts:
            self._db.executemany("INSERT INTO token_counts VALUES (?,?,?)", self._pending_counts)
        if self._pending_high:
            self._db.executemany("INSERT OR IGNORE INTO high_turns VALUES (?,?)", self._pending_high)
        if self._pending_calls:
            self._db.executemany(calls_sqlite.UPSERT, last_per_call(self._pending_calls))
        self._drop_pending()

    def _drop_pending(self) -> None:
        self._pending_records.clear()
        self._pending_refs.clear()
        self._pending_counts.clear()
        self._pending_high.clear()
        self._pending_calls.clear()

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction: ``BEGIN IMMEDIATE`` (waiting for another writer up to the lock
        timeout) … ``COMMIT``; on any error, nothing of it stays.

        SQLite rolls a transaction back by itself on some errors (a full disk, an I/O error), so
        ROLLBACK is issued only if one is still open: otherwise its own error would hide the real
        one. SQLite's errors become one-line :class:`StoreError`\\ s naming the database.
        """
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if locking.is_lock_error(exc):
                raise locking.lock_error(self.path, self.lock_timeout) from None
            raise StoreError(f"{self.path}: cannot write: {exc}") from None
        try:
            yield
            self._flush_pending()
            # Counts a read made under this counter (DecodedRecords), now that the lock is held;
            # another process may have written the same ones (deterministic), hence OR IGNORE.
            db.executemany("INSERT OR IGNORE INTO token_counts VALUES (?,?,?)",
                           [(self._counter_id, pos, n)
                            for pos, n in self._decoded.take_recounted()])
            db.execute("COMMIT")
        except BaseException as exc:
            self._drop_pending()
            if db.in_transaction:
                db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"{self.path}: cannot write: {exc}") from None
            raise

    def append_lines(self, items: Iterable[tuple[int | None, Record]], *, source: str,
                     renumber_turns: bool = False, expect_end: int | None = None) -> int:
        with self._write():
            return append_records(self, self._counter, items, source=source,
                                  renumber_turns=renumber_turns, expect_end=expect_end)

    def append(self, records: Iterable[Record], *, source: str = "<append>",
               renumber_turns: bool = False, expect_end: int | None = None) -> int:
        return self.append_lines(((None, r) for r in records), source=source,
                                 renumber_turns=renumber_turns, expect_end=expect_end)

    def rebuild_derived(self) -> None:
        """Drop every derived table and recompute it from ``records`` in one transaction.

        Replays the records through a scratch :class:`MemoryStore`, so derivation runs the very
        same code as appends do; only the derived rows are written back.
        """
        from holon_ctx.ledger.memory import MemoryStore  # noqa: PLC0415 - avoids an import cycle

        scratch = MemoryStore(self._counter)
        scratch.append(self.iter_records(), source=self.path)
        with self._write():
            for table in _DERIVED_TABLES:
                self._db.execute(f"DELETE FROM {table}")
            for row in scratch.derived_rows():
                self._insert_derived(row, self._counter_id)
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('high_index', ?)",
                             (HIGH_INDEX_KEY,))

    # -- reads ----------------------------------------------------------------------------
    def _stored(self, row: tuple[Any, ...]) -> StoredRecord:
        return self._decoded.stored(*row)

    _SELECT = ("SELECT r.pos, r.ref, r.turn_seq, r.line, t.tokens FROM records r "
               "LEFT JOIN token_counts t ON t.counter=? AND t.pos=r.pos ")

    def _query(self, where: str, args: tuple[Any, ...]) -> list[StoredRecord]:
        rows = self._db.execute(self._SELECT + where, (self._counter_id, *args)).fetchall()
        return [self._stored(r) for r in rows]

    def end_pos(self) -> int:
        return self.next_pos()

    def get(self, ref: str) -> StoredRecord | None:
        found = self._query("WHERE r.ref=?", (ref,))
        return found[0] if found else None

    def turn(self, turn_id: str) -> StoredRecord | None:
        return self.get(f"turn:{turn_id}")

    def next_turn_pos(self, seq: int) -> int | None:
        row = self._db.execute("SELECT pos FROM turns WHERE seq>? ORDER BY seq LIMIT 1",
                               (seq,)).fetchone()
        return None if row is None else int(row[0])

    def latest_turn(self, limit_pos: int) -> StoredRecord | None:
        # ORDER BY pos, not seq: the same order (seq rises with pos), but it walks the pos index
        # back from limit_pos (O(log n)) instead of sorting every earlier turn.
        row = self._db.execute("SELECT pos FROM turns WHERE pos<? ORDER BY pos DESC LIMIT 1",
                               (limit_pos,)).fetchone()
        if row is None:
            return None
        found = self._query("WHERE r.pos=?", (row[0],))
        return found[0]

    def turns_before(self, seq: int, count: int, limit_pos: int) -> list[StoredRecord]:
        positions = [p for (p,) in self._db.execute(
            "SELECT pos FROM turns WHERE seq<? AND pos<? ORDER BY seq DESC LIMIT ?",
            (seq, limit_pos, max(count, 0)))]
        return self._at_positions(positions)

    def records_of_turns(self, lo_seq: int, hi_seq: int, limit_pos: int) -> list[StoredRecord]:
        # Positions come from the records_by_turn index alone; rows are read (and decoded) only
        # for positions not already decoded. Turn rows are in that index too: dropped here.
        positions = [p for (p,) in self._db.execute(
            "SELECT pos FROM records WHERE turn_seq BETWEEN ? AND ? AND pos<? ORDER BY pos",
            (lo_seq, hi_seq, limit_pos))]
        return [r for r in self._at_positions(positions) if not isinstance(r.record, Turn)]

    def records_between(self, lo_pos: int, hi_pos: int) -> list[StoredRecord]:
        self._flush_pending()
        return self._at_positions(list(range(max(lo_pos, 0), min(hi_pos, self.next_pos()))))

    def _at_positions(self, positions: list[int]) -> list[StoredRecord]:
        """The records at ``positions``, in that order: decoded ones reused, the rest read."""
        decoded = self._decoded
        missing = [p for p in positions if p not in decoded]
        if missing:
            for chunk in range(0, len(missing), _IN_CHUNK):
                part = missing[chunk:chunk + _IN_CHUNK]
                marks = ",".join("?" * len(part))
                for row in self._db.execute(self._SELECT + f"WHERE r.pos IN ({marks})",
                                            (self._counter_id, *part)).fetchall():
                    self._stored(row)
            if any(p not in decoded for p in positions):
                # The decoded cache was cleared while filling it (a very large read): read
                # these rows directly instead.
                rows = {}
                for chunk in range(0, len(positions), _IN_CHUNK):
                    part = positions[chunk:chunk + _IN_CHUNK]
                    marks = ",".join("?" * len(part))
                    for row in self._db.execute(self._SELECT + f"WHERE r.pos IN ({marks})",
                                                (self._counter_id, *part)).fetchall():
                        rows[row[0]] = self._stored(row)
                return [rows[p] for p in positions]
        return [decoded[p] for p in positions]

    def high_turns_before(self, seq: int, count: int, limit_pos: int) -> list[StoredRecord]:
        positions = [p for (p,) in self._db.execute(
            "SELECT t.pos FROM high_turns h JOIN turns t ON t.seq=h.seq "
            "WHERE h.seq<? AND h.pos<? ORDER BY h.seq DESC LIMIT ?",
            (seq, limit_pos, max(count, 0)))]
        return self._at_positions(positions)

    def latest_operator_turn(self, before_seq: int, limit_pos: int) -> StoredRecord | None:
        row = self._db.execute(
            "SELECT pos FROM turns WHERE intent=1 AND seq<? AND pos<? ORDER BY seq DESC LIMIT 1",
            (before_seq, limit_pos)).fetchone()
        return None if row is None else self._query("WHERE r.pos=?", (row[0],))[0]

    def work_item_state(self, work_item_id: str, limit_pos: int | None = None) -> WorkItemState | None:
        row = self._db.execute(
            "SELECT state FROM work_item_states WHERE work_item_id=? AND pos<? "
            "ORDER BY pos DESC LIMIT 1",
            (work_item_id, limit_pos if limit_pos is not None else 1 << 62)).fetchone()
        return None if row is None else _wi_decoder.decode(row[0])

    def open_waits(self, limit_pos: int) -> list[WaitState]:
        """Waits whose latest transition before ``limit_pos`` is open, oldest transition first
        (kept current incrementally: :class:`~holon_ctx.ledger.readcache.OpenWaits`)."""
        return self._open_waits.at(limit_pos)

    # WaitTransitions, for OpenWaits.
    def initial_open_waits(self) -> tuple[int, list[bytes]]:
        top = self._db.execute("SELECT max(pos) FROM wait_states").fetchone()[0]
        seen = 0 if top is None else int(top) + 1
        rows = self._db.execute(
            "SELECT w.state FROM wait_states w WHERE w.pos = (SELECT max(pos) FROM "
            "wait_states v WHERE v.wait_id=w.wait_id AND v.pos<?) AND w.status='open'",
            (seen,)).fetchall()
        return seen, [r[0] for r in rows]

    def transitions_since(self, seen: int) -> list[tuple[int, str, str, bytes]]:
        return self._db.execute(
            "SELECT pos, wait_id, status, state FROM wait_states WHERE pos>=? ORDER BY pos",
            (seen,)).fetchall()

    def changed_waits(self, lo: int, hi: int) -> dict[str, tuple[str, bytes] | None]:
        changed: dict[str, tuple[str, bytes] | None] = {}
        for (wait_id,) in self._db.execute(
                "SELECT DISTINCT wait_id FROM wait_states WHERE pos>=? AND pos<?",
                (lo, hi)).fetchall():
            changed[wait_id] = self._db.execute(
                "SELECT status, state FROM wait_states WHERE wait_id=? AND pos<? "
                "ORDER BY pos DESC LIMIT 1", (wait_id, lo)).fetchone()
        return changed

    def latest_environment(self, limit_pos: int) -> StoredRecord | None:
        found = self._query(_ENV_PIN + "r.kind='environment' AND r.pos<? "
                            "ORDER BY r.pos DESC LIMIT 1", (limit_pos,))
        return found[0] if found else None

    def pins(self, limit_pos: int, count: int) -> list[StoredRecord]:
        # max(count, 0) here and above: SQLite reads a negative LIMIT as no limit at all, and
        # "up to -1 pins" is none (as in the other stores).
        found = self._query(_ENV_PIN + "r.kind='pin' AND r.pos<? ORDER BY r.pos DESC LIMIT ?",
                            (limit_pos, max(count, 0)))
        return found[::-1]

    def waiting_calls(self) -> tuple[int, list[CallRecord]]:
        return calls_sqlite.waiting(self._db, self._at_positions)

    def call_record(self, call_id: str) -> CallRecord | None:
        return calls_sqlite.newest(self._db, call_id, self._at_positions)

    def iter_records(self) -> Iterator[Record]:
        cur = self._db.execute("SELECT line FROM records ORDER BY pos")
        while True:
            batch = cur.fetchmany(1024)
            if not batch:
                return
            for (line,) in batch:
                yield _record_decoder.decode(line)

    def stats(self) -> LedgerStats:
        db = self._db
        kinds = dict(db.execute("SELECT kind, count(*) FROM records GROUP BY kind").fetchall())
        tokens = dict(db.execute(
            "SELECT r.kind, sum(t.tokens) FROM records r JOIN token_counts t ON t.pos=r.pos "
            "AND t.counter=? GROUP BY r.kind", (self._counter_id,)).fetchall())
        trust = dict(db.execute(
            "SELECT r.trust, sum(t.tokens) FROM records r JOIN token_counts t ON t.pos=r.pos "
            "AND t.counter=? GROUP BY r.trust", (self._counter_id,)).fetchall())
        # Records with no count under this store's counter (appended under another one): recount,
        # as reads do, rather than leave them out of the totals or trust a foreign count.
        uncounted = db.execute(
            "SELECT r.kind, r.trust, r.line FROM records r LEFT JOIN token_counts t "
            "ON t.counter=? AND t.pos=r.pos WHERE t.tokens IS NULL ORDER BY r.pos",
            (self._counter_id,))
        for kind, trust_name, line in uncounted:
            n = self._counter.count(record_body(_record_decoder.decode(line)))
            tokens[kind] = tokens.get(kind, 0) + n
            trust[trust_name] = trust.get(trust_name, 0) + n
        turns = db.execute("SELECT count(*) FROM turns").fetchone()[0]
        return LedgerStats(turns=turns, records=sum(kinds.values()), records_by_kind=kinds,
                           tokens_by_kind=tokens, tokens_by_trust=trust,
                           counter=self._counter_id)

    @contextmanager
    def compaction_lock(self) -> Iterator[None]:
        """Held by a compaction from its first read to its last write: one at a time across
        processes; appends and reads never wait for it (holon_ctx.ledger.compaction_lock)."""
        if self.path == ":memory:":
            with compaction_lock.process_lock(self):
                yield
            return
        with compaction_lock.file_lock(self.path, self.lock_timeout):
            yield

    @contextmanager
    def appends_held(self, writer: object = None) -> Iterator[int | None]:
        """The ledger's end, read inside ``writer``'s write transaction when it writes to this
        file (holon_ctx.ledger.compaction_lock.appends_held); else None (nothing held).

        SQLite has one write lock per file, whichever connection takes it: while the writer's
        transaction holds it, no append commits, so the end read here (on this connection, in
        autocommit: the newest commit) is the end when the writer commits. Not this
        connection's own transaction: the episode and governed stores write on their own
        connections, which would then wait for it (RFC 0020, "Stamps read where appends wait,
        on SQLite")."""
        database = getattr(writer, "database_file", None)
        file = database() if callable(database) else None
        if file is None or self.path == ":memory:" or not _same_file(file, self.path):
            yield None
            return
        with cast(compaction_lock.SameFileWriter, writer).write_transaction():
            yield self.end_pos()

    def close(self) -> None:
        self._db.close()


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
