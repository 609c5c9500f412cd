"""What only the PostgreSQL stores promise: sessions, schema versions, index plans, CLI errors.

The shared contracts (ledger, episodes, continuity) run in their conformance suites, parametrised
over stores; this file covers the rest, against the run's own database (``pg_url``, conftest.py).
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from test_store_conformance import END, LEDGER

from holon_ctx.cli.main import main
from holon_ctx.continuity import ContinuityBackend, ContinuityStore
from holon_ctx.errors import StoreError
from holon_ctx.ledger.importer import export_jsonl
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.postgres import (
    SCHEMA_VERSION,
    PostgresStore,
    delete_session,
    list_sessions,
    migrate,
)
from holon_ctx.postgres.continuity import PostgresContinuityBackend
from holon_ctx.postgres.episodes import PostgresEpisodeStore
from holon_ctx.postgres.schema import MIGRATIONS, SESSION_TABLES

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "tests" / "golden" / "small.jsonl"


@pytest.fixture
def schema_url(pg_url: str) -> Iterator[str]:
    """A URL whose tables live in a schema of their own (``search_path``), empty at the start."""
    import psycopg

    name = f"s_{abs(hash(pg_url)) % 10**6}_{next(_schemas)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    yield f"{pg_url}?options=-csearch_path%3D{name}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {name} CASCADE")


_schemas = iter(range(1 << 30))


def test_schema_is_created_on_first_use_and_versioned(schema_url: str) -> None:
    """An empty schema is migrated from version 0 by the first store; migrate then finds it current."""
    assert sorted(MIGRATIONS) == list(range(SCHEMA_VERSION))
    assert list_sessions(schema_url) == []
    PostgresStore(schema_url, session="a").close()
    assert migrate(schema_url) == (SCHEMA_VERSION, SCHEMA_VERSION)
    assert [s.key for s in list_sessions(schema_url)] == ["a"]


def test_migrate_ahead_of_use(schema_url: str) -> None:
    """`migrate` creates the schema (version 0 before); stores opened later do not migrate again."""
    assert migrate(schema_url) == (0, SCHEMA_VERSION)
    store = PostgresStore(schema_url, session="a")
    assert store.append(LEDGER) == END
    store.close()


def test_version_1_is_migrated_on_first_use(schema_url: str) -> None:
    """A schema left at version 1 is migrated through every later version by the next store opened:
    its data stays, the version moves to the current one, and sid loses its statistics."""
    import psycopg

    with psycopg.connect(schema_url, autocommit=True) as conn, conn.transaction():
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO holon_meta VALUES ('schema_version', '1')")
        conn.execute("INSERT INTO holon_sessions (key, end_pos) VALUES ('old', 0)")
    store = PostgresStore(schema_url, session="old", create=False)
    assert store.append(LEDGER) == END
    store.close()
    assert migrate(schema_url) == (SCHEMA_VERSION, SCHEMA_VERSION)
    with psycopg.connect(schema_url, autocommit=True) as conn:
        targets = dict(conn.execute(
            "SELECT c.relname, a.attstattarget FROM pg_attribute a JOIN pg_class c "
            "ON c.oid = a.attrelid WHERE a.attname = 'sid' AND c.relkind = 'r' "
            "AND c.relname <> 'holon_sessions' AND pg_table_is_visible(c.oid)"))
    assert targets == dict.fromkeys(SESSION_TABLES, 0)


def test_newer_schema_is_refused(schema_url: str) -> None:
    """A schema written by a newer holon-ctx raises one line instead of being misread."""
    import psycopg

    migrate(schema_url)
    with psycopg.connect(schema_url, autocommit=True) as conn:
        conn.execute("UPDATE holon_meta SET value=%s WHERE key='schema_version'",
                     (str(SCHEMA_VERSION + 1),))
    with pytest.raises(StoreError, match=rf"schema version {SCHEMA_VERSION + 1} is newer than "
                                         rf"this holon-ctx supports \({SCHEMA_VERSION}\)"):
        PostgresStore(schema_url, session="a")


def _high(store: PostgresStore) -> list[str]:
    return [r.ref for r in store.high_turns_before(99, 10, store.end_pos())]


def test_version_1_schema_migrates_and_indexes_its_high_turns(schema_url: str) -> None:
    """A schema-1 database with ledgers in it opens as the current version with every session's
    high-turn index built from its records; a stale index key rebuilds it the same way."""
    import psycopg
    from test_store_conformance import HIGH_LEDGER

    store = PostgresStore(schema_url, session="a")
    store.append(HIGH_LEDGER)
    expected = _high(store)
    assert expected == ["turn:h3", "turn:h2", "turn:h1"]
    store.close()
    with psycopg.connect(schema_url, autocommit=True) as conn:
        # What version 1 had: none of the tables later versions add.
        conn.execute("DROP TABLE holon_high_turns, holon_session_epochs, holon_session_state, "
                     "holon_usage, holon_episodes_runs, holon_episodes_forms, holon_calls")
        conn.execute("DELETE FROM holon_meta WHERE key='high_index'")
        conn.execute("UPDATE holon_meta SET value='1' WHERE key='schema_version'")
    assert migrate(schema_url) == (1, SCHEMA_VERSION)
    again = PostgresStore(schema_url, session="a")
    assert _high(again) == expected
    again.close()
    with psycopg.connect(schema_url, autocommit=True) as conn:
        conn.execute("DELETE FROM holon_high_turns")
        conn.execute("UPDATE holon_meta SET value='stale' WHERE key='high_index'")
    again = PostgresStore(schema_url, session="a")
    assert _high(again) == expected
    again.close()


def test_sessions_are_isolated(pg_url: str, pg_session_key: str) -> None:
    """Two sessions hold the same refs independently; neither sees the other's records."""
    a = PostgresStore(pg_url, session=pg_session_key + "a")
    b = PostgresStore(pg_url, session=pg_session_key + "b")
    a.append(LEDGER)
    b.append(LEDGER[:6])
    assert (a.end_pos(), b.end_pos()) == (END, 6)
    assert a.get("turn:t2") is not None
    assert b.get("turn:t2") is None
    assert b.latest_turn(100) == b.get("turn:t1")
    assert b.open_waits(100)[0].wait_id == "ci"
    assert a.open_waits(END)[0].wait_id == "review"
    assert (a.stats().records, b.stats().records) == (END, 6)
    a.close()
    b.close()


