"""The bill (issues 13 and 26): prefix reuse, billed share and re-plans of every approach.

Run with ``python3 dev.py bench bench/test_bench_cache.py``. Figures and the machine they were
taken on are in ``docs/performance.md`` ("Cache-stable projection").

* ``test_the_bill``: every model call replayed as a runtime would make it
  (``holon_ctx.projection.measure.replay``: before each reply, after a turn without one, at the end), each
  request priced at Anthropic's cache prices against the one before it, on four corpora — the
  twelve shared trajectories (the rules were tuned on them), the 39 validation trajectories
  (never tuned on: figures as measured), the demo ledger and a generated agent loop of 300 steps
  with 1-20 KB tool outputs — at 4,096, 8,192, 32,768 and 128,000 tokens. Approaches: the session
  projection, keep-newest, observation masking (M = 10) and the whole history (over the budget
  once it outgrows it). Reported per corpus and budget: mean over ledgers of prefix reuse and
  billed share, re-plans per 100 calls, billed totals; and per ledger whether the session bills
  more than keep-newest, than masking, or than the best approach within the budget, with the
  ratio; and on how many calls keep-newest sent the system message alone (its trim kept no
  message of the history: a request that cannot act), with the session's bill against
  keep-newest's on the other calls. Targets (issue 26, on the validation set): session reuse
  >= 0.88 at 8k and >= 0.94 at 32k; billed share <= 0.25 and <= 0.16; the session's bill at most
  keep-newest's and masking's on every trajectory at every budget (exceptions are listed, with
  their cause, in docs/performance.md).
* ``test_per_turn_latency``: a 100k-turn SQLite ledger at 32k, a long-lived session walking 900
  consecutive turns: CPU time of each request, split into requests that only append (issue 13's
  target: p50 <= 1 ms) and requests that re-plan, beside a stateless projection of the same turns.
  Times are recorded, never asserted (they depend on the machine and its load).
"""

from __future__ import annotations

import importlib.resources
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from projection_gen import projection_db
from targets import target

import holon_ctx
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.ledger.transcripts import import_any
from holon_ctx.projection.measure.cost import PRICES
from holon_ctx.projection.measure.replay import ApproachReport, replay
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.session.session import Layout, SessionProjector
from holon_ctx.tokens import default_counter

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
CORPUS = CORPORA / "swe-trajectories"
VALIDATION = CORPORA / "swe-trajectories-validation"
TRAJECTORIES = sorted(CORPUS.glob("*.traj.json")) if CORPUS.is_dir() else []
VALIDATION_SET = sorted(VALIDATION.glob("*.traj.json")) if VALIDATION.is_dir() else []
APPROACHES = ("session", "newest", "masking", "full")
BUDGETS = (4096, 8192, 32768, 128000)
#: Issue 26's targets on the validation set: (reuse at least, billed share at most).
TARGETS = {8192: (0.88, 0.25), 32768: (0.94, 0.16)}
#: Figures of this run, for the summary and docs/performance.md.
FIGURES: dict[str, dict[str, Any]] = {}


def large_output_loop(steps: int, seed: int = 7) -> LedgerStore:
    """An agent loop as a new user writes one: a task, then ``steps`` steps each running one
    command whose output is 1-20 KB of distinct lines."""
    rng = random.Random(seed)
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.set_environment(guidance="You fix failing tests. Use the tools.", workspace="/repo")
    session.operator_message("The test suite fails on the new parser; find why and fix it.")
    words = ("parser", "token", "stream", "error", "line", "column", "expected", "found",
             "module", "import", "value")
    for i in range(steps):
        call = holon_ctx.ToolCall(f"c{i}", "bash",
                                  json.dumps({"cmd": f"pytest -x tests/test_{i}.py"}))
        session.assistant_message(f"Step {i}: running the next check.", tool_calls=[call])
        size, lines, chars = rng.randint(1_000, 20_000), [], 0
        while chars < size:
            line = f"{rng.choice(words)} {rng.randint(0, 99999)} " + " ".join(
                rng.choice(words) for _ in range(rng.randint(3, 12)))
            lines.append(line)
            chars += len(line) + 1
        session.tool_result(call.call_id, "\n".join(lines) + "\n", exit_code=rng.choice([0, 1]))
    return session.store


