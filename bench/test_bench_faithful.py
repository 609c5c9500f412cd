"""Faithful folds on real agent histories: how many folds hide a different result (issue 12).

Run with ``python3 dev.py bench bench/test_bench_faithful.py``. At 25/50/75/100% of each of the
twelve trajectories' steps and at 4,096 and 8,192 tokens (the points of ``tests/test_frontier.py``),
the projection's manifest lists the earlier tool runs each repeated-call fold hides; a fold hides
a different result when such a run's status, exit code or output differs from the run shown for
it (:func:`~holon_ctx.projection.rendering.folding.hidden_differences`). Target: 0. The figures are in
``docs/performance.md`` ("Faithful folds").
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.transcripts import import_any
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.provider_formats.providers import framing_tokens
from holon_ctx.projection.rendering.folding import hidden_differences

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "swe-trajectories"
TRAJECTORIES = sorted(CORPUS.glob("*.traj.json")) if CORPUS.is_dir() else []
FRACTIONS = (0.25, 0.5, 0.75, 1.0)
BUDGETS = (4096, 8192)
pytestmark = pytest.mark.skipif(not TRAJECTORIES, reason=f"corpus not found at {CORPUS}")


def count_unfaithful_folds(paths: list[Path]) -> dict[str, int]:
    """Projection points, earlier runs folded as repeats, and those whose result differs."""
    points = folded = hidden = 0
    for path in paths:
        store = MemoryStore()
        import_any(path, store)
        steps = [r.id for r in store.iter_records()
                 if isinstance(r, Turn) and r.trigger == "x-agent-step"]
        projector = Projector(store)
        for fraction in FRACTIONS:
            at = steps[max(1, round(len(steps) * fraction)) - 1]
            for budget in BUDGETS:
                projection = projector.project(budget_tokens=budget - framing_tokens(), at=at)
                points += 1
                folded += sum(len(f.refs) - 1 for f in projection.folds
                              if "repeated_tool_call" in f.kinds)
                hidden += len(hidden_differences(projection.folds, store.get))
    return {"points": points, "folded_runs": folded, "fold_hides_different_output": hidden}


def test_fold_hides_different_output(benchmark: Any) -> None:
    """Count the folds that hide a different result on the twelve trajectories (target 0)."""
    counts = benchmark.pedantic(count_unfaithful_folds, args=(TRAJECTORIES,), rounds=1,
                                iterations=1)
    benchmark.extra_info.update(counts)
    sys.stdout.write(f"\nfaithful folds: {counts}\n")
    assert counts["fold_hides_different_output"] == 0, counts
