"""The library's real turn on PostgreSQL beside SQLite, and fleets of runtimes (issue 29 item 4).

``test_real_turn``: one agent history of 10k OpenAI messages (bench/agent_history.py, tool outputs
0.2-8 KB) imported into a SQLite file and into PostgreSQL sessions (the store's default, durable
commits, and ``durable=False``), then the agent loop on all of them, turn by turn in alternation so load
drift hits each alike: append a step through the public helpers, ``next_request(32,768)``, read
its ``openai_messages`` — writes, compaction under the default policy and the request included.
Figures: wall-clock p50/p99 of the turn and of its two halves (the appends, the request), the
PostgreSQL round trips per turn (counted on the connection), and PostgreSQL's p50 over SQLite's.
Target: ≤ 2x.

``test_fleet``: ``N`` processes (bench/fleet_worker.py), each its own session (a PostgreSQL session
key, or a SQLite file), each with a 1k-message history imported before the clock starts, run the
loop at once for ``FLEET_SECONDS``: turns per second over all of them, p50/p99 of a turn, errors,
and the most connections the fleet held (``pg_stat_activity``). Targets: 8 processes ≥ 40
turns/s with p99 ≤ 500 ms; 32 processes without an error.

Results go to ``/tmp/holon-bench/fleet-results.json`` and docs/performance.md (issue 29 items
3-4); PostgreSQL is the benchmark database of bench/pg_bench.py.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from agent_history import chat, step
from pg_bench import bench_url, drop
from targets import target

import holon_ctx
from holon_ctx.postgres import PostgresStore

# The round-trip counter the tests use (tests/ is not a package: found by path, as pytest does).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pg_round_trips import RoundTrips

MESSAGES = 10_000
BUDGET = 32_768
WARMUP = 10
ROUNDS = 100
FLEET_MESSAGES = 1_000
FLEET_SECONDS = 30.0
RESULTS = Path("/tmp/holon-bench/fleet-results.json")


def _record(key: str, value: Any) -> None:
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[key] = value
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def test_real_turn(benchmark: Any, tmp_path: Path) -> None:
    """SQLite, PostgreSQL (durable commits, the default) and PostgreSQL with durable=False, the
    same history and turns."""
    url = bench_url()
    keys = {"postgres": f"turn-{os.getpid()}", "postgres-nosync": f"turn-n-{os.getpid()}"}
    for key in keys.values():
        drop(url, key)
    history = chat(MESSAGES)
    stores: dict[str, Any] = {"sqlite": tmp_path / "agent.db",
                              "postgres": PostgresStore(url, session=keys["postgres"]),
                              "postgres-nosync": PostgresStore(url, session=keys["postgres-nosync"],
                                                               durable=False)}
    sessions = {name: holon_ctx.open_session(where) for name, where in stores.items()}
    for session in sessions.values():
        session.import_history(history, format="openai")
        session.next_request(BUDGET).openai_messages  # noqa: B018 - the first request
    trips = {name: RoundTrips(stores[name].connection) for name in keys}
    laps: dict[str, dict[str, list[float]]] = {
        name: {"turn": [], "append": [], "request": []} for name in sessions}
    counted = dict.fromkeys(keys, 0)

    def run() -> None:
        for k in range(1, WARMUP + ROUNDS + 1):
            for name, session in sessions.items():
                before = trips[name].count if name in trips else 0
                t0 = time.perf_counter()
                step(session, k)
                t1 = time.perf_counter()
                request = session.next_request(BUDGET)
                assert request.openai_messages
                t2 = time.perf_counter()
                assert request.request_tokens <= BUDGET
                if k > WARMUP:
                    laps[name]["turn"].append((t2 - t0) * 1000)
                    laps[name]["append"].append((t1 - t0) * 1000)
                    laps[name]["request"].append((t2 - t1) * 1000)
                    if name in trips:
                        counted[name] += trips[name].count - before

    try:
        benchmark.pedantic(run, rounds=1, iterations=1)
    finally:
        for name, session in sessions.items():
            session.close()
            if name in keys:
                stores[name].close()
        for key in keys.values():
            drop(url, key)
    results: dict[str, Any] = {
        name: {f"{part}_{q}_ms": round(_pct(v, p), 2) for part, v in parts.items()
               for q, p in (("p50", 0.5), ("p99", 0.99))} for name, parts in laps.items()}
    for name in keys:
        results[name]["round_trips_per_turn"] = round(counted[name] / ROUNDS, 1)
    ratio = results["postgres"]["turn_p50_ms"] / results["sqlite"]["turn_p50_ms"]
    results["ratio_p50"] = round(ratio, 2)
    results["ratio_p50_nosync"] = round(
        results["postgres-nosync"]["turn_p50_ms"] / results["sqlite"]["turn_p50_ms"], 2)
    results["load_average"] = [round(x, 2) for x in os.getloadavg()]
    benchmark.extra_info.update(results)
    _record(f"real_turn/{MESSAGES}/{BUDGET}", results)
    print("\n" + json.dumps(results, indent=1))
    target("PostgreSQL real turn p50 / SQLite's, 10k messages", ratio, 2.0)


def _connections(url: str, stop: threading.Event, seen: list[int]) -> None:
    """The most holon-ctx connections to the benchmark database while the fleet runs."""
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.wait(0.5):
            (n,), = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                 "current_database() AND application_name = 'holon-ctx'").fetchall()
            seen.append(int(n))


@pytest.mark.parametrize(("kind", "workers"), [("sqlite", 8), ("postgres", 8), ("postgres", 32)],
                         ids=["8-sqlite", "8-postgres", "32-postgres"])
def test_fleet(benchmark: Any, tmp_path: Path, kind: str, workers: int) -> None:
    """``workers`` processes, one session each, appending and asking at once."""
    url = bench_url()
    where = url if kind == "postgres" else str(tmp_path)
    keys = [f"fleet-{os.getpid()}-{workers}-{i}" for i in range(workers)]
    if kind == "postgres":
        for key in keys:
            drop(url, key)
    bench = str(Path(__file__).resolve().parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([bench, os.environ.get("PYTHONPATH", "")])}
    results: dict[str, Any] = {}

    def run() -> None:
        procs = [subprocess.Popen(
            [sys.executable, str(Path(bench) / "fleet_worker.py"), kind, where, key,
             str(FLEET_MESSAGES), str(FLEET_SECONDS), str(BUDGET)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env) for key in keys]
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n"
        stop, seen = threading.Event(), [0]
        watcher = threading.Thread(target=_connections, args=(url, stop, seen))
        watcher.start()
        started = time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        laps: list[float] = []
        errors: list[str] = []
        loops: list[float] = []
        closes: list[float] = []
        # One deadline for the whole fleet (it was FLEET_SECONDS + 300 per process, waited for
        # one after another); a worker still running then is reported, not waited for.
        deadline = time.monotonic() + FLEET_SECONDS + 600
        for proc in procs:
            out, _ = proc.communicate(timeout=max(deadline - time.monotonic(), 1))
            assert proc.returncode == 0
            found = json.loads(out)
            laps.extend(found["laps"])
            errors.extend(found["errors"])
            loops.append(found["loop_s"])
            closes.append(found["close_s"])
        elapsed = time.perf_counter() - started
        stop.set()
        watcher.join()
        # Turns per second over the loops (each worker's own, its last turn included): the
        # time from "go" to the last worker's exit adds the closes and the slowest start.
        results.update(turns=len(laps), seconds=round(elapsed, 1),
                       loop_seconds_max=round(max(loops), 1),
                       close_seconds_max=round(max(closes), 1),
                       turns_per_s=round(len(laps) / max(loops), 1),
                       turns_per_s_to_exit=round(len(laps) / elapsed, 1),
                       p50_ms=round(statistics.median(laps), 1), p99_ms=round(_pct(laps, 0.99), 1),
                       errors=len(errors), first_errors=errors[:3],
                       max_connections=max(seen) if kind == "postgres" else 0,
                       load_average=[round(x, 2) for x in os.getloadavg()])

    try:
        benchmark.pedantic(run, rounds=1, iterations=1)
    finally:
        if kind == "postgres":
            for key in keys:
                drop(url, key)
    benchmark.extra_info.update(results)
    _record(f"fleet/{kind}/{workers}", {**results, "workers": workers, "budget": BUDGET,
                                        "history_messages": FLEET_MESSAGES})
    print("\n" + json.dumps(results, indent=1))
    if workers == 8:
        target(f"{workers} {kind} processes, turns/s", results["turns_per_s"], 40, at_most=False)
        target(f"{workers} {kind} processes, p99 ms", results["p99_ms"], 500)
    target(f"{workers} {kind} processes, errors", results["errors"], 0)