def test_missing_session_is_refused_unless_created(pg_url: str, pg_session_key: str) -> None:
    """create=False names the missing session; create=True makes it, once."""
    with pytest.raises(StoreError, match=f"no session '{pg_session_key}'"):
        PostgresStore(pg_url, session=pg_session_key, create=False)
    made = PostgresStore(pg_url, session=pg_session_key)
    again = PostgresStore(pg_url, session=pg_session_key, create=False)
    assert (made.created, again.created, made.sid) == (True, False, again.sid)
    made.close()
    again.close()


def test_a_store_that_fails_to_open_closes_the_connection_it_opened(
        pg_url: str, pg_session_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store refused while opening (here: no such session) closes the connection it opened
    from the URL, so no server connection is left behind; a connection the caller passed in
    is the caller's and stays open."""
    import psycopg

    from holon_ctx.postgres import session as pg_session

    opened: list[Any] = []
    real_connect = pg_session.connect

    def connect(url: str, *, durable: bool = True) -> Any:
        opened.append(real_connect(url, durable=durable))
        return opened[-1]

    monkeypatch.setattr(pg_session, "connect", connect)
    for store in (PostgresStore, PostgresEpisodeStore):
        with pytest.raises(StoreError, match="no session"):
            store(pg_url, session=pg_session_key, create=False)
    assert len(opened) == 2
    assert all(conn.closed for conn in opened)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with pytest.raises(StoreError, match="no session"):
            PostgresStore(conn, session=pg_session_key, create=False)
        assert not conn.closed


def test_every_store_of_a_session_opened_from_a_url_commits_durably(
        pg_url: str, pg_session_key: str) -> None:
    """The episode, governed, epoch and usage stores opened from a URL keep the server's
    durable commits (an acknowledged write survives a server crash), as the ledger does by
    default: only the ledger offers ``durable=False``."""
    from holon_ctx.postgres.epochs import PostgresEpochStore
    from holon_ctx.postgres.usage import PostgresUsageStore

    stores = [kind(pg_url, session=pg_session_key) for kind in (
        PostgresEpisodeStore, PostgresContinuityBackend, PostgresEpochStore, PostgresUsageStore)]
    try:
        for store in stores:
            setting = store._h.conn.execute("SHOW synchronous_commit").fetchone()[0]
            assert (type(store).__name__, setting) == (type(store).__name__, "on")
    finally:
        for store in stores:
            store.close()


def test_delete_session_empties_every_session_table(pg_url: str, pg_session_key: str) -> None:
    """Deleting a session removes its rows from every table keyed by sid, and only its rows."""
    import psycopg
    from test_episodes_kit import billing_conversation, policy

    from holon_ctx.compaction import SessionConfig, compact
    from holon_ctx.memory.archiver import Archiver
    from holon_ctx.memory.episodes import Recap, RecapStatus
    from holon_ctx.projection.session.session import SessionProjector

    def filled(key: str) -> int:
        ledger = PostgresStore(pg_url, session=key)
        ledger.append(billing_conversation()[0].records)
        episodes = PostgresEpisodeStore(ledger.connection, session=key)
        governed = ContinuityStore(PostgresContinuityBackend(ledger.connection, session=key))
        compact(ledger, episodes, governed, session=SessionConfig(),
                clock=lambda: datetime(2026, 12, 1, tzinfo=UTC),
                archiver=Archiver(ledger, episodes, policy=policy(8, 4)))
        episodes.add_recap(Recap(episode_id="e0-3", digest="sha256:" + "0" * 64, model="m",
                                 status=RecapStatus.REJECTED))
        SessionProjector(ledger, epochs=ledger.epoch_store()).request(budget_tokens=2000)
        sid = ledger.sid
        ledger.close()
        return sid

    keep, gone = filled(pg_session_key + "keep"), filled(pg_session_key + "gone")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        tables = {t for (t,) in conn.execute(
            "SELECT table_name FROM information_schema.columns WHERE column_name='sid' "
            "AND table_schema = current_schema() AND table_name <> 'holon_sessions'")}
        assert tables == set(SESSION_TABLES)

        def counts(sid: int) -> dict[str, int]:
            return {t: conn.execute(f"SELECT count(*) FROM {t} WHERE sid=%s",
                                    (sid,)).fetchone()[0] for t in SESSION_TABLES}

        before = counts(keep)
        filled_tables = {t for t, n in counts(gone).items() if n}
        assert {"holon_records", "holon_episodes_postings", "holon_episodes_recaps",
                "holon_continuity_envelopes", "holon_continuity_events", "holon_session_epochs",
                "holon_session_state"} <= filled_tables
        assert delete_session(pg_url, pg_session_key + "gone") is True
        assert delete_session(pg_url, pg_session_key + "gone") is False
        assert set(counts(gone).values()) == {0}
        assert counts(keep) == before
    assert pg_session_key + "gone" not in {s.key for s in list_sessions(pg_url)}


def test_rebuild_derived_reproduces_reads_and_adopts_the_counter(pg_url: str,
                                                                  pg_session_key: str) -> None:
    """Deleting the derived rows changes the answers; rebuilding gives them back exactly, and
    under another counter persists that counter's counts only."""
    from test_store_conformance import CharCounter, _fixed_reads

    store = PostgresStore(pg_url, session=pg_session_key)
    store.append(LEDGER)
    before = _fixed_reads(store)
    for table in ("holon_turns", "holon_token_counts", "holon_work_item_states",
                  "holon_wait_states"):
        store.connection.execute(f"DELETE FROM {table} WHERE sid=%s", (store.sid,))
    fresh = PostgresStore(pg_url, session=pg_session_key, create=False)
    assert _fixed_reads(fresh) != before
    fresh.rebuild_derived()
    assert _fixed_reads(fresh) == before
    chars = PostgresStore(pg_url, session=pg_session_key, counter=CharCounter(), create=False)
    recounted = chars.stats()
    chars.rebuild_derived()
    assert chars.stats() == recounted
    assert chars.connection.execute("SELECT DISTINCT counter FROM holon_token_counts WHERE sid=%s",
                                    (chars.sid,)).fetchall() == [("fake:chars",)]
    for s in (store, fresh, chars):
        s.close()


def test_continuity_tables_are_append_only(pg_url: str, pg_session_key: str) -> None:
    """UPDATE or DELETE of a stored envelope, step or event is refused by the database."""
    import psycopg

    backend = PostgresContinuityBackend(pg_url, session=pg_session_key)
    assert isinstance(backend, ContinuityBackend)
    backend.append_event("context_compaction", "ce-1", "s1", b"{}", "2026-12-01T00:00:00.000000Z")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for sql in ("UPDATE holon_continuity_events SET payload='x'",
                    "DELETE FROM holon_continuity_events"):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(sql)
    backend.close()


# -- index plans --------------------------------------------------------------------------------
#: Each read, and the index its plan must search (what makes it O(window), not O(history)). The
#: ledger is LEDGER then 3,000 filler records, and reads look at LEDGER's part with limit_pos at
#: the end: a plan that walked positions up to limit_pos would read the whole history.
READS: dict[str, tuple[Callable[[PostgresStore, int], object], str]] = {
    "get": (lambda s, _end: s.get("message:m1"), "holon_records_ref"),
    "next_turn_pos": (lambda s, _end: s.next_turn_pos(12), "holon_turns_pkey"),
    "latest_turn": (lambda s, _end: s.latest_turn(15), "holon_turns_pos"),
    "turns_before": (lambda s, end: s.turns_before(21, 3, end), "holon_turns_pkey"),
    "records_of_turns": (lambda s, end: s.records_of_turns(10, 13, end), "holon_records_by_turn"),
    "latest_operator_turn": (lambda s, end: s.latest_operator_turn(21, end), "holon_turns_intent"),
    "high_turns_before": (lambda s, end: s.high_turns_before(21, 3, end), "holon_high_turns_pkey"),
    "work_item_state": (lambda s, end: s.work_item_state("wi1", end),
                        "holon_work_item_states_by_id"),
    "open_waits": (lambda s, _end: s.open_waits(15), "holon_wait_states"),
    "latest_environment": (lambda s, end: s.latest_environment(end), "holon_records_env_pin"),
    "pins": (lambda s, end: s.pins(end, 2), "holon_records_env_pin"),
    "waiting_calls": (lambda s, _end: s.waiting_calls(), "holon_calls_waiting"),
    "call_record": (lambda s, _end: s.call_record("fc7"), "holon_calls_pkey"),
}


def _filled(store: PostgresStore) -> PostgresStore:
    from holon_ctx.ledger.records import AnnouncedCall, Message, MessageRole, Tool, ToolStatus, Turn

    store.append(LEDGER)
    filler: list[Any] = []
    for i in range(1500):
        # Each reply announces a call, answered but one in a hundred (the calls still waiting).
        filler += [Turn(id=f"f{i}", seq=100 + i, trigger="timer"),
                   Message(id=f"fm{i}", turn_id=f"f{i}", role=MessageRole.ASSISTANT, text="ok",
                           tool_calls=[AnnouncedCall(call_id=f"fc{i}", name="bash")])]
        if i % 100:
            filler.append(Tool(id=f"fx{i}", turn_id=f"f{i}", tool_name="bash",
                               args_digest="sha256:0", call_id=f"fc{i}", output="ok",
                               status=ToolStatus.OK))
    store.append(filler)
    return store


@pytest.fixture(scope="module")
def planned_stores(pg_url: str) -> Iterator[dict[str, PostgresStore]]:
    """"analyzed": a session the planner's statistics know; "new": one filled after ANALYZE, whose
    size the statistics do not know (every new session of a fleet, until autovacuum runs)."""
    known = _filled(PostgresStore(pg_url, session="plans-analyzed"))
    for table in ("holon_records", "holon_turns", "holon_token_counts", "holon_wait_states",
                  "holon_work_item_states", "holon_high_turns", "holon_calls"):
        known.connection.execute(f"ANALYZE {table}")
    stores = {"analyzed": known, "new": _filled(PostgresStore(pg_url, session="plans-new"))}
    yield stores
    for store in stores.values():
        store.close()


@pytest.mark.parametrize("stats", ["analyzed", "new"])
@pytest.mark.parametrize("read", READS, ids=READS)
def test_reads_are_index_searches(read: str, stats: str,
                                  planned_stores: dict[str, PostgresStore]) -> None:
    """Every read's plan searches the index meant for it, with all of its columns, and none scans
    a table: also for a session the statistics underestimate."""
    store = planned_stores[stats]
    call, index = READS[read]
    seen: list[tuple[str, Any]] = []
    run = store._h.rows

    def spy(sql: str, args: Any, *, binary: bool = False) -> list[tuple[Any, ...]]:
        seen.append((sql, {"sid": store.sid, **args} if isinstance(args, dict) else args))
        return run(sql, args, binary=binary)

    store._rows = spy  # type: ignore[method-assign]
    store._open_waits.reset()
    store._decoded.clear()
    try:
        call(store, store.end_pos())
    finally:
        store._rows = run  # type: ignore[method-assign]
    # The state tables hold a handful of rows here, which any planner would rather scan: price
    # scans out, so a plan that still scans has no index to search.
    conn = store.connection
    conn.execute("SET enable_seqscan = off")
    plans = ["\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, args).fetchall())
             for sql, args in seen if not sql.startswith("SELECT end_pos FROM holon_sessions")]
    conn.execute("RESET enable_seqscan")
    assert plans, "the read ran no statement"
    assert any(index in plan for plan in plans), plans
    for plan in plans:
        assert "Seq Scan" not in plan, plan


# -- CLI ----------------------------------------------------------------------------------------
def _cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("db", "expected"), [
    ("postgresql://postgres@127.0.0.1:1/x", "postgresql://postgres@127.0.0.1:1/x: cannot connect: "
                                            "Connection refused"),
    ("postgresql://postgres@127.0.0.1:5432/holon_no_such_db",
     'postgresql://postgres@127.0.0.1:5432/holon_no_such_db: cannot connect: database '
     '"holon_no_such_db" does not exist'),
    ("postgresql://holon_nobody:s3cret@127.0.0.1:5432/postgres",
     'postgresql://holon_nobody@127.0.0.1:5432/postgres: cannot connect: role "holon_nobody" '
     'does not exist'),
], ids=["unreachable", "bad-database", "bad-credentials"])
@pytest.mark.parametrize("command", [["stats"], ["export"], ["episodes", "list"], ["compact"],
                                     ["project", "--budget", "500"], ["db", "sessions"]],
                         ids=lambda c: "-".join(c[:2]))
