"""PostgreSQL benchmarks (issue 15): per-turn append + projection beside SQLite, and a fleet.

``test_per_turn_append_and_project``: what a runtime pays per model turn on a 100k-turn ledger:
append the turn's records (one transaction), then project the newest turn at 32k tokens with a
long-lived ``Projector``. The same turns go through SQLite (a copy of bench/projection_gen's cached
file) and PostgreSQL (a server-side copy of the same ledger, bench/pg_bench.py) in one run, one
after the other. Wall-clock milliseconds per turn (PostgreSQL does part of the work in the server
process, so this process's CPU time would under-count it). Target: PostgreSQL's p50 within 2x
SQLite's. ``test_per_turn_append_and_session_request``: the same, with the session projection
(RFC 0010) instead: a long-lived ``SessionProjector`` (messages layout) whose re-plans are kept
beside the ledger (``epoch_store_for``: the SQLite file, the PostgreSQL session's rows). Its
PostgreSQL/SQLite ratio is recorded, not held to the 2x target (see ``_per_turn``).

``test_fleet``: 50 sessions of 1,000 turns each, 8 worker processes, each owning every 8th session
and taking them in turn: append a turn, project it at 8k tokens. For ``FLEET_SECONDS`` seconds; the
figures are turns per second over all workers and the p50/p99 of one append + projection.

Figures go to docs/performance.md ("PostgreSQL"); they are written to
``/tmp/holon-bench/postgres-results.json`` too.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pg_bench import bench_url, cached_session, clone, drop, next_turns
from projection_gen import CACHE, projection_db
from targets import target

from holon_ctx.ledger.epochs_sqlite import epoch_store_for
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.postgres import PostgresStore
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.session.session import Layout, SessionProjector

N_TURNS = 100_000
BUDGET = 32_768
WARMUP = 20
ROUNDS = 200
TARGET_RATIO = 2.0
FLEET_SESSIONS = 50
FLEET_WORKERS = 8
FLEET_TURNS = 1_000
FLEET_SECONDS = 20.0
RESULTS = CACHE / "postgres-results.json"


def _record(key: str, value: Any) -> None:
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[key] = value
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _stateless(store: LedgerStore) -> Callable[[], int]:
    projector = Projector(store)
    return lambda: projector.project(budget_tokens=BUDGET).used_tokens


def _session(store: LedgerStore) -> Callable[[], int]:
    projector = SessionProjector(store, layout=Layout.MESSAGES, epochs=epoch_store_for(store))
    return lambda: projector.request(budget_tokens=BUDGET).request_tokens


def _run_turns(store: LedgerStore, groups: list[list[Any]],
               project: Callable[[], int]) -> dict[str, list[float]]:
    laps: dict[str, list[float]] = {"append": [], "project": [], "turn": []}
    for i, group in enumerate(groups):
        t0 = time.perf_counter()
        store.append(group)
        t1 = time.perf_counter()
        used = project()
        t2 = time.perf_counter()
        assert used <= BUDGET
        if i >= WARMUP:
            laps["append"].append((t1 - t0) * 1000)
            laps["project"].append((t2 - t1) * 1000)
            laps["turn"].append((t2 - t0) * 1000)
    return laps


def _summary(laps: dict[str, list[float]]) -> dict[str, float]:
    return {f"{k}_{q}_ms": round(_pct(v, p), 2) for k, v in laps.items()
            for q, p in (("p50", 0.5), ("p99", 0.99))}


def _per_turn(benchmark: Any, tmp_path: Path, mode: str,
              projector: Callable[[LedgerStore], Callable[[], int]]) -> None:
    """SQLite and PostgreSQL, same 100k-turn ledger, same appended turns, one run."""
    groups = next_turns(N_TURNS, WARMUP + ROUNDS)
    sqlite_path = tmp_path / "ledger.db"
    shutil.copy(projection_db(N_TURNS), sqlite_path)
    url, key = bench_url(), f"per-turn-{mode}-{os.getpid()}"
    source = cached_session(N_TURNS)
    drop(url, key)
    clone(url, source, key)
    results: dict[str, dict[str, float]] = {}

    def run() -> None:
        sqlite = SqliteStore(sqlite_path)
        pg = PostgresStore(url, session=key, create=False)
        try:
            results["sqlite"] = _summary(_run_turns(sqlite, groups, projector(sqlite)))
            results["postgres"] = _summary(_run_turns(pg, groups, projector(pg)))
        finally:
            sqlite.close()
            pg.close()
            drop(url, key)

    benchmark.pedantic(run, rounds=1, iterations=1)
    ratio = results["postgres"]["turn_p50_ms"] / results["sqlite"]["turn_p50_ms"]
    results["ratio_p50"] = {"turn": round(ratio, 2)}
    results["load_average"] = dict(zip(("1m", "5m", "15m"), os.getloadavg(), strict=True))
    benchmark.extra_info.update(results)
    _record(f"per_turn/{N_TURNS}/{BUDGET}" + ("" if mode == "stateless" else f"/{mode}"), results)
    if mode == "stateless":
        # Issue 15's target. A session turn is an append plus a request of a few round trips,
        # where SQLite's request is ~0.3 ms of function calls: the ratio is recorded, not held.
        target(f"postgres: {mode} turn vs SQLite", ratio, TARGET_RATIO)


def test_per_turn_append_and_project(benchmark: Any, tmp_path: Path) -> None:
    _per_turn(benchmark, tmp_path, "stateless", _stateless)


def test_per_turn_append_and_session_request(benchmark: Any, tmp_path: Path) -> None:
    _per_turn(benchmark, tmp_path, "session", _session)


FLEET_WORKER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pg_bench import next_turns
from holon_ctx.postgres import PostgresStore
from holon_ctx.projection.planning.projector import Projector

url, keys, seconds, n_turns = sys.argv[2], sys.argv[3].split(","), float(sys.argv[4]), int(sys.argv[5])
groups = next_turns(n_turns, 2000)
stores = [PostgresStore(url, session=k, create=False) for k in keys]
projectors = [Projector(s) for s in stores]
print("ready", flush=True)
sys.stdin.readline()
laps, i = [], 0
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    k = i % len(stores)
    t0 = time.perf_counter()
    stores[k].append(groups[i // len(stores)])
    projectors[k].project(budget_tokens=8192)
    laps.append((time.perf_counter() - t0) * 1000)
    i += 1
print(json.dumps(laps), flush=True)
"""


