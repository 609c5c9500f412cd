"""ledger/sqlite.py's reads past their chunk and cache sizes, and where a database cannot be made
(issue 23: the store's paths the conformance tables do not reach)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from projection_builders import LedgerBuilder

from holon_ctx.errors import StoreError
from holon_ctx.ledger.readcache import DecodedRecords
from holon_ctx.ledger.sqlite import _IN_CHUNK, SqliteStore, missing_directory


@pytest.fixture(scope="module")
def ledger() -> LedgerBuilder:
    built = LedgerBuilder()
    for i in range(700):  # 2,100 records: more than two chunks of positions
        built.chat(f"question {i}", f"answer {i}")
    return built


def _refs(ledger: LedgerBuilder) -> list[str]:
    return [f"{r.__struct_config__.tag}:{r.id}" for r in ledger.records]


def test_a_read_of_more_positions_than_a_chunk_returns_them_all_in_order(
        ledger: LedgerBuilder, tmp_path: Path) -> None:
    assert len(ledger.records) > 2 * _IN_CHUNK
    store = SqliteStore(tmp_path / "l.db")
    store.append(ledger.records)
    store.close()
    again = SqliteStore(tmp_path / "l.db")  # nothing decoded yet
    assert [s.ref for s in again.records_between(0, again.end_pos())] == _refs(ledger)
    assert [s.pos for s in again.records_between(-5, 10 ** 9)] == list(range(len(ledger.records)))
    assert [s.pos for s in again.records_between(1000, 1003)] == [1000, 1001, 1002]
    again.close()


def test_a_read_larger_than_the_decoded_cache_reads_its_rows_directly(
        ledger: LedgerBuilder, tmp_path: Path) -> None:
    """The cache is cleared while it fills (it holds fewer rows than the read): every record
    is still returned, in order, decoded from its row."""
    store = SqliteStore(tmp_path / "l.db")
    store.append(ledger.records)
    whole = [(s.pos, s.ref, s.tokens, s.record) for s in store.records_between(0, store.end_pos())]
    store._decoded = DecodedRecords(store._decoded.counter, limit=300)
    found = store.records_between(0, store.end_pos())
    assert [s.ref for s in found] == _refs(ledger)
    assert [(s.pos, s.ref, s.tokens, s.record) for s in found] == whole
    store.close()


def test_where_a_database_cannot_be_made_is_said_before_sqlite_tries(tmp_path: Path) -> None:
    assert missing_directory(":memory:") is None
    assert missing_directory(tmp_path / "l.db") is None
    missing = missing_directory(tmp_path / "nowhere" / "l.db")
    assert missing is not None
    assert "does not exist: create it first" in missing
    (tmp_path / "file").write_text("")
    not_a_dir = missing_directory(tmp_path / "file" / "l.db")
    assert not_a_dir is not None
    assert "is not a directory: create it first" in not_a_dir
    with pytest.raises(StoreError, match=r"l\.db: the directory .* is not a directory"):
        SqliteStore(tmp_path / "file" / "l.db")


@pytest.mark.parametrize("relative", ["nowhere/l.db", "zz/l.db", "A/l.db", "0/l.db", ".d/l.db"])
def test_a_relative_path_in_a_missing_directory_is_said_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: str) -> None:
    """Only the name ``:memory:`` skips the directory check: a relative path (whichever way it
    sorts against ``:memory:``) in a directory that does not exist is said as an absolute one."""
    monkeypatch.chdir(tmp_path)
    missing = missing_directory(relative)
    assert missing is not None
    assert "does not exist: create it first" in missing
    with pytest.raises(StoreError, match="does not exist: create it first"):
        SqliteStore(relative)


def test_the_compaction_lock_of_a_file_is_held_across_stores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database file's compaction lock is a lock file beside it: a second store on the file
    (another runtime) waits for it and gives up with a lock error; ``:memory:`` needs no file."""
    db = tmp_path / "l.db"
    first, second = SqliteStore(db), SqliteStore(db, lock_timeout=0.3)
    try:
        with first.compaction_lock():
            assert (tmp_path / "l.db-compaction.lock").exists()
            with pytest.raises(StoreError), second.compaction_lock():
                pass
        with second.compaction_lock():
            pass
    finally:
        first.close()
        second.close()
    monkeypatch.chdir(tmp_path)
    memory = SqliteStore(":memory:")
    try:
        with memory.compaction_lock():
            assert not list(tmp_path.glob(":memory:*"))
    finally:
        memory.close()


@pytest.mark.parametrize("writer_kind", ["episodes", "governed"])
def test_appends_wait_while_a_writer_in_the_ledgers_file_holds_them(
        tmp_path: Path, writer_kind: str) -> None:
    """``appends_held`` with a store writing to the ledger's file (RFC 0020, "Stamps read where
    appends wait, on SQLite"): inside the block another runtime's append gives up on the file's
    write lock and the end yielded is the ledger's; after it the append goes through. A writer
    on another file (or in memory) holds nothing: the fallback, appends go on."""
    from holon_ctx.continuity import ContinuityStore
    from holon_ctx.ledger.compaction_lock import appends_held
    from holon_ctx.ledger.episode_store import SqliteEpisodeStore

    def writer_on(path: Path | str) -> tuple[object, Callable[[], None]]:
        if writer_kind == "episodes":
            episodes = SqliteEpisodeStore(path)
            return episodes, episodes.close
        governed = ContinuityStore(path)
        return governed.backend, governed.close

    built = LedgerBuilder()
    for i in range(5):
        built.chat(f"question {i}", f"answer {i}")
    chats = [built.records[3 * i:3 * i + 3] for i in range(5)]
    db = tmp_path / "l.db"
    ledger, other = SqliteStore(db), SqliteStore(db, lock_timeout=0.2)
    closers: list[Callable[[], None]] = [ledger.close, other.close]
    try:
        ledger.append(chats[0])
        same, close = writer_on(db)
        closers.append(close)
        with appends_held(ledger, 0, writer=same) as at:
            assert at == ledger.end_pos() == 3
            with pytest.raises(StoreError, match="locked"):
                other.append(chats[1])
        other.append(chats[1])
        assert ledger.end_pos() == 6
        elsewhere, close = writer_on(tmp_path / "other.db")
        closers.append(close)
        memory, close = writer_on(":memory:")
        closers.append(close)
        for chat, unheld in zip(chats[2:], (elsewhere, memory, None), strict=True):
            with appends_held(ledger, 1, writer=unheld) as at:
                assert at == 1
                other.append(chat)
        assert ledger.end_pos() == 15
    finally:
        for closing in reversed(closers):
            closing()
