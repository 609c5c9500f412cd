"""A request's reads in one round trip (issue 29, RFC 0026 decision 8).

Before a request, a session on PostgreSQL reads the ledger's end, its usage observations, the
newest episode visible at that end and the governed store's envelope ids (its "moment", RFC
0020), then walks the records appended since its last request and, for each new turn, finds the
operator turn it continues: eight or nine waits on the server, one after the other. They do not
depend on one another in a way the server cannot resolve, so :func:`read_ahead` sends them as one
pipeline and leaves the answers on the connection's :class:`~holon_ctx.postgres.session.Link`;
each store, asked, answers from there (keyed by the read, its session and its arguments), and
asks the server only what was not read ahead.

What makes each answer right when it is read from a moment a little before it is used:

- the end, and the newest episode visible at it, come from one statement (one snapshot);
- records never change once committed and their positions are a dense prefix, so the records
  from a position on, read after the end, answer any ``records_between`` inside the rows read;
- the newest operator turn of all, read after the end, is the answer of any
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

_END = ("SELECT s.end_pos, coalesce((SELECT min(first_num) - 1 FROM holon_episodes_runs r WHERE "
        "r.sid=s.sid AND r.pos > s.end_pos), (SELECT count(*) FROM holon_episodes e WHERE "
        "e.sid=s.sid)) FROM holon_sessions s WHERE s.sid=%(sid)s")
_USAGE = ("SELECT observation FROM holon_usage WHERE sid=%(sid)s AND model=%(model)s "
          "ORDER BY seq DESC LIMIT %(n)s")
_ENVELOPES = ("SELECT envelope_id FROM holon_continuity_envelopes WHERE sid=%(sid)s AND "
              "session_id=%(session)s ORDER BY seq")


@contextmanager
def read_ahead(h: SessionHandle, *, records: tuple[str, dict[str, Any]] | None = None,
               intent: tuple[str, dict[str, Any]] | None = None,
               usage: tuple[str, int] | None = None,
               envelopes: str | None = None) -> Iterator[None]:
    """Inside the block, the reads named are answered from one pipeline made on entry (see the
    module docstring): always the end and the archive visible at it; ``records``: the record
    select (``ledger_reads``' row, up to its ``WHERE``) and its arguments (``lo``, the position
    to read from, and ``counter``); ``intent``: the newest operator turn's select and arguments; ``usage``:
    ``(model, limit)``; ``envelopes``: the governed session id."""
    sid = h.sid
    statements: list[tuple[str, dict[str, Any]]] = [(_END, {})]
    if records is not None:
        select, args = records
        statements.append((select + "WHERE r.sid=%(sid)s AND r.pos>=%(lo)s ORDER BY r.pos "
                           f"LIMIT {RECORDS_AHEAD}", args))
    if intent is not None:
        statements.append(intent)
    if usage is not None:
        statements.append((_USAGE, {"model": usage[0], "n": max(usage[1], 0)}))
    if envelopes is not None:
        statements.append((_ENVELOPES, {"session": envelopes}))
    # Binary: the records' lines are bytea (hex in text form, twice the bytes to send and parse).
    answers = iter(h.batch(statements, binary=True))
    first = next(answers)
    if not first:
        # The session was deleted: nothing is answered here, and the reads say so.
        yield
        return
    ((end, archived),) = first
    found: dict[tuple[Any, ...], Any] = {
        (sid, "end"): int(end), (sid, "archived_by", int(end)): int(archived)}
    if records is not None:
        # Keyed by the counter too: the rows carry its counts.
        found[(sid, "records", records[1]["counter"])] = (int(records[1]["lo"]), next(answers))
    if intent is not None:
        found[(sid, "intent", intent[1]["counter"])] = (int(end), next(answers))
    if usage is not None:
        found[(sid, "usage", *usage)] = next(answers)
    if envelopes is not None:
        found[(sid, "envelope_ids", envelopes)] = [str(r[0]) for r in next(answers)]
    link = h.link
    link.ahead.clear()
    link.ahead.update(found)
    try:
        yield
    finally:
        link.ahead.clear()
