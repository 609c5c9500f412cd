"""An agent loop at a small budget re-plans a bounded share of its steps (RFC 0010, decision 7).

A runtime's agent loop — the operator's message, then replies each with a call and its result,
every reply after the first its own turn anchored to the operator's — asks for each step's
request at 2,048 tokens, outputs of 0.2-8 KB. Before decision 7's amendment a re-plan raised its
plan for the pinned turns — the anchor in its full form, which holds the loop's first reply and
output (the operator's turn), and the last two steps — to the brim, so the next step did not fit
and re-planned again: a re-plan at almost every step (326 epochs for 350 steps in the
benchmark). Now a re-plan offers the anchor cut right after the operator's words when its full
form leaves no room for three steps of an entry's share each: the next step fits beside the
pinned turns. What every request still promises:
the operator's words verbatim, the previous step and the current one shown (their replies
verbatim, their outputs verbatim or cut with the ref of their full text, and whole in their
planned form at a re-plan), never over budget.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_frontier import _result_shown
from test_huge_turn import cold_copy, huge_turn
from tiers import sized

import holon_ctx
from holon_ctx.ledger.records import Tool

pytestmark = pytest.mark.scaled

BUDGET = 2048
#: The share of steps that may re-plan. The anchor's full form is kept only where it leaves room
#: for three steps of an entry's share (a quarter of the budget) each, so a re-plan leaves room
#: for one more step and an epoch holds about two; the tail ends some after one. Before: about
#: every step.
MAX_REPLAN_SHARE = 0.6


def _steps(session: holon_ctx.Session) -> list[tuple[str, Tool]]:
    """Each step's turn id and its tool result, in order (the operator's turn first)."""
    store = session.store
    out: list[tuple[str, Tool]] = []
    turn = ""
    for stored in store.records_between(0, store.end_pos()):
        if stored.ref.startswith("turn:"):
            turn = stored.ref.removeprefix("turn:")
        elif isinstance(stored.record, Tool):
            out.append((turn, stored.record))
    return out


def _text(request: holon_ctx.Request) -> str:
    return "\n".join(str(m.get("content") or "") for m in request.openai_messages)


def _pinned_forms(request: holon_ctx.Request) -> dict[str, tuple[str, int, int]]:
    """A re-plan's pinned turns: reason → (form, tokens, full tokens)."""
    return {reason: (it["form"], it["tokens"], it["full_tokens"])
            for sec in request.manifest["sections"] for it in sec["items"]
            for reason in it["reasons"] if reason in ("previous_step", "current_turn")}


@pytest.mark.parametrize("seed", [3, 6])
def test_an_agent_loop_at_2048_re_plans_a_bounded_share_of_its_steps(
        tmp_path: Path, seed: int) -> None:
    path = str(tmp_path / "loop.db")
    words = huge_turn(path, records=sized(60, 200), words=30, steps=True, seed=seed)
    replans = 0
    with holon_ctx.open_session(path) as session:
        steps = _steps(session)
        for k, (turn, _) in enumerate(steps):
            request = session.next_request(BUDGET, at=turn)
            text = _text(request)
            assert request.request_tokens <= BUDGET
            assert words in text
            for j in range(max(0, k - 1), k + 1):  # the previous step and the current one
                assert f"Step {j}: running" in text, (turn, j)
                assert _result_shown(steps[j][1], text), (turn, j)
            if request.manifest["session"]["replanned"]:
                replans += 1
                forms = _pinned_forms(request)
                # At a re-plan both steps are in their full form, not cut to the room.
                for reason in ("current_turn",) + (("previous_step",) if k else ()):
                    form, tokens, full = forms[reason]
                    assert form == "full", (turn, reason, forms)
                    assert tokens == full, (turn, reason, forms)
    assert replans <= MAX_REPLAN_SHARE * len(steps), (replans, len(steps))


def test_an_agent_loop_asked_at_every_step_equals_a_cold_walk(tmp_path: Path) -> None:
    """The anchor's form is fixed by the budget, not by when requests were made: a session asked
    at every step gives the bytes a cold session gives at the end."""
    path = str(tmp_path / "loop.db")
    huge_turn(path, records=sized(40, 120), words=30, steps=True, seed=5)
    with holon_ctx.open_session(path) as session:
        for turn, _ in _steps(session):
            warm: Any = session.next_request(BUDGET, at=turn)
    with holon_ctx.open_session(cold_copy(path, str(tmp_path / "cold.db"))) as cold:
        assert cold.next_request(BUDGET).openai_messages == warm.openai_messages
