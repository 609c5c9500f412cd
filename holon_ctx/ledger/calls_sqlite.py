"""The SQLite store's index of tool calls (``holon_ctx.ledger.calls``): a ``calls`` table with
each call's newest record (position and state), written in the append's transaction and rebuilt
from the records with the other derived tables (schema version 3; a file of version 2 is filled
from its records once, when it migrates). Split from ``sqlite.py``, which is at its size limit.

Why a table and not a scan: a session that opens, or catches up with another writer, must know
every call still waiting however many turns ago it was made (a CI job that answers fifty turns
later), and the records that say so can be anywhere in the history. The partial index holds only
the calls still waiting, so the read is bounded by them (a handful), not by the history.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Final

import msgspec

from holon_ctx.ledger.calls import newest_marks
from holon_ctx.ledger.records import Record
from holon_ctx.ledger.store import CallRecord, CallState, StoredRecord

__all__ = ["SCHEMA_V3", "UPSERT", "fill", "newest", "waiting"]

SCHEMA_V3: Final = """
CREATE TABLE IF NOT EXISTS calls (
    call_id TEXT PRIMARY KEY, pos INTEGER NOT NULL, state TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS calls_waiting ON calls(pos) WHERE state <> 'answered';
"""
#: The newest record wins, whatever order rows come in (one statement per row: executemany).
UPSERT: Final = ("INSERT INTO calls VALUES (?,?,?) ON CONFLICT(call_id) DO UPDATE SET "
                 "pos=excluded.pos, state=excluded.state WHERE excluded.pos > calls.pos")
#: The partial index's own WHERE term, verbatim: SQLite uses the index only then.
_WAITING: Final = "SELECT call_id, pos, state FROM calls WHERE state <> 'answered' ORDER BY pos"

_decoder = msgspec.json.Decoder(Record)
AtPositions = Callable[[list[int]], list[StoredRecord]]


def fill(db: sqlite3.Connection) -> None:
    """Build the table from the records (inside the caller's transaction): the replies and the
    ``tool`` records only, a page at a time."""
    db.execute("DELETE FROM calls")
    rows = db.execute("SELECT pos, line FROM records WHERE kind IN ('message', 'tool') "
                      "ORDER BY pos")
    while page := rows.fetchmany(4096):
        marks = newest_marks((pos, _decoder.decode(line)) for pos, line in page)
        db.executemany(UPSERT, [(cid, pos, state.value) for cid, (pos, state) in marks.items()])


def waiting(db: sqlite3.Connection, at_positions: AtPositions) -> tuple[int, list[CallRecord]]:
    """The ledger's end and the calls waiting as of it, read in one read transaction (one
    snapshot: an append committed between the two reads would otherwise be half seen)."""
    began = not db.in_transaction
    if began:
        db.execute("BEGIN")
    try:
        top = db.execute("SELECT max(pos) FROM records").fetchone()[0]
        found = db.execute(_WAITING).fetchall()
    finally:
        if began:
            db.execute("COMMIT")
    stored = {s.pos: s for s in at_positions(sorted({pos for _, pos, _ in found}))}
    return (0 if top is None else int(top) + 1,
            [CallRecord(cid, CallState(state), stored[pos]) for cid, pos, state in found])


def newest(db: sqlite3.Connection, call_id: str, at_positions: AtPositions) -> CallRecord | None:
    row = db.execute("SELECT pos, state FROM calls WHERE call_id=?", (call_id,)).fetchone()
    return None if row is None else CallRecord(call_id, CallState(row[1]),
                                               at_positions([int(row[0])])[0])
