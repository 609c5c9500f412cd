"""The PostgreSQL ledger store: one session's ledger in a database shared by a fleet.

Appends (RFC 0009). A batch is one transaction that first locks the session's row in
``holon_sessions`` (``SELECT … FOR UPDATE``): appends to the same session queue there, appends to
other sessions do not meet at all. Under that lock the row's ``end_pos`` is the next position and
the newest turn the last sequence, so positions and sequence numbers are allocated race-free; the
batch commits with the rows and the new ``end_pos`` together. Committed positions are therefore
always a prefix of the session's ledger, which is what lets readers cache by position. A process
killed mid-batch leaves an open transaction that the server rolls back when its connection drops.

Round trips. The append path asks many small questions ("is this ref taken?", "which turn is
t42?"); the store answers a chunk's worth at once (``prefetch``, from :mod:`..ledger.writer`) and
buffers its inserts until the next chunk, so a chunk costs a few round trips, not one per record.
Reads are one statement each and return rows, not positions; rows already decoded are not decoded
again (:class:`~holon_ctx.ledger.readcache.DecodedRecords`) and the open-wait set is kept
incrementally, as in SQLite. Every read is an index search bounded by its arguments
(``tests/test_postgres.py`` checks the plans).

Length: ~500 lines, past the house's ~400, because the append side (prefetch, pending rows) and
the read side (decoded records, read-ahead of a page's records) share one connection's batch state
and caches; splitting them would put one object's invariants in two files.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import msgspec

from holon_ctx.errors import LedgerFormatError, StoreError, quote_value
from holon_ctx.ledger.body import record_body
from holon_ctx.ledger.compaction_lock import wait_for
from holon_ctx.ledger.locking import lock_timeout
from holon_ctx.ledger.readcache import DecodedRecords, OpenWaits
from holon_ctx.ledger.records import Record, Turn, record_ref
from holon_ctx.ledger.state import TurnInfo, WaitState, WorkItemState
from holon_ctx.ledger.store import LedgerStats, StoredRecord
from holon_ctx.ledger.writer import LedgerMovedError, Lookups, Row, append_records
from holon_ctx.postgres.appends import (
    APPEND_IF_END,
    FAST_BATCH,
    Known,
    Speculative,
    Unknown,
    append_params,
    derived_values,
    record_values,
)
from holon_ctx.postgres.connection import psycopg_module
from holon_ctx.postgres.epochs import PostgresEpochStore
from holon_ctx.postgres.schema import SESSION_TABLES
from holon_ctx.postgres.session import ConnectionLost, SessionHandle
from holon_ctx.postgres.usage import PostgresUsageStore
from holon_ctx.tokens import TokenCounter, default_counter

__all__ = ["PostgresStore"]

_DERIVED_TABLES: Final = ("holon_turns", "holon_token_counts", "holon_work_item_states",
                          "holon_wait_states", "holon_high_turns")
#: Buffered rows that force an insert mid-chunk (a chunk of 512 records makes at most ~1k rows;
#: this only bounds memory for a backend driven without prefetch).
_PENDING_ROWS: Final = 4096
_PAGE: Final = 2048

_record_decoder = msgspec.json.Decoder(Record)
_wi_decoder = msgspec.json.Decoder(WorkItemState)
_wait_decoder = msgspec.json.Decoder(WaitState)

#: A record row with its count. The count is a scalar subquery, not a join: a join lets the planner
#: hash the session's whole token_counts (O(history)) when it guesses the window is large.
_COLS = ("r.pos, r.ref, r.turn_seq, r.line, (SELECT c.tokens FROM holon_token_counts c "
         "WHERE c.sid=r.sid AND c.counter=%(counter)s AND c.pos=r.pos)")
_ROW = f"SELECT {_COLS} FROM holon_records r "
#: turns_before, and the records of those turns in the same round trip (see there). The turns'
#: positions are an array, not a join, and the limits are `pos + 0`: written so that a planner
#: that underestimates the session has no bad plan to pick (see RFC 0009).
_TURNS_AND_RECORDS = (
    "WITH t AS MATERIALIZED ({turns}) "
    f"SELECT {_COLS}, r.kind = 'turn' FROM holon_records r WHERE r.sid=%(sid)s AND "
    "(r.pos = ANY(ARRAY(SELECT pos FROM t)) OR (r.turn_seq BETWEEN (SELECT min(seq) FROM t) "
    "AND (SELECT max(seq) FROM t) AND r.pos + 0 < %(lim)s AND r.kind <> 'turn'))")
#: The advisory lock space of compactions (``pg_advisory_lock(class, session)``): "HOLC".
_COMPACTION_LOCK_CLASS: Final = 0x484F4C43
_INT4: Final = 2**31
_TURNS_BEFORE = ("SELECT pos, seq FROM holon_turns WHERE sid=%(sid)s AND seq<%(seq)s "
                 "AND pos + 0 < %(lim)s ORDER BY seq DESC LIMIT %(n)s")
_LATEST_TURN = ("SELECT pos, seq FROM holon_turns WHERE sid=%(sid)s AND pos<%(lim)s "
                "ORDER BY pos DESC LIMIT 1")


#: Records of an append retried as a whole when its connection dies (a runtime's appends are a
#: turn's few records; an import's batches are larger and are run again by the caller).
_RETRIED: Final = 4096


def _same_record(given: Record, held: Record, renumber_turns: bool) -> bool:
    """Whether ``held`` (a record in the ledger) is ``given`` as the writer stored it: the
    fields the writer fills in when a record leaves them out (owning turn, origin, trust, and a
    renumbered turn's sequence number) are taken from ``held``; every other field must match."""
    filled: dict[str, Any] = {name: getattr(held, name) for name in ("turn_id", "origin", "trust")
                              if hasattr(given, name) and getattr(given, name) is None}
    if renumber_turns and isinstance(given, Turn) and isinstance(held, Turn):
        filled["seq"] = held.seq
    return type(given) is type(held) and (
        msgspec.structs.replace(given, **filled) if filled else given) == held


class PostgresStore:
    """A session's ledger in PostgreSQL: ``PostgresStore(url_or_connection, session=KEY)``.

    ``create``: make the session when it does not exist (else StoreError). A connection passed in
    must be in autocommit mode; it stays the caller's (``close`` does not close it). The schema is
    created or migrated on first use (``holon-ctx db migrate`` does it ahead of time).
    ``durable``: on a connection opened from a URL, every commit waits for the server's disk as
    the server is configured to (the default: an acknowledged append survives a crash of the
    server, RFC 0026 §4); ``durable=False`` lets the server acknowledge a commit before it is
    flushed (``synchronous_commit = off``: a server crash may lose the newest fraction of a
    second of commits). The session's episode and continuity stores share the connection, so its
    commits stay in one order either way.
    """

    def __init__(self, source: str | Any, *, session: str, counter: TokenCounter | None = None,
                 create: bool = True, durable: bool = True) -> None:
        self._h = SessionHandle(source, session, create=create, durable=durable)
        self.where, self.session, self.sid = self._h.where, session, self._h.sid
        #: Whether opening made the session (a failed first import deletes it again).
        self.created = self._h.created
        self._counter = counter or default_counter()
        self._counter_id = self._counter.identity
        self._decoded = DecodedRecords(self._counter)
        self._open_waits = OpenWaits(self)
        self._rows = self._h.rows
        #: ``((lo_seq, hi_seq, limit_pos), records)`` read ahead by turns_before.
        self._owned: tuple[tuple[int, int, int], list[StoredRecord]] | None = None
        #: What this store knows of its ledger as of its last append (postgres/appends.py):
        #: while nobody else appends, a small batch is one statement.
        self._known: Known | None = None
        self._unique_violation = psycopg_module().errors.UniqueViolation
        self._reset_batch()

    def _one(self, sql: str, args: dict[str, Any] | tuple[Any, ...]) -> Any:
        found = self._rows(sql, args)
        return found[0] if found else None

    def holds(self, table: str) -> bool:
        """Whether the session has any row in ``table`` (one of schema.SESSION_TABLES): e.g. has
        it archived episodes, sealed an envelope."""
        if table not in SESSION_TABLES:
            raise ValueError(f"not a session table: {table}")
        return self._one(f"SELECT 1 FROM {table} WHERE sid=%s LIMIT 1", (self.sid,)) is not None

    @property
    def connection(self) -> Any:
        """The psycopg connection (for the session's episode and continuity stores)."""
        return self._h.conn

    def epoch_store(self) -> PostgresEpochStore:
        """The session projection's re-plan state, in this session's rows, on this store's
        connection (``epoch_store_for`` asks for it; closing it leaves the connection open)."""
        return PostgresEpochStore(self._h.conn, session=self.session, create=False)

    def usage_store(self) -> PostgresUsageStore:
        """Usage observations (RFC 0022), in this session's rows, on this store's connection
        (``usage_store_for`` asks for it; closing it leaves the connection open)."""
        return PostgresUsageStore(self._h.conn, session=self.session, create=False)

    # -- append backend -------------------------------------------------------------------
    @property
    def counter_identity(self) -> str:
        return self._counter_id

    def use_counter(self, counter: TokenCounter) -> None:
        """Count with ``counter`` from now on (as ``SqliteStore.use_counter``; counts a read
        made are written with the next append)."""
        if counter.identity == self._counter_id:
            return
        self._counter, self._counter_id = counter, counter.identity
        self._decoded = DecodedRecords(counter)

    def _reset_batch(self) -> None:
        self._batch_next: int | None = None
        self._appended = 0
        self._buf: dict[str, list[tuple[Any, ...]]] = {
            "records": [], "counts": [], "turns": [], "wis": [], "waits": [], "high": [],
            "recounts": []}
        self._pending_refs: set[str] = set()
        self._pending_turns: dict[str, TurnInfo] = {}
        self._pending_last: TurnInfo | None = None
        self._pending_wis: dict[str, WorkItemState] = {}
        self._pending_waits: dict[str, WaitState] = {}
        #: The newest turn as of this batch's rows (kept across flushes, for what it learns).
        self._batch_last: TurnInfo | None = None
        self._clear_prefetched()

    def _clear_prefetched(self) -> None:
        self._known_refs: dict[str, bool] = {}
        self._known_turns: dict[str, TurnInfo | None] = {}
        self._known_wis: dict[str, WorkItemState | None] = {}
        self._known_waits: dict[str, WaitState | None] = {}

    def next_pos(self) -> int:
        if self._batch_next is not None:
            return self._batch_next + self._appended
        return self.end_pos()

    def prefetch(self, lookups: Lookups) -> None:
        """Answer a chunk's lookups in one round trip (see :mod:`..ledger.writer`).

        Buffered rows are inserted first, so the answers describe everything appended before the
        chunk; the chunk's own rows are answered from the pending sets, which are checked first.
        """
        self._flush()
        sid = self.sid
        refs, turn_ids = list(lookups.refs), list(lookups.turn_ids)
        wait_ids, wids = list(lookups.wait_ids), list(lookups.work_item_ids)
        queries = [
            ("SELECT ref FROM holon_records WHERE sid=%s AND ref = ANY(%s)", (sid, refs)),
            ("SELECT id, seq, pos, work_item_id FROM holon_turns WHERE sid=%s AND id = ANY(%s)",
             (sid, turn_ids)),
            ("SELECT DISTINCT ON (wait_id) wait_id, state FROM holon_wait_states WHERE sid=%s "
             "AND wait_id = ANY(%s) ORDER BY wait_id, pos DESC", (sid, wait_ids)),
            ("SELECT DISTINCT ON (work_item_id) work_item_id, state FROM holon_work_item_states "
             "WHERE sid=%s AND work_item_id = ANY(%s) ORDER BY work_item_id, pos DESC",
             (sid, wids))]
        wanted = [q for q, keys in zip(queries, (refs, turn_ids, wait_ids, wids), strict=True)
                  if keys]
        answers = iter(self._h.batch(wanted))
        if refs:
            present = {r for (r,) in next(answers)}
            self._known_refs = {r: r in present for r in refs}
        if turn_ids:
            self._known_turns = dict.fromkeys(turn_ids)
            for row in next(answers):
                self._known_turns[row[0]] = TurnInfo(*row)
        if wait_ids:
            self._known_waits = dict.fromkeys(wait_ids)
            for wait_id, state in next(answers):
                self._known_waits[wait_id] = _wait_decoder.decode(state)
        if wids:
            self._known_wis = dict.fromkeys(wids)
            for wid, state in next(answers):
                self._known_wis[wid] = _wi_decoder.decode(state)

    def has_ref(self, ref: str) -> bool:
        if ref in self._pending_refs:
            return True
        known = self._known_refs.get(ref)
        if known is not None:
            return known
        return self._one("SELECT 1 FROM holon_records WHERE sid=%s AND ref=%s",
                         (self.sid, ref)) is not None

    def find_turn(self, turn_id: str) -> TurnInfo | None:
        hit = self._pending_turns.get(turn_id)
        if hit is not None:
            return hit
        if turn_id in self._known_turns:
            return self._known_turns[turn_id]
        row = self._one("SELECT id, seq, pos, work_item_id FROM holon_turns WHERE sid=%s AND id=%s",
                        (self.sid, turn_id))
        return None if row is None else TurnInfo(*row)

    def last_turn(self) -> TurnInfo | None:
        if self._pending_last is not None:
            return self._pending_last
        row = self._one("SELECT id, seq, pos, work_item_id FROM holon_turns WHERE sid=%s "
                        "ORDER BY seq DESC LIMIT 1", (self.sid,))
        self._batch_last = None if row is None else TurnInfo(*row)
        return self._batch_last

    def wait_state(self, wait_id: str) -> WaitState | None:
        hit = self._pending_waits.get(wait_id)
        if hit is not None:
            return hit
        if wait_id in self._known_waits:
            return self._known_waits[wait_id]
        row = self._one("SELECT state FROM holon_wait_states WHERE sid=%s AND wait_id=%s "
                        "ORDER BY pos DESC LIMIT 1", (self.sid, wait_id))
        return None if row is None else _wait_decoder.decode(row[0])

    def insert(self, row: Row, counter_identity: str) -> None:
        self._buf["records"].append((self.sid, *record_values(row)))
        self._pending_refs.add(row.ref)
        self._buffer_derived(row, counter_identity)
        self._appended += 1
        if len(self._buf["records"]) >= _PENDING_ROWS:
            self._flush()

    def _buffer_derived(self, row: Row, counter_identity: str) -> None:
        """The rows derived from ``row`` (count, turn, work-item and wait state), buffered."""
        sid, buf = self.sid, self._buf
        for table, values in derived_values(row, counter_identity):
            buf[table].append((sid, *values))
        if row.turn is not None and isinstance(row.record, Turn):
            self._pending_turns[row.turn.id] = row.turn
            self._pending_last = self._batch_last = row.turn
        if row.work_item_state is not None:
            self._pending_wis[row.work_item_state.work_item_id] = row.work_item_state
        if row.wait_state is not None:
            self._pending_waits[row.wait_state.wait_id] = row.wait_state
        if len(buf["counts"]) >= _PENDING_ROWS:
            self._flush()

    _INSERTS: Final = {
        "records": ("holon_records", "INSERT INTO holon_records VALUES (%s,%s,%s,%s,%s,%s,%s)"),
        "counts": ("holon_token_counts", "INSERT INTO holon_token_counts VALUES (%s,%s,%s,%s)"),
        "turns": ("holon_turns", "INSERT INTO holon_turns VALUES (%s,%s,%s,%s,%s,%s)"),
        "wis": ("holon_work_item_states",
                "INSERT INTO holon_work_item_states VALUES (%s,%s,%s,%s)"),
        "waits": ("holon_wait_states", "INSERT INTO holon_wait_states VALUES (%s,%s,%s,%s,%s)"),
        # Never through COPY (it has no ON CONFLICT): session.insert sends it as INSERTs.
        "high": ("holon_high_turns",
                 "INSERT INTO holon_high_turns VALUES (%s,%s,%s) ON CONFLICT (sid, seq) DO NOTHING"),
        # Counts a read made under this counter (use_counter); another process may have written
        # the same ones, so conflicts are skipped (never through COPY either).
        "recounts": ("holon_token_counts",
                     "INSERT INTO holon_token_counts VALUES (%s,%s,%s,%s) "
                     "ON CONFLICT (sid, counter, pos) DO NOTHING"),
    }

    def _flush(self, end_pos: int | None = None) -> None:
        """Insert the buffered rows (inside the batch's transaction), and at the end of a batch
        its new ``end_pos`` with them; the pending sets and the prefetched answers go too: from
        now on the database answers for those rows."""
        self._h.insert([(*self._INSERTS[name], rows) for name, rows in self._buf.items()],
                       after=[] if end_pos is None else [
                           ("UPDATE holon_sessions SET end_pos=%s WHERE sid=%s",
                            (end_pos, self.sid))])
        for rows in self._buf.values():
            rows.clear()
        self._pending_refs.clear()
        self._pending_turns.clear()
        self._pending_wis.clear()
        self._pending_waits.clear()
        self._clear_prefetched()

    def append_lines(self, items: Iterable[tuple[int | None, Record]], *, source: str,
                     renumber_turns: bool = False, expect_end: int | None = None) -> int:
        """Append ``(line, record)`` pairs in one transaction. Idempotent by record id (RFC
        0027): a record already in the ledger as it is given again (its commit landed but the
        caller saw an error) is not appended twice, and the call succeeds; another record under
        a taken id is refused as a duplicate. A batch whose connection dies is retried once on a
        new connection. Both hold for a batch of up to ``_RETRIED`` records: a bulk import is not
        held in memory to be read twice (it is all or nothing: its caller sees whether it
        landed)."""
        it = iter(items)
        head = list(itertools.islice(it, _RETRIED + 1))
        if len(head) > _RETRIED:
            return self._append_once(itertools.chain(head, it), source, renumber_turns,
                                     expect_end)
        try:
            return self._append_once(head, source, renumber_turns, expect_end)
        except ConnectionLost:
            # The commit may have landed: the retry skips what is already in the ledger.
            return self._append_given_again(head, source, renumber_turns, None)
        except LedgerMovedError:
            # Another writer's records may equal these (ids minted at the same position): they
            # are not these being given again.
            raise
        except LedgerFormatError as exc:
            return self._append_given_again(head, source, renumber_turns, exc)

    def _append_given_again(self, items: list[tuple[int | None, Record]], source: str,
                            renumber_turns: bool, refused: LedgerFormatError | None) -> int:
        """``items`` without those the ledger already holds as given, appended; ``refused``:
        the error the whole batch met (raised again when the ledger holds none of them as
        given, so the error stands for what it says)."""
        self._known = None
        refs = [record_ref(r) for _, r in items]
        held = {ref: _record_decoder.decode(line) for ref, line in self._rows(
            "SELECT ref, line FROM holon_records WHERE sid=%s AND ref = ANY(%s)",
            (self.sid, refs), binary=True)}
        rest = [(line, r) for (line, r), ref in zip(items, refs, strict=True)
                if ref not in held or not _same_record(r, held[ref], renumber_turns)]
        if refused is not None and len(rest) == len(items):
            raise refused
        return len(items) - len(rest) + (self._append_once(rest, source, renumber_turns)
                                          if rest else 0)

    def _append_once(self, items: Iterable[tuple[int | None, Record]], source: str,
                     renumber_turns: bool, expect_end: int | None = None) -> int:
        it = iter(items)
        head = list(itertools.islice(it, FAST_BATCH + 1))
        known = self._known
        if len(head) <= FAST_BATCH and (expect_end is None or (
                known is not None and known.end == expect_end)):
            # One statement that appends only if the ledger still ends where the known facts
            # say: an expected end is checked by it too (else the locked path checks it).
            done = self._append_if_end(head, source, renumber_turns)
            if done is not None:
                return done
            items = head
        else:
            items = itertools.chain(head, it)
        learned: list[Known] = []

        def batch() -> int:
            # The lock first, alone: the newest turn must be read by a later statement. One
            # statement that also read it (a lateral join) saw the turns as of before it waited
            # for the lock, and two appenders took the same sequence number (the stress test).
            row = self._one("SELECT end_pos FROM holon_sessions WHERE sid=%s FOR UPDATE",
                            (self.sid,))
            if row is None:
                raise StoreError(f"{self.where}: session {quote_value(self.session)} was deleted")
            self._batch_next = int(row[0])
            n = append_records(self, self._counter, items, source=source,
                               renumber_turns=renumber_turns, expect_end=expect_end)
            learned.append(self._facts_of_batch())
            self._buf["recounts"].extend((self.sid, self._counter_id, pos, tokens)
                                         for pos, tokens in self._decoded.take_recounted())
            self._flush(end_pos=self._batch_next + self._appended)
            return n
        self._known = None
        try:
            n = self._h.transaction(batch)
        finally:
            self._reset_batch()
        # Committed: what the batch saw under the lock is what the ledger holds at its end.
        self._known = learned[0]
        return n

    def _facts_of_batch(self) -> Known:
        """What a locked batch knows at its end: its turns, refs, waits and work items, and those
        its last chunk looked up (the ledger's newest state, read under the lock)."""
        assert self._batch_next is not None
        known = Known(self._batch_next + self._appended, self._batch_last)
        known.learn(turns=[*(t for t in self._known_turns.values() if t is not None),
                           *self._pending_turns.values()],
                    refs={*(r for r, present in self._known_refs.items() if present),
                          *self._pending_refs},
                    waits={**self._known_waits, **self._pending_waits},
                    work_items={**self._known_wis, **self._pending_wis})
        return known

    def _append_if_end(self, items: list[tuple[int | None, Record]], source: str,
                       renumber_turns: bool) -> int | None:
        """A small batch in one statement, when the known facts answer its checks and nobody
        appended since (postgres/appends.py); None: take the locked path."""
        known = self._known
        if known is None or not items or self._decoded.recounted:
            # Counts a read made under a new counter go in with the locked path's rows.
            return None
        spec = Speculative(known)
        try:
            n = append_records(spec, self._counter, items, source=source,
                               renumber_turns=renumber_turns)
        except (Unknown, LedgerFormatError):
            # Not decided here: the locked path asks the database and reports any error.
            return None
        params = append_params(self.sid, known.end, spec.rows, self._counter_id)

        def run() -> int:
            try:
                (count,), = self._h.conn.execute(APPEND_IF_END, params).fetchall()
                return int(count)
            except self._unique_violation:
                return -1  # a ref already in the ledger: the locked path reports it
        matched = self._h.call(run)
        if matched != 1:
            self._known = None
            return None
        known.advanced(spec.rows, spec.last_turn())
        return n

    def append(self, records: Iterable[Record], *, source: str = "<append>",
               renumber_turns: bool = False, expect_end: int | None = None) -> int:
        return self.append_lines(((None, r) for r in records), source=source,
                                 renumber_turns=renumber_turns, expect_end=expect_end)

    def rebuild_derived(self) -> None:
        """Drop the session's derived rows and recompute them from its records, in one
        transaction holding the append lock (as ``SqliteStore.rebuild_derived``: the records are
        replayed through a scratch MemoryStore, so derivation runs the append path's code)."""
        from holon_ctx.ledger.memory import MemoryStore  # noqa: PLC0415 - avoids an import cycle

        def run() -> None:
            self._one("SELECT end_pos FROM holon_sessions WHERE sid=%s FOR UPDATE", (self.sid,))
            scratch = MemoryStore(self._counter)
            scratch.append(self.iter_records(), source=self.where)
            for table in _DERIVED_TABLES:
                self._rows(f"DELETE FROM {table} WHERE sid=%s", (self.sid,))
            for row in scratch.derived_rows():
                self._buffer_derived(row, self._counter_id)
            self._flush()
        try:
            self._h.transaction(run)
        finally:
            self._reset_batch()
            self._decoded.clear()
            self._open_waits.reset()

    # -- reads ----------------------------------------------------------------------------
    def _records(self, where: str, args: dict[str, Any]) -> list[StoredRecord]:
        args["counter"] = self._counter_id
        stored = self._decoded.stored
        return [stored(*row) for row in self._rows(_ROW + where, args, binary=True)]

    def end_pos(self) -> int:
        row = self._one("SELECT end_pos FROM holon_sessions WHERE sid=%s", (self.sid,))
        if row is None:
            raise StoreError(f"{self.where}: session {quote_value(self.session)} was deleted")
        end = int(row[0])
        if self._known is not None and self._known.end != end:
            # Another writer appended: what this store knew may no longer hold.
            self._known = None
        return end

    def get(self, ref: str) -> StoredRecord | None:
        # Records never change, and tokens come from this store's counter: a hit is the answer.
        hit = self._decoded.by_ref(ref)
        if hit is not None:
            return hit
        found = self._records("WHERE r.sid=%(sid)s AND r.ref=%(ref)s", {"ref": ref})
        return found[0] if found else None

    def turn(self, turn_id: str) -> StoredRecord | None:
        return self.get(f"turn:{turn_id}")

    def next_turn_pos(self, seq: int) -> int | None:
        row = self._one("SELECT pos FROM holon_turns WHERE sid=%s AND seq>%s ORDER BY seq LIMIT 1",
                        (self.sid, seq))
        return None if row is None else int(row[0])

    def latest_turn(self, limit_pos: int) -> StoredRecord | None:
        """The turn; its records come back in the same round trip for the ``records_of_turns``
        call that follows (the projector reads the current turn, then its records)."""
        found = self._turns_and_records(_LATEST_TURN, {"lim": limit_pos})
        return found[0] if found else None

    def turns_before(self, seq: int, count: int, limit_pos: int) -> list[StoredRecord]:
        """The turns, newest first. The records those turns own come back in the same round trip
        and answer the ``records_of_turns`` call that follows (the projector reads a page of
        turns and then their records: one round trip instead of two)."""
        if count <= 0:
            return []
        return self._turns_and_records(_TURNS_BEFORE, {"seq": seq, "lim": limit_pos, "n": count})

    def _turns_and_records(self, turns_sql: str, args: dict[str, Any]) -> list[StoredRecord]:
        """The turns ``turns_sql`` selects, newest first, and (kept for records_of_turns) the
        records they own below ``args["lim"]``."""
        args.update(sid=self.sid, counter=self._counter_id)
        stored = self._decoded.stored
        turns: list[StoredRecord] = []
        owned: list[StoredRecord] = []
        for *row, is_turn in self._rows(_TURNS_AND_RECORDS.format(turns=turns_sql), args,
                                        binary=True):
            (turns if is_turn else owned).append(stored(*row))
        turns.sort(key=lambda r: -(r.turn_seq or 0))
        owned.sort(key=lambda r: r.pos)
        if turns:
            # Records never change below limit_pos (committed positions are a prefix), so the
            # answer stays right; it is kept for the one call that asks exactly for it.
            self._owned = ((turns[-1].turn_seq or 0, turns[0].turn_seq or 0, args["lim"]), owned)
        return turns

    def records_of_turns(self, lo_seq: int, hi_seq: int, limit_pos: int) -> list[StoredRecord]:
        if self._owned is not None and self._owned[0] == (lo_seq, hi_seq, limit_pos):
            found = self._owned[1]
            self._owned = None
            return found
        # Neither the limit nor the order may suit the primary key (sid, pos): a planner that
        # underestimates the session (one newer than the statistics) would walk it from the
        # session's first record instead of searching the turn range. So `pos + 0`, and the
        # window (a few hundred rows) is sorted here.
        found = self._records(
            "WHERE r.sid=%(sid)s AND r.turn_seq BETWEEN %(lo)s AND %(hi)s AND r.pos + 0 < %(lim)s "
            "AND r.kind <> 'turn'", {"lo": lo_seq, "hi": hi_seq, "lim": limit_pos})
        found.sort(key=lambda r: r.pos)
        return found

    def records_between(self, lo_pos: int, hi_pos: int) -> list[StoredRecord]:
        return self._records("WHERE r.sid=%(sid)s AND r.pos>=%(lo)s AND r.pos<%(hi)s ORDER BY r.pos",
                             {"lo": lo_pos, "hi": hi_pos})

    def high_turns_before(self, seq: int, count: int, limit_pos: int) -> list[StoredRecord]:
        if count <= 0:
            return []
        # Arrays rather than joins, and `pos + 0`, as in turns_before (RFC 0009: no bad plan for
        # a session the statistics underestimate).
        return self._records(
            "WHERE r.sid=%(sid)s AND r.pos = ANY(ARRAY(SELECT t.pos FROM holon_turns t WHERE "
            "t.sid=%(sid)s AND t.seq = ANY(ARRAY(SELECT seq FROM holon_high_turns WHERE "
            "sid=%(sid)s AND seq<%(seq)s AND pos + 0 < %(lim)s ORDER BY seq DESC "
            "LIMIT %(n)s)))) ORDER BY r.turn_seq DESC",
            {"seq": seq, "lim": limit_pos, "n": count})

    def latest_operator_turn(self, before_seq: int, limit_pos: int) -> StoredRecord | None:
        found = self._records(
            "WHERE r.sid=%(sid)s AND r.pos = (SELECT pos FROM holon_turns WHERE sid=%(sid)s "
            "AND intent AND seq<%(seq)s AND pos + 0 < %(lim)s ORDER BY seq DESC LIMIT 1)",
            {"seq": before_seq, "lim": limit_pos})
        return found[0] if found else None

    def work_item_state(self, work_item_id: str, limit_pos: int | None = None) -> WorkItemState | None:
        if limit_pos is None and self._batch_next is not None:
            hit = self._pending_wis.get(work_item_id)
            if hit is not None:
                return hit
            if work_item_id in self._known_wis:
                return self._known_wis[work_item_id]
        row = self._one(
            "SELECT state FROM holon_work_item_states WHERE sid=%s AND work_item_id=%s AND pos<%s "
            "ORDER BY pos DESC LIMIT 1",
            (self.sid, work_item_id, limit_pos if limit_pos is not None else 1 << 62))
        return None if row is None else _wi_decoder.decode(row[0])

    def open_waits(self, limit_pos: int) -> list[WaitState]:
        return self._open_waits.at(limit_pos)

    # WaitTransitions, for OpenWaits.
    def initial_open_waits(self) -> tuple[int, list[bytes]]:
        rows = self._rows(
            "SELECT pos, status, state FROM (SELECT DISTINCT ON (wait_id) pos, status, state "
            "FROM holon_wait_states WHERE sid=%s ORDER BY wait_id, pos DESC) latest",
            (self.sid,))
        seen = max((int(r[0]) for r in rows), default=-1) + 1
        return seen, [r[2] for r in rows if r[1] == "open"]

    def transitions_since(self, seen: int) -> list[tuple[int, str, str, bytes]]:
        return self._rows("SELECT pos, wait_id, status, state FROM holon_wait_states "
                          "WHERE sid=%s AND pos>=%s ORDER BY pos", (self.sid, seen))

    def changed_waits(self, lo: int, hi: int) -> dict[str, tuple[str, bytes] | None]:
        changed: dict[str, tuple[str, bytes] | None] = {}
        for wait_id, status, state in self._rows(
                "SELECT c.wait_id, l.status, l.state FROM (SELECT DISTINCT wait_id FROM "
                "holon_wait_states WHERE sid=%(sid)s AND pos>=%(lo)s AND pos<%(hi)s) c "
                "LEFT JOIN LATERAL (SELECT status, state FROM holon_wait_states WHERE sid=%(sid)s "
                "AND wait_id=c.wait_id AND pos<%(lo)s ORDER BY pos DESC LIMIT 1) l ON true",
                {"sid": self.sid, "lo": lo, "hi": hi}):
            changed[wait_id] = None if status is None else (status, state)
        return changed

    def latest_environment(self, limit_pos: int) -> StoredRecord | None:
        found = self._records("WHERE r.sid=%(sid)s AND r.kind='environment' AND r.pos<%(lim)s "
                              "ORDER BY r.pos DESC LIMIT 1", {"lim": limit_pos})
        return found[0] if found else None

    def pins(self, limit_pos: int, count: int) -> list[StoredRecord]:
        if count <= 0:
            return []
        found = self._records("WHERE r.sid=%(sid)s AND r.kind='pin' AND r.pos<%(lim)s "
                              "ORDER BY r.pos DESC LIMIT %(n)s", {"lim": limit_pos, "n": count})
        return found[::-1]

    def iter_records(self) -> Iterator[Record]:
        """Every record in order, as of the call (a page of positions per round trip)."""
        end, pos = self.end_pos(), 0
        while pos < end:
            rows = self._rows("SELECT pos, line FROM holon_records WHERE sid=%s AND pos>=%s "
                              "AND pos<%s ORDER BY pos LIMIT %s", (self.sid, pos, end, _PAGE),
                              binary=True)
            if not rows:
                return
            for _, line in rows:
                yield _record_decoder.decode(line)
            pos = int(rows[-1][0]) + 1

    def stats(self) -> LedgerStats:
        sid, counter = self.sid, self._counter_id
        kinds = dict(self._rows("SELECT kind, count(*) FROM holon_records WHERE sid=%s "
                                "GROUP BY kind", (sid,)))
        sums = "SELECT r.{0}, sum(t.tokens) FROM holon_records r JOIN holon_token_counts t ON " \
               "t.sid=r.sid AND t.pos=r.pos AND t.counter=%s WHERE r.sid=%s GROUP BY r.{0}"
        tokens = {k: int(v) for k, v in self._rows(sums.format("kind"), (counter, sid))}
        trust = {k: int(v) for k, v in self._rows(sums.format("trust"), (counter, sid))}
        # Records with no count under this store's counter: recount, as reads do.
        for kind, trust_name, line in self._rows(
                "SELECT r.kind, r.trust, r.line FROM holon_records r LEFT JOIN holon_token_counts t "
                "ON t.sid=r.sid AND t.counter=%s AND t.pos=r.pos WHERE r.sid=%s "
                "AND t.tokens IS NULL ORDER BY r.pos", (counter, sid)):
            n = self._counter.count(record_body(_record_decoder.decode(line)))
            tokens[kind] = tokens.get(kind, 0) + n
            trust[trust_name] = trust.get(trust_name, 0) + n
        turns = int(self._one("SELECT count(*) FROM holon_turns WHERE sid=%s", (sid,))[0])
        return LedgerStats(turns=turns, records=sum(kinds.values()), records_by_kind=kinds,
                           tokens_by_kind=tokens, tokens_by_trust=trust, counter=counter)

    @contextmanager
    def compaction_lock(self) -> Iterator[None]:
        """Held by a compaction from its first read to its last write: a session-level advisory
        lock keyed by the session, so one compaction at a time across processes and hosts;
        appends and reads never wait for it (holon_ctx.ledger.compaction_lock)."""
        key = {"cls": _COMPACTION_LOCK_CLASS, "obj": self.sid % _INT4}
        wait_for(lambda: bool(self._one("SELECT pg_try_advisory_lock(%(cls)s, %(obj)s)", key)[0]),
                 lock_timeout(), self.where)
        try:
            yield
        finally:
            # A connection that died mid-compaction released the lock with it: the error that
            # ended the compaction is the one to report, not the unlock's.
            with contextlib.suppress(StoreError):
                self._one("SELECT pg_advisory_unlock(%(cls)s, %(obj)s)", key)

    def close(self) -> None:
        self._h.close()
