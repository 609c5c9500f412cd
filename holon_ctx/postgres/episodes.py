"""Episodes of one session in PostgreSQL: the SQLite layout (``ledger/episode_store.py``) with
``sid`` in front of every key.

Writes are one transaction each under a transaction-level advisory lock on the session's
episodes, so two archivers of the same session take turns (numbers ``num`` are allocated under
it) while other sessions, and the session's ledger appends, are not held up. The postings layout
and its block arithmetic are shared with SQLite (``plan_postings``, ``newest_postings``); here an
append takes the lock and makes every read it needs (every touched term's head among them) in one
pipelined round trip, then sends its writes with ``executemany`` and the commit in another.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar

from holon_ctx.errors import StoreError, quote_value
from holon_ctx.ledger.episode_store import (
    BLOCK,
    PostingsHead,
    conflict,
    newest_postings,
    plan_postings,
)
from holon_ctx.memory.episodes import (
    Episode,
    Recap,
    decode_episode,
    decode_episode_shared,
    decode_recap,
    encode_episode,
    encode_recap,
)
from holon_ctx.memory.index import FormCounts, IndexedEpisode
from holon_ctx.memory.store import OpenRow, Resolution
from holon_ctx.postgres.session import MISSING, SessionHandle

__all__ = ["PostgresEpisodeStore"]

#: First key of the advisory lock that serialises one session's episode writes (second: sid).
_LOCK: Final = 0x45504953  # "EPIS"
_T = TypeVar("_T")
#: The connection is in no transaction (psycopg's ``TransactionStatus.IDLE``).
_IDLE: Final = 0
_SET_META: Final = ("INSERT INTO holon_episodes_meta VALUES (%s, %s, %s) ON CONFLICT (sid, key) "
                    "DO UPDATE SET value = excluded.value")


class PostgresEpisodeStore:
    """``PostgresEpisodeStore(url_or_connection, session=KEY)``; ``create=False`` refuses a
    session that has archived nothing yet, as the SQLite store refuses a file without episodes."""

    def __init__(self, source: str | Any, *, session: str, create: bool = True) -> None:
        self._h = SessionHandle(source, session, create=create)
        if not create and not self._h.one(
                "SELECT EXISTS (SELECT 1 FROM holon_episodes_meta WHERE sid=%(sid)s) "
                "OR EXISTS (SELECT 1 FROM holon_episodes WHERE sid=%(sid)s)", {})[0]:
            self._h.close()
            raise StoreError(f"{self._h.where} session {quote_value(session)}: no episodes archived yet "
                             "(run `holon-ctx episodes archive`)")

    def _write(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` in one transaction holding the session's episode lock."""
        def locked() -> _T:
            self._h.rows("SELECT pg_advisory_xact_lock(%(lock)s, (%(sid)s %% 2147483647)::int)",
                         {"lock": _LOCK})
            return fn()
        return self._h.transaction(locked)

    # -- settings ------------------------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        ahead = self._h.ahead("episodes_meta")  # a compaction's read ahead (compaction_ahead.py)
        if ahead is not MISSING:
            return dict(ahead)
        return dict(self._h.rows("SELECT key, value FROM holon_episodes_meta WHERE sid=%(sid)s", {}))

    def _set_meta(self, items: Mapping[str, str]) -> None:
        self._h.many(_SET_META, [(self._h.sid, k, v) for k, v in sorted(items.items())])

    def set_meta(self, items: Mapping[str, str]) -> None:
        self._write(lambda: self._set_meta(items))

    # -- writes --------------------------------------------------------------------------------
    def append(self, batch: Sequence[IndexedEpisode], *, archived_pos: int | None = None) -> int:
        """Append ``batch`` (an episode already stored with the same bytes is skipped; another
        under a stored id, or a turn covered twice, is refused) in one transaction holding the
        session's episode lock, in two round trips whatever the batch holds: the lock and
        every read the batch needs in one pipeline (the newest number, the stored bodies of its
        ids, the turns already covered, its terms' postings heads, the corpus), then its writes
        and the commit in another. Inside the caller's transaction (an archive run holds the
        ledger's appends) it is part of that one."""
        if not batch:
            return 0
        return self._h.call(lambda: self._pipelined(batch, archived_pos))

    def _pipelined(self, batch: Sequence[IndexedEpisode], archived_pos: int | None) -> int:
        conn = self._h.conn
        outer = conn.info.transaction_status != _IDLE
        try:
            with conn.pipeline() as pipe:
                if not outer:
                    conn.execute("BEGIN")
                reads = [conn.execute(sql, {"sid": self._h.sid, **args})
                         for sql, args in _append_reads(batch)]
                pipe.sync()
                answers = [list(cur.fetchall()) for cur in reads]
                added = self._append(batch, archived_pos, answers[1:])
                if not outer:
                    conn.execute("COMMIT")
        except BaseException:
            if not outer and not conn.closed and conn.info.transaction_status != _IDLE:
                conn.execute("ROLLBACK")
            raise
        return added

    def _append(self, batch: Sequence[IndexedEpisode], archived_pos: int | None,
                answers: list[list[tuple[Any, ...]]]) -> int:
        """The writes of ``batch``, queued on the pipeline, from the reads' ``answers``."""
        (newest,), known_rows, taken_rows, head_rows, corpus_rows = answers
        sid = self._h.sid
        num = int(newest[0])
        first = num + 1
        known = {str(i): bytes(b) for i, b in known_rows}
        pending: dict[str, list[int]] = {}
        rows: dict[str, list[tuple[Any, ...]]] = {"turns": [], "episodes": [], "links": [],
                                                  "open": [], "forms": []}
        added = total = 0
        new: list[Episode] = []
        for item in batch:
            ep = item.episode
            body = encode_episode(ep)
            old = known.get(ep.id)
            if old is not None:
                if old == body:
                    continue
                raise conflict(ep, decode_episode(old), "")
            num += 1
            known[ep.id] = body
            new.append(ep)
            rows["turns"].extend((sid, tid, num) for tid in ep.turn_ids)
            rows["episodes"].append((sid, num, ep.id, ep.span.first_seq, ep.span.last_seq,
                                     ep.owner, ep.digest, item.length, body))
            rows["links"].extend((sid, k, num) for k in item.links)
            rows["open"].extend((sid, num, o.key, o.kind, o.pinned, ep.span.last_seq, ep.id)
                                for o in item.open_items)
            if item.forms is not None:
                rows["forms"].append((sid, num, item.forms.counter, item.forms.data))
            for term, tf in item.terms.items():
                pending.setdefault(term, []).extend((num, tf, item.length))
            total += item.length
            added += 1
        if not added:
            return 0
        _check_turns(new, {str(t) for (t,) in taken_rows})
        plan = plan_postings(pending, {
            str(term): PostingsHead(df=int(df), blocks=blocks, last_n=n, last_data=bytes(data))
            for term, df, blocks, n, data in head_rows})
        corpus = {str(k): int(v) for k, v in corpus_rows}
        writes: list[tuple[str, list[tuple[Any, ...]]]] = [
            ("INSERT INTO holon_episodes_turns VALUES (%s, %s, %s)", rows["turns"]),
            ("INSERT INTO holon_episodes VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)", rows["episodes"]),
            ("INSERT INTO holon_episodes_links VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
             rows["links"]),
            ("INSERT INTO holon_episodes_open (sid, num, key, kind, pinned, last_seq, "
             "episode_id) VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING", rows["open"]),
            ("INSERT INTO holon_episodes_forms VALUES (%s, %s, %s, %s) ON CONFLICT (sid, num) "
             "DO UPDATE SET counter = excluded.counter, data = excluded.data", rows["forms"]),
            ("UPDATE holon_episodes_postings SET n=%s, data=%s WHERE sid=%s AND term=%s "
             "AND block=%s", [(n, data, sid, term, block)
                              for term, block, n, data in plan.updates]),
            ("INSERT INTO holon_episodes_postings VALUES (%s,%s,%s,%s,%s,%s)",
             [(sid, *row) for row in plan.inserts]),
            ("INSERT INTO holon_episodes_terms VALUES (%s,%s,%s,%s) ON CONFLICT (sid, term) "
             "DO UPDATE SET df = excluded.df, blocks = excluded.blocks",
             [(sid, *row) for row in plan.terms]),
            ("INSERT INTO holon_episodes_runs VALUES (%s, %s, %s) ON CONFLICT (sid, first_num) "
             "DO UPDATE SET pos = excluded.pos",
             [] if archived_pos is None else [(sid, first, archived_pos)]),
            (_SET_META, [(sid, "corpus_docs", str(corpus.get("corpus_docs", 0) + added)),
                         (sid, "corpus_terms", str(corpus.get("corpus_terms", 0) + total))]),
        ]
        with self._h.conn.cursor() as cur:
            for sql, values in writes:
                if values:
                    cur.executemany(sql, values)
        return added

    def mark_resolved(self, resolutions: Sequence[Resolution]) -> None:
        sid = self._h.sid
        self._write(lambda: self._h.many(
            "UPDATE holon_episodes_open SET resolved_pos=%s, exact=%s WHERE sid=%s AND num=%s "
            "AND key=%s AND (resolved_pos IS NULL OR resolved_pos > %s)",
            [(r.resolved_pos, r.exact, sid, r.num, r.key, r.resolved_pos) for r in resolutions]))

    def add_recap(self, recap: Recap) -> None:
        self._write(lambda: self._h.rows(
            "INSERT INTO holon_episodes_recaps (sid, episode_id, digest, body) "
            "VALUES (%(sid)s, %(id)s, %(digest)s, %(body)s)",
            {"id": recap.episode_id, "digest": recap.digest, "body": encode_recap(recap)}))

    def clear(self) -> None:
        def run() -> None:
            for table in ("holon_episodes", "holon_episodes_turns", "holon_episodes_terms",
                          "holon_episodes_postings", "holon_episodes_links", "holon_episodes_open",
                          "holon_episodes_runs", "holon_episodes_forms"):
                self._h.rows(f"DELETE FROM {table} WHERE sid=%(sid)s", {})
            self._h.rows("DELETE FROM holon_episodes_meta WHERE sid=%(sid)s "
                         "AND key LIKE 'corpus_%%'", {})
        self._write(run)

    # -- reads ---------------------------------------------------------------------------------
    def count(self) -> int:
        # Numbers are dense from 1 (an append numbers from the highest under its lock; episodes
        # are only ever deleted all at once), so the count is the highest: one index probe, not
        # a scan of every episode (0.14 ms of each request's read ahead at 10k messages).
        ahead = self._h.ahead("episode_count")  # a compaction's read ahead (compaction_ahead.py)
        if ahead is not MISSING:
            return int(ahead)
        return int(self._h.one(_COUNT, {})[0])

    def _body(self, where: str, args: dict[str, Any]) -> Episode | None:
        row = self._h.one(f"SELECT body FROM holon_episodes WHERE sid=%(sid)s {where}", args)
        return None if row is None else decode_episode(row[0])

    def last(self) -> Episode | None:
        newest = self._h.ahead("episodes_newest")  # a compaction's (compaction_ahead.py)
        if newest is not MISSING:
            return decode_episode(newest[max(newest)]) if newest else None
        return self._body("ORDER BY num DESC LIMIT 1", {})

    def get(self, episode_id: str) -> Episode | None:
        return self._body("AND id=%(id)s", {"id": episode_id})

    def page(self, *, limit: int, offset: int = 0) -> list[tuple[int, Episode]]:
        rows = self._h.rows("SELECT num, body FROM holon_episodes WHERE sid=%(sid)s ORDER BY num "
                            "LIMIT %(limit)s OFFSET %(offset)s", {"limit": limit, "offset": offset})
        return [(int(num), decode_episode(body)) for num, body in rows]

    def iter_episodes(self) -> Iterator[Episode]:
        after = 0
        while True:
            rows = self._h.rows("SELECT num, body FROM holon_episodes WHERE sid=%(sid)s AND "
                                "num > %(after)s ORDER BY num LIMIT 256", {"after": after})
            if not rows:
                return
            for _, body in rows:
                yield decode_episode(body)
            after = int(rows[-1][0])

    def max_num_before(self, seq: int) -> int:
        row = self._h.one("SELECT num FROM holon_episodes WHERE sid=%(sid)s AND last_seq < %(seq)s "
                          "ORDER BY last_seq DESC LIMIT 1", {"seq": seq})
        return 0 if row is None else int(row[0])

    def archived_by(self, pos: int) -> int:
        ahead = self._h.ahead("archived_by", pos)  # a request's read ahead (postgres/ahead.py)
        if ahead is not MISSING:
            return int(ahead)
        first = self._h.one("SELECT min(first_num) FROM holon_episodes_runs WHERE sid=%(sid)s "
                            "AND pos > %(pos)s", {"pos": pos})[0]
        return self.count() if first is None else int(first) - 1

    def corpus_through(self, max_num: int) -> tuple[int, int]:
        row = self._h.one("SELECT count(*), coalesce(sum(length), 0) FROM holon_episodes "
                          "WHERE sid=%(sid)s AND num <= %(max)s", {"max": max_num})
        return int(row[0]), int(row[1])

    def corpus(self) -> tuple[int, int]:
        meta = dict(self._h.rows(
            "SELECT key, value FROM holon_episodes_meta WHERE sid=%(sid)s "
            "AND key IN ('corpus_docs', 'corpus_terms')", {}))
        return int(meta.get("corpus_docs", 0)), int(meta.get("corpus_terms", 0))

    def df(self, terms: Collection[str]) -> dict[str, int]:
        if not terms:
            return {}
        return {t: int(n) for t, n in self._h.rows(
            "SELECT term, df FROM holon_episodes_terms WHERE sid=%(sid)s AND term = ANY(%(t)s)",
            {"t": list(terms)})}

    def corpus_df(self, terms: Collection[str]) -> tuple[int, int, dict[str, int]]:
        # One statement, so one snapshot: each read apart, an episode another connection
        # committed between them was in the counts and not in the totals (RFC 0020).
        rows = self._h.rows(
            "SELECT 0, key, value::bigint FROM holon_episodes_meta WHERE sid=%(sid)s "
            "AND key IN ('corpus_docs', 'corpus_terms') UNION ALL SELECT 1, term, df::bigint "
            "FROM holon_episodes_terms WHERE sid=%(sid)s AND term = ANY(%(t)s)",
            {"t": list(terms)})
        meta = {str(key): int(n) for part, key, n in rows if part == 0}
        return (meta.get("corpus_docs", 0), meta.get("corpus_terms", 0),
                {str(term): int(n) for part, term, n in rows if part == 1})

    def postings(self, term: str, max_num: int, cap: int) -> list[tuple[int, int, int]]:
        rows = self._h.rows(
            "SELECT data FROM holon_episodes_postings WHERE sid=%(sid)s AND term=%(term)s AND "
            "first_num <= %(max)s ORDER BY block DESC LIMIT %(n)s",
            {"term": term, "max": max_num, "n": cap // BLOCK + 2})
        return newest_postings((bytes(data) for (data,) in rows), max_num, cap)

    def by_owner(self, owner: str, max_num: int, limit: int) -> list[int]:
        return [int(r[0]) for r in self._h.rows(
            "SELECT num FROM holon_episodes WHERE sid=%(sid)s AND owner=%(owner)s AND "
            "num <= %(max)s ORDER BY num DESC LIMIT %(n)s",
            {"owner": owner, "max": max_num, "n": limit})]

    def by_links(self, keys: Collection[str], max_num: int, limit: int) -> list[tuple[int, str]]:
        if not keys:
            return []
        rows = self._h.rows(
            "SELECT l.num, k.key FROM unnest(%(keys)s::text[]) AS k(key) CROSS JOIN LATERAL "
            "(SELECT num FROM holon_episodes_links WHERE sid=%(sid)s AND key=k.key AND "
            "num <= %(max)s ORDER BY num DESC LIMIT %(n)s) l",
            {"keys": sorted(keys), "max": max_num, "n": limit})
        out = [(int(num), key) for num, key in rows]
        out.sort(key=lambda p: (-p[0], p[1]))
        return out[:limit]

    def open_rows(self, max_num: int, limit_pos: int, limit: int) -> list[OpenRow]:
        none_after = self._h.ahead("open_rows_none_after")  # a compaction's (compaction_ahead)
        if none_after is not MISSING and limit_pos >= none_after:
            # No item open, and none resolved after the end read ahead: none after limit_pos.
            return []
        cols = ("SELECT num, episode_id, last_seq, key, kind, pinned, resolved_pos, exact FROM "
                "holon_episodes_open WHERE sid=%(sid)s AND num <= %(max)s AND ")
        order = " ORDER BY pinned DESC, num DESC LIMIT %(n)s"
        # The open ones and those resolved after limit_pos: two index searches in one
        # statement, so one snapshot (two statements, even pipelined, saw two: an item another
        # runtime's archive run marked resolved after limit_pos between them was in both).
        found = self._h.rows(f"({cols}resolved_pos IS NULL{order}) UNION ALL "
                             f"({cols}resolved_pos > %(pos)s{order})",
                             {"max": max_num, "pos": limit_pos, "n": limit})
        rows = [OpenRow(num=int(r[0]), episode_id=r[1], last_seq=int(r[2]), key=r[3], kind=r[4],
                        pinned=bool(r[5]), resolved_pos=None if r[6] is None else int(r[6]),
                        exact=bool(r[7])) for r in found]
        rows.sort(key=lambda r: (not r.pinned, -r.num, r.key))
        return rows[:limit]

    def episodes(self, nums: Collection[int]) -> dict[int, Episode]:
        if not nums:
            return {}
        newest = self._h.ahead("episodes_newest")  # a compaction's (compaction_ahead.py)
        if newest is not MISSING:
            # The newest episodes, read with the count: numbers are dense from 1 (see count),
            # so a number above the count or below 1 is no episode.
            count = max(newest, default=0)
            if all(n in newest or n > count or n < 1 for n in nums):
                return {n: decode_episode_shared(newest[n]) for n in nums if n in newest}
        return {int(num): decode_episode_shared(body) for num, body in self._h.rows(
            "SELECT num, body FROM holon_episodes WHERE sid=%(sid)s AND num = ANY(%(nums)s)",
            {"nums": list(nums)})}

    def form_counts(self, nums: Collection[int]) -> dict[int, FormCounts]:
        if not nums:
            return {}
        return {int(num): FormCounts(counter, bytes(data)) for num, counter, data in self._h.rows(
            "SELECT num, counter, data FROM holon_episodes_forms WHERE sid=%(sid)s "
            "AND num = ANY(%(nums)s)", {"nums": list(nums)})}

    def recaps(self, episode_id: str) -> list[Recap]:
        return self.recaps_for([episode_id]).get(episode_id, [])

    def recaps_for(self, episode_ids: Collection[str]) -> dict[str, list[Recap]]:
        if not episode_ids:
            return {}
        out: dict[str, list[Recap]] = {}
        for ident, body in self._h.rows(
                "SELECT episode_id, body FROM holon_episodes_recaps WHERE sid=%(sid)s AND "
                "episode_id = ANY(%(ids)s) ORDER BY rid", {"ids": list(episode_ids)}):
            out.setdefault(ident, []).append(decode_recap(body))
        return out

    def close(self) -> None:
        self._h.close()


#: The session's episode count (see ``count``; the read ahead asks it too).
_COUNT: Final = "SELECT coalesce(max(num), 0) FROM holon_episodes WHERE sid=%(sid)s"


def _append_reads(batch: Sequence[IndexedEpisode]) -> list[tuple[str, dict[str, Any]]]:
    """What an append reads, the lock first: none needs another's answer."""
    return [
        ("SELECT pg_advisory_xact_lock(%(lock)s, (%(sid)s %% 2147483647)::int)", {"lock": _LOCK}),
        (_COUNT, {}),
        ("SELECT id, body FROM holon_episodes WHERE sid=%(sid)s AND id = ANY(%(ids)s)",
         {"ids": [item.episode.id for item in batch]}),
        ("SELECT turn_id FROM holon_episodes_turns WHERE sid=%(sid)s AND turn_id = ANY(%(ids)s)",
         {"ids": [t for item in batch for t in item.episode.turn_ids]}),
        ("SELECT t.term, t.df, t.blocks, p.n, p.data FROM holon_episodes_terms t "
         "JOIN holon_episodes_postings p ON p.sid=t.sid AND p.term=t.term "
         "AND p.block=t.blocks-1 WHERE t.sid=%(sid)s AND t.term = ANY(%(terms)s)",
         {"terms": sorted({term for item in batch for term in item.terms})}),
        ("SELECT key, value FROM holon_episodes_meta WHERE sid=%(sid)s "
         "AND key IN ('corpus_docs', 'corpus_terms')", {}),
    ]


def _check_turns(new: list[Episode], taken: set[str]) -> None:
    """A turn covered twice (by a stored episode, ``taken``, or within the batch) is refused,
    naming the first episode that would cover it again, as SQLite's primary key does."""
    for ep in new:
        if taken.intersection(ep.turn_ids) or len(set(ep.turn_ids)) < len(ep.turn_ids):
            raise conflict(ep, None, f"turns {ep.span.first_turn}–{ep.span.last_turn}")
        taken.update(ep.turn_ids)
