"""One-statement appends: a batch checked against what the store knows, written in one round trip.

Why. The locked append (RFC 0009) takes the session row ``FOR UPDATE``, reads the newest turn,
asks the batch's lookups, inserts and commits: six round trips for a runtime's one-record append,
most of a turn's time on a busy server (issue 29). A store that appends again and again to its
own session already knows the answers: the ledger's end and newest turn, the turns, refs, waits
and work items it has seen — facts that stay true for as long as nobody else appends.

How (RFC 0026). :class:`Known` holds those facts as of one ledger end. A small batch is checked
against them alone (:class:`Speculative`, the append path's backend: a question it cannot answer
gives up) and written by :data:`APPEND_IF_END`, one statement that moves ``end_pos`` from the
known end to the new one *only if it is still the known end*, and inserts the rows only when it
did. So the facts the batch was checked against held when it was written, or nothing was written
(another writer appended meanwhile: the statement inserts nothing and reports it). A new record
is assumed not to be in the ledger yet; the unique index on refs checks that in the same
statement. Whatever goes wrong (a question the facts cannot answer, a rule the batch breaks, a
duplicate ref, another writer) the store falls back to the locked append, which checks against
the database and reports the error as before: the one-statement path never decides an error.

Facts are learned from the store's own appends (the locked one primes them) and forgotten when
a read shows another end than the known one. They are bounded: a fact not kept is a question the
next batch cannot answer, so it takes the locked path once and learns again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

import msgspec

from holon_ctx.ledger.calls import call_marks
from holon_ctx.ledger.records import OPERATOR_TRIGGERS, Turn
from holon_ctx.ledger.state import TurnInfo, WaitState, WorkItemState
from holon_ctx.ledger.writer import Row

__all__ = ["APPEND_IF_END", "FAST_BATCH", "Known", "Speculative", "Unknown", "append_params",
           "derived_values", "record_values"]

#: Batches up to this many records may take the one-statement path (a runtime's appends are a
#: few records; an import takes the locked path and COPY).
FAST_BATCH: Final = 64
#: Facts of each kind kept (turns, refs, waits, work items); past it, that kind starts over.
_KEEP: Final = 4096
_INTENT_TRIGGERS = frozenset(OPERATOR_TRIGGERS - {"approval_decision"})
_encode = msgspec.json.encode

#: The whole append in one statement (autocommit: its own transaction). ``s`` takes the session
#: row (waiting behind an appender that holds it) and matches only if ``end_pos`` is still the
#: known end; every insert joins ``s``, so with no match nothing is written and the count is 0.
#: Each table's rows come as one JSON array of objects (``json_to_recordset``; bytea columns in
#: base64, msgspec's form of bytes), not as an array per column: psycopg adapts a list in
#: Python, element by element, and 23 of them were most of the append's client CPU (about
#: 0.1 ms of 0.17 for one execute); one string per table is adapted in C (RFC 0026 decision 3,
#: amended 2026-12-06).
APPEND_IF_END: Final = """
WITH s AS (UPDATE holon_sessions SET end_pos = %(new_end)s
           WHERE sid = %(sid)s AND end_pos = %(old_end)s RETURNING sid),
r AS (INSERT INTO holon_records SELECT s.sid, u.pos, u.ref, u.kind, u.trust, u.seq,
      decode(u.line, 'base64') FROM s, json_to_recordset(%(records)s::json)
      AS u(pos bigint, ref text, kind text, trust text, seq bigint, line text)),
c AS (INSERT INTO holon_token_counts SELECT s.sid, u.* FROM s, json_to_recordset(
      %(counts)s::json) AS u(counter text, pos bigint, tokens integer)),
t AS (INSERT INTO holon_turns SELECT s.sid, u.* FROM s, json_to_recordset(%(turns)s::json)
      AS u(seq bigint, id text, pos bigint, intent boolean, wi text)),
w AS (INSERT INTO holon_work_item_states SELECT s.sid, u.pos, u.id, decode(u.state, 'base64')
      FROM s, json_to_recordset(%(wis)s::json) AS u(pos bigint, id text, state text)),
