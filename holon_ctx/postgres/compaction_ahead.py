"""A compaction's reads in one round trip, and a compaction that writes nothing in that one only
(RFC 0026 decision 13).

Theory of operation. Before a request, a session compacts one turn in four while the budget
binds (RFC 0024 decision 3), and most of those compactions find nothing to archive or seal. On
PostgreSQL each still waited on the server ~15 times: the compaction lock, then the archive's
reads one after the other (the policy, the end, the newest turn, the recent window, the newest
episode, the look-ahead's settle and the frontier, the records to segment, the open items), the
governed read ahead, the unsealed episodes, the newest envelope's control snapshot, the unlock.
None of them needs another's answer in a way SQL cannot resolve, so :func:`read_compaction_ahead`
asks them all in one statement (a ``UNION ALL`` of the reads, each row tagged with the read it
answers, as ``ahead.py`` does for a request) and leaves the answers on the connection's
:class:`~holon_ctx.postgres.session.Link`, keyed by the read, the session's ``sid`` and the
arguments; the ledger, episode and continuity stores answer from there.

:func:`run_alone` then runs the whole compaction on those answers *without the compaction lock*,
with the connection refusing to reach the server (``Link.dry``): the first read not answered
ahead, or the first write (the archive's append, a resolution, a seal, a snapshot), raises
:class:`~holon_ctx.postgres.session.NotAnswered` before anything is sent, and the compaction
runs again from the start, for real, under the lock. So only a compaction that writes nothing
returns from the dry run, and what it returns is exactly what the real one returns on the same
state:

- every answer comes from one statement, so from one snapshot of the session's ledger, episodes
  and governed store; the compaction's code, unchanged, decides from them;
- a compaction that writes nothing and found nothing to write in one consistent state is the
  compaction run at that moment: it needs no lock (the lock orders writers, RFC 0020), and a
  state another compactor had half written (episodes archived and not yet sealed, a crash's
  leftovers) is one the real run handles too: it wants to write there, so it is not run alone;
- records never change once committed and their positions are dense below the end, so the
  records read ahead answer any ``records_between`` inside them;
- no episode's open item is open, or resolved after the end read here (each resolution is
  stamped at most at the end its run read, which is at most this end): then ``open_rows`` as
  of the end or later has no row. With open items the compaction reads the ledger's facts about
  them, which are not read ahead: it runs under the lock.

The answers are dropped on leaving (:func:`run_alone`, the ``compaction_reads`` block) and by
any write (``SessionHandle.call``), so a request after the compaction reads the server as
before (a request's own read ahead is not kept across a compaction: RFC 0026 decision 11).
Under the lock, after a dry run that wanted to write, the same statement answers the reads the
real run makes before its first write (the archive's reads: a sealing compaction waits ~8 times
less).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

from holon_ctx.postgres.session import NotAnswered, SessionHandle

__all__ = ["AHEAD_ENVELOPES", "AHEAD_PAGE", "read_compaction_ahead", "run_alone"]

_T = TypeVar("_T")
#: The most records read ahead to segment: the archiver's page (``memory/archiver.py``): a run
#: that needs a second page asks the server (under the lock).
AHEAD_PAGE: Final = 2048
#: Envelopes whose body, journal and control snapshot are read ahead, newest first (as the
#: governed read ahead of ``continuity.py``): more crashed compactions in a row are read as usual.
AHEAD_ENVELOPES: Final = 4
#: The control snapshots' fact kind (``FactKind.CONTROL_SNAPSHOT``) and the separator of their
#: keys (``continuity/snapshots.py``): the governed session id, then the envelope id.
_SNAPSHOT_KIND: Final = "control_snapshot"
_SNAPSHOT_SEP: Final = "\x1f"

(_END, _CURRENT, _RECENT, _NEXT, _SPAN, _RECORDS, _EPISODES, _META, _OPEN, _IDS, _BODIES,
 _JOURNAL, _SNAPSHOTS) = range(13)

#: Every row is the part it answers, a sort key, then ``pos, ref, turn_seq, line, tokens, note``:
#: a record row's columns (``ledger_reads._COLS``, the count under ``counter``) and one text
#: more; the other parts use the columns that fit.
_COLS = ("r.pos, r.ref, r.turn_seq, r.line, (SELECT c.tokens FROM holon_token_counts c "
         "WHERE c.sid=r.sid AND c.counter=%(counter)s AND c.pos=r.pos), NULL::text")
# The CTEs follow the archiver's reads (``Archiver.archive``, ``_span``): the end; the newest
# turn before it (``resolve_limit``); the ``recent`` newest turns up to it (``turns_before``),
# the oldest of them the horizon when there are that many; the newest episodes (``last``, the
# first page of ``_unsealed``); the turn after the horizon and after the newest episode's last
# (``next_turn_pos``); the records from the frontier to the horizon's settle, one page
# (``records_between``: the frontier clipped to the horizon, the settle to the end). Limits are
# ``pos + 0`` as in ledger_reads (RFC 0009: no bad plan for a session the statistics
# underestimate).
_STATEMENT: Final = f"""WITH s AS MATERIALIZED (
  SELECT end_pos AS e FROM holon_sessions WHERE sid=%(sid)s),
