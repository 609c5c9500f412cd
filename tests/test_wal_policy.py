"""How a ledger file's WAL is checkpointed (RFC 0001, "The SQLite store", WAL checkpoints): every
connection a session writes through waits for the same, larger threshold; the WAL still restarts
past it; and replacing a saved epoch's state does not write its freed pages again as zeros."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from projection_builders import LedgerBuilder

from holon_ctx.continuity.sqlite_backend import SQLiteBackend
from holon_ctx.ledger.episode_store import SqliteEpisodeStore
from holon_ctx.ledger.epochs import EpochStart, EpochState
from holon_ctx.ledger.epochs_sqlite import SqliteEpochStore
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.usage_sqlite import SqliteUsageStore
from holon_ctx.ledger.walpolicy import WAL_AUTOCHECKPOINT, WAL_SIZE_LIMIT

#: SQLite's own default threshold (pages), which the policy raises.
_SQLITE_DEFAULT = 1000


def _wal_frames(path: Path) -> int:
    """Frames the -wal file has room for (its size: SQLite reuses it from the start after a
    checkpoint, so this is the most the WAL has held since the last truncation)."""
    wal = Path(f"{path}-wal")
    if not wal.exists():
        return 0
    page = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    return (wal.stat().st_size - 32) // (page + 24)


def _connections(path: Path) -> Iterator[tuple[str, sqlite3.Connection, Callable[[], None]]]:
    ledger = SqliteStore(path)
    yield "ledger", ledger._db, ledger.close
    episodes = SqliteEpisodeStore(path)
    yield "episodes", episodes._db, episodes.close
    epochs = SqliteEpochStore(path)
    yield "epochs", epochs._db, epochs.close
    usage = SqliteUsageStore(path)
    yield "usage", usage._db, usage.close
    governed = SQLiteBackend(path)
    yield "continuity", governed._conn, governed.close


def test_every_connection_a_session_writes_through_waits_for_the_same_threshold(
        tmp_path: Path) -> None:
    """SQLite checkpoints from whichever connection commits past *its own* threshold: one store
    left at the default would checkpoint every ~1,000 pages for all of them."""
    assert WAL_AUTOCHECKPOINT > _SQLITE_DEFAULT
    for name, db, close in _connections(tmp_path / "l.db"):
        assert db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_AUTOCHECKPOINT, name
        assert db.execute("PRAGMA journal_size_limit").fetchone()[0] == WAL_SIZE_LIMIT, name
        close()


def _append_until(store: SqliteStore, path: Path, frames: int) -> int:
    """Append chat turns one transaction each until ~``frames`` WAL frames were written; the
    most one transaction wrote."""
    built = LedgerBuilder()
    written, largest, i = 0, 0, 0
    while written < frames:
        done = len(built.records)
        built.chat(f"question {i}", f"answer {i} " + "lorem ipsum dolor " * 200)
        before = _wal_frames(path)
        store.append(built.records[done:])
        # Across a restart the file's size says nothing: count what this commit could add.
        grew = _wal_frames(path) - before
        step = grew if grew > 0 else largest or 1
        written += step
        largest = max(largest, step)
        i += 1
    return largest


def test_a_ledger_keeps_writing_its_wal_past_sqlites_default(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    store = SqliteStore(path)
    largest = _append_until(store, path, (_SQLITE_DEFAULT + WAL_AUTOCHECKPOINT) // 2)
    # At SQLite's default the WAL restarts at ~1,000 frames and the file never holds more than
    # that and one transaction; here nothing was checkpointed yet, so it holds everything.
    assert _wal_frames(path) > _SQLITE_DEFAULT + 2 * largest
    store.close()


def test_the_wal_still_restarts_past_the_threshold(tmp_path: Path) -> None:
    """The WAL is bounded: past the threshold a commit checkpoints it and the next writes go
    to its start again, so the file never holds much more than the threshold."""
    path = tmp_path / "l.db"
    store = SqliteStore(path)
    largest = _append_until(store, path, 2 * WAL_AUTOCHECKPOINT)
    assert _wal_frames(path) <= WAL_AUTOCHECKPOINT + 2 * largest
    store.close()


def test_replacing_a_saved_state_writes_only_its_own_pages(tmp_path: Path) -> None:
    """Builds with SQLITE_SECURE_DELETE zero each freed page: replacing a ~130 KB state wrote
    its old overflow pages again, about twice the frames of the state itself."""
    path = tmp_path / "l.db"
    SqliteStore(path).close()
    store = SqliteEpochStore(path)
    frozen = os.urandom(96 * 1024).hex().encode()[: 130 * 1024]

    def state(epoch: int, size: int) -> EpochState:
        start = EpochStart(epoch=epoch, turn_id=f"t{epoch}", turn_seq=epoch, limit_pos=epoch,
                           reason="over_budget")
        return EpochState(key="k", start=start, frozen=frozen[:size])

    def save(saved: EpochState) -> int:
        before = _wal_frames(path)
        store.save(saved)
        return _wal_frames(path) - before

    save(state(1, len(frozen)))
    # Another size, as a re-plan's state has: SQLite rewrites a same-sized row's changed pages
    # in place, and frees nothing.
    new = state(2, len(frozen) - 5000)
    state_pages = len(msgspec.json.encode(new)) // 4096 + 1  # as stored (bytes in base64)
    assert save(new) <= state_pages + 8  # the row's pages, its index leaves, the file header
    store.close()


@pytest.mark.parametrize("name", ["ledger", "episodes", "epochs", "usage"])
def test_freed_pages_are_not_rewritten_as_zeros(name: str, tmp_path: Path) -> None:
    for found, db, close in _connections(tmp_path / "l.db"):
        if found == name:
            assert db.execute("PRAGMA secure_delete").fetchone()[0] == 2  # FAST
        close()
