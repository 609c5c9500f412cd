"""The first turns after importing a long history (issue 29 item 3, RFC 0026).

What is measured. A runtime opens a session on a new SQLite ledger, imports an existing agent
conversation with ``import_history`` (bench/agent_history.py: 1k, 10k, 100k OpenAI messages,
tool outputs 0.2-8 KB), asks for the first request (``next_request(32,768)`` and its
``openai_messages``), then runs the agent loop: each turn appends a step (a reply calling a tool,
the tool's 0.2-8 KB output; an operator request every tenth) and asks for the next request. Two
ways, side by side in one run:

* ``at-import`` — the session archives the imported history during ``import_history``, in bulk
  (what the library does now);
* ``deferred`` — the history is imported without compaction and the session's default policy is
  switched on afterwards: its first compaction, inside a request, archives the whole history
  (what the library did before, issue 29: 0.63 s, 4.2 s and 68.5 s at 1k/10k/100k).

Figures per size and way: the import (wall clock and this process's CPU time), the first request,
the first turn after it and the p50/p99 of the next ``TURNS``. Targets: the first request after
importing 100k messages ≤ 2 s, the turn after ≤ 50 ms. Results go to
``/tmp/holon-bench/import-stall.json`` and docs/performance.md (issue 29 items 3-4).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from agent_history import chat, step
from targets import target

import holon_ctx

SIZES = [1_000, 10_000, 100_000]
BUDGET = 32_768
TURNS = 20
RESULTS = Path("/tmp/holon-bench/import-stall.json")


def _record(key: str, value: dict[str, Any]) -> None:
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[key] = value
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True))


def _timed(fn: Any) -> tuple[Any, float, float]:
    """``(result, wall ms, CPU ms)`` of ``fn()``."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, (time.perf_counter() - w) * 1000, (time.process_time() - c) * 1000


def _request(session: holon_ctx.Session) -> int:
    request = session.next_request(BUDGET)
    assert len(request.openai_messages) > 0
    assert request.request_tokens <= BUDGET
    return request.request_tokens


def _run(db: Path, n_messages: int, way: str) -> dict[str, Any]:
    messages = chat(n_messages)
    policy = holon_ctx.CompactionPolicy()
    session = holon_ctx.open_session(db, compaction=policy if way == "at-import" else None)
    try:
        stored, import_wall, import_cpu = _timed(
            lambda: session.import_history(messages, format="openai"))
        messages.clear()  # the history is the ledger's now
        session.compaction = policy  # "deferred": the default policy from the next request on
        _, first_wall, first_cpu = _timed(lambda: _request(session))
        laps: list[tuple[float, float]] = []
        # From step 1: a step that is an operator's new request (every tenth) re-plans the
        # session projection whatever the archive holds; the turn after the import is a reply.
        for k in range(1, TURNS + 2):
            _, wall, cpu = _timed(lambda k=k: (step(session, k), _request(session)))
            laps.append((wall, cpu))
        later = sorted(w for w, _ in laps[1:])
        return {"records": stored, "import_wall_s": round(import_wall / 1000, 2),
                "import_cpu_s": round(import_cpu / 1000, 2),
                "first_request_ms": round(first_wall, 1), "first_request_cpu_ms": round(first_cpu, 1),
                "turn_after_ms": round(laps[0][0], 1), "turn_after_cpu_ms": round(laps[0][1], 1),
                "later_p50_ms": round(statistics.median(later), 1),
                "later_p99_ms": round(later[min(len(later) - 1, round(0.99 * (len(later) - 1)))], 1)}
    finally:
        session.close()


@pytest.mark.parametrize("way", ["at-import", "deferred"])
@pytest.mark.parametrize("n_messages", SIZES, ids=lambda n: f"{n // 1000}k-messages")
def test_first_turns_after_import(benchmark: Any, tmp_path: Path, n_messages: int,
                                  way: str) -> None:
    result: dict[str, Any] = {}
    benchmark.pedantic(lambda: result.update(_run(tmp_path / "agent.db", n_messages, way)),
                       rounds=1, iterations=1)
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    benchmark.extra_info.update(result)
    _record(f"{way}/{n_messages}", result)
    if way == "at-import":
        target(f"first request after importing {n_messages:,} messages (ms)",
               result["first_request_ms"], 2_000)
        target(f"the turn after it, {n_messages:,} messages (ms)", result["turn_after_ms"], 50)


def test_table(benchmark: Any) -> None:
    """Print the docs/performance.md table from the figures recorded above (run the whole file)."""
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    rows = ["| messages | archived | import (wall / CPU) | first request | turn after | "
            "next 20 turns p50 / p99 |", "|---:|---|---:|---:|---:|---:|"]
    for n in SIZES:
        for way in ("at-import", "deferred"):
            f = data.get(f"{way}/{n}")
            if f is None:
                continue
            rows.append(f"| {n:,} | {way} | {f['import_wall_s']} s / {f['import_cpu_s']} s | "
                        f"{f['first_request_ms']:,} ms | {f['turn_after_ms']:,} ms | "
                        f"{f['later_p50_ms']} / {f['later_p99_ms']} ms |")
    print("\n" + "\n".join(rows))