cur AS MATERIALIZED (SELECT pos, seq FROM holon_turns WHERE sid=%(sid)s
  AND pos < (SELECT e FROM s) ORDER BY pos DESC LIMIT 1),
recent AS MATERIALIZED (SELECT pos, seq FROM holon_turns WHERE sid=%(sid)s
  AND seq < (SELECT seq FROM cur) + 1 AND pos + 0 < (SELECT e FROM s)
  ORDER BY seq DESC LIMIT %(recent)s),
horizon AS MATERIALIZED (SELECT pos, seq FROM recent
  WHERE (SELECT count(*) FROM recent) = %(recent)s ORDER BY seq LIMIT 1),
newest AS MATERIALIZED (SELECT num, last_seq, body FROM holon_episodes WHERE sid=%(sid)s
  ORDER BY num DESC LIMIT 2),
after AS MATERIALIZED (SELECT last_seq AS seq FROM newest ORDER BY num DESC LIMIT 1),
nxt AS MATERIALIZED (SELECT k.seq, (SELECT t.pos FROM holon_turns t WHERE t.sid=%(sid)s
  AND t.seq > k.seq ORDER BY t.seq LIMIT 1) AS pos
  FROM (SELECT seq FROM horizon UNION SELECT seq FROM after) k),
span AS MATERIALIZED (SELECT lo, least(CASE WHEN settle IS NULL OR settle > (SELECT e FROM s)
  THEN (SELECT e FROM s) ELSE settle END, lo + {AHEAD_PAGE}) AS hi
  FROM (SELECT least(coalesce((SELECT pos FROM nxt WHERE seq = (SELECT seq FROM after)), h.pos),
  h.pos) AS lo, (SELECT pos FROM nxt WHERE seq = h.seq) AS settle FROM horizon h
  WHERE EXISTS (SELECT 1 FROM after)) x),
envs AS MATERIALIZED (SELECT seq, envelope_id, body FROM holon_continuity_envelopes
  WHERE sid=%(sid)s AND session_id=%(session)s ORDER BY seq DESC LIMIT {AHEAD_ENVELOPES})
SELECT {_END}, 0::bigint, e, NULL::text, NULL::bigint, NULL::bytea, NULL::integer, NULL::text
  FROM s
UNION ALL (SELECT {_CURRENT}, 0, {_COLS} FROM holon_records r
  WHERE r.sid=%(sid)s AND r.pos = (SELECT pos FROM cur))
UNION ALL (SELECT {_RECENT}, r.turn_seq, {_COLS} FROM holon_records r
  WHERE r.sid=%(sid)s AND r.pos = ANY(ARRAY(SELECT pos FROM recent)))
UNION ALL (SELECT {_NEXT}, seq, pos, NULL, seq, NULL, NULL, NULL FROM nxt)
UNION ALL (SELECT {_SPAN}, 0, lo, NULL, hi, NULL, NULL, NULL FROM span)
UNION ALL (SELECT {_RECORDS}, r.pos, {_COLS} FROM holon_records r WHERE r.sid=%(sid)s
  AND r.pos >= (SELECT lo FROM span) AND r.pos < (SELECT hi FROM span))
UNION ALL (SELECT {_EPISODES}, num, num, NULL, last_seq, body, NULL, NULL FROM newest)
UNION ALL (SELECT {_META}, 0, NULL, key, NULL, NULL, NULL, value FROM holon_episodes_meta
  WHERE sid=%(sid)s)
UNION ALL (SELECT {_OPEN}, 0, (EXISTS (SELECT 1 FROM holon_episodes_open WHERE sid=%(sid)s
  AND resolved_pos IS NULL) OR EXISTS (SELECT 1 FROM holon_episodes_open WHERE sid=%(sid)s
  AND resolved_pos > (SELECT e FROM s)))::integer, NULL, NULL, NULL, NULL, NULL)
UNION ALL (SELECT {_IDS}, seq, NULL, envelope_id, NULL, NULL, NULL, NULL
  FROM holon_continuity_envelopes WHERE sid=%(sid)s AND session_id=%(session)s)