x AS (INSERT INTO holon_wait_states SELECT s.sid, u.pos, u.id, u.status,
      decode(u.state, 'base64') FROM s, json_to_recordset(%(waits)s::json)
      AS u(pos bigint, id text, status text, state text)),
h AS (INSERT INTO holon_high_turns SELECT s.sid, u.* FROM s, json_to_recordset(%(high)s::json)
      AS u(seq bigint, pos bigint) ON CONFLICT (sid, seq) DO NOTHING),
k AS (INSERT INTO holon_calls SELECT s.sid, u.* FROM s, json_to_recordset(%(calls)s::json)
      AS u(call_id text, pos bigint, state text) ON CONFLICT (sid, call_id) DO UPDATE
      SET pos = excluded.pos, state = excluded.state WHERE holon_calls.pos < excluded.pos)
SELECT count(*) FROM s"""

#: Each table's columns after ``sid``, as :data:`APPEND_IF_END` names them in its JSON rows.
_COLUMNS: Final = {
    "records": ("pos", "ref", "kind", "trust", "seq", "line"),
    "counts": ("counter", "pos", "tokens"),
    "turns": ("seq", "id", "pos", "intent", "wi"),
    "wis": ("pos", "id", "state"),
    "waits": ("pos", "id", "status", "state"),
    "high": ("seq", "pos"),
    "calls": ("call_id", "pos", "state"),
}


def record_values(row: Row) -> tuple[Any, ...]:
    """The ``holon_records`` values of ``row`` after ``sid``."""
    trust = row.record.trust.value if row.record.trust else ""
    return (row.pos, row.ref, row.kind, trust, row.turn_seq, row.line)


def derived_values(row: Row, counter_identity: str) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """``(table, values after sid)`` of the rows derived from ``row``: its count, and its turn,
    work-item state, wait state, high-turn mark and calls' new states when it has them."""
    yield "counts", (counter_identity, row.pos, row.tokens)
    rec = row.record
    if row.turn is not None and isinstance(rec, Turn):
        yield "turns", (rec.seq, rec.id, row.pos, rec.trigger in _INTENT_TRIGGERS, rec.work_item_id)
    if row.work_item_state is not None:
        state = row.work_item_state
        yield "wis", (row.pos, state.work_item_id, _encode(state))
    if row.wait_state is not None:
        wait = row.wait_state
        yield "waits", (row.pos, wait.wait_id, wait.status.value, _encode(wait))
    if row.marks_high and row.turn_seq is not None:
        # In position order, ON CONFLICT DO NOTHING: the first record that marks it wins.
        yield "high", (row.turn_seq, row.pos)
    for call_id, call_state in call_marks(rec):
        yield "calls", (call_id, row.pos, call_state.value)


def append_params(sid: int, old_end: int, rows: list[Row],
                  counter_identity: str) -> dict[str, Any]:
    """:data:`APPEND_IF_END`'s parameters: each table's rows as one JSON array of objects."""
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in _COLUMNS}
    for row in rows:
        tables["records"].append(dict(zip(_COLUMNS["records"], record_values(row), strict=True)))
        for table, values in derived_values(row, counter_identity):
            tables[table].append(dict(zip(_COLUMNS[table], values, strict=True)))
    # One row per call: an upsert may not touch a row twice in one statement (the newest wins).
    tables["calls"] = list({row["call_id"]: row for row in tables["calls"]}.values())
    return {"sid": sid, "old_end": old_end, "new_end": old_end + len(rows),
            **{name: _encode(found).decode() for name, found in tables.items()}}


class Unknown(Exception):
    """A question the known facts cannot answer: the batch takes the locked path."""


