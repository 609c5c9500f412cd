"""A cold request over one huge turn, by budget (RFC 0010, decision 7; docs/performance.md).

The ledger: one operator message, then ``RECORDS`` records of the same piece of work — tool runs
of one turn (``tool_run``), or replies each with a call and its result (agent steps anchored to
the operator's turn) — with outputs of 0.2-8 KB (bench/agent_history.py's generator). Each round
copies the ledger file (so the session finds no saved epoch) and times a new session's first
``next_request(budget)``: the walk from the turn's start, every re-plan it makes included. Before
decision 7 the walk re-planned at every record at 2,048 tokens, each re-plan rendering the whole
turn (24 s for 350 tool runs, 5 s for 350 agent steps against 1.6 s at 8,192); now a huge turn's
form is bounded and a re-plan of an epoch a few turns old keeps room to grow.

``HOLON_BENCH_HUGE_TURN_RECORDS`` (default 350) sets the size. Figures: CPU time of the request
(the machine is shared) in ``extra_info``, the epochs the walk made (re-plans).
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from agent_history import _output

import holon_ctx

RECORDS = int(os.environ.get("HOLON_BENCH_HUGE_TURN_RECORDS", "350"))
ROUNDS = 3


def _ledger(path: Path, steps: bool) -> Path:
    rng = random.Random(7)
    with holon_ctx.open_session(path) as session:
        session.operator_message("Migrate the billing module to the new ledger API; keep the "
                                 "totals exact and the public API stable.")
        for k in range(RECORDS):
            command, output, failed = _output(rng, k)
            status = "error" if failed else "ok"
            if steps:
                session.assistant_message(f"Step {k}: running `{command}`.", tool_calls=[
                    holon_ctx.ToolCall(f"c{k}", "bash", {"command": command})])
                session.tool_result(f"c{k}", output, status=status, exit_code=int(failed))
            else:
                session.tool_run("bash", {"command": command}, output, status=status,
                                 exit_code=int(failed))
    return path


@pytest.mark.parametrize("budget", [1024, 2048, 4096, 8192])
@pytest.mark.parametrize("steps", [False, True], ids=["tool_runs", "agent_steps"])
def test_cold_request_over_one_huge_turn(benchmark: Any, tmp_path: Path, steps: bool,
                                         budget: int) -> None:
    source = _ledger(tmp_path / "source.db", steps)
    cpu: list[float] = []
    epochs: list[int] = []
    copies = iter(range(10**6))

    def setup() -> tuple[tuple[Path], dict[str, Any]]:
        copy = tmp_path / f"cold-{next(copies)}.db"
        shutil.copy(source, copy)
        return (copy,), {}

    def cold(path: Path) -> None:
        with holon_ctx.open_session(path) as session:
            start = time.process_time()
            session.next_request(budget)
            cpu.append(time.process_time() - start)
        with sqlite3.connect(path) as db:  # the epochs the walk saved: one per re-plan
            epochs.append(db.execute("SELECT count(*) FROM session_epochs").fetchone()[0])

    benchmark.pedantic(cold, setup=setup, rounds=ROUNDS, iterations=1)
    benchmark.extra_info.update(cpu_s=round(sorted(cpu)[len(cpu) // 2], 3),
                                epochs=epochs[-1], records=RECORDS)
