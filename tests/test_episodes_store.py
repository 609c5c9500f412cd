"""The EpisodeStore contract, run against the SQLite and the in-memory store alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from test_episodes_kit import Conv, make_stores, policy

from holon_ctx.errors import StoreError
from holon_ctx.ledger.episode_store import (
    BLOCK,
    MemoryEpisodeStore,
    SqliteEpisodeStore,
    has_episode_tables,
)
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.memory.archiver import Archiver
from holon_ctx.memory.episodes import Claim, Episode, Recap, RecapStatus, Span
from holon_ctx.memory.index import FormCounts, chunk_key, index_episode, pack_counts
from holon_ctx.memory.store import EpisodeStore, Resolution
from holon_ctx.postgres.episodes import PostgresEpisodeStore


def _episode(first: int, last: int, text: str, *, owner: str = "conversation",
             unresolved: list[Claim] | None = None) -> Episode:
    return Episode(
        id=f"e{first}-{last}",
        span=Span(first_turn=f"turn:t{first}", last_turn=f"turn:t{last}", first_seq=first,
                  last_seq=last),
        turn_ids=[f"t{s}" for s in range(first, last + 1)],
        source_refs=[f"turn:t{s}" for s in range(first, last + 1)],
        digest="sha256:" + f"{first:064x}", owner=owner, closed_by="max_range",
        operator_intents=[Claim(kind="request", text="operator request", refs=[f"turn:t{first}"],
                                quote=text, origin="operator", trust="trusted_operator")],
        unresolved=unresolved or [], links=[f"file:{owner}.py"])


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EpisodeStore]:
    s: EpisodeStore
    if request.param == "memory":
        s = MemoryEpisodeStore()
    elif request.param == "postgres":
        s = PostgresEpisodeStore(request.getfixturevalue("pg_url"),
                                 session=request.getfixturevalue("pg_session_key"))
    else:
        SqliteStore(tmp_path / "l.db").close()
        s = SqliteEpisodeStore(tmp_path / "l.db")
    yield s
    s.close()


def test_append_is_idempotent_and_numbers_in_order(store: EpisodeStore) -> None:
    """Episodes are numbered in append order; appending the same bytes again is a no-op."""
    a, b = _episode(0, 1, "billing database"), _episode(2, 4, "website banner")
    assert store.append([index_episode(a), index_episode(b)]) == 2
    assert store.append([index_episode(a)]) == 0
    assert [ep.id for ep in store.iter_episodes()] == ["e0-1", "e2-4"]
    assert store.last() == b
    assert store.get("e0-1") == a
    assert store.get("e9-9") is None
    assert [n for n, _ in store.page(limit=1, offset=1)] == [2]
    assert store.max_num_before(2) == 1
    assert store.max_num_before(5) == 2
    assert store.max_num_before(0) == 0


def test_a_conflicting_episode_or_a_double_covered_turn_is_refused_atomically(
        store: EpisodeStore) -> None:
    """Different bytes for a stored id, or a turn in two episodes, raise and keep nothing."""
    store.append([index_episode(_episode(0, 1, "billing"))])
    with pytest.raises(StoreError, match="different content"):
        store.append([index_episode(_episode(0, 1, "changed"))])
    with pytest.raises(StoreError, match="at most one episode"):
        store.append([index_episode(_episode(2, 3, "fine")), index_episode(_episode(1, 2, "x"))])
    assert [ep.id for ep in store.iter_episodes()] == ["e0-1"]
    assert store.corpus() == (1, index_episode(_episode(0, 1, "billing")).length)


def test_postings_are_newest_first_capped_and_bounded_by_num(store: EpisodeStore) -> None:
    """A term's postings come newest first, never past ``max_num``, at most ``cap`` of them."""
    n = BLOCK * 2 + 5
    store.append([index_episode(_episode(i, i, f"billing replica {i}")) for i in range(n)])
    assert store.df(["billing", "replica", "nothing"]) == {"billing": n, "replica": n}
    got = store.postings("billing", n, 10)
    assert [p[0] for p in got] == list(range(n, n - 10, -1))
    got = store.postings("billing", 100, 300)
    assert [p[0] for p in got] == list(range(100, 0, -1))
    assert all(tf == 1 and length > 0 for _, tf, length in got)


