"""Every waiting tool call is known however old (RFC 0008 decision 5, amended 2026-12-06 again).

A call's state is its newest record: the reply that announced it (waiting in its turn), a
``pending`` record (written once, when a turn opened with it still out: it takes a late result),
or its result (a second result is refused). Each store keeps that state per call id in the
append's own transaction, so a Session that opens or catches up reads every waiting call at once,
however many turns back it was made, without reading the ledger.

The scenarios are run interrupted (a restart, or other Sessions writing in between) and not, and
the two ledgers must be the same records, byte for byte.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_announced_calls import ROOT, Opener, _lines, kill_when, sessions

from holon_ctx import Session, ToolCall, open_session
from holon_ctx.errors import InputError
from holon_ctx.ledger import calls_sqlite
from holon_ctx.ledger.calls import last_per_call
from holon_ctx.ledger.codec import encode_record
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import (
    AnnouncedCall,
    Message,
    MessageRole,
    Record,
    Tool,
    ToolStatus,
    Turn,
)
from holon_ctx.ledger.sqlite import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import CallState, LedgerStore


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """A new Session on a named ledger of each store kind, compacting only when asked."""
    with sessions(request.param, tmp_path, request, compaction=None) as open_one:
        yield open_one


def start_ci(session: Session) -> None:
    """The model starts a CI job whose result comes back many turns later."""
    session.operator_message("Run the full CI pipeline on release 4.2, and keep me posted.")
    session.assistant_message("Starting the pipeline.", tool_calls=[
        ToolCall("call_ci", "run_pipeline", {"ref": "release-4.2", "suite": "full"})])


def chat_turns(session: Session, count: int, first: int = 0) -> None:
    """``count`` turns of conversation while the job runs."""
    for k in range(first, first + count):
        session.operator_message(f"Anything from CI yet? ({k})")
        session.assistant_message(f"Still running ({k}).")


def ci_result(session: Session) -> str:
    return session.tool_result("call_ci", "pipeline green: 1,204 passed", exit_code=0)


def _results(session: Session, call_id: str) -> list[tuple[ToolStatus, str | None]]:
    return [(r.status, r.turn_id) for r in session.store.iter_records()
            if isinstance(r, Tool) and r.call_id == call_id]


# -- a late result, however far back ---------------------------------------------------------------
@pytest.mark.parametrize("later", [5, 50])
def test_a_late_result_many_turns_later_lands_after_a_restart(opener: Opener, later: int) -> None:
    """The job answers ``later`` turns after it started, and the runtime restarted just before
    (no close: what a crash leaves): the result lands in the call's turn, as in an uninterrupted
    run (before, the reopened Session read only the latest two turns and refused it)."""
    first = opener("run")
    start_ci(first)
    chat_turns(first, later)
    restarted = opener("run")
    ci_result(restarted)

    clean = opener("clean")
    start_ci(clean)
    chat_turns(clean, later)
    ci_result(clean)
    assert _lines(restarted) == _lines(clean)
    assert _results(restarted, "call_ci") == [(ToolStatus.PENDING, "t0"), (ToolStatus.OK, "t0")]


CRASHING_RUNTIME = """
import sys, time
sys.path.insert(0, sys.argv[1])
import holon_ctx
from test_waiting_calls import chat_turns, start_ci
where, key, later = sys.argv[2], sys.argv[3], int(sys.argv[4])
session = (holon_ctx.open_session(where, session_key=key, compaction=None) if key
           else holon_ctx.open_session(where, compaction=None))
