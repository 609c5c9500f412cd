"""Where a PostgreSQL real turn's round trips go, phase by phase (issue 29, RFC 0026).

``python bench/pg_turn_phases.py [MESSAGES] [TURNS]`` imports bench/agent_history.py's seeded
conversation (default 10,000 messages) into a PostgreSQL session of the benchmark database
(bench/pg_bench.py) and runs the agent loop of bench/test_bench_real_turn.py (a step appended
through the public helpers, ``next_request(32,768)``, its OpenAI messages) for ``TURNS`` turns
(default 120) under the default compaction policy. Each turn's round trips are counted on the
connection (tests/pg_round_trips.py) and split: the step's appends, the compaction a request
runs (when it runs; sealing or not) and the rest of the request. Beside them: the wall and CPU
milliseconds of each part, the wall of whole plain turns and of turns that compacted without
sealing, and the median wait of a ``SELECT 1`` on the same connection (what
one round trip costs here, without server work), and of a one-row insert into a scratch table
committed with ``synchronous_commit`` on and off (the difference is one WAL flush: what each
durable append waits for, RFC 0026 decision 4). Prints one JSON object.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from agent_history import chat, step
from pg_bench import bench_url, drop

import holon_ctx
import holon_ctx.session_upkeep as upkeep
from holon_ctx.postgres import PostgresStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pg_round_trips import RoundTrips

BUDGET = 32_768


def _summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {"n": len(values), "mean": round(statistics.fmean(values), 2),
            "p50": round(ordered[len(ordered) // 2], 2), "max": round(ordered[-1], 2)}


def _timed(conn: Any, sql: str, times: int = 200) -> list[float]:
    """Milliseconds of each of ``times`` runs of ``sql`` on ``conn`` (autocommit)."""
    laps = []
    for _ in range(times):
        t0 = time.perf_counter()
        conn.execute(sql)
        laps.append((time.perf_counter() - t0) * 1000)
    return laps


def _commits(conn: Any) -> dict[str, dict[str, float]]:
    """A one-row insert's wait, each its own commit, with the WAL flushed before the answer
    (``synchronous_commit`` on, what the ledger's durable appends do) and without (off): alternated
    in rounds, so both see the same load; a scratch table (a temporary one writes no WAL)."""
    table = f"holon_bench_flush_{os.getpid()}"
    (given,), = conn.execute("SHOW synchronous_commit").fetchall()
    conn.execute(f"CREATE TABLE {table} (n integer)")
    laps: dict[str, list[float]] = {"on": [], "off": []}
    try:
        for _ in range(10):
            for setting in ("on", "off"):
                conn.execute(f"SET synchronous_commit TO {setting}")
                laps[setting] += _timed(conn, f"INSERT INTO {table} VALUES (1)", 20)
    finally:
        conn.execute(f"SET synchronous_commit TO {given}")
        conn.execute(f"DROP TABLE {table}")
    return {"commit_flushed_ms": _summary(laps["on"]),
            "commit_unflushed_ms": _summary(laps["off"])}


def main(messages: int, turns: int) -> dict[str, Any]:
    url = bench_url()
    key = f"phases-{os.getpid()}"
    drop(url, key)
    store = PostgresStore(url, session=key)
    session = holon_ctx.open_session(store)
    try:
        session.import_history(chat(messages), format="openai")
        session.next_request(BUDGET).openai_messages  # noqa: B018 - the first request
        trips = RoundTrips(store.connection)
        compacting: dict[str, Any] = {}
        inner = upkeep.compact

        def counted(*args: Any, **kwargs: Any) -> Any:
            before, t0 = trips.count, time.perf_counter()
            result = inner(*args, **kwargs)
            compacting.update(trips=trips.count - before, wall=(time.perf_counter() - t0) * 1000,
                              sealed=result.envelope_id is not None)
            return result
        upkeep.compact = counted  # type: ignore[assignment]
        parts: dict[str, list[float]] = {name: [] for name in (
            "append_trips", "append_ms", "request_trips", "request_ms", "seal_trips", "seal_ms",
            "noop_compaction_trips", "noop_compaction_ms", "turn_trips", "turn_ms", "turn_cpu_ms",
            "plain_turn_ms", "noop_turn_ms")}
        for k in range(1, turns + 1):
            compacting.clear()
            c0, t0, n0 = time.process_time(), time.perf_counter(), trips.count
            step(session, k)
            t1, n1 = time.perf_counter(), trips.count
            assert session.next_request(BUDGET).openai_messages
            t2, n2, c2 = time.perf_counter(), trips.count, time.process_time()
            parts["append_trips"].append(n1 - n0)
            parts["append_ms"].append((t1 - t0) * 1000)
            request_trips, request_ms = n2 - n1, (t2 - t1) * 1000
            if compacting:
                kind = "seal" if compacting["sealed"] else "noop_compaction"
                parts[f"{kind}_trips"].append(compacting["trips"])
                parts[f"{kind}_ms"].append(compacting["wall"])
                request_trips -= compacting["trips"]
                request_ms -= compacting["wall"]
            parts["request_trips"].append(request_trips)
            parts["request_ms"].append(request_ms)
            # The whole turn by kind: a plain one (no compaction, its request one round trip;
            # the p50 turn) and one whose compaction archived and sealed nothing.
            if not compacting and request_trips == 1:
                parts["plain_turn_ms"].append((t2 - t0) * 1000)
            elif compacting and not compacting["sealed"]:
                parts["noop_turn_ms"].append((t2 - t0) * 1000)
            parts["turn_trips"].append(n2 - n0)
            parts["turn_ms"].append((t2 - t0) * 1000)
            parts["turn_cpu_ms"].append((c2 - c0) * 1000)
        upkeep.compact = inner  # type: ignore[assignment]
        conn = store.connection
        pings = _timed(conn, "SELECT 1")
        flush = _commits(conn)
    finally:
        session.close()
        store.close()
        drop(url, key)
    return {"messages": messages, "turns": turns,
            **{name: _summary(values) for name, values in parts.items()},
            "select_1_ms": _summary(pings), **flush,
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "at_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    print(json.dumps(main(*(args or [10_000, 120])), indent=1))