def _ledger_row(name: str, reports: dict[str, ApproachReport], budget: int) -> dict[str, Any]:
    session = reports["session"]
    within = [r for r in reports.values() if r.name != "session" and r.over_budget == 0]
    best = min(within, key=lambda r: r.billed)
    newest = reports["newest"]
    # The calls where keep-newest's request holds a message of the history: where its trim kept
    # none it sends the system message alone — next to nothing billed, and a request that cannot
    # act on the newest record (the generated loop, the demo at 4,096 on 22 of 279 calls).
    acts = [i for i, row in enumerate(newest.rows) if not row.empty]
    newest_acting = sum(newest.rows[i].cost.billed for i in acts)
    return {"ledger": name, "calls": len(session.rows),
            "newest_empty_calls": newest.empty_calls,
            "vs_newest_where_it_sends_history": round(
                sum(session.rows[i].cost.billed for i in acts) / newest_acting, 3)
            if newest_acting else None,
            **{f"{n}_billed": round(r.billed) for n, r in reports.items()},
            "session_replans": session.replans,
            "session_reuse": round(session.reuse, 3),
            "session_share": round(session.billed_share, 3),
            "best": best.name, "vs_best": round(session.billed / best.billed, 3),
            "more_than_newest": session.billed > reports["newest"].billed + 1e-6,
            "more_than_masking": session.billed > reports["masking"].billed + 1e-6,
            "more_than_best": session.billed > best.billed + 1e-6}


def _replay_corpus(label: str, stores: dict[str, LedgerStore], budget: int) -> dict[str, Any]:
    counter = default_counter()
    rows = []
    by_approach: dict[str, list[ApproachReport]] = {a: [] for a in APPROACHES}
    for name, store in stores.items():
        reports = {r.name: r for r in replay(store, budget, PRICES["anthropic"], counter,
                                             approaches=APPROACHES)}
        for a in APPROACHES:
            by_approach[a].append(reports[a])
        rows.append(_ledger_row(name, reports, budget))
    summary = {a: {"reuse": round(statistics.mean(r.reuse for r in reps), 3),
                   "billed_share": round(statistics.mean(r.billed_share for r in reps), 3),
                   "replans_per_100": round(statistics.mean(r.replans_per_100 for r in reps), 1),
                   "billed_total": round(sum(r.billed for r in reps)),
                   "over_budget": sum(r.over_budget for r in reps)}
               for a, reps in by_approach.items()}
    return {"label": label, "budget": budget, "ledgers": len(rows), **summary,
            "session_more_than_newest": [r["ledger"] for r in rows if r["more_than_newest"]],
            "newest_empty_calls": sum(r["newest_empty_calls"] for r in rows),
            "session_more_than_newest_where_it_sends_history": [
                r["ledger"] for r in rows if (r["vs_newest_where_it_sends_history"] or 0) > 1],
            "session_more_than_masking": [r["ledger"] for r in rows if r["more_than_masking"]],
            "session_more_than_best": sum(r["more_than_best"] for r in rows),
            "rows": rows}


def _trajectory_stores(paths: list[Path]) -> dict[str, LedgerStore]:
    stores: dict[str, LedgerStore] = {}
    for path in paths:
        store = MemoryStore(default_counter())
        import_any(path, store)
        stores[path.name.removesuffix(".traj.json")] = store
    return stores


def _demo_store() -> MemoryStore:
    store = MemoryStore(default_counter())
    resource = importlib.resources.files("holon_ctx").joinpath("data/demo.jsonl")
    with importlib.resources.as_file(resource) as path:
        import_jsonl(path, store)
    return store


@pytest.mark.skipif(not TRAJECTORIES or not VALIDATION_SET,
                    reason=f"corpora not found under {CORPORA}")
def test_the_bill(benchmark: Any) -> None:
    """Session, keep-newest, masking and the whole history on four corpora at four budgets."""
    corpora = {"trajectories": _trajectory_stores(TRAJECTORIES),
               "validation": _trajectory_stores(VALIDATION_SET),
               "demo": {"demo": _demo_store()},
               "loop": {"loop-300x1-20KB": large_output_loop(300)}}

    def run() -> None:
        for label, stores in corpora.items():
            for budget in BUDGETS:
                FIGURES[f"{label}/{budget}"] = _replay_corpus(label, stores, budget)

    load_before = os.getloadavg()[0]
    benchmark.pedantic(run, rounds=1, iterations=1)
    FIGURES["load_average"] = {"before": round(load_before, 1),
                               "after": round(os.getloadavg()[0], 1)}
    benchmark.extra_info.update({k: {f: v for f, v in row.items() if f != "rows"}
                                 if "rows" in row else row for k, row in FIGURES.items()})
    out = os.environ.get("HOLON_BILL_FIGURES")
    if out:  # every ledger's row, for docs/performance.md (the summary holds the means)
        Path(out).write_text(json.dumps(FIGURES, indent=1) + "\n", encoding="utf-8")
    for budget, (reuse, share) in TARGETS.items():
        row = FIGURES[f"validation/{budget}"]
        target(f"validation session reuse at {budget}", row["session"]["reuse"], reuse,
               at_most=False)
        target(f"validation session billed share at {budget}", row["session"]["billed_share"],
               share)
    for label in corpora:
        for budget in BUDGETS:
            row = FIGURES[f"{label}/{budget}"]
            assert row["session"]["over_budget"] == 0, row
            target(f"{label} {budget}: ledgers where the session bills more than keep-newest",
                   len(row["session_more_than_newest"]), 0)
            target(f"{label} {budget}: ledgers where the session bills more than masking",
                   len(row["session_more_than_masking"]), 0)