def test_owner_link_and_open_item_lookups(store: EpisodeStore) -> None:
    """Owner, link and open-item reads return the newest matches within the eligible prefix."""
    pending = Claim(kind="tool_call_pending", text="tool call pending", refs=["tool:x1"],
                    key="call:c1")
    todo = Claim(kind="todo_open", text="open todo", refs=["work_item:w1"], key="todo:wi1:ab")
    store.append([index_episode(_episode(0, 0, "a", owner="work_item:wi1", unresolved=[todo])),
                  index_episode(_episode(1, 1, "b", owner="work_item:wi2")),
                  index_episode(_episode(2, 2, "c", owner="work_item:wi1",
                                         unresolved=[pending]))])
    assert store.by_owner("work_item:wi1", 3, 5) == [3, 1]
    assert store.by_owner("work_item:wi1", 2, 5) == [1]
    assert store.by_links(["file:work_item:wi2.py", "turn:t0"], 3, 5) == [
        (2, "file:work_item:wi2.py"), (1, "turn:t0")]
    rows = store.open_rows(3, 100, 10)
    assert [(r.num, r.key, r.pinned) for r in rows] == [(3, "call:c1", True),
                                                         (1, "todo:wi1:ab", False)]
    store.mark_resolved([Resolution(3, "call:c1", 50, True)])
    assert [r.key for r in store.open_rows(3, 100, 10)] == ["todo:wi1:ab"]
    assert [r.key for r in store.open_rows(3, 40, 10)] == ["call:c1", "todo:wi1:ab"]


def test_recaps_survive_clear_and_episodes_do_not(store: EpisodeStore) -> None:
    """``clear`` drops episodes and their indexes but keeps recaps and settings."""
    store.append([index_episode(_episode(0, 0, "billing"))])
    store.set_meta({"policy": "p"})
    store.add_recap(Recap(episode_id="e0-0", digest="sha256:x", model="m",
                          status=RecapStatus.REJECTED, reasons=["empty_recap"]))
    store.clear()
    assert store.count() == 0
    assert store.df(["billing"]) == {}
    assert store.corpus() == (0, 0)
    assert store.recaps("e0-0")[0].reasons == ["empty_recap"]
    assert store.meta()["policy"] == "p"


def test_form_counts_are_stored_with_their_episode_and_cleared_with_it(
        store: EpisodeStore) -> None:
    """An episode appended with its form counts gives them back (counter and bytes) by number;
    one appended without is left out; a clear drops them with the episodes."""
    counts = FormCounts("tiktoken:cl100k_base", pack_counts({chunk_key("a line\n"): 3}))
    a, b = _episode(0, 1, "billing"), _episode(2, 3, "banner")
    store.append([attrs.evolve(index_episode(a), forms=counts), index_episode(b)])
    assert store.form_counts([1, 2, 9]) == {1: counts}
    assert store.form_counts([]) == {}
    assert counts.table("tiktoken:cl100k_base") == {chunk_key("a line\n"): 3}
    assert counts.table("tiktoken:o200k_base") is None
    store.clear()
    assert store.form_counts([1, 2]) == {}


def test_sqlite_episode_tables_live_in_the_ledger_file_and_leave_the_ledger_alone(
        tmp_path: Path) -> None:
    """Episodes are tables prefixed ``episodes`` in the same file; the ledger still opens."""
    path = tmp_path / "ledger.db"
    c = Conv()
    for i in range(8):
        c.operator(f"billing replication step {i}: keep the billing replica in sync")
    ledger, store = make_stores("sqlite", tmp_path)
    ledger.append(c.records)
    assert not has_episode_tables(path)
    Archiver(ledger, store, policy=policy(2, 2)).archive()
    store.close()
    ledger.close()
    assert has_episode_tables(path)
    import sqlite3

    db = sqlite3.connect(path)
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    db.close()
    assert {n for n in names if n.startswith("episodes")} >= {
        "episodes", "episodes_turns", "episodes_terms", "episodes_postings", "episodes_links",
        "episodes_open", "episodes_recaps", "episodes_meta"}
    again = SqliteStore(path)
    assert again.stats().turns == 8
    again.close()
    with pytest.raises(StoreError, match="no episodes"):
        SqliteEpisodeStore(tmp_path / "other.db", create=False)


