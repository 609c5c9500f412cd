"""Speed on real agent histories: import the twelve trajectories, project every step at 8,192.

Run with ``python3 dev.py bench bench/test_bench_frontier.py`` (pytest-benchmark). Two figures:

* import: the twelve ``*.traj.json`` files read, parsed and appended to an in-memory store;
* per step: each trajectory walked the way a runtime does it, one projector, each step projected
  once, as of that step (``at=``) and at 8,192 tokens, three walks per trajectory. A step's time
  is its fastest of the walks (the machine is shared; the minimum is what the code costs). The
  per-step times are split into the quartiles of the trajectory's steps; the p50 of each quartile
  shows whether the cost follows the history (it must not) or the budget and window (it may);
* a long history: every corpus step replayed back to back (~490 steps), to show the plateau
  once the window is full.

Figures and the machine they were taken on are in ``docs/performance.md``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from targets import target

from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.transcripts import import_any
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.tokens import default_counter

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "swe-trajectories"
TRAJECTORIES = sorted(CORPUS.glob("*.traj.json")) if CORPUS.is_dir() else []
BUDGET = 8192
ROUNDS = 3
#: Turns in the first page of the recent window (WindowLimits.page_turns), and the block size of
#: the long replay's table.
WINDOW_TURNS = 64
BLOCK = 50
pytestmark = pytest.mark.skipif(not TRAJECTORIES, reason=f"corpus not found at {CORPUS}")

#: Per-step timings gathered by the walks, for the summary table (trajectory -> ms per step).
WALKS: dict[str, list[float]] = {}


def _import_all() -> list[MemoryStore]:
    stores = []
    for path in TRAJECTORIES:
        store = MemoryStore(default_counter())
        import_any(path, store)
        stores.append(store)
    return stores


def test_import_the_twelve_trajectories(benchmark: Any) -> None:
    """Read, parse and append all twelve trajectories (token counting included)."""
    default_counter().count("warm up the vocabulary")
    stores = benchmark.pedantic(_import_all, rounds=ROUNDS, iterations=1)
    records = sum(s.end_pos() for s in stores)
    benchmark.extra_info["records"] = records
    benchmark.extra_info["records_per_s"] = round(records / benchmark.stats.stats.median)
    assert len(stores) == len(TRAJECTORIES)


def _quartiles(per_step: list[float]) -> list[float]:
    """p50 of each quarter of the steps, in order."""
    n = len(per_step)
    cuts = [round(n * q / 4) for q in range(5)]
    return [statistics.median(per_step[cuts[q]:cuts[q + 1]] or per_step[-1:]) for q in range(4)]


@pytest.mark.parametrize("path", TRAJECTORIES, ids=[p.name.split(".")[0] for p in TRAJECTORIES])
def test_project_every_step(benchmark: Any, path: Path) -> None:
    """Project each step once, as of that step, at 8,192 tokens; per-step p50 by quartile."""
    store = MemoryStore()
    import_any(path, store)
    steps = [r.id for r in store.iter_records() if isinstance(r, Turn) and r.trigger == "x-agent-step"]
    rounds: list[list[float]] = []

    def walk() -> None:
        projector = Projector(store)  # a runtime's projector: one per process, one call per step
        times = []
        for step in steps:
            start = time.perf_counter()
            projector.project(budget_tokens=BUDGET, at=step)
            times.append((time.perf_counter() - start) * 1000)
        rounds.append(times)

    benchmark.pedantic(walk, rounds=ROUNDS, iterations=1)
    per_step = [min(r[i] for r in rounds) for i in range(len(steps))]
    WALKS[path.name.removesuffix(".traj.json")] = per_step
    q = _quartiles(per_step)
    benchmark.extra_info.update(steps=len(steps), p50_ms=round(statistics.median(per_step), 2),
                                quartile_p50_ms=[round(x, 2) for x in q])
    # These histories (21-70 steps) fit in the first window page (64 turns), so their cost may
    # still grow with the page; the plateau past it is test_a_long_history_costs_what_a_window_does.
    assert max(per_step) < 250, max(per_step)


def _long_replay(tmp: Path) -> Path:
    """One trajectory of every corpus step back to back (the submissions dropped), ~490 steps."""
    first = json.loads(TRAJECTORIES[0].read_text(encoding="utf-8"))
    messages = first["messages"][:2]
    for path in TRAJECTORIES:
        body = json.loads(path.read_text(encoding="utf-8"))["messages"][2:]
        if body and body[-1]["role"] == "user" and "<returncode>" not in body[-1]["content"]:
            body = body[:-2]
        messages += body
    out = tmp / "replay.traj.json"
    out.write_text(json.dumps(dict(first, messages=messages)), encoding="utf-8")
    return out


def test_a_long_history_costs_what_a_window_does(benchmark: Any, tmp_path: Path) -> None:
    """On a ~490-step replay, per-step p50 after the window fills does not grow with history."""
    store = MemoryStore()
    import_any(_long_replay(tmp_path), store)
    steps = [r.id for r in store.iter_records() if isinstance(r, Turn) and r.trigger == "x-agent-step"]
    rounds: list[list[float]] = []

    def walk() -> None:
        projector = Projector(store)
        times = []
        for step in steps:
            start = time.perf_counter()
            projector.project(budget_tokens=BUDGET, at=step)
            times.append((time.perf_counter() - start) * 1000)
        rounds.append(times)

    benchmark.pedantic(walk, rounds=ROUNDS, iterations=1)
    per_step = [min(r[i] for r in rounds) for i in range(len(steps))]
    blocks = [round(statistics.median(per_step[a:a + BLOCK]), 2)
              for a in range(0, len(per_step), BLOCK)]
    benchmark.extra_info.update(steps=len(steps), block_steps=BLOCK, block_p50_ms=blocks)
    WALKS["replay of all twelve (synthetic)"] = per_step
    early = statistics.median(per_step[WINDOW_TURNS:WINDOW_TURNS + 100])
    late = statistics.median(per_step[-100:])
    target("frontier: late vs early per-step median", late / early, 1.5)


def test_summary_table(benchmark: Any) -> None:
    """Print the per-step table of docs/performance.md (after the walks above)."""
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    if not WALKS:
        pytest.skip("run with the walks (the whole module)")
    lines = ["| trajectory | steps | p50 Q1 | p50 Q2 | p50 Q3 | p50 Q4 | p50 all | max |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    every: list[float] = []
    quarters: list[list[float]] = [[], [], [], []]
    replay: list[str] = []
    for name, per_step in WALKS.items():
        q = _quartiles(per_step)
        n = len(per_step)
        row = (f"| {name} | {n} | " + " | ".join(f"{x:.1f}" for x in q)
               + f" | {statistics.median(per_step):.1f} | {max(per_step):.1f} |")
        if "synthetic" in name:
            replay.append(row)
            continue
        cuts = [round(n * k / 4) for k in range(5)]
        for k in range(4):
            quarters[k].extend(per_step[cuts[k]:cuts[k + 1]])
        every.extend(per_step)
        lines.append(row)
    lines.append(f"| **all twelve** | {len(every)} | "
                 + " | ".join(f"**{statistics.median(x):.1f}**" for x in quarters)
                 + f" | **{statistics.median(every):.1f}** | {max(every):.1f} |")
    lines.extend(replay)
    sys.stdout.write("\n" + "\n".join(lines) + "\n")
