"""The governed store's backend in PostgreSQL, one session's state beside its ledger.

The same four append-only logs as ``continuity/sqlite_backend.py`` (facts, envelopes, the
compaction journal, trace events), keyed by ``sid``. Each write is its own committed transaction
(the step-by-step compaction protocol relies on it), except inside :meth:`batch`: a seal's
writes, kept and sent as one statement (``continuity_batch.py``). Envelopes, journal and events are guarded
against UPDATE and DELETE by a trigger (deleting a whole session is the one exception, see
``schema.py``). Sequence numbers come from identity columns: strictly increasing in the order they
are taken, which for one writer is the order of its writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from holon_ctx.continuity.backend import StoredEvent
from holon_ctx.continuity.exceptions import DuplicateRecordError
from holon_ctx.errors import first_line
from holon_ctx.postgres.connection import psycopg_module
from holon_ctx.postgres.continuity_batch import FLUSH, SEAL_ENTRY, SealBatch
from holon_ctx.postgres.session import MISSING, SessionHandle

__all__ = ["PostgresContinuityBackend"]

_TOUCH = ("INSERT INTO holon_continuity_meta VALUES (%(sid)s, 'last_recorded_at', %(at)s) "
          "ON CONFLICT (sid, key) DO UPDATE SET value = "
          "greatest(holon_continuity_meta.value, excluded.value)")


#: Envelopes whose journal a read-ahead brings (newest first): more crashed compactions in a row
#: than this are read as usual.
_AHEAD_ENVELOPES = 4


class PostgresContinuityBackend:
    """``ContinuityBackend`` for a session: ``PostgresContinuityBackend(url_or_conn, session=KEY)``."""

    def __init__(self, source: str | Any, *, session: str, create: bool = True) -> None:
        self._h = SessionHandle(source, session, create=create)
        self._unique = psycopg_module().errors.UniqueViolation
        #: Answers read ahead (``reading_ahead``), by the read and its arguments.
        self._ahead: dict[tuple[str, ...], Any] = {}
        #: Inside ``batch()``: the writes kept and the view the block reads.
        self._sealing: SealBatch | None = None

    @contextmanager
    def batch(self) -> Iterator[None]:
        """The writes inside the block in one statement, and its reads of the governed store
        answered from one pipeline made on entry (``continuity_batch.py``): a compaction's
        seal in three round trips or so, where each write and the reads between were one each.
        Inside the caller's transaction the statement is part of it; an exception leaves
        nothing of the block. Not reentrant: an inner block is the outer one's."""
        if self._sealing is not None:
            yield
            return
        self._ahead = {}
        h = self._h
        sealing = SealBatch(h.batch([(sql, dict(args)) for sql, args in SEAL_ENTRY]),
                            h.rows, h.batch)
        self._sealing = sealing
        try:
            yield
        finally:
            self._sealing = None
        args = sealing.flush_args()
        if args is not None:
            self._run(FLUSH, args)

    @contextmanager
    def reading_ahead(self, session_id: str, kinds: Sequence[str]) -> Iterator[None]:
        """Inside the block, the reads of a session's governed state (its envelope ids, the
        journal and body of its newest envelopes, the current facts of ``kinds``) are answered
        from one round trip made on entry: what is read before every request (the projection's
        control state, ``compaction.GovernedControl``) costs one wait on the server, not six.
        Answers are as of entry, kept only inside the block, and dropped by any write. Inside
        a compaction's read ahead (``compaction_ahead.py``) the kinds-less read it makes is
        answered from there already: nothing is read."""
        if not kinds and self._h.ahead("governed", session_id) is not MISSING:
            yield
            return
        args: dict[str, Any] = {"sid": self._h.sid, "session": session_id}
        ids, journal, bodies, facts = self._h.batch([
            ("SELECT envelope_id FROM holon_continuity_envelopes WHERE sid=%(sid)s AND "
             "session_id=%(session)s ORDER BY seq", args),
            ("SELECT j.envelope_id, j.step, j.body FROM holon_continuity_journal j WHERE "
             "j.sid=%(sid)s AND j.envelope_id IN (SELECT envelope_id FROM "
             "holon_continuity_envelopes WHERE sid=%(sid)s AND session_id=%(session)s "
             f"ORDER BY seq DESC LIMIT {_AHEAD_ENVELOPES})", args),
            ("SELECT envelope_id, body FROM holon_continuity_envelopes WHERE sid=%(sid)s AND "
             f"session_id=%(session)s ORDER BY seq DESC LIMIT {_AHEAD_ENVELOPES}", args),
            ("SELECT kind, body FROM (SELECT DISTINCT ON (kind, key) seq, kind, scope, body FROM "
             "holon_continuity_facts WHERE sid=%(sid)s AND kind = ANY(%(kinds)s) ORDER BY kind, "
             "key, seq DESC) latest WHERE scope=%(session)s ORDER BY seq",
             {**args, "kinds": list(kinds)})])
        ahead: dict[tuple[str, ...], Any] = {("ids", session_id): [str(r[0]) for r in ids]}
        for envelope_id, body in bodies:
            ahead[("steps", str(envelope_id))] = {}
            ahead[("envelope", str(envelope_id))] = bytes(body)
        for envelope_id, step, body in journal:
            # The statements of a batch each see their own moment: another runtime's envelope
            # sealed between them is in the journal's answer and not the bodies' (the body is
            # then read when asked for). It used to raise KeyError in a runtime's request.
            ahead.setdefault(("steps", str(envelope_id)), {})[str(step)] = bytes(body)
        for kind in kinds:
            ahead[("facts", kind, session_id)] = [bytes(b) for k, b in facts if k == kind]
        self._ahead = ahead
        try:
            yield
        finally:
            self._ahead = {}

    def _write(self, sql: str, args: dict[str, Any], at: str) -> list[tuple[Any, ...]]:
        """One statement and the latest-time mark, in one committed transaction: ``sql`` is an
        INSERT (its RETURNING rows are returned)."""
        self._ahead = {}
        # One statement (so one transaction, one round trip, where BEGIN, the write, the mark
        # and COMMIT were four): the write and the mark as data-modifying CTEs.
        returned = "RETURNING" in sql
        statement = (f"WITH w AS ({sql}), touched AS ({_TOUCH}) "
                     + ("SELECT * FROM w" if returned else "SELECT 1"))
        return self._run(statement, {"at": at, **args}, returned=returned)

    def _run(self, statement: str, args: dict[str, Any], *,
             returned: bool = False) -> list[tuple[Any, ...]]:
        """A write statement; a unique violation as :class:`DuplicateRecordError`."""
        args = {"sid": self._h.sid, **args}

        def run() -> list[tuple[Any, ...]]:
            try:
                # The live connection, read here: a dead one is replaced before run() runs.
                rows = list(self._h.conn.execute(statement, args).fetchall())
            except self._unique as exc:
                # The server's first line: its DETAIL line would make the message two.
                raise DuplicateRecordError(f"record already exists: {first_line(exc)}") from None
            return rows if returned else []
        return self._h.call(run)

    def append_fact(self, kind: str, key: str, scope: str, body: bytes, at: str) -> None:
        if self._sealing is not None:
            self._sealing.append_fact(kind, key, scope, body, at)
            return
        self._write("INSERT INTO holon_continuity_facts (sid, kind, key, scope, body, recorded_at) "
                    "VALUES (%(sid)s, %(kind)s, %(key)s, %(scope)s, %(body)s, %(at)s)",
                    {"kind": kind, "key": key, "scope": scope, "body": bytes(body), "at": at}, at)

    def latest_fact(self, kind: str, key: str) -> bytes | None:
        if self._sealing is not None:
            return self._sealing.latest_fact(kind, key)
        ahead = self._h.ahead("fact", kind, key)  # a compaction's (compaction_ahead.py)
        if ahead is not MISSING:
            return None if ahead is None else bytes(ahead)
        row = self._h.one("SELECT body FROM holon_continuity_facts WHERE sid=%(sid)s AND "
                          "kind=%(kind)s AND key=%(key)s ORDER BY seq DESC LIMIT 1",
                          {"kind": kind, "key": key})
        return None if row is None else bytes(row[0])

    def latest_facts_in_scope(self, kind: str, scope: str) -> list[bytes]:
        if self._sealing is not None:
            return self._sealing.latest_facts_in_scope(kind, scope)
        if ("facts", kind, scope) in self._ahead:
            found: list[bytes] = self._ahead[("facts", kind, scope)]
            return found
        rows = self._h.rows(
            "SELECT body FROM (SELECT DISTINCT ON (key) seq, scope, body FROM "
            "holon_continuity_facts WHERE sid=%(sid)s AND kind=%(kind)s ORDER BY key, seq DESC) "
            "latest WHERE scope=%(scope)s ORDER BY seq", {"kind": kind, "scope": scope})
        return [bytes(r[0]) for r in rows]

    def append_envelope(self, envelope_id: str, session_id: str, body: bytes, at: str) -> None:
        if self._sealing is not None:
            self._sealing.append_envelope(envelope_id, session_id, body, at)
            return
        self._write("INSERT INTO holon_continuity_envelopes (sid, envelope_id, session_id, body, "
                    "recorded_at) VALUES (%(sid)s, %(id)s, %(session)s, %(body)s, %(at)s)",
                    {"id": envelope_id, "session": session_id, "body": bytes(body), "at": at}, at)

    def envelope(self, envelope_id: str) -> bytes | None:
        if self._sealing is not None:
            return self._sealing.envelope(envelope_id)
        if ("envelope", envelope_id) in self._ahead:
            body: bytes = self._ahead[("envelope", envelope_id)]
            return body
        ahead = self._h.ahead("envelope", envelope_id)  # a compaction's (compaction_ahead.py)
        if ahead is not MISSING:
            return bytes(ahead)
        row = self._h.one("SELECT body FROM holon_continuity_envelopes WHERE sid=%(sid)s AND "
                          "envelope_id=%(id)s", {"id": envelope_id})
        return None if row is None else bytes(row[0])

    def envelope_ids(self, session_id: str) -> list[str]:
        if self._sealing is not None:
            return [*self._envelope_ids(session_id),
                    *self._sealing.written_envelope_ids(session_id)]
        return self._envelope_ids(session_id)

    def _envelope_ids(self, session_id: str) -> list[str]:
        if ("ids", session_id) in self._ahead:
            return list(self._ahead[("ids", session_id)])
        ahead = self._h.ahead("envelope_ids", session_id)  # a request's (postgres/ahead.py)
        if ahead is not MISSING:
            return list(ahead)
        return [str(r[0]) for r in self._h.rows(
            "SELECT envelope_id FROM holon_continuity_envelopes WHERE sid=%(sid)s AND "
            "session_id=%(session)s ORDER BY seq", {"session": session_id})]

    def append_step(self, envelope_id: str, step: str, body: bytes, at: str) -> None:
        if self._sealing is not None:
            self._sealing.append_step(envelope_id, step, body, at)
            return
        self._write("INSERT INTO holon_continuity_journal VALUES (%(sid)s, %(id)s, %(step)s, "
                    "%(body)s, %(at)s)",
                    {"id": envelope_id, "step": step, "body": bytes(body), "at": at}, at)

    def steps(self, envelope_id: str) -> dict[str, bytes]:
        if self._sealing is not None:
            return self._sealing.steps(envelope_id)
        if ("steps", envelope_id) in self._ahead:
            return dict(self._ahead[("steps", envelope_id)])
        ahead = self._h.ahead("steps", envelope_id)  # a compaction's (compaction_ahead.py)
        if ahead is not MISSING:
            return dict(ahead)
        return {str(step): bytes(body) for step, body in self._h.rows(
            "SELECT step, body FROM holon_continuity_journal WHERE sid=%(sid)s AND "
            "envelope_id=%(id)s", {"id": envelope_id})}

    def append_event(self, event_type: str, envelope_id: str, session_id: str, payload: bytes,
                     at: str) -> int:
        if self._sealing is not None:
            return self._sealing.append_event(event_type, envelope_id, session_id, payload, at)
        rows = self._write(
            "INSERT INTO holon_continuity_events (sid, event_type, envelope_id, session_id, "
            "payload, recorded_at) VALUES (%(sid)s, %(type)s, %(id)s, %(session)s, %(payload)s, "
            "%(at)s) RETURNING seq",
            {"type": event_type, "id": envelope_id, "session": session_id,
             "payload": bytes(payload), "at": at}, at)
        return int(rows[0][0])

    def events(self, *, envelope_id: str | None, session_id: str | None) -> list[StoredEvent]:
        if self._sealing is not None:
            if envelope_id is not None:
                found = self._sealing.events(envelope_id)
            else:
                found = [*self._events(None, session_id), *self._sealing.written_events()]
            return [e for e in found if session_id is None or e.session_id == session_id]
        return self._events(envelope_id, session_id)

    def _events(self, envelope_id: str | None, session_id: str | None) -> list[StoredEvent]:
        rows = self._h.rows(
            "SELECT seq, event_type, envelope_id, session_id, payload, recorded_at FROM "
            "holon_continuity_events WHERE sid=%(sid)s AND "
            "(%(id)s::text IS NULL OR envelope_id=%(id)s) AND "
            "(%(session)s::text IS NULL OR session_id=%(session)s) ORDER BY seq",
            {"id": envelope_id, "session": session_id})
        return [StoredEvent(int(s), str(t), str(e), str(sid), bytes(p), str(at))
                for s, t, e, sid, p, at in rows]

    def last_recorded_at(self) -> str | None:
        if self._sealing is not None:
            return self._sealing.last
        row = self._h.one("SELECT value FROM holon_continuity_meta WHERE sid=%(sid)s AND "
                          "key='last_recorded_at'", {})
        return None if row is None else str(row[0])

    def close(self) -> None:
        self._h.close()
