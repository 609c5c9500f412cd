"""ledger/dbpath.py's answers about where a SQLite ledger may be, each at the edges its callers
meet: a path relative to the working directory as well as an absolute one (``"/…"`` sorts
before ``":memory:"``, ``"agent.db"`` after it), SQLite's ``:memory:`` name given as text or as a
``Path`` while a file or directory of that name sits in the working directory, and files on
either side of the 100-byte header (the mutation sample of 2026-12-06, docs/testing.md)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from holon_ctx.ledger.dbpath import database_path_problem, not_a_database_file, sqlite_file

_SHORT = "not a usable holon-ctx database (file is not a database)"
_DIRECTORY = "is a directory, not a database file"


def _database(path: Path) -> bytes:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t(x)")
    db.commit()
    db.close()
    return path.read_bytes()


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_a_directory_is_named_as_one_wherever_its_path_sorts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ledger.db").mkdir()
    path = Path("ledger.db") if relative else tmp_path / "ledger.db"
    assert not_a_database_file(path) == _DIRECTORY
    assert not_a_database_file(str(path)) == _DIRECTORY


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
@pytest.mark.parametrize(("size", "short"), [(0, False), (1, True), (99, True), (100, False),
                                             (4096, False)])
def test_only_a_file_shorter_than_the_header_and_not_empty_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool, size: int,
        short: bool) -> None:
    """An empty file is a new database; 1 to 99 bytes cannot hold SQLite's header (SQLite would
    take a 1-byte file for an empty database and write over it); from 100 bytes SQLite judges."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent.db").write_bytes(b"x" * size)
    path = Path("agent.db") if relative else tmp_path / "agent.db"
    assert not_a_database_file(path) == (_SHORT if short else None)


@pytest.mark.parametrize("name", [":memory:", Path(":memory:")], ids=["str", "Path"])
def test_memory_is_never_a_file_even_beside_one_of_that_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str | Path) -> None:
    """SQLite opens ``:memory:`` (as text or a ``Path``) in memory: a directory or a short file
    named ``:memory:`` in the working directory is not what it opens, so not judged."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ":memory:").mkdir()
    assert not_a_database_file(name) is None
    (tmp_path / ":memory:").rmdir()
    (tmp_path / ":memory:").write_bytes(b"[")
    assert not_a_database_file(name) is None
    assert database_path_problem(name, new=True) is None


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
@pytest.mark.parametrize("name", ["agent.jsonl", "Agent.JSON", "t.json"])
def test_a_new_database_under_a_ledger_or_transcript_name_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool, name: str) -> None:
    monkeypatch.chdir(tmp_path)
    path = Path(name) if relative else tmp_path / name
    problem = database_path_problem(path, new=True)
    assert problem is not None
    assert f"would be SQLite under a {Path(name).suffix} name" in problem
    assert "name it .db" in problem
    assert database_path_problem(str(path), new=True) == problem


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_the_name_is_judged_only_for_a_new_database_not_yet_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool) -> None:
    """An existing file is judged by its bytes elsewhere; an existing ledger is opened whatever
    its name; a ``.db`` name is fine."""
    monkeypatch.chdir(tmp_path)
    base = Path() if relative else tmp_path
    assert database_path_problem(base / "agent.jsonl", new=False) is None
    assert database_path_problem(base / "agent.db", new=True) is None
    (tmp_path / "there.jsonl").write_bytes(b"")
    assert database_path_problem(base / "there.jsonl", new=True) is None


def test_a_missing_directory_comes_first_unless_the_caller_makes_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "agent.jsonl"
    problem = database_path_problem(missing, new=True)
    assert problem is not None
    assert "does not exist: create it first" in problem
    made = database_path_problem(missing, new=True, directory=False)
    assert made is not None
    assert "name it .db" in made
    assert database_path_problem(tmp_path / "nowhere" / "a.db", new=True, directory=False) is None


def test_sqlite_file_says_what_sqlite_makes_of_the_file(tmp_path: Path) -> None:
    """True for a database; False for what SQLite says is none (100 bytes of text, anything
    shorter than the header, a directory); None when it cannot tell (a database cut to its
    100-byte header reads as damaged, not as another kind of file)."""
    whole = _database(tmp_path / "a.db")
    assert sqlite_file(tmp_path / "a.db") is True
    (tmp_path / "header.db").write_bytes(whole[:100])
    assert sqlite_file(tmp_path / "header.db") is None
    (tmp_path / "short.db").write_bytes(whole[:99])
    assert sqlite_file(tmp_path / "short.db") is False
    (tmp_path / "text.db").write_bytes(b"x" * 100)
    assert sqlite_file(tmp_path / "text.db") is False
    (tmp_path / "t.jsonl").write_bytes(b'{"kind": "message"}\n' * 10)
    assert sqlite_file(tmp_path / "t.jsonl") is False
    assert sqlite_file(tmp_path) is False
