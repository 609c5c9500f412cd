"""Opening a session, and catching up with another writer, on a 100k-record ledger whose waiting
calls were made long ago (RFC 0008 decision 5: every waiting call is known however old).

The ledger: ``N_RECORDS`` records in turns of four (the operator's words, a reply announcing one
call, the call's result), where ``OLD_CALLS`` calls spread over the history were left ``pending``
(a CI job, a long build). What is timed, on SQLite and PostgreSQL:

* ``catch_up``: ``Session._load_state()``, what a session reads when it opens and whenever
  another writer appended since its last append (its waiting calls, its newest turn and that
  turn's records), on an open store;
* ``open``: ``open_session`` on a new store object (a new connection) and ``close``, the whole
  open a restarted runtime pays;
* ``fill``: building the calls index from the records once, as migrating a ledger of the
  previous schema does (skipped where the index does not exist).

Round trips (PostgreSQL) of a catch-up are counted too: they are what a server's latency
multiplies. Figures: CPU and wall p50 of ``ROUNDS`` rounds, to ``/tmp/holon-bench/waiting-calls.json``
(``HOLON_BENCH_CALLS_OUT``) and docs/performance.md ("Waiting calls").
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_bench_real_turn import _pct, _save

import holon_ctx
from holon_ctx.ledger.records import (
    AnnouncedCall,
    Message,
    MessageRole,
    Record,
    Tool,
    ToolStatus,
    Turn,
)
from holon_ctx.ledger.sqlite import SqliteStore

N_RECORDS = int(os.environ.get("HOLON_BENCH_CALLS_RECORDS", "100000"))
OLD_CALLS = 8
ROUNDS = int(os.environ.get("HOLON_BENCH_CALLS_ROUNDS", "30"))
RESULTS = Path(os.environ.get("HOLON_BENCH_CALLS_OUT", "/tmp/holon-bench/waiting-calls.json"))


def ledger(n_records: int) -> list[Record]:
    """The ledger described in the module docstring."""
    turns = n_records // 4
    left = {turns * (i + 1) // (OLD_CALLS + 1) for i in range(OLD_CALLS)}
    out: list[Record] = []
    for k in range(turns):
        tid, call = f"t{k}", f"c{k}"
        out += [Turn(id=tid, seq=k, trigger="operator_input"),
                Message(id=f"m{k}", turn_id=tid, role=MessageRole.OPERATOR,
                        text=f"Request {k}: run the tests of module {k % 97}."),
                Message(id=f"a{k}", turn_id=tid, role=MessageRole.ASSISTANT,
                        text=f"Running module {k % 97}.", tool_calls=[
                            AnnouncedCall(call_id=call, name="bash", arguments=f"pytest m{k % 97}")]),
                Tool(id=f"x{k}", turn_id=tid, tool_name="bash", args_digest="sha256:0",
                     args_preview=f"pytest m{k % 97}", call_id=call,
                     status=ToolStatus.PENDING if k in left else ToolStatus.OK,
                     output="" if k in left else f"{k % 13} passed")]
    return out


def _timed(fn: Callable[[], object], rounds: int) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(rounds):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return {"wall_p50_ms": 1000 * _pct(walls, 0.5), "wall_p90_ms": 1000 * _pct(walls, 0.9),
            "cpu_p50_ms": 1000 * _pct(cpus, 0.5)}


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return ledger(N_RECORDS)


def _measure(benchmark: Any, key: str, make: Callable[[], Any], trips: Callable[[Any], Any] | None,
             fill: Callable[[Any], None] | None) -> None:
    store = make()
    session = holon_ctx.Session(store, compaction=None)
    info: dict[str, Any] = {"records": store.end_pos(), "old_calls_known": len(session._late),
                            "load": os.getloadavg()[0], "code": holon_ctx.__file__}
    info["catch_up"] = _timed(session._load_state, ROUNDS)
    if trips is not None:
        counter = trips(store)
        before = counter.count
        session._load_state()
        info["catch_up_round_trips"] = counter.count - before

    def open_close() -> None:
        other = make()
        holon_ctx.Session(other, compaction=None).close()
        other.close()
    info["open"] = _timed(open_close, max(ROUNDS // 3, 5))
    if fill is not None:
        info["fill"] = _timed(lambda: fill(store), 3)
    session.close()
    store.close()
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    _save(benchmark, key, info, RESULTS)
    print(json.dumps(info, indent=1))


def test_waiting_calls_sqlite(benchmark: Any, tmp_path: Path, records: list[Record]) -> None:
    db = tmp_path / "calls.db"
    store = SqliteStore(db)
    store.append(records)
    store.close()

    def fill(store: SqliteStore) -> None:
        from holon_ctx.ledger import calls_sqlite

        store._db.execute("BEGIN IMMEDIATE")
        calls_sqlite.fill(store._db)
        store._db.execute("COMMIT")
    has_index = Path(holon_ctx.__file__).with_name("ledger").joinpath("calls_sqlite.py").exists()
    _measure(benchmark, f"sqlite/{N_RECORDS}", lambda: SqliteStore(db), None,
             fill if has_index else None)


def test_waiting_calls_postgres(benchmark: Any, records: list[Record]) -> None:
    try:
        from pg_bench import bench_url, drop

        url = bench_url()
    except Exception:
        pytest.skip("no PostgreSQL server answers at HOLON_BENCH_POSTGRES")
    from holon_ctx.postgres import PostgresStore

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from pg_round_trips import RoundTrips

    key = f"waiting-calls-{N_RECORDS}-{os.getpid()}"
    drop(url, key)
    store = PostgresStore(url, session=key)
    store.append(records)
    store.connection.execute("ANALYZE")
    store.close()

    def fill(store: Any) -> None:
        from holon_ctx.postgres.schema import rebuild_calls

        with store.connection.transaction():
            rebuild_calls(store.connection, store.sid)
    try:
        from holon_ctx.postgres.schema import rebuild_calls  # noqa: F401 - is there an index?
        has_index = True
    except ImportError:
        has_index = False
    try:
        _measure(benchmark, f"postgres/{N_RECORDS}", lambda: PostgresStore(url, session=key),
                 lambda s: RoundTrips(s.connection), fill if has_index else None)
    finally:
        drop(url, key)
