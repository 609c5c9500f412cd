"""The execution frontier holds in session mode, on every turn of the shared trajectories.

The checks of ``test_frontier.py`` that a session projection promises (issue 13): the task
statement kept, the last two steps shown (verbatim, or excerpted with the ref of the full text),
every file modified so far named, no tool message without its call — on every turn, in the
provider layout, at 4,096 and 8,192 tokens, re-measured.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from provider_shapes import assert_openai_pairing
from test_frontier import (
    TRAJECTORIES,
    _message_shown,
    _result_shown,
    _task_present,
    load,
    needs_corpus,
)

from holon_ctx.projection.provider_formats.providers import measure
from holon_ctx.projection.session.session import Layout, SessionProjector
from holon_ctx.tokens import default_counter

BUDGETS = (4096, 8192)


@needs_corpus
@pytest.mark.parametrize("path", TRAJECTORIES, ids=[p.name.split(".")[0] for p in TRAJECTORIES])
def test_every_turn_keeps_the_frontier(path: Path) -> None:
    traj = load(path)
    counter = default_counter()
    failures: list[tuple[int, int, str]] = []
    for budget in BUDGETS:
        projector = SessionProjector(traj.store, layout=Layout.MESSAGES)
        for k, step in enumerate(traj.steps, start=1):
            request = projector.request(budget_tokens=budget, at=step.turn_id)
            messages = request.openai_messages()
            text = "".join(m["content"] or "" for m in messages)
            files, _, _ = traj.truth(k)
            checks = {
                "task": _task_present(traj, text),
                "last_two_steps": all(
                    _message_shown(s.message, text) if s.tool is None else (
                        _result_shown(s.tool, text)
                        and (s.tool.args_preview in text or _message_shown(s.message, text)))
                    for s in traj.steps[max(0, k - 2):k]),
                "files_named": all(f in text for f in files),
                "budget_holds": measure(messages, counter) <= budget,
            }
            try:
                assert_openai_pairing(messages)
            except AssertionError:
                checks["tool_pairing"] = False
            failures.extend((k, budget, name) for name, ok in checks.items() if not ok)
    assert failures == []
