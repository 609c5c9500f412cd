"""A database locked by another writer (issue 10, item 2).

Writers wait up to the lock timeout (``lock_timeout=``, ``HOLON_CTX_LOCK_TIMEOUT``), then fail
with one ``StoreError`` line that names the database and, on Linux, the process holding the lock,
instead of ``sqlite3.OperationalError: database is locked`` and a traceback.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from ledger_procs import child_env

from holon_ctx.errors import StoreError
from holon_ctx.ledger.locking import DEFAULT_LOCK_TIMEOUT, lock_timeout
from holon_ctx.ledger.records import Message, MessageRole, Turn
from holon_ctx.ledger.sqlite import SqliteStore

HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("ROLLBACK")
"""
LINUX = Path("/proc/locks").exists()



def _batch(tag: str, seq: int) -> list[Turn | Message]:
    return [Turn(id=f"{tag}t", seq=seq, trigger="timer"),
            Message(id=f"{tag}m", turn_id=f"{tag}t", role=MessageRole.ASSISTANT, text=tag)]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    store = SqliteStore(path)
    store.append(_batch("a", 0))
    store.close()
    return path


@pytest.fixture
def holder(db: Path) -> subprocess.Popen[str]:
    """Another process that holds the write lock until its stdin is closed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "locked\n"
    yield proc
    if proc.poll() is None:
        proc.communicate("\n", timeout=30)


def test_a_library_append_gives_up_with_one_line_naming_the_holder(
        db: Path, holder: subprocess.Popen[str]) -> None:
    store = SqliteStore(db, lock_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        store.append(_batch("b", 1))
    waited = time.monotonic() - started
    store.close()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{db}: database is locked by another writer")
    assert message.endswith("gave up after waiting 0.3 s (wait longer with "
                            "HOLON_CTX_LOCK_TIMEOUT=SECONDS)")
    assert waited >= 0.3
    if LINUX:
        assert f"(held by process {holder.pid}: python" in message
        assert "-c ?import sqlite3" in message  # its command line, newlines shown as "?"


def test_the_cli_exits_2_with_that_line_and_writes_nothing(
        db: Path, holder: subprocess.Popen[str], tmp_path: Path) -> None:
    src = tmp_path / "more.jsonl"
    src.write_text('{"v":1,"type":"turn","id":"bt","seq":1,"trigger":"timer"}\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "holon_ctx", "import", str(src), "--db", str(db)],
                          capture_output=True, text=True, timeout=60, check=False,
                          env=child_env(HOLON_CTX_LOCK_TIMEOUT="0.5"))
    assert (done.returncode, done.stdout) == (2, "")
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"holon-ctx: error: {db}: database is locked by another writer")
    assert "gave up after waiting 0.5 s" in lines[0]
    if LINUX:
        assert f"held by process {holder.pid}" in lines[0]
    holder.communicate("\n", timeout=30)
    assert [r.id for r in SqliteStore(db).iter_records()] == ["at", "am"]


def test_a_writer_waits_for_the_lock_to_come_free(db: Path) -> None:
    """Within the timeout an append simply waits, then succeeds."""
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    threading.Timer(0.4, lambda: other.execute("COMMIT")).start()
    store = SqliteStore(db, lock_timeout=20)
    assert store.append(_batch("b", 1)) == 2
    store.close()
    other.close()


def test_the_holder_in_this_process_is_named_as_such(db: Path) -> None:
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        store = SqliteStore(db, lock_timeout=0)
        with pytest.raises(StoreError, match="gave up after waiting 0 s") as caught:
            store.append(_batch("b", 1))
        store.close()
        if LINUX:
            assert "(held by another connection in this process)" in str(caught.value)
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_the_timeout_comes_from_the_argument_then_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOLON_CTX_LOCK_TIMEOUT", raising=False)
    assert lock_timeout() == DEFAULT_LOCK_TIMEOUT
    monkeypatch.setenv("HOLON_CTX_LOCK_TIMEOUT", "2.5")
    assert lock_timeout() == 2.5
    assert lock_timeout(7) == 7
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv("HOLON_CTX_LOCK_TIMEOUT", bad)
        with pytest.raises(StoreError, match="HOLON_CTX_LOCK_TIMEOUT: expected a number of "
                                             "seconds >= 0, got"):
            lock_timeout()
