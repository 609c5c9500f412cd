"""The ledger's own checks on a SQLite file: is it whole, and does every derived row agree?

:func:`verify_ledger` is what to run after a crash, a ``kill -9`` or a copy of the file, and what
the stress tests run after every killed writer. It reads the file through its own read-only
connection (it never writes, and never needs the write lock) and reports problems as lines:

1. SQLite's ``PRAGMA integrity_check`` (pages, indexes, constraints);
2. the ``records`` table replayed, in order, through the very append path every store uses (into a
   scratch :class:`~holon_ctx.ledger.memory.MemoryStore`): every ledger rule holds again — unique
   refs, rising turn numbers, owning turns before their records, opened waits, pin targets — and
   each row's ``ref``, ``kind``, ``trust`` and position agree with its line;
3. every derived row (``turns``, ``records.turn_seq``, ``token_counts`` under the given counter,
   ``work_item_states``, ``wait_states``, ``high_turns``) equals what the replay derives, with none
   missing or extra.

It holds the whole ledger in memory for the replay (a checker, not a hot path).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import msgspec

from holon_ctx.errors import HolonCtxError
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import OPERATOR_TRIGGERS, Record, Turn, record_ref
from holon_ctx.tokens import TokenCounter

__all__ = ["verify_ledger"]

_decode = msgspec.json.Decoder(Record).decode
_INTENT = OPERATOR_TRIGGERS - {"approval_decision"}


def verify_ledger(path: str | Path, counter: TokenCounter | None = None, *,
                  limit: int = 20) -> list[str]:
    """Problems found in the SQLite ledger at ``path`` (at most ``limit``); empty when sound."""
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        return [f"cannot open: {exc}"]
    try:
        # One read transaction: every query below sees the same committed state.
        db.execute("BEGIN")
        return _verify(db, counter, limit)
    except sqlite3.DatabaseError as exc:
        return [f"unreadable: {exc}"]
    finally:
        db.close()


def _verify(db: sqlite3.Connection, counter: TokenCounter | None, limit: int) -> list[str]:
    problems = [f"integrity_check: {msg}" for (msg,) in db.execute("PRAGMA integrity_check")
                if msg != "ok"][:limit]
    if problems:
        return problems
    scratch = MemoryStore(counter)
    turn_seqs: dict[int, int | None] = {}

    def rows() -> Iterator[tuple[int | None, Record]]:
        expected = 0
        for pos, ref, kind, trust, turn_seq, line in db.execute(
                "SELECT pos, ref, kind, trust, turn_seq, line FROM records ORDER BY pos"):
            if pos != expected:
                problems.append(f"records: position {expected} is missing (next is {pos})")
                expected = pos
            record = _decode(line)
            if ref != record_ref(record) or kind != ref.partition(":")[0] or \
                    trust != (record.trust.value if record.trust else ""):
                problems.append(f"records: row {pos} ({ref}, {kind}, {trust}) disagrees with "
                                f"its line ({record_ref(record)})")
            turn_seqs[pos] = turn_seq
            expected += 1
            yield pos, record

    try:
        scratch.append_lines(rows(), source="records")
    except HolonCtxError as exc:
        # The line number of the error is the record's position.
        return [*problems, f"replay: {exc}"][:limit]
    want = _replayed(scratch, turn_seqs, problems)
    problems += _compare(db, want, scratch.counter_identity)
    return problems[:limit]


@attrs.define
class _Replayed:
    """What the derived tables should hold, by the replay of the records."""

    turns: set[tuple[Any, ...]] = attrs.Factory(set)
    counts: dict[int, int] = attrs.Factory(dict)
    work_items: dict[int, tuple[str, bytes]] = attrs.Factory(dict)
    waits: dict[int, tuple[str, str, bytes]] = attrs.Factory(dict)
    high: dict[int, int] = attrs.Factory(dict)


def _replayed(scratch: MemoryStore, turn_seqs: dict[int, int | None],
              problems: list[str]) -> _Replayed:
    """The replay's derived rows; a record whose stored turn_seq differs is a problem."""
    want = _Replayed()
    for row in scratch.derived_rows():
        rec = row.record
        if row.marks_high and row.turn_seq is not None:
            want.high.setdefault(row.turn_seq, row.pos)
        if row.turn is not None and isinstance(rec, Turn):
            want.turns.add((rec.seq, rec.id, row.pos, int(rec.trigger in _INTENT),
                            rec.work_item_id))
        if turn_seqs.get(row.pos) != row.turn_seq:
            problems.append(f"records: row {row.pos} ({row.ref}) has turn_seq "
                            f"{turn_seqs.get(row.pos)}, the replay gives {row.turn_seq}")
        want.counts[row.pos] = row.tokens
        if row.work_item_state is not None:
            want.work_items[row.pos] = (row.work_item_state.work_item_id,
                                        msgspec.json.encode(row.work_item_state))
        if row.wait_state is not None:
            want.waits[row.pos] = (row.wait_state.wait_id, row.wait_state.status.value,
                                   msgspec.json.encode(row.wait_state))
    return want


def _compare(db: sqlite3.Connection, want: _Replayed, counter_id: str) -> list[str]:
    """Where the file's derived tables differ from the replay's."""
    problems: list[str] = []
    have_turns = set(db.execute("SELECT seq, id, pos, intent, work_item_id FROM turns"))
    problems += [f"turns: missing {t}" for t in sorted(want.turns - have_turns, key=str)]
    problems += [f"turns: extra {t}" for t in sorted(have_turns - want.turns, key=str)]
    # Counts under another counter are not this check's business; reads recount those records.
    for pos, tokens in db.execute("SELECT pos, tokens FROM token_counts WHERE counter=?",
                                  (counter_id,)):
        if want.counts.get(pos) != tokens:
            problems.append(f"token_counts: position {pos} holds {tokens}, the replay counts "
                            f"{want.counts.get(pos)}")
    have_wi = {pos: (wid, bytes(state)) for pos, wid, state in db.execute(
        "SELECT pos, work_item_id, state FROM work_item_states")}
    have_waits = {pos: (wid, status, bytes(state)) for pos, wid, status, state in db.execute(
        "SELECT pos, wait_id, status, state FROM wait_states")}
    has_high = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND "
                          "name='high_turns'").fetchone()
    # A schema-1 file has no index yet (it is built on the first open by this version).
    have_high = dict(db.execute("SELECT seq, pos FROM high_turns")) if has_high else want.high
    for seq in sorted(want.high.keys() | have_high.keys()):
        if want.high.get(seq) != have_high.get(seq):
            problems.append(f"high_turns: turn seq {seq} is marked at {have_high.get(seq)}, the "
                            f"replay marks it at {want.high.get(seq)}")
    tables: tuple[tuple[str, dict[int, Any], dict[int, Any]], ...] = (
        ("work_item_states", want.work_items, have_wi), ("wait_states", want.waits, have_waits))
    for table, wanted, have in tables:
        for pos in sorted(wanted.keys() | have.keys()):
            if wanted.get(pos) != have.get(pos):
                problems.append(f"{table}: position {pos} differs from the replay")
    return problems