def test_server_refusals_are_one_line(db: str, expected: str, command: list[str], pg_url: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Unreachable, bad database, bad credentials: one line naming the server (no password).
    (``pg_url``: the refusals need the server up; without it the test is skipped or fails.)"""
    code, out, err = _cli(*command, "--db", db, "--session-key", "k", capsys=capsys)
    if command == ["db", "sessions"]:
        code, out, err = _cli(*command, "--db", db, capsys=capsys)
    assert (code, out) == (2, "")
    assert err == f"holon-ctx: error: {expected}\n"
    assert "s3cret" not in err


def test_missing_session_and_missing_key_are_one_line(pg_url: str, pg_session_key: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A session that does not exist, or no --session-key with a URL: exit 2, one line."""
    code, out, err = _cli("stats", "--db", pg_url, "--session-key", pg_session_key, capsys=capsys)
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert f"no session '{pg_session_key}'" in err
    code, _, err = _cli("preview", "--db", pg_url, "--budget", "900", capsys=capsys)
    assert code == 2
    assert "needs --session-key KEY" in err
    assert err.count("\n") == 1
    assert pg_session_key not in {s.key for s in list_sessions(pg_url)}


def test_cli_on_postgres_matches_sqlite(pg_url: str, pg_session_key: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """import, export, project --json, archive and list give SQLite's answers on PostgreSQL."""
    sqlite_db = str(tmp_path / "l.db")
    pg = ["--db", pg_url, "--session-key", pg_session_key]
    assert _cli("import", str(SMALL), "--db", sqlite_db, capsys=capsys)[0] == 0
    code, out, _ = _cli("import", str(SMALL), *pg, capsys=capsys)
    assert code == 0
    assert f"session '{pg_session_key}'" in out
    shown = ""
    for command in (["export"], ["project", "--budget", "700", "--json"],
                    ["episodes", "archive", "--recent", "4"], ["episodes", "show", "e1-5"],
                    ["project", "--budget", "1500"]):
        code_s, out_s, _ = _cli(*command, "--db", sqlite_db, capsys=capsys)
        code_p, out_p, _ = _cli(*command, *pg, capsys=capsys)
        where = f"{pg_url} session '{pg_session_key}'"
        assert (code_p, out_p.replace(where, "DB")) == (code_s, out_s.replace(sqlite_db, "DB")), \
            command
        shown += out_p
    assert "episode:e1-5\ncovers: turn:t1 – turn:t5" in shown


def test_failed_import_leaves_no_session(pg_url: str, pg_session_key: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """An import that fails removes the session it made, as it removes a SQLite file it made."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(SMALL.read_text() + '{"v":1,"type":"pin","id":"p9","target":"tool:none"}\n')
    code, _, err = _cli("import", str(bad), "--db", pg_url, "--session-key", pg_session_key,
                        capsys=capsys)
    assert code == 2
    assert "pin target 'tool:none' is not in the ledger" in err
    assert pg_session_key not in {s.key for s in list_sessions(pg_url)}


def test_export_matches_sqlite_byte_for_byte(pg_url: str, pg_session_key: str,
                                             tmp_path: Path) -> None:
    """The same ledger exports to the same bytes from both stores."""
    outs = []
    for store in (SqliteStore(tmp_path / "l.db"), PostgresStore(pg_url, session=pg_session_key)):
        store.append(LEDGER)
        buf = io.BytesIO()
        export_jsonl(store, buf)
        outs.append(buf.getvalue())
        store.close()
    assert outs[0] == outs[1]


def test_core_imports_without_psycopg() -> None:
    """Without psycopg the CLI and the library import, and a URL fails with one line naming the
    extra to install."""
    script = (
        "import sys; sys.modules['psycopg'] = None\n"
        "import holon_ctx.cli.main, holon_ctx.postgres\n"
        "from holon_ctx.postgres import PostgresStore\n"
        "from holon_ctx.errors import StoreError\n"
        "try:\n    PostgresStore('postgresql://127.0.0.1/x', session='a')\n"
        "except StoreError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    from holon_ctx.extras import install_command

    # Installed from this checkout: the command installs the checkout's extra, never from an
    # index that does not have holon-ctx.
    assert install_command("postgres") == f"pip install -e '{ROOT}[postgres]'"
    assert out.stdout == ("PostgreSQL support needs the 'postgres' extra (psycopg is not "
                          f"installed): pip install -e '{ROOT}[postgres]'\n")


def test_large_import_goes_through_copy_and_matches_memory(pg_url: str,
                                                          pg_session_key: str) -> None:
    """The demo ledger (656 records: its rows go in with COPY, the high-turn marks as INSERT … ON
    CONFLICT) reads back as the memory store reads it."""
    from holon_ctx.ledger.importer import import_jsonl
    from holon_ctx.ledger.memory import MemoryStore

    demo = ROOT / "holon_ctx" / "data" / "demo.jsonl"
    memory, pg = MemoryStore(), PostgresStore(pg_url, session=pg_session_key)
    import_jsonl(demo, memory)
    import_jsonl(demo, pg)
    end = memory.end_pos()
    assert pg.end_pos() == end
    high = [r.ref for r in memory.high_turns_before(10**9, 1000, end)]
    assert len(high) > 10
    assert [r.ref for r in pg.high_turns_before(10**9, 1000, end)] == high
    assert pg.stats() == memory.stats()
    assert list(pg.iter_records()) == list(memory.iter_records())
    pg.close()


def test_the_compaction_lock_is_the_sessions_advisory_lock(pg_url: str) -> None:
    """Held: one advisory lock keyed (``HOLC``, the session's id), visible to every process on
    the server; released after (postgres/ledger.py ``compaction_lock``)."""
    import psycopg

    store = PostgresStore(pg_url, session=f"lock-key-{datetime.now(UTC).timestamp()}")
    query = ("SELECT classid::bigint, objid::bigint FROM pg_locks WHERE locktype='advisory' "
             "AND granted AND classid::bigint = %s")
    with psycopg.connect(pg_url, autocommit=True) as other:
        with store.compaction_lock():
            held = other.execute(query, (0x484F4C43,)).fetchall()
            assert (0x484F4C43, store.sid) in held
        assert (0x484F4C43, store.sid) not in other.execute(query, (0x484F4C43,)).fetchall()
    store.close()


def test_a_few_rows_are_pipelined_inserts_and_more_go_through_copy(
        pg_url: str, pg_session_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``SessionHandle.insert``: up to ``_PIPELINED_ROWS`` rows over all tables are INSERTs in
    one pipeline, one more sends each table through COPY; an INSERT … ON CONFLICT stays an
    INSERT in a COPY-sized batch (COPY cannot skip conflicts), and every row lands."""
    from holon_ctx.postgres.session import _PIPELINED_ROWS

    store = PostgresStore(pg_url, session=pg_session_key)
    handle = store._h
    copied: list[str] = []
    real_copy = handle.copy

    def copy(table: str, rows: Any) -> None:
        copied.append(table)
        real_copy(table, rows)

    monkeypatch.setattr(handle, "copy", copy)
    try:
        handle.rows("CREATE TEMP TABLE few (n int PRIMARY KEY)", ())
        handle.rows("CREATE TEMP TABLE keyed (n int PRIMARY KEY)", ())
        plain = "INSERT INTO few VALUES (%s)"
        handle.insert([("few", plain, [(-1,)])])
        handle.insert([("few", plain, [(n,) for n in range(_PIPELINED_ROWS)])])
        assert copied == []
        handle.insert([("few", plain, [(n,) for n in range(1000, 1001 + _PIPELINED_ROWS)])])
        assert copied == ["few"]
        upsert = "INSERT INTO keyed VALUES (%s) ON CONFLICT DO NOTHING"
        handle.insert([("few", plain, [(n,) for n in range(2000, 2000 + _PIPELINED_ROWS)]),
                       ("keyed", upsert, [(n,) for n in range(_PIPELINED_ROWS)])])
        assert copied == ["few", "few"]
        counts = [handle.one(f"SELECT count(*) FROM {t}", ())[0] for t in ("few", "keyed")]
        assert counts == [3 * _PIPELINED_ROWS + 2, _PIPELINED_ROWS]
    finally:
        store.close()
