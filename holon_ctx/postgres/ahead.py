"""A request's reads in one round trip (issue 29, RFC 0026 decision 8).

Before a request, a session on PostgreSQL reads the ledger's end, its usage observations, the
newest episode visible at that end and the governed store's envelope ids (its "moment", RFC
0020), then walks the records appended since its last request and, for each new turn, finds the
operator turn it continues: eight or nine waits on the server, one after the other. They do not
depend on one another in a way the server cannot resolve, so :func:`read_ahead` asks them in one
statement (a ``UNION ALL`` of the reads, each row tagged with the read it answers) and leaves
the answers on the connection's :class:`~holon_ctx.postgres.session.Link`; each store, asked,
answers from there (keyed by the read, its session and its arguments), and asks the server only
what was not read ahead.

What makes each answer right when it is read from a moment a little before it is used:

- every answer comes from one statement, so from one snapshot: the end, the newest episode
  visible at it, and the records and operator turn committed with it;
- records never change once committed and their positions are a dense prefix, so the records
  from a position on, read with the end, answer any ``records_between`` inside the rows read;
- the newest operator turn of all, read with the end, is the answer of any
  ``latest_operator_turn(before_seq, limit_pos)`` it satisfies (``seq < before_seq`` and
  ``pos < limit_pos``) for ``limit_pos`` at most that end: it has the highest ``seq`` there is;
  a call it does not satisfy asks the server;
- usage observations and envelope ids are what a read at the request's start returned; a write
  on the connection (a compaction before the walk, an append) drops every answer
  (``SessionHandle.call``), and the block's end does too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from holon_ctx.postgres.session import SessionHandle

__all__ = ["RECORDS_AHEAD", "read_ahead"]

#: The most records a request reads ahead from its walk's position: a turn appends a few; a
#: request after a longer absence (an import, another writer) reads the rest as before.
RECORDS_AHEAD: Final = 64

#: Every answer is a row of one shape: the part it answers, a sort key, then a record row's
#: columns (``pos, ref, turn_seq, line, tokens``), the other parts in the columns that fit
#: (the end and the archive in ``pos`` and ``turn_seq``, an observation in ``line``, an
#: envelope id in ``ref``; the archive is the episode count, ``max(num)``: numbers are dense,
#: see ``PostgresEpisodeStore.count``). One statement, not a pipeline of five: one snapshot, and a
#: fraction of psycopg's work per statement (RFC 0026 decision 8, amended 2026-12-06).
_END, _RECORDS, _INTENT, _USAGE, _ENVELOPES = range(5)
_END_ROW = ("SELECT 0, 0::bigint, s.end_pos, NULL::text, coalesce((SELECT min(first_num) - 1 "
            "FROM holon_episodes_runs r WHERE r.sid=s.sid AND r.pos > s.end_pos), (SELECT "
            "max(num) FROM holon_episodes e WHERE e.sid=s.sid), 0), NULL::bytea, NULL::integer "
            "FROM holon_sessions s WHERE s.sid=%(sid)s")
_USAGE_ROWS = ("SELECT 3, -seq, NULL::bigint, NULL::text, NULL::bigint, observation, "
               "NULL::integer FROM holon_usage WHERE sid=%(sid)s AND model=%(model)s "
               "ORDER BY seq DESC LIMIT %(n)s")
_ENVELOPE_ROWS = ("SELECT 4, seq, NULL::bigint, envelope_id, NULL::bigint, NULL::bytea, "
                  "NULL::integer FROM holon_continuity_envelopes WHERE sid=%(sid)s AND "
                  "session_id=%(session)s")


@contextmanager
def read_ahead(h: SessionHandle, *, records: tuple[str, dict[str, Any]] | None = None,
               intent: tuple[str, dict[str, Any]] | None = None,
               usage: tuple[str, int] | None = None,
               envelopes: str | None = None) -> Iterator[None]:
    """Inside the block, the reads named are answered from one statement run on entry (see the
    module docstring): always the end and the archive visible at it; ``records``: the record
    select (``ledger_reads``' row, up to its ``WHERE``) and its arguments (``lo``, the position
    to read from, and ``counter``); ``intent``: the newest operator turn's select and arguments; ``usage``:
    ``(model, limit)``; ``envelopes``: the governed session id."""
    sid = h.sid
    # ``select``s are ledger_reads' record row up to its ``WHERE`` ("SELECT <cols> FROM
    # holon_records r "): the part and its sort key go in front of the columns.
    parts = [_END_ROW]
    args: dict[str, Any] = {}
    if records is not None:
        select, given = records
        parts.append(f"SELECT {_RECORDS}, r.pos, " + select.removeprefix("SELECT ")
                     + "WHERE r.sid=%(sid)s AND r.pos>=%(lo)s ORDER BY r.pos "
                     f"LIMIT {RECORDS_AHEAD}")
        args.update(given)
    if intent is not None:
        select, given = intent
        parts.append(f"SELECT {_INTENT}, 0::bigint, " + select.removeprefix("SELECT "))
        args.update(given)
    if usage is not None:
        parts.append(_USAGE_ROWS)
        args.update(model=usage[0], n=max(usage[1], 0))
    if envelopes is not None:
        parts.append(_ENVELOPE_ROWS)
        args["session"] = envelopes
    # The first part has no ORDER BY of its own: left bare, the statement starts with SELECT
    # (what SessionHandle takes for a read, run again on a new connection if the old one died).
    sql = " UNION ALL ".join([parts[0], *(f"({part})" for part in parts[1:])]) + " ORDER BY 1, 2"
    # Binary: the records' lines are bytea (hex in text form, twice the bytes to send and parse).
    rows = h.rows(sql, args, binary=True)
    if not rows or rows[0][0] != _END:
        # The session was deleted: nothing is answered here, and the reads say so.
        yield
        return
    by_part: list[list[tuple[Any, ...]]] = [[] for _ in range(5)]
    for row in rows[1:]:
        by_part[row[0]].append(row)
    end, archived = int(rows[0][2]), int(rows[0][4])
    found: dict[tuple[Any, ...], Any] = {
        (sid, "end"): end, (sid, "archived_by", end): archived}
    if records is not None:
        # Keyed by the counter too: the rows carry its counts.
        found[(sid, "records", records[1]["counter"])] = (
            int(records[1]["lo"]), [row[2:] for row in by_part[_RECORDS]])
    if intent is not None:
        found[(sid, "intent", intent[1]["counter"])] = (end, [row[2:] for row in by_part[_INTENT]])
    if usage is not None:
        found[(sid, "usage", *usage)] = [(row[5],) for row in by_part[_USAGE]]
    if envelopes is not None:
        found[(sid, "envelope_ids", envelopes)] = [str(row[3]) for row in by_part[_ENVELOPES]]
    link = h.link
    link.ahead.clear()
    link.ahead.update(found)
    try:
        yield
    finally:
        link.ahead.clear()
