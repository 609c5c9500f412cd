"""A compaction's governed writes in one statement, its reads answered ahead (issue 29, RFC 0026).

Why. A compaction that seals an envelope writes the session's governed facts (identity, policy,
budget, side effects, obligations, constraints, checkpoint, the control snapshot), five journal
steps, the envelope and its trace event, reading the store between the writes (the latest
recorded time before every write, the current value of each fact it may change, the journal of
the envelope it seals). On PostgreSQL each of those was a round trip: about 60 of a seal's ~105
on a 40-turn session, the rest the archive and the lock.

How. :class:`SealBatch` is what ``PostgresContinuityBackend.batch()`` holds while the block
runs. On entry one pipeline reads the latest recorded time, the current row of every governed
fact of the session (every kind but the control snapshots, one per envelope ever sealed; those
are read when asked, once) and one number of the trace events' sequence. Inside the block:

- a write is kept, not sent: it updates the batch's view (the fact's current row, the envelope,
  its journal, the latest time) so the reads after it see it, as they would see a committed
  write;
- a read is answered from the view; an envelope's body, journal and events are read once, in
  one pipeline, the first time the block asks about that envelope;
- a duplicate the view can see (an envelope or a journal step the server holds, or the block
  wrote) raises :class:`DuplicateRecordError` at once, as the write alone would; one it cannot
  see is the unique index's, at the flush.

On exit every kept write goes in one statement (data-modifying CTEs, one array per column, rows
in the order written, so a fact's ``seq`` order is the order of its writes): one round trip,
atomic on its own — or inside the caller's transaction (the compaction holds the ledger's
appends while it seals: ``compaction.py``), committed with it. An exception leaves nothing of
the block, as a killed process does. The trace event is written with the sequence number taken
on entry (``OVERRIDING SYSTEM VALUE``): the journal step that names it is in the same statement.
Numbers are taken in order; one a block does not use is a gap, as a rolled-back insert leaves.

What makes the answers right: a compaction holds the ledger's compaction lock (RFC 0020), so no
other compaction of the session writes its governed store meanwhile; the latest time only ever
rises (a write stamped below it is refused before it is kept, as it was before it was sent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from holon_ctx.continuity.backend import StoredEvent
from holon_ctx.continuity.exceptions import DuplicateRecordError
from holon_ctx.errors import quote_value

__all__ = ["FLUSH", "SEAL_ENTRY", "SealBatch"]

#: Facts read when asked, not on entry: one per envelope ever sealed (RFC 0020 snapshots).
_ASKED_KINDS: Final = frozenset({"control_snapshot"})
_CURRENT = ("SELECT kind, key, scope, body FROM (SELECT DISTINCT ON (kind, key) seq, kind, key, "
            "scope, body FROM holon_continuity_facts WHERE sid=%(sid)s AND kind <> ALL(%(asked)s) "
            "ORDER BY kind, key, seq DESC) latest ORDER BY seq")
#: The batch's entry reads: the latest time, every current fact but the asked kinds', a number.
SEAL_ENTRY: Final[tuple[tuple[str, dict[str, Any]], ...]] = (
    ("SELECT value FROM holon_continuity_meta WHERE sid=%(sid)s AND key='last_recorded_at'", {}),
    (_CURRENT, {"asked": sorted(_ASKED_KINDS)}),
    ("SELECT nextval(pg_get_serial_sequence('holon_continuity_events', 'seq'))", {}),
)
_KIND_CURRENT = ("SELECT key, scope, body FROM (SELECT DISTINCT ON (key) seq, key, scope, body "
                 "FROM holon_continuity_facts WHERE sid=%(sid)s AND kind=%(kind)s ORDER BY key, "
                 "seq DESC) latest ORDER BY seq")
_ENVELOPE_READS = (
    "SELECT session_id, body FROM holon_continuity_envelopes WHERE sid=%(sid)s AND "
    "envelope_id=%(id)s",
    "SELECT step, body FROM holon_continuity_journal WHERE sid=%(sid)s AND envelope_id=%(id)s",
    "SELECT seq, event_type, envelope_id, session_id, payload, recorded_at FROM "
    "holon_continuity_events WHERE sid=%(sid)s AND envelope_id=%(id)s ORDER BY seq",
)
#: Every kept write, one array per column, in the order written (``WITH ORDINALITY``).
FLUSH: Final = """
WITH f AS (INSERT INTO holon_continuity_facts (sid, kind, key, scope, body, recorded_at)
           SELECT %(sid)s, u.kind, u.key, u.scope, u.body, u.at FROM unnest(%(f_kind)s::text[],
           %(f_key)s::text[], %(f_scope)s::text[], %(f_body)s::bytea[], %(f_at)s::text[])
           WITH ORDINALITY u(kind, key, scope, body, at, n) ORDER BY u.n),