UNION ALL (SELECT {_BODIES}, seq, NULL, envelope_id, NULL, body, NULL, NULL FROM envs)
UNION ALL (SELECT {_JOURNAL}, 0, NULL, j.envelope_id, NULL, j.body, NULL, j.step
  FROM holon_continuity_journal j WHERE j.sid=%(sid)s
  AND j.envelope_id IN (SELECT envelope_id FROM envs))
UNION ALL (SELECT {_SNAPSHOTS}, 0, NULL, f.key, NULL, f.body, NULL, NULL FROM (
  SELECT DISTINCT ON (key) key, body FROM holon_continuity_facts WHERE sid=%(sid)s
  AND kind=%(kind)s AND key = ANY(ARRAY(SELECT %(prefix)s || envelope_id FROM envs))
  ORDER BY key, seq DESC) f)
ORDER BY 1, 2"""


def read_compaction_ahead(h: SessionHandle, *, counter: str, recent_turns: int,
                          governed: str) -> None:
    """Leave on ``h``'s link the answers of the reads a compaction of ``recent_turns`` recent
    turns, sealing for governed session ``governed``, makes before its first write (see the
    module docstring), replacing whatever was there; none when the session was deleted."""
    rows = h.rows(_STATEMENT, {"counter": counter, "recent": recent_turns, "session": governed,
                              "kind": _SNAPSHOT_KIND, "prefix": governed + _SNAPSHOT_SEP},
                  binary=True)
    link = h.link
    link.ahead.clear()
    if not rows or rows[0][0] != _END:
        return
    parts: list[list[tuple[Any, ...]]] = [[] for _ in range(_SNAPSHOTS + 1)]
    for row in rows[1:]:
        parts[row[0]].append(row)
    sid, end = h.sid, int(rows[0][2])
    found: dict[tuple[Any, ...], Any] = {(sid, "end"): end}
    current = parts[_CURRENT][0][2:7] if parts[_CURRENT] else None
    found[(sid, "latest_turn", counter, end)] = current
    if current is not None:
        recent = sorted((row[2:7] for row in parts[_RECENT]), key=lambda r: -int(r[2]))
        found[(sid, "turns_before", counter, int(current[2]) + 1, recent_turns, end)] = recent
    for row in parts[_NEXT]:
        found[(sid, "next_turn_pos", int(row[4]))] = None if row[2] is None else int(row[2])
    if parts[_SPAN]:
        found[(sid, "records", counter)] = (int(parts[_SPAN][0][2]),
                                            [row[2:7] for row in parts[_RECORDS]])
    newest = {int(row[2]): bytes(row[5]) for row in parts[_EPISODES]}
    found[(sid, "episode_count")] = max(newest, default=0)
    found[(sid, "episodes_newest")] = newest
    found[(sid, "episodes_meta")] = {str(row[3]): str(row[7]) for row in parts[_META]}
    if parts[_OPEN] and not parts[_OPEN][0][2]:
        found[(sid, "open_rows_none_after")] = end
    found[(sid, "envelope_ids", governed)] = [str(row[3]) for row in parts[_IDS]]
    found[(sid, "governed", governed)] = True
    for row in parts[_BODIES]:
        envelope_id = str(row[3])
        found[(sid, "envelope", envelope_id)] = bytes(row[5])
        found[(sid, "steps", envelope_id)] = {}
        found[(sid, "fact", _SNAPSHOT_KIND, governed + _SNAPSHOT_SEP + envelope_id)] = None
    for row in parts[_JOURNAL]:
        steps = found.get((sid, "steps", str(row[3])))
        if steps is not None:
            steps[str(row[7])] = bytes(row[5])
    for row in parts[_SNAPSHOTS]:
        found[(sid, "fact", _SNAPSHOT_KIND, str(row[3]))] = bytes(row[5])
    link.ahead.update(found)


@contextmanager
def compaction_reads(h: SessionHandle, *, counter: str, recent_turns: int,
                     governed: str) -> Iterator[None]:
    """Inside the block, a compaction's reads answered from one statement run on entry (until
    its first write drops them); none after it."""
    read_compaction_ahead(h, counter=counter, recent_turns=recent_turns, governed=governed)
    try:
        yield
    finally:
        h.link.ahead.clear()


def run_alone(h: SessionHandle, fn: Callable[[], _T], *, counter: str, recent_turns: int,
              governed: str) -> _T | None:
    """``fn()`` answered by one statement alone (see the module docstring), or None, having
    sent nothing more, when it would read anything else or write."""
    link = h.link
    read_compaction_ahead(h, counter=counter, recent_turns=recent_turns, governed=governed)
    link.dry = True
    try:
        return fn()
    except NotAnswered:
        return None
    finally:
        link.dry = False
        link.ahead.clear()
