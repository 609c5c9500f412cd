"""Time of a refused request: a budget too small for the pinned references and the current state.

The refusal states a budget at which the request is made (projection/session/need.py): a search
of a few budgets, each a walk of the session at that budget from its checkpoint turn. Two cases:
the library's ``next_request`` at a small budget after an imported agent history
(:mod:`agent_history`), and the CLI's error example of docs/cli.md, ``preview --db demo.db
--budget 100``, start-up included (its preview asks for the turn before the shown one first, for
the cached share, and is refused there too). Whether the need stated is right is the tests' job
(tests/test_budget_need.py); this records how long a runtime or a person waits for it.

Run with ``python3 dev.py bench bench/test_bench_refusal.py`` (to time another tree, run pytest
from a directory without ``holon_ctx`` in it, with that tree on ``PYTHONPATH``: ``python -m``
puts the working directory first); figures go to docs/performance.md,
"Refusals (component)". Each case is one round: a refusal is several walks of the session.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from agent_history import chat

import holon_ctx

#: A walk of the session is seconds long, a refusal several walks (minutes at 2,000 messages
#: before 2026-12-06): one round each.
ROUNDS = 1


def _imported(messages: int) -> holon_ctx.Session:
    session = holon_ctx.open_session(":memory:")
    session.import_history(chat(messages), format="openai")
    return session


@pytest.mark.parametrize(("messages", "budget"), [(2_000, 100), (10_000, 100)])
def test_bench_refused_request_after_an_import(benchmark: pytest.FixtureRequest, messages: int,
                                               budget: int) -> None:
    """``next_request(budget)`` refused after importing ``messages`` messages (the import is
    set-up, not timed): the need search alone."""
    stated: list[int] = []

    def refuse(session: holon_ctx.Session) -> None:
        try:
            session.next_request(budget)
        except holon_ctx.BudgetTooSmallError as refusal:
            stated.append(refusal.required_tokens)

    benchmark.pedantic(refuse, setup=lambda: ((_imported(messages),), {}),  # type: ignore[attr-defined]
                       rounds=ROUNDS, iterations=1)
    # Recorded, so a run that compares two trees can see they stated the same need.
    benchmark.extra_info["need"] = stated[-1] if stated else None  # type: ignore[attr-defined]


def test_bench_cli_preview_refused(benchmark: pytest.FixtureRequest, demo_db: Path) -> None:
    """docs/cli.md's error example: ``preview --budget 100`` on the demo, exit status 2."""
    argv = [sys.executable, "-m", "holon_ctx", "preview", "--db", str(demo_db), "--budget",
            "100", "--plain"]

    def run() -> None:
        done = subprocess.run(argv, check=False, capture_output=True, text=True)
        assert done.returncode == 2, done.stderr

    benchmark.pedantic(run, rounds=1, iterations=1)  # type: ignore[attr-defined]