e AS (INSERT INTO holon_continuity_envelopes (sid, envelope_id, session_id, body, recorded_at)
      SELECT %(sid)s, u.* FROM unnest(%(e_id)s::text[], %(e_session)s::text[],
      %(e_body)s::bytea[], %(e_at)s::text[]) u),
j AS (INSERT INTO holon_continuity_journal SELECT %(sid)s, u.* FROM unnest(%(j_id)s::text[],
      %(j_step)s::text[], %(j_body)s::bytea[], %(j_at)s::text[]) u),
v AS (INSERT INTO holon_continuity_events (sid, seq, event_type, envelope_id, session_id,
      payload, recorded_at) OVERRIDING SYSTEM VALUE SELECT %(sid)s, u.* FROM
      unnest(%(v_seq)s::bigint[], %(v_type)s::text[], %(v_id)s::text[], %(v_session)s::text[],
      %(v_payload)s::bytea[], %(v_at)s::text[]) u),
m AS (INSERT INTO holon_continuity_meta VALUES (%(sid)s, 'last_recorded_at', %(at)s)
      ON CONFLICT (sid, key) DO UPDATE SET value =
      greatest(holon_continuity_meta.value, excluded.value))
SELECT 1"""
_COLUMNS: Final = {
    "facts": ("f_kind", "f_key", "f_scope", "f_body", "f_at"),
    "envelopes": ("e_id", "e_session", "e_body", "e_at"),
    "journal": ("j_id", "j_step", "j_body", "j_at"),
    "events": ("v_seq", "v_type", "v_id", "v_session", "v_payload", "v_at"),
}

#: ``rows(sql, args)`` and ``batch([(sql, args), ...])`` of the backend's session handle.
Rows = Callable[[str, dict[str, Any]], list[tuple[Any, ...]]]
Batch = Callable[[list[tuple[str, dict[str, Any]]]], list[list[tuple[Any, ...]]]]


class _Envelope:
    """What the batch knows of one envelope id: its row, journal and events."""

    def __init__(self, row: tuple[str, bytes] | None, steps: dict[str, bytes],
                 events: list[StoredEvent]) -> None:
        self.row = row
        self.steps = steps
        self.events = events


class SealBatch:
    """The view a block of governed writes reads, and the writes it keeps (module docstring)."""

    def __init__(self, entry: list[list[tuple[Any, ...]]], rows: Rows, batch: Batch) -> None:
        meta, current, ((seq,),) = entry
        self.last: str | None = str(meta[0][0]) if meta else None
        self._rows, self._batch = rows, batch
        #: ``(kind, key)`` → ``(order, scope, body)``: the server's rows (order ``(0, i)``), then
        #: the block's (``(1, i)``), so a kind's listing keeps the order of the latest writes.
        self._facts: dict[tuple[str, str], tuple[tuple[int, int], str, bytes]] = {
            (str(k), str(key)): ((0, i), str(scope), bytes(body))
            for i, (k, key, scope, body) in enumerate(current)}
        self._kinds_read: set[str] = set()
        self._envelopes: dict[str, _Envelope] = {}
        self._session_envelopes: list[tuple[str, str]] = []
        self._next_event = int(seq)
        self._writes: dict[str, list[tuple[Any, ...]]] = {t: [] for t in _COLUMNS}

    # -- facts ---------------------------------------------------------------------------------
    def _read_kind(self, kind: str) -> None:
        """An asked kind's current rows, read once (before the block's own writes of it)."""
        if kind not in _ASKED_KINDS or kind in self._kinds_read:
            return
        self._kinds_read.add(kind)
        for i, (key, scope, body) in enumerate(self._rows(_KIND_CURRENT, {"kind": kind})):
            # A key the block wrote already is newer than the server's row.
            self._facts.setdefault((kind, str(key)), ((0, i), str(scope), bytes(body)))

    def latest_fact(self, kind: str, key: str) -> bytes | None:
        self._read_kind(kind)
        found = self._facts.get((kind, key))
        return None if found is None else found[2]

    def latest_facts_in_scope(self, kind: str, scope: str) -> list[bytes]:
        self._read_kind(kind)
        return [body for (k, _), (_, sc, body) in sorted(self._facts.items(), key=lambda i: i[1][0])
                if k == kind and sc == scope]

    def append_fact(self, kind: str, key: str, scope: str, body: bytes, at: str) -> None:
        # An asked kind's rows are not needed to write one (read later, they stay older).
        self._facts[(kind, key)] = ((1, len(self._writes["facts"])), scope, bytes(body))
        self._keep("facts", (kind, key, scope, bytes(body), at), at)

    # -- envelopes, journal, events -------------------------------------------------------------
    def _envelope(self, envelope_id: str) -> _Envelope:
        found = self._envelopes.get(envelope_id)
        if found is None:
            args = {"id": envelope_id}
            row, steps, events = self._batch([(sql, args) for sql in _ENVELOPE_READS])
            found = self._envelopes[envelope_id] = _Envelope(
                (str(row[0][0]), bytes(row[0][1])) if row else None,
                {str(s): bytes(b) for s, b in steps},
                [StoredEvent(int(s), str(t), str(e), str(sid), bytes(p), str(at))
                 for s, t, e, sid, p, at in events])
        return found

    def envelope(self, envelope_id: str) -> bytes | None:
        row = self._envelope(envelope_id).row
        return None if row is None else row[1]

    def steps(self, envelope_id: str) -> dict[str, bytes]:
        return dict(self._envelope(envelope_id).steps)

    def events(self, envelope_id: str) -> list[StoredEvent]:
        return list(self._envelope(envelope_id).events)

    def written_envelope_ids(self, session_id: str) -> list[str]:
        """The envelopes the block appended for ``session_id``, in order (after the server's)."""
        return [e for e, s in self._session_envelopes if s == session_id]

    def written_events(self) -> list[StoredEvent]:
        return [StoredEvent(*row) for row in self._writes["events"]]

    def append_envelope(self, envelope_id: str, session_id: str, body: bytes, at: str) -> None:
        known = self._envelope(envelope_id)
        if known.row is not None:
            raise DuplicateRecordError(f"envelope {quote_value(envelope_id)} already recorded")
        known.row = (session_id, bytes(body))
        self._session_envelopes.append((envelope_id, session_id))
        self._keep("envelopes", (envelope_id, session_id, bytes(body), at), at)

    def append_step(self, envelope_id: str, step: str, body: bytes, at: str) -> None:
        known = self._envelope(envelope_id)
        if step in known.steps:
            raise DuplicateRecordError(
                f"step {quote_value(step)} of {quote_value(envelope_id)} already recorded")
        known.steps[step] = bytes(body)
        self._keep("journal", (envelope_id, step, bytes(body), at), at)

    def append_event(self, event_type: str, envelope_id: str, session_id: str, payload: bytes,
                     at: str) -> int:
        seq = self._next_event
        if self._writes["events"]:
            # One number is taken on entry (a seal writes one event); a second asks again.
            ((seq,),) = self._rows("SELECT nextval(pg_get_serial_sequence("
                                   "'holon_continuity_events', 'seq'))", {})
        event = (int(seq), event_type, envelope_id, session_id, bytes(payload), at)
        if envelope_id in self._envelopes:
            self._envelopes[envelope_id].events.append(StoredEvent(*event))
        self._keep("events", event, at)
        return int(seq)

    # -- the flush -------------------------------------------------------------------------------
    def _keep(self, table: str, values: tuple[Any, ...], at: str) -> None:
        self._writes[table].append(values)
        self.last = at if self.last is None else max(self.last, at)

    def flush_args(self) -> dict[str, Any] | None:
        """:data:`FLUSH`'s arguments (one array per column), or None when nothing was kept."""
        if not any(self._writes.values()) or self.last is None:
            return None
        args: dict[str, Any] = {"at": self.last}
        for table, names in _COLUMNS.items():
            columns = list(zip(*self._writes[table], strict=True)) or [()] * len(names)
            args.update({name: list(column) for name, column in zip(names, columns, strict=True)})
        return args