start_ci(session)
chat_turns(session, later // 2)
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("later", [5, 50])
def test_a_runtime_killed_while_its_job_runs_takes_the_result_turns_later(
        backend: str, later: int, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A real SIGKILL halfway through the job's ``later`` turns: the restarted runtime goes on
    with the conversation, and the job's result, ``later`` turns after it started, is the record
    an uninterrupted runtime writes."""
    if backend == "sqlite":
        where, key = str(tmp_path / "crashed.db"), ""

        def reopen(name: str) -> Session:
            return open_session(tmp_path / f"{name}.db", compaction=None)
    else:
        where, key = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_session_key")

        def reopen(name: str) -> Session:
            return open_session(where, session_key=key if name == "crashed" else f"{key}-{name}",
                                compaction=None)
    kill_when(CRASHING_RUNTIME, "ready", where, key, str(later))
    restarted, clean = reopen("crashed"), reopen("clean")
    try:
        chat_turns(restarted, later - later // 2, later // 2)
        ci_result(restarted)
        start_ci(clean)
        chat_turns(clean, later)
        ci_result(clean)
        assert _lines(restarted) == _lines(clean)
        assert _results(restarted, "call_ci") == [(ToolStatus.PENDING, "t0"),
                                                  (ToolStatus.OK, "t0")]
    finally:
        restarted.close()
        clean.close()


# -- other Sessions ---------------------------------------------------------------------------------
def test_a_result_another_session_recorded_long_ago_is_not_taken_twice(opener: Opener) -> None:
    """A worker pool: another Session records the result of this one's call, and turns go on;
    this Session's own late ``tool_result`` for it is refused naming the call, and the ledger
    holds one result (before, the announcer kept its call waiting across the reload and wrote a
    second result)."""
    announcer, worker = opener("pool"), opener("pool")
    start_ci(announcer)
    chat_turns(worker, 2)
    ci_result(worker)
    chat_turns(worker, 3, 2)
    with pytest.raises(InputError) as refused:
        ci_result(announcer)
    assert str(refused.value).startswith("tool_result: call_id: call 'call_ci' has its result")
    assert "\n" not in str(refused.value)
    assert _results(announcer, "call_ci") == [(ToolStatus.PENDING, "t0"), (ToolStatus.OK, "t0")]


def test_a_call_another_session_left_pending_is_not_written_pending_again(opener: Opener) -> None:
    """A worker pool whose other worker opens turns while this one's call is out: the call is
    written ``pending`` once, by the Session that opened the next turn, however many turns go
    by before this Session opens one (before, this Session kept its call waiting and wrote it
    ``pending`` a second time)."""
    def pooled(open_: Opener) -> Session:
        announcer, worker = open_("pool"), open_("pool")
        start_ci(announcer)
        chat_turns(worker, 4)
        chat_turns(announcer, 1, 4)
        ci_result(announcer)
        return announcer

    pool = pooled(opener)
    clean = opener("clean")
    start_ci(clean)
    chat_turns(clean, 5)
    ci_result(clean)
    assert _lines(pool) == _lines(clean)
    assert _results(pool, "call_ci") == [(ToolStatus.PENDING, "t0"), (ToolStatus.OK, "t0")]


def test_a_second_result_in_one_session_is_refused_naming_the_call(opener: Opener) -> None:
    """One runtime, a result given twice: the second is refused in one line naming the call and
    where its result is; nothing is appended."""
    session = opener("run")
    start_ci(session)
    first = ci_result(session)
    end = session.store.end_pos()
    with pytest.raises(InputError, match=rf"^tool_result: call_id: call 'call_ci' has its result "
                                         rf"already \({first}\)"):
        ci_result(session)
    assert session.store.end_pos() == end


# -- two results at once ----------------------------------------------------------------------------
ROUNDS = 12


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_sessions_racing_to_record_one_result_exactly_one_wins(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Two Sessions (each its own connection, in two threads) record the result of the same call
    at the same instant, ``ROUNDS`` times: each time exactly one is stored and the other is
    refused naming the call (the append is the serialisation point: it lands only where the
    ledger still ends where the Session last read it, and the loser, reading the ledger again,
    finds the call answered)."""
    if backend == "sqlite":
        def open_one() -> Session:
            return open_session(tmp_path / "race.db", compaction=None)
    else:
        url, key = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_session_key")

        def open_one() -> Session:
            return open_session(url, session_key=key, compaction=None)
    a, b = open_one(), open_one()
    try:
        a.operator_message("Run the checks.")
        for k in range(ROUNDS):
            call = f"call_{k}"
            a.assistant_message(f"Check {k}.", tool_calls=[ToolCall(call, "check", "{}")])
            a.operator_message(f"And {k}?")  # the call is late: both Sessions read it
            b.next_request(8192)             # b catches up with the ledger
            gate = threading.Barrier(2)
            got: list[str] = []

            def answer(session: Session, who: str, call: str = call,
                       gate: threading.Barrier = gate, got: list[str] = got) -> None:
                gate.wait()
                try:
                    session.tool_result(call, f"result from {who}")
                    got.append(f"stored by {who}")
                except InputError as exc:
                    got.append(str(exc))
            threads = [threading.Thread(target=answer, args=(s, w)) for s, w in ((a, "a"), (b, "b"))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert len([g for g in got if g.startswith("stored by")]) == 1, got
            assert next(g for g in got if not g.startswith("stored by")).startswith(
                f"tool_result: call_id: call '{call}' has its result already"), got
            assert [s for s, _ in _results(a, call)] == [ToolStatus.PENDING, ToolStatus.OK]
    finally:
        a.close()
        b.close()



def test_a_replys_calls_are_written_pending_in_the_order_it_made_them(opener: Opener) -> None:
    """A reply's calls share its position: after a restart they are written ``pending`` in the
    order the reply made them, as the announcing Session writes them (ids that sort the other
    way round: a store's index orders by position, then by whatever it likes)."""
    ids = [f"call_{c}" for c in "zyxwv"]

    def reply(session: Session) -> None:
        session.operator_message("Check every host.")
        session.assistant_message("Checking.", tool_calls=[ToolCall(i, "ping", "{}") for i in ids])

    reply(opener("run"))
    restarted = opener("run")
    restarted.operator_message("Well?")
    clean = opener("clean")
    reply(clean)
    clean.operator_message("Well?")
    assert _lines(restarted) == _lines(clean)
    assert [r.call_id for r in restarted.store.iter_records() if isinstance(r, Tool)] == ids


# -- the stores' index of calls -----------------------------------------------------------------------
def _turn(tid: str, seq: int) -> Turn:
    return Turn(id=tid, seq=seq, trigger="operator_input")


def _reply(mid: str, tid: str, *ids: str) -> Message:
    return Message(id=mid, turn_id=tid, role=MessageRole.ASSISTANT, text="on it",
                   tool_calls=[AnnouncedCall(call_id=i, name="bash", arguments=i) for i in ids])


def _tool(xid: str, tid: str, call_id: str, status: ToolStatus = ToolStatus.OK) -> Tool:
    return Tool(id=xid, turn_id=tid, tool_name="bash", args_digest="sha256:0", args_preview=call_id,
                status=status, call_id=call_id)


#: Appends of one ledger: calls announced, left pending, answered, announced again after their
#: result; a batch naming one call twice (announced and answered in one append); calls that are
#: never announced (an imported transcript's records).
BATCHES: list[list[Record]] = [
    [_turn("t0", 0), _reply("m1", "t0", "a", "b", "c")],
    [_tool("x2", "t0", "a")],
    [_tool("x3", "t0", "b", ToolStatus.PENDING), _tool("x4", "t0", "c", ToolStatus.PENDING),
     _turn("t1", 1)],
    [_reply("m6", "t1", "d"), _tool("x7", "t1", "d"), _tool("x8", "t1", "e", ToolStatus.PENDING)],
    [_tool("x9", "t0", "b"), _turn("t2", 2), _reply("m11", "t2", "a", "f")],
    [_tool("x12", "t2", "g"), _tool("x13", "t0", "c", ToolStatus.ERROR)],
]


def _expected(records: list[Record]) -> dict[str, tuple[int, CallState]]:
    """Each call's newest record and state, walking the records (the rule as RFC 0008 states
    it, written out apart from the stores)."""
    newest: dict[str, tuple[int, CallState]] = {}
    for pos, rec in enumerate(records):
        if isinstance(rec, Message):
            newest.update({c.call_id: (pos, CallState.ANNOUNCED) for c in rec.tool_calls})
        elif isinstance(rec, Tool) and rec.call_id is not None:
            newest[rec.call_id] = (pos, CallState.PENDING if rec.status is ToolStatus.PENDING
                                   else CallState.ANSWERED)
    return newest


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    if request.param == "memory":
        store: LedgerStore = MemoryStore()
    elif request.param == "sqlite":
        store = SqliteStore(tmp_path / "calls.db")
    else:
        from holon_ctx.postgres import PostgresStore

        store = PostgresStore(request.getfixturevalue("pg_url"),
                              session=request.getfixturevalue("pg_session_key"))
    yield store
    store.close()


def _state(store: LedgerStore) -> tuple[int, list[tuple[str, CallState, int]]]:
    end, calls = store.waiting_calls()
    return end, sorted((c.call_id, c.state, c.stored.pos) for c in calls)


def _want(records: list[Record]) -> tuple[int, list[tuple[str, CallState, int]]]:
    return len(records), sorted((cid, state, pos) for cid, (pos, state) in
                                _expected(records).items() if state is not CallState.ANSWERED)


def test_every_store_knows_each_calls_newest_record_after_every_append(
        any_store: LedgerStore) -> None:
    """After each append (the first on PostgreSQL by the locked path, the next ones by the
    one-statement path), the calls waiting and each call's newest record are what walking the
    records says: one query, whatever the history."""
    appended: list[Record] = []
    for batch in BATCHES:
        any_store.append(batch, expect_end=len(appended))
        appended.extend(batch)
        assert _state(any_store) == _want(appended)
        for cid, (pos, state) in _expected(appended).items():
            found = any_store.call_record(cid)
            assert found is not None
            assert (found.state, found.stored.pos, found.stored.ref) == (
                state, pos, any_store.records_between(pos, pos + 1)[0].ref)
    assert any_store.call_record("never") is None


def test_an_import_in_one_batch_indexes_the_calls_as_appends_one_by_one_do(
        any_store: LedgerStore) -> None:
    """One append of the whole ledger (an import: on PostgreSQL the locked path, a call named
    by several of its records) leaves the same index as the appends one by one."""
    records = [r for batch in BATCHES for r in batch]
    any_store.append(records)
    assert _state(any_store) == _want(records)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_rebuilding_the_derived_tables_rebuilds_the_calls(backend: str, tmp_path: Path,
                                                          request: pytest.FixtureRequest) -> None:
    """The index is derived: emptied, a rebuild from the records gives its answers back."""
    records = [r for batch in BATCHES for r in batch]
    if backend == "sqlite":
        store: Any = SqliteStore(tmp_path / "calls.db")
        store.append(records)
        store._db.execute("DELETE FROM calls")
    else:
        from holon_ctx.postgres import PostgresStore

        store = PostgresStore(request.getfixturevalue("pg_url"),
                              session=request.getfixturevalue("pg_session_key"))
        store.append(records)
        store.connection.execute("DELETE FROM holon_calls WHERE sid=%s", (store.sid,))
    assert _state(store) == (len(records), [])
    store.rebuild_derived()
    assert _state(store) == _want(records)
    store.close()


def test_a_version_2_sqlite_ledger_migrates_with_its_waiting_calls(tmp_path: Path) -> None:
    """A ledger written before the index (schema 2: no calls table) is indexed from its records
    when it is opened, once: its session takes the late result of a call left pending long
    before."""
    path = tmp_path / "v2.db"
    first = open_session(path, compaction=None)
    start_ci(first)
    chat_turns(first, 5)
    first.close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE calls")
        db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    again = open_session(path, compaction=None)
    ci_result(again)
    assert _results(again, "call_ci") == [(ToolStatus.PENDING, "t0"), (ToolStatus.OK, "t0")]
    again.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
            str(SQLITE_SCHEMA_VERSION),)


def test_a_version_7_postgres_database_migrates_with_every_sessions_waiting_calls(
        pg_url: str, pg_session_key: str) -> None:
    """Schema 7 (no holon_calls) with two sessions in it: migrating indexes each session's calls
    from its records, and each takes its late result."""
    import psycopg

    from holon_ctx.postgres import SCHEMA_VERSION, migrate

    schema = f"calls_{abs(hash(pg_session_key)) % 10**8}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = f"{pg_url}?options=-csearch_path%3D{schema}"
    for key in ("a", "b"):
        session = open_session(url, session_key=key, compaction=None)
        start_ci(session)
        chat_turns(session, 3 if key == "a" else 6)
        session.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE holon_calls")
        conn.execute("UPDATE holon_meta SET value='7' WHERE key='schema_version'")
    assert migrate(url) == (7, SCHEMA_VERSION)
    for key in ("a", "b"):
        session = open_session(url, session_key=key, compaction=None)
        ci_result(session)
        assert _results(session, "call_ci") == [(ToolStatus.PENDING, "t0"),
                                                (ToolStatus.OK, "t0")]
        session.close()


def test_a_catch_up_reads_every_waiting_call_in_three_round_trips(pg_url: str,
                                                                   pg_session_key: str) -> None:
    """On PostgreSQL a Session catching up with another writer reads the ledger's end, then the
    waiting calls with the end they are as of, then the newest turn with its records: three
    round trips, however long the history and however many calls wait in it (four before: the
    end twice and the turn before the newest, and the calls further back never read)."""
    from pg_round_trips import RoundTrips

    trips = []
    for turns in (1, 30):
        key = f"{pg_session_key}-{turns}"
        writer = open_session(pg_url, session_key=key, compaction=None)
        for k in range(3):
            writer.operator_message(f"Job {k}.")
            writer.assistant_message("Started.", tool_calls=[ToolCall(f"job{k}", "run", "{}")])
            chat_turns(writer, turns)
        reader = open_session(pg_url, session_key=key, compaction=None)
        writer.operator_message("Any of them done?")
        counter = RoundTrips(reader.store.connection)  # type: ignore[attr-defined]
        reader._catch_up("test", read=True)
        trips.append(counter.count)
        assert sorted(reader._late) == ["job0", "job1", "job2"]
        writer.close()
        reader.close()
    assert trips == [3, 3]


# -- any interleaving ------------------------------------------------------------------------------
#: What a runtime does next: the operator speaks (a new turn), the model replies with some calls,
#: a waiting call's result comes back, a result comes back a second time; and, in the
#: interrupted run only, the runtime restarts (a new Session, the old one dropped unclosed) or
#: another worker's Session does the next step.
_OPS = st.lists(st.one_of(
    st.just(("say", 0)), st.tuples(st.just("reply"), st.integers(0, 3)),
    st.tuples(st.just("result"), st.integers(0, 50)), st.tuples(st.just("again"), st.integers(0, 50)),
    st.just(("restart", 0)), st.just(("switch", 0))), min_size=1, max_size=40)


def _play(ops: list[tuple[str, int]], sessions: Callable[[], Session], *,
          interrupted: bool) -> list[str]:
    """Run ``ops`` and return what each step answered (a ref, or the refusal)."""
    pool = [sessions(), sessions()]
    current = 0
    announced: list[str] = []
    answered: list[str] = []
    said: list[str] = []
    pool[current].operator_message("Start.")
    for op, arg in ops:
        session = pool[current]
        try:
            if op == "say":
                said.append(session.operator_message(f"Status {len(said)}?"))
            elif op == "reply":
                ids = [f"c{len(announced) + k}" for k in range(arg)]
                announced.extend(ids)
                said.append(session.assistant_message(
                    "On it.", tool_calls=[ToolCall(i, "job", {"n": i}) for i in ids]))
            elif op in ("result", "again"):
                pick = ([c for c in announced if c not in answered] if op == "result"
                        else answered)
                if pick:
                    call = pick[arg % len(pick)]
                    if op == "result":
                        answered.append(call)
                    said.append(session.tool_result(call, f"{call} done"))
            elif interrupted and op == "restart":
                pool[current] = sessions()
            elif interrupted and op == "switch":
                current = 1 - current
        except InputError as exc:
            said.append(str(exc))
    return said


def _interleavings(ops: list[tuple[str, int]], make: Callable[[str], Callable[[], Session]]
                   ) -> None:
    """``ops`` played by one Session and with restarts and workers (``make(name)``: what opens a
    Session on the ledger ``name``), compared."""
    ledgers = []
    answers = []
    for interrupted in (False, True):
        sessions = make("interrupted" if interrupted else "clean")
        answers.append(_play(ops, sessions, interrupted=interrupted))
        ledger = sessions().store
        ledgers.append([encode_record(r) for r in ledger.iter_records()])
    assert answers[1] == answers[0]
    assert ledgers[1] == ledgers[0]
    tools = [r for r in ledger.iter_records() if isinstance(r, Tool)]
    pending = [t.call_id for t in tools if t.status is ToolStatus.PENDING]
    results = [t.call_id for t in tools if t.status is not ToolStatus.PENDING]
    assert len(pending) == len(set(pending)), "a call written pending twice"
    assert len(results) == len(set(results)), "a call with two results"


@settings(max_examples=40)
@given(ops=_OPS)
def test_any_interleaving_of_restarts_and_workers_writes_the_uninterrupted_ledger(
        ops: list[tuple[str, int]]) -> None:
    """Whatever the runtime does, restarting between any two steps or handing any step to
    another worker's Session leaves the ledger one uninterrupted Session leaves, and each step
    answers the same: the same refs, the same refusals (a second result, named by its call)."""
    def make(_name: str) -> Callable[[], Session]:
        store = MemoryStore()
        return lambda: open_session(store, compaction=None)
    _interleavings(ops, make)


@settings(max_examples=10)
@given(ops=_OPS)
def test_any_interleaving_on_sqlite_writes_the_uninterrupted_ledger(
        ops: list[tuple[str, int]]) -> None:
    """The same on SQLite files, each Session on its own connection (the index read from the
    file, not from the memory of the store that wrote it)."""
    with tempfile.TemporaryDirectory() as tmp:
        _interleavings(ops, lambda name: lambda: open_session(Path(tmp) / f"{name}.db",
                                                              compaction=None))


def test_an_import_by_another_session_writes_the_calls_waiting_pending_first(
        opener: Opener) -> None:
    """A history imported by a Session that has not appended since another one announced a call:
    the call is written ``pending`` before the history's turns, as the announcing Session's own
    import writes it (before, the importer's stale state had no waiting call, and the call was
    left announced under turns that closed without it)."""
    history = [{"role": "user", "content": "What did the nightly run say?"},
               {"role": "assistant", "content": "All green."}]

    def steps(announcer: Session, importer: Session) -> Session:
        start_ci(announcer)
        importer.import_history(history)
        ci_result(announcer)
        return announcer

    importer = opener("pool")
    pool = steps(opener("pool"), importer)
    clean = opener("clean")
    steps(clean, clean)
    assert _lines(pool) == _lines(clean)
    assert _results(pool, "call_ci") == [(ToolStatus.PENDING, "t0"), (ToolStatus.OK, "t0")]


RACER = """
import sys
sys.path.insert(0, sys.argv[1])
import holon_ctx
where, key, who = sys.argv[2], sys.argv[3], sys.argv[4]
session = (holon_ctx.open_session(where, session_key=key, compaction=None) if key
           else holon_ctx.open_session(where, compaction=None))
print("ready", flush=True)
for line in sys.stdin:
    try:
        print("stored " + session.tool_result(line.strip(), "result from " + who), flush=True)
    except holon_ctx.InputError as exc:
        print(exc, flush=True)
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_processes_racing_to_record_one_result_exactly_one_wins(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The race between two runtime processes (each its own Session and connection), each
    given the same call id at the same moment, ``ROUNDS`` calls: one result stored for each,
    the other process refused naming the call."""
    import subprocess
    import sys

    if backend == "sqlite":
        where, key = str(tmp_path / "race.db"), ""
        announcer = open_session(where, compaction=None)
    else:
        where, key = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_session_key")
        announcer = open_session(where, session_key=key, compaction=None)
    announcer.operator_message("Run the checks.")
    tests = str(Path(__file__).resolve().parent)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    racers = [subprocess.Popen([sys.executable, "-c", RACER, tests, where, key, who],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env) for who in ("p", "q")]
    try:
        for racer in racers:
            assert racer.stdout is not None
            assert racer.stdout.readline() == "ready\n", racer.communicate()
        for k in range(ROUNDS):
            call = f"call_{k}"
            announcer.assistant_message(f"Check {k}.", tool_calls=[ToolCall(call, "check", "{}")])
            announcer.operator_message(f"And {k}?")
            for racer in racers:
                assert racer.stdin is not None
                racer.stdin.write(call + "\n")
                racer.stdin.flush()
            got = [racer.stdout.readline().strip() for racer in racers]  # type: ignore[union-attr]
            assert len([g for g in got if g.startswith("stored tool:")]) == 1, got
            assert next(g for g in got if not g.startswith("stored")).startswith(
                f"tool_result: call_id: call '{call}' has its result already"), got
            assert [s for s, _ in _results(announcer, call)] == [ToolStatus.PENDING,
                                                                  ToolStatus.OK]
    finally:
        for racer in racers:
            racer.communicate(timeout=60)
        announcer.close()


def test_an_append_upserts_each_call_once_with_its_newest_row() -> None:
    """``last_per_call`` (what a batch's index rows are cut to before their upserts): one row
    per key, the newest, in the order the keys first appear, for SQLite's ``(call, pos,
    state)`` rows and PostgreSQL's ``(session, call, pos, state)``. A reply's call and its
    result in one import batch are one upsert, not two (the mutation sample of 2026-12-06,
    seed 1486458052: ``row[:-2]`` → ``row[:2]`` kept every row and no test saw it)."""
    sqlite_rows = [("c1", 4, "announced"), ("c2", 4, "announced"), ("c1", 5, "answered"),
                   ("c2", 6, "pending"), ("c2", 9, "answered")]
    assert last_per_call(sqlite_rows) == [("c1", 5, "answered"), ("c2", 9, "answered")]
    pg_rows = [(7, "c1", 4, "announced"), (8, "c1", 4, "announced"), (7, "c1", 5, "answered")]
    assert last_per_call(pg_rows) == [(7, "c1", 5, "answered"), (8, "c1", 4, "announced")]
    assert last_per_call([]) == []


class _AppendBetweenReads:
    """A store's connection that lets another writer commit right after the first statement
    ``calls_sqlite.waiting`` reads (the ledger's end), before it reads the calls."""

    def __init__(self, db: sqlite3.Connection, write: Callable[[], None]) -> None:
        self._db, self._write = db, write

    @property
    def in_transaction(self) -> bool:
        return self._db.in_transaction

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        cursor = self._db.execute(sql, *args)
        if sql.startswith("SELECT max(pos)"):
            self._write()
        return cursor


def test_the_waiting_calls_and_the_ledger_end_are_one_snapshot(tmp_path: Path) -> None:
    """Another writer announces a call between the two reads of ``waiting``: the calls come
    with the end they were read at, so none waits past the end returned (a session catching up
    from that end would read the call's reply again). Before the snapshot's BEGIN was pinned
    (the mutation sample of 2026-12-06, seed 1486458052, ``began = not …`` → ``began = …``), the
    two reads could see two states."""
    reader, writer = SqliteStore(tmp_path / "l.db"), SqliteStore(tmp_path / "l.db")
    reply = Message(id="r1", turn_id="t0", role=MessageRole.ASSISTANT, text="Starting.",
                    tool_calls=[AnnouncedCall(call_id="call_ci", name="run", arguments="{}")])
    reader.append([Turn(id="t0", seq=0, trigger="operator_input"),
                   Message(id="u1", turn_id="t0", role=MessageRole.OPERATOR, text="Run CI.")])
    db = reader._db  # type: ignore[attr-defined]
    end, found = calls_sqlite.waiting(
        _AppendBetweenReads(db, lambda: writer.append([reply])),  # type: ignore[arg-type]
        reader._at_positions)  # type: ignore[attr-defined]
    assert end == 2
    assert found == []
    end, found = reader.waiting_calls()
    assert end == 3
    assert [(c.call_id, c.state, c.stored.pos) for c in found] == [
        ("call_ci", CallState.ANNOUNCED, 2)]
    writer.close()
    reader.close()