def _cpu_ms(fn: Any) -> float:
    started = time.process_time()
    fn()
    return (time.process_time() - started) * 1000


#: Consecutive turns the latency benchmark walks (after 60 to warm up): enough for ~10 re-plans,
#: so their median is not one or two samples.
LATENCY_TURNS = 900


def test_per_turn_latency(benchmark: Any) -> None:
    """900 consecutive turns of a 100k-turn ledger at 32k: appends vs re-plans vs stateless."""
    db = projection_db(100_000)
    store = SqliteStore(db)
    turns = [s.record.id for s in store.turns_before(10**12, LATENCY_TURNS + 60, store.end_pos())
             if isinstance(s.record, Turn)][::-1]
    session = SessionProjector(store, layout=Layout.MESSAGES)
    stateless = Projector(store)
    append_ms: list[float] = []
    replan_ms: list[float] = []
    stateless_ms: list[float] = []
    #: Each re-plan's time over the stateless call's for the same turn.
    replan_ratio: list[float] = []
    reasons: dict[str, int] = {}

    def run() -> None:
        # Two passes over the same turns, not one interleaved walk: a runtime's session makes
        # its requests back to back, and a stateless call between two of them (as the first
        # version of this benchmark made, to compare the same turns) evicted the session's
        # working set from the processor caches and added ~0.4 ms to each append it measured.
        session.request(budget_tokens=32768, at=turns[59])  # warm: the walk from a checkpoint
        replanned: dict[str, float] = {}
        for turn_id in turns[60:]:
            started = time.process_time()
            request = session.request(budget_tokens=32768, at=turn_id)
            ms = (time.process_time() - started) * 1000
            (replan_ms if request.replanned else append_ms).append(ms)
            if request.replanned:
                replanned[turn_id] = ms
                reason = request.replan_reason or "?"
                reasons[reason] = reasons.get(reason, 0) + 1
        for turn_id in turns[60:]:
            stateless_ms.append(_cpu_ms(lambda t=turn_id: stateless.project(
                budget_tokens=32768, at=t)))
            if turn_id in replanned:
                replan_ratio.append(replanned[turn_id] / stateless_ms[-1])

    load_before = os.getloadavg()[0]
    benchmark.pedantic(run, rounds=1, iterations=1)
    append_p50 = round(statistics.median(append_ms), 3)
    figures = {"append_p50_ms": append_p50,
               "append_p99_ms": round(sorted(append_ms)[int(len(append_ms) * 0.99) - 1], 3),
               "replans": len(replan_ms), "replan_reasons": reasons,
               "replan_p50_ms": round(statistics.median(replan_ms), 2) if replan_ms else None,
               "replan_over_stateless_same_turn_p50": (
                   round(statistics.median(replan_ratio), 2) if replan_ratio else None),
               "stateless_p50_ms": round(statistics.median(stateless_ms), 2),
               # What a runtime pays per turn, re-plans included.
               "mean_ms_per_turn": round(statistics.mean(append_ms + replan_ms), 3),
               "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)]}
    FIGURES["latency/100k/32768"] = figures
    benchmark.extra_info.update(figures)
    store.close()
    # Times are recorded (docs/performance.md), never asserted: they depend on the machine and
    # its load. Issue 13's targets: append p50 <= 1 ms; a re-plan no slower than a stateless call
    # (p50 against p50, and each re-plan against the stateless call for the same turn).
    target("session append p50 ms at 100k turns, 32k", append_p50, 1.0)
    if replan_ms:
        target("session re-plan p50 / stateless p50",
               statistics.median(replan_ms) / statistics.median(stateless_ms), 1.0)
        target("session re-plan / stateless call, same turn, p50",
               statistics.median(replan_ratio), 1.0)
