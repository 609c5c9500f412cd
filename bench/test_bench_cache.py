"""The bill (issue 13): prefix reuse, billed share and re-plans of every approach, in one run.

Run with ``python3 dev.py bench bench/test_bench_cache.py``. Figures and the machine they were
taken on are in ``docs/performance.md`` ("Cache-stable projection").

* ``test_the_bill``: the twelve shared trajectories at 8,192 and 32,768 tokens and the demo ledger
  at 8,192, every model call replayed as a runtime would make it (``holon_ctx.projection.replay``:
  before each reply, after a turn without one, at the end), each request priced at Anthropic's
  cache prices against the one before it. Approaches: the session
  projection, the stateless projection, keep-newest and the whole history. Reported per corpus and
  budget: mean over ledgers of prefix reuse (tokens shared with the previous request over tokens
  sent), billed share (billed price over the uncached price), re-plans per 100 calls, and the
  billed total over all ledgers.
  Targets (issue 13): session reuse >= 0.85 at 8k and >= 0.92 at 32k; billed share <= 0.30 at 8k
  and <= 0.18 at 32k, and below keep-newest's at both.
* ``test_per_turn_latency``: a 100k-turn SQLite ledger at 32k, a long-lived session walking 900
  consecutive turns: CPU time of each request, split into requests that only append (issue 13's
  target: p50 <= 1 ms) and requests that re-plan, beside a stateless projection of the same turns.
  Times are recorded, never asserted (they depend on the machine and its load).
"""

from __future__ import annotations

import importlib.resources
import os
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from projection_gen import projection_db
from targets import target

from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.ledger.transcripts import import_any
from holon_ctx.projection.cost import PRICES
from holon_ctx.projection.projector import Projector
from holon_ctx.projection.replay import ApproachReport, replay
from holon_ctx.projection.session import Layout, SessionProjector
from holon_ctx.tokens import default_counter

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "swe-trajectories"
TRAJECTORIES = sorted(CORPUS.glob("*.traj.json")) if CORPUS.is_dir() else []
APPROACHES = ("session", "stateless", "newest", "full")
TARGETS = {8192: (0.85, 0.30), 32768: (0.92, 0.18)}
#: Figures of this run, for the summary and docs/performance.md.
FIGURES: dict[str, dict[str, Any]] = {}


def _mean(reports: list[ApproachReport], field: str) -> float:
    return statistics.mean(float(getattr(r, field)) for r in reports)


def _row(label: str, budget: int, by_approach: dict[str, list[ApproachReport]],
         latency: dict[str, list[float]]) -> dict[str, Any]:
    return {name: {"reuse": round(_mean(reps, "reuse"), 3),
                   "billed_share": round(_mean(reps, "billed_share"), 3),
                   "replans_per_100": round(_mean(reps, "replans_per_100"), 1),
                   "billed_total": round(sum(r.billed for r in reps)),
                   "sent_total": sum(r.sent_tokens for r in reps),
                   "over_budget": sum(r.over_budget for r in reps),
                   "ms_per_call_p50": round(statistics.median(latency[name]), 2)}
            for name, reps in by_approach.items()} | {"label": label, "budget": budget}


def _replay_all(stores: list[MemoryStore], budget: int) -> tuple[dict[str, list[ApproachReport]],
                                                                  dict[str, list[float]]]:
    counter = default_counter()
    by_approach: dict[str, list[ApproachReport]] = {a: [] for a in APPROACHES}
    latency: dict[str, list[float]] = {a: [] for a in APPROACHES}
    for store in stores:
        for name in APPROACHES:
            # One approach at a time, so each one's time per call is its own.
            started = time.process_time()
            (report,) = replay(store, budget, PRICES["anthropic"], counter, approaches=(name,))
            per_call = (time.process_time() - started) * 1000 / max(1, len(report.rows))
            by_approach[name].append(report)
            latency[name].append(per_call)
    return by_approach, latency


def _trajectory_stores() -> list[MemoryStore]:
    stores = []
    for path in TRAJECTORIES:
        store = MemoryStore(default_counter())
        import_any(path, store)
        stores.append(store)
    return stores


def _demo_store() -> MemoryStore:
    store = MemoryStore(default_counter())
    resource = importlib.resources.files("holon_ctx").joinpath("data/demo.jsonl")
    with importlib.resources.as_file(resource) as path:
        import_jsonl(path, store)
    return store


@pytest.mark.skipif(not TRAJECTORIES, reason=f"corpus not found at {CORPUS}")
def test_the_bill(benchmark: Any) -> None:
    """Every approach on the trajectories (8k, 32k) and the demo (8k), in one run."""
    trajectories = _trajectory_stores()
    demo = _demo_store()

    def run() -> None:
        for budget in (8192, 32768):
            reports, latency = _replay_all(trajectories, budget)
            FIGURES[f"trajectories/{budget}"] = _row("12 trajectories", budget, reports, latency)
        reports, latency = _replay_all([demo], 8192)
        FIGURES["demo/8192"] = _row("demo ledger", 8192, reports, latency)

    benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(FIGURES)
    for budget, (reuse, share) in TARGETS.items():
        row = FIGURES[f"trajectories/{budget}"]
        assert row["session"]["reuse"] >= reuse, row
        assert row["session"]["billed_share"] <= share, row
        assert row["session"]["billed_share"] < row["newest"]["billed_share"], row
        assert row["session"]["over_budget"] == 0, row


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