def test_postgres_count_is_the_rows_under_racing_and_refused_appends(
        pg_url: str, pg_session_key: str) -> None:
    """The count is the highest episode number (849680d: one index probe, not a scan), which
    holds only while numbers stay dense from 1: four writers on one session append at once,
    each with a batch refused mid-way after its first episode was numbered (a turn another
    episode covers); the count is the episodes there are, numbered 1..n, the read ahead's too."""
    import threading

    from holon_ctx.postgres import PostgresStore

    PostgresStore(pg_url, session=pg_session_key).close()
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        store = PostgresEpisodeStore(pg_url, session=pg_session_key)
        try:
            for i in range(6):
                first = 1000 * w + 10 * i
                store.append([index_episode(_episode(first, first + 1, f"w{w} b{i}"))])
                with pytest.raises(StoreError):
                    store.append([index_episode(_episode(first + 5, first + 6, "fresh")),
                                  index_episode(_episode(first + 1, first + 2, "covered"))])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    store = PostgresEpisodeStore(pg_url, session=pg_session_key, create=False)
    nums = [n for n, _ in store.page(limit=1000, offset=0)]
    assert nums == list(range(1, 25))
    assert store.count() == 24
    store.close()
    ledger = PostgresStore(pg_url, session=pg_session_key, create=False)
    shared = PostgresEpisodeStore(ledger.connection, session=pg_session_key)
    assert shared.archived_by(ledger.end_pos()) == 24
    with ledger.reading_ahead():
        assert shared.archived_by(ledger.end_pos()) == 24
    shared.close()
    ledger.close()


class _MarksAfterFirstRead:
    """A SQLite connection after whose first read of the open items ``mark`` runs: another
    runtime's archive run marking an item resolved, committed on its own connection."""

    def __init__(self, db: Any, mark: Callable[[], object]) -> None:
        self._db, self._mark, self.marked = db, mark, False

    def execute(self, sql: str, *args: Any) -> Any:
        rows = self._db.execute(sql, *args).fetchall()
        if "episodes_open" in sql and not self.marked:
            self.marked = True
            self._mark()
        return _Rows(rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


@attrs.define
class _Rows:
    rows: list[Any]

    def fetchall(self) -> list[Any]:
        return self.rows


def test_open_items_are_read_at_one_moment_while_another_runtime_marks_them(
        tmp_path: Path) -> None:
    """The open items and those resolved after the position read at one moment: read in two
    statements, an item another runtime's archive run marked resolved past the position between
    them was in both reads, listed twice, taking the place of another item under the limit (a
    recall's candidates then depended on when it ran, not on its position). Here a second
    connection marks one right after the recall's first read: each item is listed once, and
    the items are those read with nothing marked between."""
    SqliteStore(tmp_path / "l.db").close()
    writer, reader = (SqliteEpisodeStore(tmp_path / "l.db") for _ in range(2))
    try:
        waits = [Claim(kind="wait_open", text="wait open", refs=[f"wait:w{n}"], key=f"wait_id:w{n}")
                 for n in range(3)]
        writer.append([index_episode(_episode(n, n, "deploy", unresolved=[waits[n]]))
                       for n in range(3)])
        racing = _MarksAfterFirstRead(reader._db, lambda: writer.mark_resolved(
            [Resolution(3, "wait_id:w2", 90, True)]))
        reader._db = racing
        during = reader.open_rows(3, 50, 3)
        assert racing.marked
        reader._db = racing._db
        after = reader.open_rows(3, 50, 3)
        assert [r.resolved_pos for r in after] == [90, None, None], "it binds"
        assert [(r.num, r.key) for r in during] == [(r.num, r.key) for r in after]
    finally:
        reader.close()
        writer.close()
