"""Several runtimes, and ``holon-ctx compact``, on one ledger (issue 23 defect 2 and the stress
test, RFC 0020), on SQLite and PostgreSQL, with real processes (``tests/session_procs.py``).

Each agent process appends its own turns, asks its ``Session`` for requests (which compact) and
compacts explicitly; a CLI process runs ``holon-ctx compact`` beside them. Before the compaction
lock two compactions interleaved: one journaled a step the other had (``UNIQUE constraint
failed``) or stamped its writes with a time read before the other's (``clock went backwards``),
and the runtime's request failed. Afterwards: no call failed, every record appended is in the
ledger exactly once, every archived episode is covered by exactly one complete envelope, in order
(the envelopes are chained), and no compaction was left half-done.

Sizes (``tiers.sized``): the defect tests start 3 agents of 6 turns (each compacting at every
turn) and a CLI process compacting 3 times; the stress tests 8 agents of 4 turns and one CLI
compaction in the default run, of 40 turns and 8 CLI compactions in the slow tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tiers import sized

from holon_ctx.continuity import ContinuityStore
from holon_ctx.ledger.episode_store import SqliteEpisodeStore
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.memory import EpisodeStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file locks")

ROOT = Path(__file__).resolve().parent.parent
PROCS = Path(__file__).resolve().parent / "session_procs.py"
SESSION_ID = "session-local"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _start(args: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, str(PROCS), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == "ready", proc.communicate()[1]
    return proc


def run_together(where: str, *, agents: int, turns: int, compact_share: float,
                 cli_rounds: int) -> tuple[list[dict[str, Any]], list[int]]:
    """Start every process, release them at once, and collect what each reports."""
    procs = [_start(["agent", where, f"a{k}", str(turns), str(k), str(compact_share)])
             for k in range(agents)]
    cli = _start(["compact", where, str(cli_rounds)]) if cli_rounds else None
    everyone = [*procs, *([cli] if cli else [])]
    for proc in everyone:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reports: list[Any] = []
    for proc in everyone:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports[:agents], (reports[agents] if cli else [])


def check_after(ledger: LedgerStore, episodes: EpisodeStore, continuity: ContinuityStore,
                reports: list[dict[str, Any]], codes: list[int]) -> None:
    """No failure; nothing lost or duplicated; envelopes chained over the episodes."""
    failures = [f for r in reports for f in r["failures"]]
    assert failures == [], failures[:5]
    assert all(code == 0 for code in codes), codes
    refs = [s.ref for s in ledger.records_between(0, ledger.end_pos())]
    stored = Counter(refs)
    appended = [ref for r in reports for ref in r["appended"]]
    assert len(appended) == len(set(appended))
    assert not [ref for ref, n in stored.items() if n > 1]
    assert set(appended) <= set(stored)
    assert all(r["requests"] == len({ref.split(".")[1] for ref in r["appended"]
                                     if ref.startswith("turn:")}) for r in reports)
    # Envelopes chained: in append order, each covers the episodes right after the previous one.
    ids = continuity.envelope_ids(SESSION_ID)
    assert ids, "the runs compacted"
    assert all(continuity.is_compaction_complete(e) for e in ids), "a compaction was left half-done"
    spans = [episodes.episodes([n])[n].span for n in range(1, episodes.count() + 1)]
    at = 0
    for envelope_id in ids:
        envelope = continuity.latest_envelope(SESSION_ID) if envelope_id == ids[-1] else None
        body = continuity.envelope_bytes(envelope_id)
        assert body is not None
        first = json.loads(body)["source_event_range"]["first"]
        last = json.loads(body)["source_event_range"]["last"]
        assert spans[at].first_turn == first, (envelope_id, at)
        while spans[at].last_turn != last:
            at += 1
        at += 1
        assert envelope is None or envelope.envelope_id == envelope_id
    assert at == len(spans), "every archived episode is sealed by exactly one envelope"


# -- SQLite ---------------------------------------------------------------------------------------
def _sqlite_check(db: Path, reports: list[dict[str, Any]], codes: list[int]) -> None:
    ledger, episodes, continuity = SqliteStore(db), SqliteEpisodeStore(db), ContinuityStore(db)
    try:
        check_after(ledger, episodes, continuity, reports, codes)
    finally:
        continuity.close()
        episodes.close()
        ledger.close()


def test_runtimes_and_the_cli_compact_one_sqlite_ledger_without_failing(tmp_path: Path) -> None:
    """Defect 2 on SQLite: four runtimes compacting at every turn and ``holon-ctx compact``."""
    db = tmp_path / "shared.db"
    SqliteStore(db).close()
    reports, codes = run_together(str(db), agents=3, turns=6, compact_share=1.0, cli_rounds=3)
    _sqlite_check(db, reports, codes)


@pytest.mark.scaled
def test_stress_eight_runtimes_on_one_sqlite_ledger(tmp_path: Path) -> None:
    """The stress test on SQLite: 8 runtimes appending, asking and compacting."""
    db = tmp_path / "stress.db"
    SqliteStore(db).close()
    reports, codes = run_together(str(db), agents=8, turns=sized(4, 40), compact_share=0.3,
                                  cli_rounds=sized(1, 8))
    _sqlite_check(db, reports, codes)


# -- PostgreSQL -----------------------------------------------------------------------------------
@pytest.fixture
def pg_where(pg_url: str, pg_session_key: str) -> str:
    from holon_ctx.postgres import PostgresStore

    PostgresStore(pg_url, session=pg_session_key).close()
    return f"{pg_url}#{pg_session_key}"


def _pg_check(where: str, reports: list[dict[str, Any]], codes: list[int]) -> None:
    from holon_ctx.postgres import PostgresStore
    from holon_ctx.postgres.continuity import PostgresContinuityBackend
    from holon_ctx.postgres.episodes import PostgresEpisodeStore

    url, _, key = where.partition("#")
    ledger = PostgresStore(url, session=key)
    episodes = PostgresEpisodeStore(ledger.connection, session=key)
    continuity = ContinuityStore(PostgresContinuityBackend(ledger.connection, session=key))
    try:
        check_after(ledger, episodes, continuity, reports, codes)
    finally:
        ledger.close()


def test_runtimes_and_the_cli_compact_one_postgres_ledger_without_failing(pg_where: str) -> None:
    """Defect 2 on PostgreSQL: four runtimes compacting at every turn and ``holon-ctx compact``."""
    reports, codes = run_together(pg_where, agents=3, turns=6, compact_share=1.0, cli_rounds=3)
    _pg_check(pg_where, reports, codes)


@pytest.mark.scaled
def test_stress_eight_runtimes_on_one_postgres_ledger(pg_where: str) -> None:
    """The stress test on PostgreSQL: 8 runtimes appending, asking and compacting."""
    reports, codes = run_together(pg_where, agents=8, turns=sized(4, 40), compact_share=0.3,
                                  cli_rounds=sized(1, 8))
    _pg_check(pg_where, reports, codes)
