"""Faithful folds on real agent histories (issue 12, item 2): no fold hides a different result.

At the points and budgets of ``test_frontier.py`` (25/50/75/100% of each trajectory's steps, 4,096
and 8,192 tokens), every earlier run a repeated-call fold hides printed what the run shown for it
printed, and ended the same way (:func:`~holon_ctx.projection.rendering.folding.hidden_differences`). Before
the fix, 134 of the 169 earlier runs folded at these points had printed something else
(``docs/performance.md``, "Faithful folds").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_frontier import BUDGETS, TRAJECTORIES, load, needs_corpus

from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.provider_formats.providers import framing_tokens
from holon_ctx.projection.rendering.folding import hidden_differences


def fold_counts(path: Path) -> tuple[int, list[tuple[str, str]]]:
    """Earlier runs folded at the trajectory's points, and the folds among them that hide a
    different result (``(earlier, shown)``)."""
    traj = load(path)
    projector = Projector(traj.store)
    folded = 0
    hidden: list[tuple[str, str]] = []
    for k in traj.points():
        for budget in BUDGETS:
            projection = projector.project(budget_tokens=budget - framing_tokens(),
                                           at=traj.steps[k - 1].turn_id)
            folded += sum(len(f.refs) - 1 for f in projection.folds
                          if "repeated_tool_call" in f.kinds)
            hidden += hidden_differences(projection.folds, traj.store.get)
    return folded, hidden


@needs_corpus
@pytest.mark.parametrize("path", TRAJECTORIES, ids=[p.name.split(".")[0] for p in TRAJECTORIES])
def test_no_fold_hides_a_different_result(path: Path) -> None:
    """Every run folded as a repeat printed what the run shown for it printed."""
    _, hidden = fold_counts(path)
    assert hidden == []
