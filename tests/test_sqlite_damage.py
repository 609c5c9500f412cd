"""A damaged SQLite ledger is one line of StoreError from every session call, as the CLI says it
(exit 2), never a raw ``sqlite3.DatabaseError`` with a traceback into the store: the stores
translate the errors they expect (a lock held too long, a write refused), and the session's
public calls translate any other one (``session_base.one_line_errors``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import holon_ctx


def _thirty_messages(db: Path) -> Path:
    with holon_ctx.open_session(db) as session:
        for i in range(30):
            session.operator_message(f"message {i} " + "words " * 200)
    return db


def _damage(db: Path) -> None:
    """Overwrite the pages after the third (a disk fault, a bad copy)."""
    with db.open("r+b") as f:
        f.seek(4096 * 3)
        f.write(b"\xff" * (4096 * 6))


def test_a_damaged_ledger_is_one_store_error_line_at_open(tmp_path: Path) -> None:
    db = _thirty_messages(tmp_path / "damaged.db")
    _damage(db)
    with pytest.raises(holon_ctx.StoreError) as caught:
        holon_ctx.open_session(db)
    assert str(caught.value) == f"{db}: database disk image is malformed"


@pytest.mark.parametrize("call", [
    lambda s: s.next_request(4000),
    lambda s: s.next_request(3000, at="turn:t3"),
    lambda s: s.compact(),
], ids=["next_request", "next_request at", "compact"])
def test_a_ledger_damaged_under_a_session_is_one_store_error_line(
        tmp_path: Path, call: Callable[[holon_ctx.Session], object]) -> None:
    """The session's reads fail as its writes do: a StoreError naming the file, never a raw
    sqlite3.DatabaseError with a traceback into the store's internals."""
    db = _thirty_messages(tmp_path / "ledger.db")
    session = holon_ctx.open_session(db)
    _damage(db)
    with pytest.raises(holon_ctx.StoreError, match="database disk image is malformed") as caught:
        call(session)
    assert "\n" not in str(caught.value)
    session.close()
