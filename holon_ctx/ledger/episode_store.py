"""Episode stores: episodes beside the ledger, in its SQLite file or in memory.

Both implement :class:`holon_ctx.memory.store.EpisodeStore` and pass the same conformance tests.

SQLite layout. Every table is prefixed ``episodes`` and created with ``IF NOT EXISTS`` on the
first archive, apart from the ledger's schema (which stays at its own version; dropping these
tables loses nothing the ledger cannot rebuild):

``episodes``           one row per episode: ``num`` (append order), id, covered range, owner,
                       digest, term count, canonical body. Append-only.
``episodes_turns``     turn id (primary key) → ``num``: the database refuses a turn in two episodes.
``episodes_terms``     term → document frequency and number of posting blocks.
``episodes_postings``  (term, block) → up to :data:`BLOCK` postings packed as little-endian
                       uint32 triples ``(num, tf, length)``. Appending touches only the last block
                       of each term, so archiving costs O(terms of the new episodes), and a term's
                       newest postings come back in a handful of rows.
``episodes_links``     (key, num): files, waits, tasks, calls and turns an episode shares.
``episodes_open``      one row per unresolved item, with what is known about its resolution.
``episodes_recaps``    summariser recaps, accepted or rejected, bound to (episode id, digest).
``episodes_meta``      archive settings (boundary policy) and corpus totals.
``episodes_runs``      (first num, ledger position): the episodes from ``first_num`` on were
                       archived with the ledger at that position (RFC 0020: recall as of a
                       position sees only the episodes archived by then).
``episodes_forms``     num → the token counts of the episode's rendered forms and the counter
                       that made them (:mod:`holon_ctx.memory.index`; RFC 0024 decision 6).

This module is longer than the usual ~400 lines because it holds both stores: they are the two
halves of one contract and are easiest to keep in step side by side. The postings' packing and
block planning, which every store shares (PostgreSQL's too), are in ``ledger/postings.py``.
"""

from __future__ import annotations

