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

The store is built in two modules: the connection, the batch state, the caches and every read
(``ledger_reads.py``), and here the append side, which fills that batch state.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import msgspec

from holon_ctx.errors import LedgerFormatError, StoreError, quote_value
from holon_ctx.ledger.calls import last_per_call
from holon_ctx.ledger.records import Record, Turn, record_ref
from holon_ctx.ledger.state import TurnInfo, WaitState
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
from holon_ctx.postgres.ledger_reads import _PostgresLedgerBase, _record_decoder, _wait_decoder, _wi_decoder
from holon_ctx.postgres.schema import UPSERT_CALL
from holon_ctx.postgres.session import ConnectionLost

#: The session row, locked as every append locks it first (``appends_held``).
_HOLD: Final = "SELECT end_pos FROM holon_sessions WHERE sid=%s FOR UPDATE"
#: No transaction open on the connection (psycopg's ``TransactionStatus.IDLE``).
_IDLE: Final = 0

__all__ = ["PostgresStore"]

_DERIVED_TABLES: Final = ("holon_turns", "holon_token_counts", "holon_work_item_states",
                          "holon_wait_states", "holon_high_turns", "holon_calls")
#: Buffered rows that force an insert mid-chunk (a chunk of 512 records makes at most ~1k rows;
#: this only bounds memory for a backend driven without prefetch).
_PENDING_ROWS: Final = 4096


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


class PostgresStore(_PostgresLedgerBase):
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

    # -- append backend -------------------------------------------------------------------
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
        # Never through COPY either; a row per statement, so a batch may name a call twice.
        "calls": ("holon_calls", UPSERT_CALL),
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
        self._buf["calls"] = last_per_call(self._buf["calls"])
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

    @contextmanager
    def appends_held(self, writer: object = None) -> Iterator[int]:  # noqa: ARG002 - SqliteStore's
        """The ledger's end, in a transaction holding the session row (the lock every append
        takes first), so no append lands until what the block writes on this connection, or
        commits on another, is committed (holon_ctx.ledger.compaction_lock.appends_held;
        ``writer``, the store that writes in the block, makes no difference here)."""
        self._h.call(lambda: None)  # a connection the server dropped is replaced first
        conn = self._h.conn
        try:
            if conn.info.transaction_status != _IDLE:  # inside the caller's: a savepoint
                with conn.transaction():
                    yield self._held_end(self._one(_HOLD, (self.sid,)))
                return
            # BEGIN and the lock in one round trip (a compaction takes it twice: RFC 0026).
            with conn.pipeline():
                conn.execute("BEGIN")
                held = conn.execute(_HOLD, (self.sid,))
            try:
                yield self._held_end(held.fetchone())
            except BaseException:
                if not conn.closed:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except psycopg_module().Error as exc:  # BEGIN or COMMIT on a connection lost meanwhile
            raise self._h.failed(exc) from None

    def _held_end(self, row: Any) -> int:
        if row is None:
            raise StoreError(f"{self.where}: session {quote_value(self.session)} was deleted")
        return int(row[0])

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
