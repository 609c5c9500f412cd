"""One process of the fleet benchmark (bench/test_bench_fleet.py): a runtime's agent loop.

``python fleet_worker.py KIND WHERE KEY MESSAGES SECONDS BUDGET`` opens a session (``KIND``
``postgres``: session ``KEY`` of the database at URL ``WHERE``; ``sqlite``: the file ``KEY`` in
the directory ``WHERE``), imports a ``MESSAGES``-message agent history and asks for one request,
then prints ``ready`` and waits for a line on stdin. It then runs the loop for ``SECONDS``: append
a step (bench/agent_history.py), ask for the next request, read its OpenAI messages. It prints
one JSON object: each turn's milliseconds, the error of every turn that raised (a turn that
raises is counted, and the loop goes on), the loop's seconds and the close's.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from agent_history import chat, step

import holon_ctx
from holon_ctx.postgres import PostgresStore


def main(kind: str, where: str, key: str, messages: int, seconds: float, budget: int) -> None:
    store: holon_ctx.LedgerStore | Path = (PostgresStore(where, session=key) if kind == "postgres"
                                           else Path(where) / f"{key}.db")
    session = holon_ctx.open_session(store)
    seed = sum(map(ord, key))
    session.import_history(chat(messages, seed), format="openai")
    session.next_request(budget).openai_messages  # noqa: B018 - the runtime's first request
    print("ready", flush=True)
    sys.stdin.readline()
    laps: list[float] = []
    errors: list[str] = []
    k = 1
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t0 = time.perf_counter()
        try:
            step(session, k, seed)
            session.next_request(budget).openai_messages  # noqa: B018 - what is sent
        except Exception as exc:  # every failure is part of the measurement
            errors.append(f"{type(exc).__name__}: {exc}"[:300])
        laps.append((time.perf_counter() - t0) * 1000)
        k += 1
    loop_s = time.monotonic() - deadline + seconds
    t0 = time.perf_counter()
    session.close()
    if isinstance(store, PostgresStore):
        store.close()
    # The loop's own seconds (its last turn ends after the deadline) and the close's: the
    # fleet's turns/s is over the loops, not over the stragglers' closes.
    print(json.dumps({"laps": laps, "errors": errors, "loop_s": loop_s,
                      "close_s": time.perf_counter() - t0}), flush=True)


if __name__ == "__main__":
    kind, where, key, messages, seconds, budget = sys.argv[1:7]
    main(kind, where, key, int(messages), float(seconds), int(budget))