import bisect
import sqlite3
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from holon_ctx.continuity.sqlite_backend import file_name
from holon_ctx.errors import StoreError
from holon_ctx.ledger import locking, walpolicy
from holon_ctx.ledger.postings import (
    BLOCK,
    PostingsHead,
    PostingsPlan,
    newest_postings,
    pack_postings,
    plan_postings,
    unpack_postings,
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

__all__ = ["BLOCK", "MemoryEpisodeStore", "PostingsHead", "PostingsPlan", "SqliteEpisodeStore",
           "conflict", "has_episode_tables", "newest_postings", "pack_postings", "plan_postings",
           "unpack_postings"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    num INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    owner TEXT NOT NULL,
    digest TEXT NOT NULL,
    length INTEGER NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS episodes_by_last ON episodes(last_seq);
CREATE INDEX IF NOT EXISTS episodes_by_owner ON episodes(owner, num);
CREATE TABLE IF NOT EXISTS episodes_turns (turn_id TEXT PRIMARY KEY, num INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS episodes_terms (
    term TEXT PRIMARY KEY, df INTEGER NOT NULL, blocks INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS episodes_postings (
    term TEXT NOT NULL, block INTEGER NOT NULL, first_num INTEGER NOT NULL, n INTEGER NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (term, block)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS episodes_links (
    key TEXT NOT NULL, num INTEGER NOT NULL, PRIMARY KEY (key, num)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS episodes_open (
    num INTEGER NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL, pinned INTEGER NOT NULL,
    last_seq INTEGER NOT NULL, episode_id TEXT NOT NULL, resolved_pos INTEGER,
    exact INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (num, key));
CREATE INDEX IF NOT EXISTS episodes_open_live ON episodes_open(pinned, num)
    WHERE resolved_pos IS NULL;
CREATE INDEX IF NOT EXISTS episodes_open_resolved ON episodes_open(resolved_pos)
    WHERE resolved_pos IS NOT NULL;
CREATE TABLE IF NOT EXISTS episodes_recaps (
    rid INTEGER PRIMARY KEY, episode_id TEXT NOT NULL, digest TEXT NOT NULL, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS episodes_recaps_by_id ON episodes_recaps(episode_id, rid);
CREATE TABLE IF NOT EXISTS episodes_runs (first_num INTEGER PRIMARY KEY, pos INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS episodes_forms (
    num INTEGER PRIMARY KEY, counter TEXT NOT NULL, data BLOB NOT NULL);
"""
#: A corpus total of ``episodes_meta`` as a scalar subquery (0 before any episode).
_META_INT = "coalesce((SELECT CAST(value AS INTEGER) FROM episodes_meta WHERE key='{key}'), 0)"
_DERIVED = ("episodes", "episodes_turns", "episodes_terms", "episodes_postings", "episodes_links",
            "episodes_open", "episodes_runs", "episodes_forms")


def has_episode_tables(path: str | Path) -> bool:
    """True when the SQLite file at ``path`` holds at least one episode (read-only check)."""
    try:
        db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        row = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='episodes'"
                         ).fetchone()
        return row is not None and db.execute("SELECT 1 FROM episodes LIMIT 1").fetchone() is not None
    except sqlite3.Error:
        return False
    finally:
        db.close()


def conflict(new: Episode, old: Episode | None, what: str) -> StoreError:
    if old is not None and old.id == new.id:
        return StoreError(f"episode {new.id} is already stored with different content "
                          f"(digest {old.digest} vs {new.digest}); run `holon-ctx episodes rebuild`")
    return StoreError(f"episode {new.id} would cover {what} a second time; every turn belongs to "
                      "at most one episode")


class SqliteEpisodeStore:
    """Episodes in the ledger's SQLite file (see the module docstring)."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = str(path)
        timeout = locking.lock_timeout()
        try:
            self._db = sqlite3.connect(file_name(self.path), isolation_level=None, check_same_thread=False,
                                       timeout=timeout)
            self._db.execute("PRAGMA synchronous=NORMAL")
            walpolicy.tune_wal(self._db)
            if create:
                self._db.executescript(_SCHEMA)
            elif not self._db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type='table' AND name='episodes'").fetchone():
                self._db.close()
                raise StoreError(f"{self.path}: no episodes archived yet "
                                 "(run `holon-ctx episodes archive`)")
        except sqlite3.DatabaseError as exc:
            if locking.is_lock_error(exc):
                self._db.close()
                raise locking.lock_error(self.path, timeout) from None
            raise StoreError(f"{self.path}: cannot use episode tables ({exc})") from None

    # -- helpers ------------------------------------------------------------------------------
    def _tx(self) -> _Tx:
        return _Tx(self._db, self.path)

    def _one(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        row = self._db.execute(sql, args).fetchone()
        return None if row is None else row[0]

    # -- settings ------------------------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT key, value FROM episodes_meta").fetchall())

    def set_meta(self, items: Mapping[str, str]) -> None:
        with self._tx():
            self._db.executemany("INSERT OR REPLACE INTO episodes_meta VALUES (?, ?)",
                                 sorted(items.items()))

    # -- writes --------------------------------------------------------------------------------
    def database_file(self) -> str:
        """The file the episodes are written to (compaction_lock.SameFileWriter)."""
        return self.path

    def write_transaction(self) -> _Tx:
        """``BEGIN IMMEDIATE … COMMIT``: the file's write lock from its start; the writes
        inside join it (compaction_lock.SameFileWriter: a run stamped where appends wait)."""
        return self._tx()

    def append(self, batch: Sequence[IndexedEpisode], *, archived_pos: int | None = None) -> int:
        db = self._db
        added = 0
        with self._tx():
            pending: dict[str, list[int]] = {}
            num = int(self._one("SELECT coalesce(max(num), 0) FROM episodes"))
            first = num + 1
            total = 0
            for item in batch:
                ep = item.episode
                body = encode_episode(ep)
                old = self._one("SELECT body FROM episodes WHERE id=?", (ep.id,))
                if old is not None:
                    if bytes(old) == body:
                        continue
                    raise conflict(ep, decode_episode(old), "")
                num += 1
                try:
                    db.executemany("INSERT INTO episodes_turns VALUES (?, ?)",
                                   [(tid, num) for tid in ep.turn_ids])
                except sqlite3.IntegrityError:
                    raise conflict(ep, None, f"turns {ep.span.first_turn}–{ep.span.last_turn}"
                                    ) from None
                db.execute("INSERT INTO episodes VALUES (?,?,?,?,?,?,?,?)",
                           (num, ep.id, ep.span.first_seq, ep.span.last_seq, ep.owner, ep.digest,
                            item.length, body))
                db.executemany("INSERT OR IGNORE INTO episodes_links VALUES (?, ?)",
                               [(k, num) for k in item.links])
                db.executemany(
                    "INSERT OR IGNORE INTO episodes_open (num, key, kind, pinned, last_seq, "
                    "episode_id) VALUES (?,?,?,?,?,?)",
                    [(num, o.key, o.kind, int(o.pinned), ep.span.last_seq, ep.id)
                     for o in item.open_items])
                if item.forms is not None:
                    db.execute("INSERT OR REPLACE INTO episodes_forms VALUES (?, ?, ?)",
                               (num, item.forms.counter, item.forms.data))
                for term, tf in item.terms.items():
                    pending.setdefault(term, []).extend((num, tf, item.length))
                total += item.length
                added += 1
            self._add_postings(pending)
            if added and archived_pos is not None:
                db.execute("INSERT OR REPLACE INTO episodes_runs VALUES (?, ?)",
                           (first, archived_pos))
            meta = self.meta()
            self.set_meta_raw({"corpus_docs": str(int(meta.get("corpus_docs", "0")) + added),
                               "corpus_terms": str(int(meta.get("corpus_terms", "0")) + total)})
        return added

    def set_meta_raw(self, items: Mapping[str, str]) -> None:
        self._db.executemany("INSERT OR REPLACE INTO episodes_meta VALUES (?, ?)",
                             sorted(items.items()))

    def _add_postings(self, pending: dict[str, list[int]]) -> None:
        db = self._db
        heads: dict[str, PostingsHead] = {}
        for term in pending:
            row = db.execute("SELECT df, blocks FROM episodes_terms WHERE term=?", (term,)).fetchone()
            if row is not None:
                n, data = db.execute("SELECT n, data FROM episodes_postings WHERE term=? AND block=?",
                                     (term, row[1] - 1)).fetchone()
                heads[term] = PostingsHead(df=row[0], blocks=row[1], last_n=n, last_data=bytes(data))
        plan = plan_postings(pending, heads)
        db.executemany("UPDATE episodes_postings SET n=?, data=? WHERE term=? AND block=?",
                       [(n, data, term, block) for term, block, n, data in plan.updates])
        db.executemany("INSERT INTO episodes_postings VALUES (?,?,?,?,?)", plan.inserts)
        db.executemany("INSERT OR REPLACE INTO episodes_terms VALUES (?,?,?)", plan.terms)

    def mark_resolved(self, resolutions: Sequence[Resolution]) -> None:
        with self._tx():
            self._db.executemany(
                "UPDATE episodes_open SET resolved_pos=?, exact=? WHERE num=? AND key=? AND "
                "(resolved_pos IS NULL OR resolved_pos > ?)",
                [(r.resolved_pos, int(r.exact), r.num, r.key, r.resolved_pos) for r in resolutions])

    def add_recap(self, recap: Recap) -> None:
        with self._tx():
            self._db.execute("INSERT INTO episodes_recaps (episode_id, digest, body) VALUES (?,?,?)",
                             (recap.episode_id, recap.digest, encode_recap(recap)))

    def clear(self) -> None:
        with self._tx():
            for table in _DERIVED:
                self._db.execute(f"DELETE FROM {table}")
            self._db.execute("DELETE FROM episodes_meta WHERE key LIKE 'corpus_%'")

    # -- reads ---------------------------------------------------------------------------------
    def count(self) -> int:
        return int(self._one("SELECT count(*) FROM episodes"))

    def last(self) -> Episode | None:
        body = self._one("SELECT body FROM episodes ORDER BY num DESC LIMIT 1")
        return None if body is None else decode_episode(body)

    def get(self, episode_id: str) -> Episode | None:
        body = self._one("SELECT body FROM episodes WHERE id=?", (episode_id,))
        return None if body is None else decode_episode(body)

    def page(self, *, limit: int, offset: int = 0) -> list[tuple[int, Episode]]:
        rows = self._db.execute("SELECT num, body FROM episodes ORDER BY num LIMIT ? OFFSET ?",
                                (limit, offset)).fetchall()
        return [(num, decode_episode(body)) for num, body in rows]

    def iter_episodes(self) -> Iterator[Episode]:
        cur = self._db.execute("SELECT body FROM episodes ORDER BY num")
        while batch := cur.fetchmany(256):
            for (body,) in batch:
                yield decode_episode(body)

    def max_num_before(self, seq: int) -> int:
        row = self._one("SELECT num FROM episodes WHERE last_seq < ? ORDER BY last_seq DESC "
                        "LIMIT 1", (seq,))
        return 0 if row is None else int(row)

    def archived_by(self, pos: int) -> int:
        first = self._one("SELECT min(first_num) FROM episodes_runs WHERE pos > ?", (pos,))
        return self.count() if first is None else int(first) - 1

    def corpus_through(self, max_num: int) -> tuple[int, int]:
        # The totals less the episodes past ``max_num`` (the newest few: a recall as of an
        # earlier position): the totals are kept in the transaction that adds each episode, and
        # summing the rows up to ``max_num`` read every episode's page (5.2 ms at 100k messages).
        # One statement, one snapshot: read apart, another connection's episode committed between
        # the reads was counted in the rows past the bound and not in the totals.
        row = self._db.execute(
            f"SELECT {_META_INT.format(key='corpus_docs')} - count(*), "
            f"{_META_INT.format(key='corpus_terms')} - coalesce(sum(length), 0) "
            "FROM episodes WHERE num > ?", (max_num,)).fetchone()
        return int(row[0]), int(row[1])

    def corpus(self) -> tuple[int, int]:
        docs, terms, _ = self.corpus_df(())
        return docs, terms

    def df(self, terms: Collection[str]) -> dict[str, int]:
        return self.corpus_df(terms)[2] if terms else {}

    def corpus_df(self, terms: Collection[str]) -> tuple[int, int, dict[str, int]]:
        # One statement, so one snapshot of the totals and the terms' counts, which the
        # transaction adding an episode updates together.
        marks = ",".join("?" * len(terms))
        rows = self._db.execute(
            "SELECT 0, key, CAST(value AS INTEGER) FROM episodes_meta WHERE key IN "
            "('corpus_docs', 'corpus_terms') UNION ALL SELECT 1, term, df FROM episodes_terms "
            f"WHERE term IN ({marks})", tuple(terms)).fetchall()
        meta = {str(key): int(n) for part, key, n in rows if part == 0}
        return (meta.get("corpus_docs", 0), meta.get("corpus_terms", 0),
                {str(term): int(n) for part, term, n in rows if part == 1})

    def postings(self, term: str, max_num: int, cap: int) -> list[tuple[int, int, int]]:
        rows = self._db.execute(
            "SELECT data FROM episodes_postings WHERE term=? AND first_num<=? "
            "ORDER BY block DESC LIMIT ?", (term, max_num, cap // BLOCK + 2)).fetchall()
        return newest_postings((data for (data,) in rows), max_num, cap)

    def by_owner(self, owner: str, max_num: int, limit: int) -> list[int]:
        rows = self._db.execute("SELECT num FROM episodes WHERE owner=? AND num<=? "
                                "ORDER BY num DESC LIMIT ?", (owner, max_num, limit)).fetchall()
        return [r[0] for r in rows]

    def by_links(self, keys: Collection[str], max_num: int, limit: int) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        for key in sorted(keys):
            rows = self._db.execute("SELECT num FROM episodes_links WHERE key=? AND num<=? "
                                    "ORDER BY num DESC LIMIT ?", (key, max_num, limit)).fetchall()
            out.extend((r[0], key) for r in rows)
        out.sort(key=lambda p: (-p[0], p[1]))
        return out[:limit]

    def open_rows(self, max_num: int, limit_pos: int, limit: int) -> list[OpenRow]:
        cols = "num, episode_id, last_seq, key, kind, pinned, resolved_pos, exact"
        # The open ones and those resolved after limit_pos, in one statement (one snapshot): read
        # apart, an item another connection resolved after limit_pos between the reads was in both.
        found = self._db.execute(
            f"SELECT * FROM (SELECT {cols} FROM episodes_open WHERE resolved_pos IS NULL "
            "AND num<=? ORDER BY pinned DESC, num DESC LIMIT ?) UNION ALL "
            f"SELECT * FROM (SELECT {cols} FROM episodes_open WHERE resolved_pos IS NOT NULL "
            "AND resolved_pos>? AND num<=? ORDER BY pinned DESC, num DESC LIMIT ?)",
            (max_num, limit, limit_pos, max_num, limit)).fetchall()
        rows = [OpenRow(num=r[0], episode_id=r[1], last_seq=r[2], key=r[3], kind=r[4],
                        pinned=bool(r[5]), resolved_pos=r[6], exact=bool(r[7]))
                for r in found]
        rows.sort(key=lambda r: (not r.pinned, -r.num, r.key))
        return rows[:limit]

    def episodes(self, nums: Collection[int]) -> dict[int, Episode]:
        if not nums:
            return {}
        marks = ",".join("?" * len(nums))
        rows = self._db.execute(f"SELECT num, body FROM episodes WHERE num IN ({marks})",
                                tuple(nums)).fetchall()
        return {num: decode_episode_shared(body) for num, body in rows}

    def form_counts(self, nums: Collection[int]) -> dict[int, FormCounts]:
        if not nums:
            return {}
        marks = ",".join("?" * len(nums))
        rows = self._db.execute(f"SELECT num, counter, data FROM episodes_forms "
                                f"WHERE num IN ({marks})", tuple(nums)).fetchall()
        return {num: FormCounts(counter, bytes(data)) for num, counter, data in rows}

    def recaps(self, episode_id: str) -> list[Recap]:
        rows = self._db.execute("SELECT body FROM episodes_recaps WHERE episode_id=? ORDER BY rid",
                                (episode_id,)).fetchall()
        return [decode_recap(r[0]) for r in rows]

    def recaps_for(self, episode_ids: Collection[str]) -> dict[str, list[Recap]]:
        if not episode_ids:
            return {}
        marks = ",".join("?" * len(episode_ids))
        out: dict[str, list[Recap]] = {}
        for ident, body in self._db.execute(
                f"SELECT episode_id, body FROM episodes_recaps WHERE episode_id IN ({marks}) "
                "ORDER BY rid", tuple(episode_ids)).fetchall():
            out.setdefault(ident, []).append(decode_recap(body))
        return out

    def close(self) -> None:
        self._db.close()


class _Tx:
    """``BEGIN IMMEDIATE … COMMIT`` (ROLLBACK on error); nested uses join the outer one."""

    def __init__(self, db: sqlite3.Connection, path: str) -> None:
        self.db = db
        self.path = path
        self.outer = not db.in_transaction

    def __enter__(self) -> None:
        if self.outer:
            with locking.translate_lock_errors(self.path):
                self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self.outer:
            return
        if exc_type is None:
            self.db.execute("COMMIT")
        elif self.db.in_transaction:
            # SQLite already rolled back by itself on a full disk or an I/O error; a ROLLBACK
            # then would fail and hide that error.
            self.db.execute("ROLLBACK")


class MemoryEpisodeStore:
    """The same contract in dicts and lists, for tests and for embedding with a MemoryStore."""

    def __init__(self) -> None:
        self._meta: dict[str, str] = {}
        self._eps: list[Episode] = []  # num - 1 → episode
        self._by_id: dict[str, int] = {}
        self._last_seqs: list[int] = []
        self._covered: dict[str, int] = {}
        self._postings: dict[str, list[tuple[int, int, int]]] = {}
        self._links: dict[str, list[int]] = {}
        self._owner: dict[str, list[int]] = {}
        #: Unresolved rows with no known resolution, and resolved rows by resolution position.
        self._open: dict[tuple[int, str], OpenRow] = {}
        self._resolved: list[tuple[int, int, str]] = []
        self._resolved_rows: dict[tuple[int, str], OpenRow] = {}
        self._recaps: dict[str, list[Recap]] = {}
        self._terms = 0
        self._lengths: list[int] = []
        #: ``(ledger position, first num)`` of each archive run that gave one (ascending).
        self._runs: list[tuple[int, int]] = []
        self._forms: dict[int, FormCounts] = {}

    def meta(self) -> dict[str, str]:
        return dict(self._meta)

    def set_meta(self, items: Mapping[str, str]) -> None:
        self._meta.update(items)

    def append(self, batch: Sequence[IndexedEpisode], *, archived_pos: int | None = None) -> int:
        staged: list[IndexedEpisode] = []
        covered: dict[str, str] = {}
        for item in batch:
            ep = item.episode
            known = self._by_id.get(ep.id)
            if known is not None:
                old = self._eps[known - 1]
                if encode_episode(old) == encode_episode(ep):
                    continue
                raise conflict(ep, old, "")
            for tid in ep.turn_ids:
                if tid in self._covered or tid in covered:
                    raise conflict(ep, None, f"turns {ep.span.first_turn}–{ep.span.last_turn}")
                covered[tid] = ep.id
            staged.append(item)
        if staged and archived_pos is not None:
            self._runs.append((archived_pos, len(self._eps) + 1))
        for item in staged:
            ep = item.episode
            self._lengths.append(item.length)
            self._eps.append(ep)
            num = len(self._eps)
            self._by_id[ep.id] = num
            self._last_seqs.append(ep.span.last_seq)
            for tid in ep.turn_ids:
                self._covered[tid] = num
            for term, tf in item.terms.items():
                self._postings.setdefault(term, []).append((num, tf, item.length))
            for key in item.links:
                self._links.setdefault(key, []).append(num)
            self._owner.setdefault(ep.owner, []).append(num)
            if item.forms is not None:
                self._forms[num] = item.forms
            for o in item.open_items:
                self._open.setdefault((num, o.key), OpenRow(
                    num=num, episode_id=ep.id, last_seq=ep.span.last_seq, key=o.key, kind=o.kind,
                    pinned=o.pinned, resolved_pos=None, exact=False))
            self._terms += item.length
        return len(staged)

    def mark_resolved(self, resolutions: Sequence[Resolution]) -> None:
        for r in resolutions:
            ident = (r.num, r.key)
            row = self._open.get(ident) or self._resolved_rows.get(ident)
            if row is None or (row.resolved_pos is not None and row.resolved_pos <= r.resolved_pos):
                continue
            if row.resolved_pos is not None:
                self._resolved.remove((row.resolved_pos, r.num, r.key))
            self._open.pop(ident, None)
            self._resolved_rows[ident] = OpenRow(
                num=row.num, episode_id=row.episode_id, last_seq=row.last_seq, key=row.key,
                kind=row.kind, pinned=row.pinned, resolved_pos=r.resolved_pos, exact=r.exact)
            bisect.insort(self._resolved, (r.resolved_pos, r.num, r.key))

    def add_recap(self, recap: Recap) -> None:
        self._recaps.setdefault(recap.episode_id, []).append(recap)

    def clear(self) -> None:
        recaps, meta = self._recaps, self._meta
        self.__init__()  # type: ignore[misc]
        self._recaps, self._meta = recaps, meta

    def count(self) -> int:
        return len(self._eps)

    def last(self) -> Episode | None:
        return self._eps[-1] if self._eps else None

    def get(self, episode_id: str) -> Episode | None:
        num = self._by_id.get(episode_id)
        return None if num is None else self._eps[num - 1]

    def page(self, *, limit: int, offset: int = 0) -> list[tuple[int, Episode]]:
        return [(i + 1, ep) for i, ep in enumerate(self._eps[offset : offset + limit], start=offset)]

    def iter_episodes(self) -> Iterator[Episode]:
        return iter(list(self._eps))

    def max_num_before(self, seq: int) -> int:
        return bisect.bisect_left(self._last_seqs, seq)

    def corpus(self) -> tuple[int, int]:
        return len(self._eps), self._terms

    def archived_by(self, pos: int) -> int:
        later = [first for at, first in self._runs if at > pos]
        return min(later) - 1 if later else len(self._eps)

    def corpus_through(self, max_num: int) -> tuple[int, int]:
        lengths = self._lengths[:max(0, max_num)]
        return len(lengths), sum(lengths)

    def corpus_df(self, terms: Collection[str]) -> tuple[int, int, dict[str, int]]:
        return (*self.corpus(), self.df(terms))

    def df(self, terms: Collection[str]) -> dict[str, int]:
        return {t: len(self._postings[t]) for t in terms if t in self._postings}

    def postings(self, term: str, max_num: int, cap: int) -> list[tuple[int, int, int]]:
        plist = self._postings.get(term, [])
        end = bisect.bisect_right(plist, (max_num, sys.maxsize, sys.maxsize))
        return plist[max(0, end - cap) : end][::-1]

    def by_owner(self, owner: str, max_num: int, limit: int) -> list[int]:
        nums = self._owner.get(owner, [])
        end = bisect.bisect_right(nums, max_num)
        return nums[max(0, end - limit) : end][::-1]

    def by_links(self, keys: Collection[str], max_num: int, limit: int) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        for key in sorted(keys):
            nums = self._links.get(key, [])
            end = bisect.bisect_right(nums, max_num)
            out.extend((n, key) for n in nums[max(0, end - limit) : end])
        out.sort(key=lambda p: (-p[0], p[1]))
        return out[:limit]

    def open_rows(self, max_num: int, limit_pos: int, limit: int) -> list[OpenRow]:
        later = self._resolved[bisect.bisect_right(self._resolved, (limit_pos, sys.maxsize, "")):]
        rows = [r for r in self._open.values() if r.num <= max_num]
        rows.extend(self._resolved_rows[(n, k)] for _, n, k in later if n <= max_num)
        rows.sort(key=lambda r: (not r.pinned, -r.num, r.key))
        return rows[:limit]

    def episodes(self, nums: Collection[int]) -> dict[int, Episode]:
        return {n: self._eps[n - 1] for n in nums if 0 < n <= len(self._eps)}

    def form_counts(self, nums: Collection[int]) -> dict[int, FormCounts]:
        return {n: self._forms[n] for n in nums if n in self._forms}

    def recaps(self, episode_id: str) -> list[Recap]:
        return list(self._recaps.get(episode_id, []))

    def recaps_for(self, episode_ids: Collection[str]) -> dict[str, list[Recap]]:
        return {i: list(self._recaps[i]) for i in episode_ids if i in self._recaps}

    def close(self) -> None:
        return None