class Known:
    """Facts about a session's ledger as of position ``end`` (see the module docstring)."""

    def __init__(self, end: int, last_turn: TurnInfo | None) -> None:
        self.end = end
        self.last_turn = last_turn
        self.turns: dict[str, TurnInfo] = {}
        self.refs: set[str] = set()
        #: Latest state as of ``end``; None: known never opened / never stated.
        self.waits: dict[str, WaitState | None] = {}
        self.work_items: dict[str, WorkItemState | None] = {}
        if last_turn is not None:
            self.turns[last_turn.id] = last_turn

    def learn(self, *, turns: Iterable[TurnInfo] = (), refs: Iterable[str] = (),
              waits: Mapping[str, WaitState | None] | None = None,
              work_items: Mapping[str, WorkItemState | None] | None = None) -> None:
        """Add facts true as of ``end`` (each kind starts over past its bound)."""
        for turn in turns:
            if len(self.turns) >= _KEEP:
                self.turns = {} if self.last_turn is None else {self.last_turn.id: self.last_turn}
            self.turns[turn.id] = turn
        for ref in refs:
            if len(self.refs) >= _KEEP:
                self.refs = set()
            self.refs.add(ref)
        if waits:
            if len(self.waits) + len(waits) > _KEEP:
                self.waits.clear()
            self.waits.update(waits)
        if work_items:
            if len(self.work_items) + len(work_items) > _KEEP:
                self.work_items.clear()
            self.work_items.update(work_items)

    def advanced(self, rows: list[Row], last_turn: TurnInfo | None) -> None:
        """The ledger now also holds ``rows`` (appended at ``end``): learn what they say."""
        self.end += len(rows)
        self.last_turn = last_turn
        self.learn(turns=[r.turn for r in rows if r.turn is not None], refs=[r.ref for r in rows],
                   waits={r.wait_state.wait_id: r.wait_state for r in rows
                          if r.wait_state is not None},
                   work_items={r.work_item_state.work_item_id: r.work_item_state for r in rows
                               if r.work_item_state is not None})


class Speculative:
    """The append path's backend over :class:`Known` facts alone (no database): rows are kept
    for :data:`APPEND_IF_END`. ``has_ref`` says False for a ref it does not know: for a new
    record's own ref the unique index checks it; for a ref that must exist (a pin's target, a
    wait's resolver) the batch fails its check and takes the locked path."""

    def __init__(self, known: Known) -> None:
        self.known = known
        self.rows: list[Row] = []
        self._refs: set[str] = set()
        self._turns: dict[str, TurnInfo] = {}
        self._last: TurnInfo | None = known.last_turn
        self._waits: dict[str, WaitState] = {}
        self._work_items: dict[str, WorkItemState] = {}

    def next_pos(self) -> int:
        return self.known.end + len(self.rows)

    def has_ref(self, ref: str) -> bool:
        return ref in self._refs or ref in self.known.refs

    def find_turn(self, turn_id: str) -> TurnInfo | None:
        found = self._turns.get(turn_id) or self.known.turns.get(turn_id)
        if found is None:
            raise Unknown(f"turn {turn_id}")
        return found

    def last_turn(self) -> TurnInfo | None:
        return self._last

    def work_item_state(self, work_item_id: str) -> WorkItemState | None:
        if work_item_id in self._work_items:
            return self._work_items[work_item_id]
        if work_item_id not in self.known.work_items:
            raise Unknown(f"work item {work_item_id}")
        return self.known.work_items[work_item_id]

    def wait_state(self, wait_id: str) -> WaitState | None:
        if wait_id in self._waits:
            return self._waits[wait_id]
        if wait_id not in self.known.waits:
            raise Unknown(f"wait {wait_id}")
        return self.known.waits[wait_id]

    def insert(self, row: Row, counter_identity: str) -> None:
        del counter_identity  # the store's, given again when the statement is made
        self.rows.append(row)
        self._refs.add(row.ref)
        if row.turn is not None:
            self._turns[row.turn.id] = row.turn
            self._last = row.turn
        if row.wait_state is not None:
            self._waits[row.wait_state.wait_id] = row.wait_state
        if row.work_item_state is not None:
            self._work_items[row.work_item_state.work_item_id] = row.work_item_state
