"""Nothing holon_ctx does in a process releases the locks of that process's SQLite connections.

Closing any descriptor of a file releases every POSIX lock the process holds on it, those of
SQLite's connections included. Reading a ledger's header to tell a database from a ledger JSONL
file did that: a second session opened on the same file in one process (or a CLI command run
in it, or the ledger given to ``import_history``) left the first session's connection without
its locks. The next process to close its last connection (a CLI reader, another runtime) then
took the database for unused, checkpointed it and deleted its WAL, and every later append of
the first session went to the deleted WAL: acknowledged, then gone for every other process and
after a restart (or read back as "database disk image is malformed").
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import holon_ctx
from holon_ctx.cli.main import main
from holon_ctx.ledger.dbpath import sqlite_file


def _records_seen_elsewhere(db: Path) -> int:
    """The records another process sees, after it closed its connection (its last one)."""
    code = (f"import sqlite3; c = sqlite3.connect({str(db)!r}); "
            "print(c.execute('SELECT count(*) FROM records').fetchone()[0]); c.close()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return int(done.stdout)


def _second_session(db: Path) -> None:
    holon_ctx.open_session(db).close()


def _cli_with_db(db: Path) -> None:
    assert main(["stats", "--db", str(db)]) == 0


def _cli_with_source(db: Path) -> None:
    assert main(["project", str(db), "--budget", "2000", "--format", "openai"]) == 0


def _import_of_the_ledger(db: Path) -> None:
    refused = "an SQLite database, not ledger JSONL or a transcript: open it as the ledger"
    with holon_ctx.open_session(":memory:") as other, pytest.raises(holon_ctx.InputError,
                                                                    match=refused):
        other.import_history(db)


@pytest.mark.parametrize("touch", [_second_session, _cli_with_db, _cli_with_source,
                                   _import_of_the_ledger],
                         ids=["second session", "cli --db", "cli SOURCE", "import_history"])
def test_appends_after_the_file_is_opened_again_in_process_are_kept(
        tmp_path: Path, touch: Callable[[Path], None], capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "agent.db"
    session = holon_ctx.open_session(db)
    session.operator_message("Keep every record.")
    session.next_request(2000)
    touch(db)
    capsys.readouterr()
    assert _records_seen_elsewhere(db) == session.store.end_pos()
    for i in range(5):
        session.operator_message(f"record {i}")
        session.next_request(2000)
    assert _records_seen_elsewhere(db) == session.store.end_pos() == 12
    session.close()
    with holon_ctx.open_session(db) as again:
        assert again.store.end_pos() == 12


def test_sqlite_file_tells_databases_from_files_without_reading_them(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    holon_ctx.open_session(db).close()
    ledger = tmp_path / "run.jsonl"
    ledger.write_text('{"kind": "turn"}\n')
    empty = tmp_path / "empty"
    empty.touch()
    assert sqlite_file(db) is True
    assert sqlite_file(ledger) is False
    assert sqlite_file(empty) is False
    assert sqlite_file(tmp_path) is False
    assert sqlite_file(tmp_path / "missing.db") is False
    for text in ("[", "{", "x"):  # SQLite reads a 1-byte file as an empty database
        short = tmp_path / "short.json"
        short.write_text(text)
        assert sqlite_file(short) is False, text


def _wal_ledger(tmp_path: Path) -> Path:
    """A WAL-mode ledger closed cleanly: its -wal and -shm files are gone, as after any run."""
    db = tmp_path / "agent.db"
    with holon_ctx.open_session(db) as session:
        session.operator_message("Keep every record.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db"]
    return db


def test_asking_whether_a_file_is_a_database_leaves_no_file_beside_it(tmp_path: Path) -> None:
    """The question is read-only: a read-only connection to a WAL database made its -wal and
    -shm files and, read-only, could not remove them when it closed."""
    db = _wal_ledger(tmp_path)
    before = db.read_bytes()
    assert sqlite_file(db) is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db"]
    assert db.read_bytes() == before


def test_a_refused_import_of_a_database_leaves_its_directory_as_it_was(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`holon-ctx import --db new.db ledger.db` exits 2 with one line and writes nothing: not
    the new database, nor a -wal or -shm beside the ledger it refused."""
    db = _wal_ledger(tmp_path)
    assert main(["import", "--db", str(tmp_path / "new.db"), str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "an SQLite database, not ledger JSONL or a transcript" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db"]
