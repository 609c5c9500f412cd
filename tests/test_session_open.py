"""``open_session`` refusing its arguments after it opened a store closes that store, and only
that one: a store the caller passed in stays the caller's and usable (issue 23: a session
closing a store it did not open)."""

from __future__ import annotations

from pathlib import Path

import pytest

from holon_ctx import InputError, open_session
from holon_ctx.ledger.sqlite import SqliteStore


@pytest.fixture
def closed(monkeypatch: pytest.MonkeyPatch) -> list[SqliteStore]:
    """Every SqliteStore closed, in order."""
    seen: list[SqliteStore] = []
    real = SqliteStore.close

    def close(self: SqliteStore) -> None:
        seen.append(self)
        real(self)

    monkeypatch.setattr(SqliteStore, "close", close)
    return seen


def test_a_refused_session_closes_the_store_it_opened(tmp_path: Path,
                                                      closed: list[SqliteStore]) -> None:
    with pytest.raises(InputError, match="compaction"):
        open_session(tmp_path / "opened.db", compaction=42)  # type: ignore[arg-type]
    assert len(closed) == 1
    assert str(closed[0].path) == str(tmp_path / "opened.db")


def test_a_refused_session_leaves_a_store_it_was_given_open(tmp_path: Path,
                                                            closed: list[SqliteStore]) -> None:
    given = SqliteStore(tmp_path / "given.db")
    with pytest.raises(InputError, match="compaction"):
        open_session(given, compaction=42)  # type: ignore[arg-type]
    assert closed == []
    assert given.end_pos() == 0  # still open: a closed connection would raise here
    with open_session(given, compaction=None) as session:  # and usable by a session
        session.operator_message("start")
    assert closed == []
    assert given.end_pos() == 2
    given.close()