def test_fleet(benchmark: Any) -> None:
    """50 sessions, 8 processes appending and projecting at once for a fixed time."""
    url, source = bench_url(), cached_session(FLEET_TURNS)
    keys = [f"fleet-{os.getpid()}-{i}" for i in range(FLEET_SESSIONS)]
    for key in keys:
        drop(url, key)
        clone(url, source, key)
    results: dict[str, Any] = {}

    def run() -> None:
        bench_dir = str(Path(__file__).resolve().parent)
        workers = [subprocess.Popen(
            [sys.executable, "-c", FLEET_WORKER, bench_dir, url, ",".join(keys[w::FLEET_WORKERS]),
             str(FLEET_SECONDS), str(FLEET_TURNS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for w in range(FLEET_WORKERS)]
        for w in workers:
            assert w.stdout is not None
            assert w.stdout.readline() == "ready\n"
        started = time.perf_counter()
        for w in workers:
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.flush()
        laps: list[float] = []
        for w in workers:
            out, _ = w.communicate(timeout=FLEET_SECONDS + 120)
            assert w.returncode == 0
            laps.extend(json.loads(out))
        elapsed = time.perf_counter() - started
        results.update(turns=len(laps), seconds=round(elapsed, 1),
                       turns_per_s=round(len(laps) / elapsed, 1),
                       p50_ms=round(statistics.median(laps), 2),
                       p99_ms=round(_pct(laps, 0.99), 2),
                       load_average=os.getloadavg())

    try:
        benchmark.pedantic(run, rounds=1, iterations=1)
    finally:
        for key in keys:
            drop(url, key)
    benchmark.extra_info.update(results)
    _record("fleet", {**results, "sessions": FLEET_SESSIONS, "workers": FLEET_WORKERS,
                      "turns_per_session": FLEET_TURNS, "budget": 8192})


if __name__ == "__main__":  # pragma: no cover - convenience: python bench/test_bench_postgres.py
    sys.exit(pytest.main([__file__, "--benchmark-only", "-p", "no:randomly", "-s"]))
