"""The PostgreSQL ledger store's groundwork and its reads (split from ledger.py): the session's
connection, the counter, the batch state the append side fills (``ledger.py``), and every read.
Reads are one statement each and return rows, not positions; rows already decoded are not decoded
again (:class:`~holon_ctx.ledger.readcache.DecodedRecords`) and the open-wait set is kept
incrementally, as in SQLite. Every read is an index search bounded by its arguments
(``tests/test_postgres.py`` checks the plans). A read consults the batch being appended where it
must (the prefetched work-item states), which is why both halves share one object.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final, TypeVar

import msgspec

from holon_ctx.errors import StoreError, quote_value
from holon_ctx.ledger.body import record_body
from holon_ctx.ledger.compaction_lock import wait_for
from holon_ctx.ledger.locking import lock_timeout
from holon_ctx.ledger.readcache import DecodedRecords, OpenWaits
from holon_ctx.ledger.records import Record
from holon_ctx.ledger.state import TurnInfo, WaitState, WorkItemState
from holon_ctx.ledger.store import CallRecord, CallState, LedgerStats, StoredRecord
from holon_ctx.postgres.ahead import read_ahead
from holon_ctx.postgres.appends import (
    Known,
)
from holon_ctx.postgres.compaction_ahead import compaction_reads, run_alone
from holon_ctx.postgres.connection import psycopg_module
from holon_ctx.postgres.epochs import PostgresEpochStore
from holon_ctx.postgres.schema import SESSION_TABLES
from holon_ctx.postgres.session import MISSING, SessionHandle
from holon_ctx.postgres.usage import PostgresUsageStore
from holon_ctx.tokens import TokenCounter, default_counter

_PAGE: Final = 2048
_T = TypeVar("_T")

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
#: The end and the calls waiting as of it (one statement: one snapshot), each with its newest
#: record; the partial index holds only the calls waiting (postgres/schema.py, version 8).
_WAITING_CALLS = (f"SELECT s.end_pos, c.call_id, c.state, {_COLS} FROM holon_sessions s "
                  "LEFT JOIN (holon_calls c JOIN holon_records r ON r.sid=c.sid AND r.pos=c.pos) "
                  "ON c.sid=s.sid AND c.state <> 'answered' WHERE s.sid=%(sid)s ORDER BY r.pos")
#: The advisory lock space of compactions (``pg_advisory_lock(class, session)``): "HOLC".
_COMPACTION_LOCK_CLASS: Final = 0x484F4C43
_INT4: Final = 2**31
_TURNS_BEFORE = ("SELECT pos, seq FROM holon_turns WHERE sid=%(sid)s AND seq<%(seq)s "
                 "AND pos + 0 < %(lim)s ORDER BY seq DESC LIMIT %(n)s")
_LATEST_TURN = ("SELECT pos, seq FROM holon_turns WHERE sid=%(sid)s AND pos<%(lim)s "
                "ORDER BY pos DESC LIMIT 1")
#: The newest operator turn of all (read ahead: postgres/ahead.py; the partial intent index).
_NEWEST_INTENT = ("WHERE r.sid=%(sid)s AND r.pos = (SELECT pos FROM holon_turns WHERE "
                  "sid=%(sid)s AND intent ORDER BY seq DESC LIMIT 1)")


class _PostgresLedgerBase:
    """The connection, the counter, the batch state and the reads of ``PostgresStore``
    (``holon_ctx.postgres.ledger``, where the class and its append side are)."""

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

    # -- the counter and the batch state ------------------------------------------------
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
            "calls": [], "recounts": []}
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

    # -- reads ----------------------------------------------------------------------------
    def _records(self, where: str, args: dict[str, Any]) -> list[StoredRecord]:
        args["counter"] = self._counter_id
        stored = self._decoded.stored
        return [stored(*row) for row in self._rows(_ROW + where, args, binary=True)]

    def reading_ahead(self, *, records_from: int | None = None,
                      usage: tuple[str, int] | None = None,
                      governed: str | None = None) -> AbstractContextManager[None]:
        """A request's reads in one round trip (``holon_ctx.postgres.ahead``): the end, the
        archive visible at it, the records from ``records_from`` on, the newest operator turn,
        the usage observations ``(model, limit)`` and the governed session's envelope ids,
        answered inside the block by this store and the stores sharing its connection."""
        args = {"counter": self._counter_id}
        return read_ahead(self._h, records=None if records_from is None else (
            _ROW, {**args, "lo": records_from}), intent=(_ROW + _NEWEST_INTENT, args),
            usage=usage, envelopes=governed)

    def end_pos(self) -> int:
        ahead = self._h.ahead("end")
        if ahead is not MISSING:
            end = int(ahead)
        else:
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
        ahead = self._h.ahead("next_turn_pos", seq)  # a compaction's (compaction_ahead.py)
        if ahead is not MISSING:
            return None if ahead is None else int(ahead)
        row = self._one("SELECT pos FROM holon_turns WHERE sid=%s AND seq>%s ORDER BY seq LIMIT 1",
                        (self.sid, seq))
        return None if row is None else int(row[0])

    def latest_turn(self, limit_pos: int) -> StoredRecord | None:
        """The turn; its records come back in the same round trip for the ``records_of_turns``
        call that follows (the projector reads the current turn, then its records)."""
        ahead = self._h.ahead("latest_turn", self._counter_id, limit_pos)  # a compaction's
        if ahead is not MISSING:
            return None if ahead is None else self._decoded.stored(*ahead)
        found = self._turns_and_records(_LATEST_TURN, {"lim": limit_pos})
        return found[0] if found else None

    def turns_before(self, seq: int, count: int, limit_pos: int) -> list[StoredRecord]:
        """The turns, newest first. The records those turns own come back in the same round trip
        and answer the ``records_of_turns`` call that follows (the projector reads a page of
        turns and then their records: one round trip instead of two)."""
        if count <= 0:
            return []
        ahead = self._h.ahead("turns_before", self._counter_id, seq, count, limit_pos)
        if ahead is not MISSING:  # a compaction's read ahead (compaction_ahead.py)
            stored = self._decoded.stored
            return [stored(*row) for row in ahead]
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
        ahead = self._h.ahead("records", self._counter_id)
        if ahead is not MISSING:
            # Read ahead from ``start`` on: committed records never change and their positions
            # are dense, so any range inside the rows read is the answer.
            start, rows = ahead
            if start <= lo_pos and hi_pos <= start + len(rows) and (
                    not rows or int(rows[-1][0]) == start + len(rows) - 1):
                stored = self._decoded.stored
                return [stored(*row) for row in rows[lo_pos - start:max(hi_pos - start, 0)]]
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
        ahead = self._h.ahead("intent", self._counter_id)
        if ahead is not MISSING:
            # The newest operator turn of all, read after the end: the answer for any limit up
            # to that end that it satisfies (it has the highest seq there is); none at all,
            # the answer is none.
            end, rows = ahead
            if limit_pos <= end and (not rows or (
                    int(rows[0][2]) < before_seq and int(rows[0][0]) < limit_pos)):
                return self._decoded.stored(*rows[0]) if rows else None
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

    def waiting_calls(self) -> tuple[int, list[CallRecord]]:
        rows = self._rows(_WAITING_CALLS, {"sid": self.sid, "counter": self._counter_id},
                          binary=True)
        if not rows:
            raise StoreError(f"{self.where}: session {quote_value(self.session)} was deleted")
        end = int(rows[0][0])
        if self._known is not None and self._known.end != end:
            self._known = None  # another writer appended (as end_pos)
        stored = self._decoded.stored
        return end, [CallRecord(cid, CallState(state), stored(*row))
                     for _, cid, state, *row in rows if cid is not None]

    def call_record(self, call_id: str) -> CallRecord | None:
        found = self._rows(f"SELECT c.state, {_COLS} FROM holon_calls c JOIN holon_records r "
                           "ON r.sid=c.sid AND r.pos=c.pos WHERE c.sid=%(sid)s AND "
                           "c.call_id=%(id)s", {"sid": self.sid, "id": call_id,
                                                "counter": self._counter_id}, binary=True)
        return None if not found else CallRecord(call_id, CallState(found[0][0]),
                                                 self._decoded.stored(*found[0][1:]))

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

    def compaction_reads(self, recent_turns: int, governed: str) -> AbstractContextManager[None]:
        """Inside the block, a compaction's reads (of ``recent_turns`` recent turns, sealing for
        governed session ``governed``) answered by this store and the stores sharing its
        connection from one statement run on entry (``holon_ctx.postgres.compaction_ahead``)."""
        return compaction_reads(self._h, counter=self._counter_id, recent_turns=recent_turns,
                                governed=governed)

    def compact_alone(self, fn: Callable[[], _T], *, recent_turns: int, governed: str,
                      stores: Sequence[object]) -> _T | None:
        """``fn()``, a compaction, answered by one statement alone and without the compaction
        lock, or None when it would read anything else or write (``compaction_ahead.run_alone``)
        or when one of ``stores`` (its episode and governed stores) is not on this store's
        connection: a store elsewhere could be written to outside the lock."""
        if not all(isinstance(h := getattr(store, "_h", None), SessionHandle)
                   and h.link is self._h.link and h.sid == self.sid for store in stores):
            return None
        return run_alone(self._h, fn, counter=self._counter_id, recent_turns=recent_turns,
                         governed=governed)

    @contextmanager
    def compaction_lock(self) -> Iterator[None]:
        """Held by a compaction from its first read to its last write: a session-level advisory
        lock keyed by the session, so one compaction at a time across processes and hosts;
        appends and reads never wait for it (holon_ctx.ledger.compaction_lock)."""
        key = {"cls": _COMPACTION_LOCK_CLASS, "obj": self.sid % _INT4}
        # What a request read ahead is as of before the lock: a compaction (another runtime's
        # finished while this one waited) reads the server (the try-lock is a SELECT, which
        # would not drop it; postgres/ahead.py).
        self._h.link.ahead.clear()
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
