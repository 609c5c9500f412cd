"""Several sessions appending to one ledger through the public helpers (issue 23, RFC 0020).

A session names records by ledger position (``m57``). Its append is refused unless the ledger
still ends where the ids were minted (checked inside the store's write transaction), and the
helper then builds its batch again from the ledger as it is: real processes appending at once,
on SQLite and PostgreSQL, never fail, never store one id for two records, and lose nothing —
not even a plain ``timer`` wake, which two processes would otherwise build as the same record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_concurrent_compaction import _start
from tiers import sized

from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore

PROCESSES = 4
TURNS = sized(6, 30)


def _run(where: str) -> list[dict[str, Any]]:
    import json

    procs = [_start(["helpers", where, f"p{k}", str(TURNS)]) for k in range(PROCESSES)]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def _check(ledger: LedgerStore, reports: list[dict[str, Any]]) -> None:
    failures = [f for r in reports for f in r["failures"]]
    assert failures == [], failures[:5]
    made = [pair for r in reports for pair in r["made"]]
    assert len(made) == PROCESSES * TURNS * 4
    refs = [ref for ref, _ in made]
    assert len(set(refs)) == len(refs), "one ref handed to two helper calls"
    for ref, what in made:
        stored = ledger.get(ref)
        assert stored is not None, ref
        rec = stored.record
        if isinstance(rec, Turn):
            assert rec.trigger == what, ref
        else:
            assert what in (getattr(rec, "text", None), getattr(rec, "output", None)), ref
    timers = [r for r in ledger.iter_records() if isinstance(r, Turn) and r.trigger == "timer"]
    assert len(timers) == PROCESSES * TURNS, "a wake was lost"
    all_refs = [s.ref for s in ledger.records_between(0, ledger.end_pos())]
    assert len(all_refs) == len(set(all_refs))


@pytest.mark.scaled
def test_sqlite_sessions_append_through_helpers_at_once(tmp_path: Path) -> None:
    """SQLite: four processes, each turn four helper calls; nothing fails, lost or doubled."""
    db = tmp_path / "ledger.db"
    SqliteStore(db).close()
    reports = _run(str(db))
    ledger = SqliteStore(db)
    try:
        _check(ledger, reports)
    finally:
        ledger.close()


@pytest.mark.scaled
def test_postgres_sessions_append_through_helpers_at_once(pg_url: str,
                                                          pg_session_key: str) -> None:
    """PostgreSQL: the same on one session key (whose appends take a record given again as
    already held: ids minted twice would lose a wake there, not fail)."""
    from holon_ctx.postgres import PostgresStore

    PostgresStore(pg_url, session=pg_session_key).close()
    reports = _run(f"{pg_url}#{pg_session_key}")
    ledger = PostgresStore(pg_url, session=pg_session_key)
    try:
        _check(ledger, reports)
    finally:
        ledger.close()
