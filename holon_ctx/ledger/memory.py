"""The in-memory store: the same Protocol as SQLite, for tests and embedding.

Appends are atomic: rows go to a staging list and are published only when the whole batch passed.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TypeVar

import attrs

from holon_ctx.ledger.body import record_body
from holon_ctx.ledger.calls import call_marks
from holon_ctx.ledger.facts import marks_high
from holon_ctx.ledger.records import OPERATOR_TRIGGERS, Environment, Pin, Record, Turn
from holon_ctx.ledger.state import TurnInfo, WaitState, WorkItemState
from holon_ctx.ledger.store import CallRecord, CallState, LedgerStats, StoredRecord
from holon_ctx.ledger.writer import Row, append_records
from holon_ctx.tokens import TokenCounter, default_counter

__all__ = ["MemoryStore"]

_INTENT_TRIGGERS = OPERATOR_TRIGGERS - {"approval_decision"}


class MemoryStore:
    """A ledger held in lists and dicts; rebuilds nothing because nothing is persisted."""

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self._counter = counter or default_counter()
        self._rows: list[StoredRecord] = []
        self._by_ref: dict[str, int] = {}
        self._turn_seqs: list[int] = []  # sorted; parallel to _turn_pos
        self._turn_pos: list[int] = []
        self._turn_by_id: dict[str, TurnInfo] = {}
        self._operator_seqs: list[int] = []
        self._operator_pos: list[int] = []
        self._by_turn_seq: dict[int, list[int]] = {}
        self._wi: dict[str, list[WorkItemState]] = {}
        self._waits: dict[str, list[WaitState]] = {}
        self._env: list[int] = []
        self._pins: list[int] = []
        # The high-turn index: sorted seqs of turns marked high, and the position that marked each.
        self._high_seqs: list[int] = []
        self._high_pos: dict[int, int] = {}
        #: Each call's newest (position, state), and the positions of those still waiting.
        self._calls: dict[str, tuple[int, CallState]] = {}
        self._waiting: dict[str, int] = {}
        self._staged: list[Row] = []
        # Indexes over the staged batch, so a large batch costs O(1) per lookup and a duplicate
        # is found however far back in the batch its first copy is.
        self._staged_refs: set[str] = set()
        self._staged_turns: dict[str, TurnInfo] = {}
        self._staged_last_turn: TurnInfo | None = None
        self._staged_wi: dict[str, WorkItemState] = {}
        self._staged_waits: dict[str, WaitState] = {}

    # -- append backend -------------------------------------------------------------------
    @property
    def counter_identity(self) -> str:
        return self._counter.identity

    def use_counter(self, counter: TokenCounter) -> None:
        """Count with ``counter`` from now on: every record is recounted once, now (the rows
        carry one counter's counts)."""
        if counter.identity == self._counter.identity:
            return
        counts = counter.count_many([record_body(r.record) for r in self._rows])
        self._rows = [attrs.evolve(r, tokens=n) for r, n in zip(self._rows, counts, strict=True)]
        self._counter = counter

    def next_pos(self) -> int:
        return len(self._rows) + len(self._staged)

    def has_ref(self, ref: str) -> bool:
        return ref in self._by_ref or ref in self._staged_refs

    def find_turn(self, turn_id: str) -> TurnInfo | None:
        return self._turn_by_id.get(turn_id) or self._staged_turns.get(turn_id)

    def last_turn(self) -> TurnInfo | None:
        if self._staged_last_turn is not None:
            return self._staged_last_turn
        if not self._turn_pos:
            return None
        rec = self._rows[self._turn_pos[-1]].record
        assert isinstance(rec, Turn)
        return self._turn_by_id[rec.id]

    def work_item_state(self, work_item_id: str, limit_pos: int | None = None) -> WorkItemState | None:
        staged = self._staged_wi.get(work_item_id)
        if staged is not None and (limit_pos is None or staged.pos < limit_pos):
            return staged
        states = self._wi.get(work_item_id, [])
        return _latest_before(states, limit_pos)

    def wait_state(self, wait_id: str) -> WaitState | None:
        staged = self._staged_waits.get(wait_id)
        if staged is not None:
            return staged
        states = self._waits.get(wait_id)
        return states[-1] if states else None

    def insert(self, row: Row, counter_identity: str) -> None:
        del counter_identity  # one counter per store: rows already carry its counts
        self._staged.append(row)
        self._staged_refs.add(row.ref)
        if row.turn is not None:
            self._staged_turns[row.turn.id] = row.turn
            self._staged_last_turn = row.turn
        if row.work_item_state is not None:
            self._staged_wi[row.work_item_state.work_item_id] = row.work_item_state
        if row.wait_state is not None:
            self._staged_waits[row.wait_state.wait_id] = row.wait_state

    def _clear_staged(self) -> None:
        self._staged = []
        self._staged_refs = set()
        self._staged_turns = {}
        self._staged_last_turn = None
        self._staged_wi = {}
        self._staged_waits = {}

    def _publish(self, row: Row) -> None:
        stored = StoredRecord(pos=row.pos, ref=row.ref, record=row.record, tokens=row.tokens,
                              turn_seq=row.turn_seq)
        self._rows.append(stored)
        self._by_ref[row.ref] = row.pos
        rec = row.record
        if row.turn is not None and isinstance(rec, Turn):
            self._turn_seqs.append(row.turn.seq)
            self._turn_pos.append(row.pos)
            self._turn_by_id[rec.id] = row.turn
            if rec.trigger in _INTENT_TRIGGERS:
                self._operator_seqs.append(rec.seq)
                self._operator_pos.append(row.pos)
        elif row.turn_seq is not None:
            self._by_turn_seq.setdefault(row.turn_seq, []).append(row.pos)
        if row.work_item_state is not None:
            self._wi.setdefault(row.work_item_state.work_item_id, []).append(row.work_item_state)
        if row.wait_state is not None:
            self._waits.setdefault(row.wait_state.wait_id, []).append(row.wait_state)
        if row.marks_high and row.turn_seq is not None and row.turn_seq not in self._high_pos:
            self._high_pos[row.turn_seq] = row.pos
            bisect.insort(self._high_seqs, row.turn_seq)
        for call_id, state in call_marks(rec):
            self._calls[call_id] = (row.pos, state)
            self._waiting.pop(call_id, None)
            if state is not CallState.ANSWERED:
                self._waiting[call_id] = row.pos
        if isinstance(rec, Environment):
            self._env.append(row.pos)
        if isinstance(rec, Pin):
            self._pins.append(row.pos)

    def append_lines(self, items: Iterable[tuple[int | None, Record]], *, source: str,
                     renumber_turns: bool = False, expect_end: int | None = None) -> int:
        self._clear_staged()
        try:
            n = append_records(self, self._counter, items, source=source,
                               renumber_turns=renumber_turns, expect_end=expect_end)
        except BaseException:
            self._clear_staged()
            raise
        for row in self._staged:
            self._publish(row)
        self._clear_staged()
        return n

    def append(self, records: Iterable[Record], *, source: str = "<append>",
               renumber_turns: bool = False, expect_end: int | None = None) -> int:
        return self.append_lines(((None, r) for r in records), source=source,
                                 renumber_turns=renumber_turns, expect_end=expect_end)

    # -- reads ----------------------------------------------------------------------------
    def end_pos(self) -> int:
        return len(self._rows)

    def get(self, ref: str) -> StoredRecord | None:
        pos = self._by_ref.get(ref)
        return None if pos is None else self._rows[pos]

    def turn(self, turn_id: str) -> StoredRecord | None:
        return self.get(f"turn:{turn_id}")

    def next_turn_pos(self, seq: int) -> int | None:
        i = bisect.bisect_right(self._turn_seqs, seq)
        return self._turn_pos[i] if i < len(self._turn_pos) else None

    def latest_turn(self, limit_pos: int) -> StoredRecord | None:
        i = bisect.bisect_left(self._turn_pos, limit_pos)
        return self._rows[self._turn_pos[i - 1]] if i else None

    def turns_before(self, seq: int, count: int, limit_pos: int) -> list[StoredRecord]:
        i = bisect.bisect_left(self._turn_seqs, seq)
        out: list[StoredRecord] = []
        while i > 0 and len(out) < count:
            i -= 1
            if self._turn_pos[i] < limit_pos:
                out.append(self._rows[self._turn_pos[i]])
        return out

    def records_of_turns(self, lo_seq: int, hi_seq: int, limit_pos: int) -> list[StoredRecord]:
        lo = bisect.bisect_left(self._turn_seqs, lo_seq)
        hi = bisect.bisect_right(self._turn_seqs, hi_seq)
        positions: list[int] = []
        for seq in self._turn_seqs[lo:hi]:
            positions.extend(p for p in self._by_turn_seq.get(seq, ()) if p < limit_pos)
        positions.sort()
        return [self._rows[p] for p in positions]

    def records_between(self, lo_pos: int, hi_pos: int) -> list[StoredRecord]:
        return self._rows[max(lo_pos, 0):max(hi_pos, 0)]

    def high_turns_before(self, seq: int, count: int, limit_pos: int) -> list[StoredRecord]:
        i = bisect.bisect_left(self._high_seqs, seq)
        out: list[StoredRecord] = []
        while i > 0 and len(out) < count:
            i -= 1
            found = self._high_seqs[i]
            if self._high_pos[found] < limit_pos:
                j = bisect.bisect_left(self._turn_seqs, found)
                out.append(self._rows[self._turn_pos[j]])
        return out

    def latest_operator_turn(self, before_seq: int, limit_pos: int) -> StoredRecord | None:
        i = bisect.bisect_left(self._operator_seqs, before_seq)
        while i > 0:
            i -= 1
            if self._operator_pos[i] < limit_pos:
                return self._rows[self._operator_pos[i]]
        return None

    def open_waits(self, limit_pos: int) -> list[WaitState]:
        out = []
        for states in self._waits.values():
            latest = _latest_before(states, limit_pos)
            if latest is not None and latest.status.value == "open":
                out.append(latest)
        return sorted(out, key=lambda w: w.pos)

    def latest_environment(self, limit_pos: int) -> StoredRecord | None:
        i = bisect.bisect_left(self._env, limit_pos)
        return self._rows[self._env[i - 1]] if i else None

    def pins(self, limit_pos: int, count: int) -> list[StoredRecord]:
        i = bisect.bisect_left(self._pins, limit_pos)
        return [self._rows[p] for p in self._pins[max(0, i - count):i]]

    def waiting_calls(self) -> tuple[int, list[CallRecord]]:
        # Kept in order of their newest record: a call's entry moves to the end when it changes.
        return len(self._rows), [CallRecord(cid, self._calls[cid][1], self._rows[pos])
                                 for cid, pos in self._waiting.items()]

    def call_record(self, call_id: str) -> CallRecord | None:
        found = self._calls.get(call_id)
        return None if found is None else CallRecord(call_id, found[1], self._rows[found[0]])

    def iter_records(self) -> Iterator[Record]:
        return (row.record for row in self._rows)

    def stats(self) -> LedgerStats:
        kinds: Counter[str] = Counter()
        tokens: Counter[str] = Counter()
        trust: Counter[str] = Counter()
        for row in self._rows:
            kind = row.ref.partition(":")[0]
            kinds[kind] += 1
            tokens[kind] += row.tokens
            trust[str(row.record.trust)] += row.tokens
        return LedgerStats(turns=len(self._turn_pos), records=len(self._rows),
                           records_by_kind=dict(kinds), tokens_by_kind=dict(tokens),
                           tokens_by_trust=dict(trust), counter=self.counter_identity)

    def close(self) -> None:
        return None

    def derived_rows(self) -> Iterator[Row]:
        """Each record with its derived values, as the append path produced them."""
        wi = {s.pos: s for states in self._wi.values() for s in states}
        waits = {s.pos: s for states in self._waits.values() for s in states}
        for row in self._rows:
            rec = row.record
            turn = self._turn_by_id.get(rec.id) if isinstance(rec, Turn) else None
            yield Row(pos=row.pos, ref=row.ref, kind=row.ref.partition(":")[0], record=rec,
                      line=b"", turn_seq=row.turn_seq, tokens=row.tokens, turn=turn,
                      work_item_state=wi.get(row.pos), wait_state=waits.get(row.pos),
                      marks_high=row.turn_seq is not None and marks_high(rec))


_S = TypeVar("_S", WorkItemState, WaitState)


def _latest_before(states: list[_S], limit_pos: int | None) -> _S | None:
    for state in reversed(states):
        if limit_pos is None or state.pos < limit_pos:
            return state
    return None
