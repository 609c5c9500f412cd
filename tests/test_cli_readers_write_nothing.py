"""The CLI's reading commands close every database connection they open, so the database and
the files beside it are byte-for-byte what they were, also after the process collects its
garbage.

Why it matters beyond tidiness: SQLite checkpoints a write-ahead log when the last connection to
it closes. A connection a command left for the collector closed later, in the middle of whatever
the process did next, and rewrote the ledger file then; the preview-is-sent test caught it once
in CI as "the CLI wrote to the database it read" (the governed store's connection, opened for the
control state and never closed).
"""

from __future__ import annotations

import gc
import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from demo_story import KEY_REFS

from holon_ctx.cli.main import main


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("readers") / "demo.db"
    assert main(["demo", "--db", str(db), "--plain", "--width", "100", "--no-pager"]) == 0
    gc.collect()  # the build's own connections, should any be left, are not the readers' doing
    return db


def _files(db: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(db.parent.iterdir()) if p.is_file()}


@pytest.fixture
def opened_connections(monkeypatch: pytest.MonkeyPatch) -> list[sqlite3.Connection]:
    """Every SQLite connection opened while the test runs, whichever module opens it."""
    made: list[sqlite3.Connection] = []
    real: Callable[..., sqlite3.Connection] = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real(*args, **kwargs)
        made.append(conn)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    return made


def _still_open(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return False  # "Cannot operate on a closed database."
    return True


REF = KEY_REFS["long_output"]

#: Each reading command, at the demo's budget and one where the plan binds harder.
COMMANDS = {
    "preview": ["preview", "--budget", "8192", "--plain", "--width", "100", "--no-pager"],
    "preview-4096": ["preview", "--budget", "4096", "--plain", "--width", "100", "--no-pager"],
    "preview-stateless": ["preview", "--budget", "8192", "--plain", "--no-pager", "--mode",
                          "stateless"],
    "project-text": ["project", "--budget", "8192"],
    "project-json": ["project", "--budget", "8192", "--json"],
    "project-openai": ["project", "--budget", "8192", "--format", "openai"],
    "project-stateless": ["project", "--budget", "8192", "--json", "--mode", "stateless"],
    "stats": ["stats", "--budget", "8192", "--plain"],
    "explain": ["explain", "--budget", "8192", "--plain", REF],
    "diff": ["diff", "--budget", "4096", "--budget", "8192", "--plain"],
    "episodes-list": ["episodes", "list"],
    "episodes-verify": ["episodes", "verify"],
    "export": ["export"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_reading_command_closes_what_it_opens_and_changes_no_file(
        name: str, demo_db: Path, opened_connections: list[sqlite3.Connection],
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = COMMANDS[name]
    before = _files(demo_db)
    # The database goes where each command takes it: after the action for ``episodes``.
    where = 2 if argv[0] == "episodes" else 1
    code = main([*argv[:where], "--db", str(demo_db), *argv[where:]])
    capsys.readouterr()
    assert code == 0, name
    assert opened_connections, "the command opened no database: the check checked nothing"
    left = [c for c in opened_connections if _still_open(c)]
    assert not left, f"{name} left {len(left)} of {len(opened_connections)} connections open"
    gc.collect()
    assert _files(demo_db) == before, f"{name} changed the database or a file beside it"
