"""The session's bill against the simple approaches (issue 26, RFC 0025): while the whole history
fits, the request is the history — append-only, no re-plan, no tail the history already says."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

from session_helpers import check_request

import holon_ctx
from holon_ctx.ledger.epochs_sqlite import SqliteEpochStore
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.cost import PRICES
from holon_ctx.projection.replay import call_points, replay
from holon_ctx.projection.session import (
    Layout,
    SessionPolicy,
    SessionProjector,
    SessionRequest,
)
from holon_ctx.projection.tail import TAIL_TITLE
from holon_ctx.tokens import default_counter


def _two_work_items(seed: int, steps: int, where: str | Path = ":memory:") -> LedgerStore:
    """An agent that switches between two work items and back, with tool runs in each: on the
    planned layout every switch re-plans, and the tail restates the work item every call."""
    rng = random.Random(seed)
    session = holon_ctx.open_session(where, compaction=None)
    session.set_environment(guidance="You port importers. Use the tools.", workspace="/repo")
    items = ["port-importer", "fix-docs"]
    for i in range(steps):
        item = items[(i // 4) % 2]
        if i % 4 == 0:
            session.operator_message(f"Now {item}, part {i}.", work_item=item)
            session.set_work_item(item, objective=f"{item}: finish part {i}")
        call = holon_ctx.ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"pytest -k case{i}"}))
        session.assistant_message(f"Step {i}: " + "checking. " * rng.randint(1, 10),
                                  tool_calls=[call])
        session.tool_result(call.call_id, f"ran case {i}\n" * rng.randint(1, 20),
                            exit_code=rng.choice([0, 0, 1]))
    return session.store


def _requests(store: LedgerStore, budget: int,
              projector: SessionProjector | None = None) -> list[SessionRequest]:
    """The request of every model call (replay's call points)."""
    session = projector or SessionProjector(store, layout=Layout.MESSAGES)
    return [session.request(budget_tokens=budget, limit_pos=limit)
            for _, limit in call_points(store)]


def test_a_fitting_history_never_re_plans_and_each_request_extends_the_last() -> None:
    """Work-item switches, a new anchor at each operator message: none re-plans while the whole
    history fits (the first request opens the one epoch), and every request is the one before it
    plus what happened since, byte for byte."""
    store = _two_work_items(1, 24)
    requests = _requests(store, 32768)
    assert requests[-1].request_tokens < 32768 // 2  # the whole history fits, with room
    assert [r.replanned for r in requests[1:]] == [False] * (len(requests) - 1)
    for before, after in itertools.pairwise(requests):
        check_request(after)
        assert after.text.startswith(before.text)


def test_a_whole_history_request_has_no_tail_the_records_already_say() -> None:
    """A request that is the whole history ends with the history: the work item, the anchor and
    the frontier are in its records, so no current-state tail restates them."""
    store = _two_work_items(2, 12)
    for request in _requests(store, 32768):
        assert not request.has_tail
        assert TAIL_TITLE not in request.text
        assert request.openai_messages()[-1]["role"] in ("user", "tool")


def test_the_session_bills_no_more_than_keep_newest_while_the_history_fits() -> None:
    """The bill of every call, at Anthropic's and OpenAI's prices: the session's total is at most
    keep-newest's (which is the whole history, append-only, while it fits)."""
    store = _two_work_items(3, 24)
    counter = default_counter()
    for price in ("anthropic", "openai"):
        session, newest = replay(store, 32768, PRICES[price], counter,
                                 approaches=("session", "newest"))
        assert newest.over_budget == 0
        assert session.over_budget == 0
        assert session.billed <= newest.billed, price
        assert session.replans == 1  # the first call opens the epoch


def test_once_the_history_outgrows_the_budget_the_tail_returns() -> None:
    """The whole epoch ends when the history outgrows the budget: the re-plan lays out a planned
    epoch, whose requests end with the current-state tail again."""
    store = _two_work_items(4, 40)
    projector = SessionProjector(store, layout=Layout.MESSAGES)
    requests = _requests(store, 1500, projector)
    first_replan = next(i for i, r in enumerate(requests[1:], 1) if r.replanned)
    assert not any(r.has_tail for r in requests[:first_replan])
    # The whole epoch ends where the history outgrows the budget (a switch of work item
    # re-plans only in a planned epoch).
    assert [s.reason for s in projector.epoch_starts(budget_tokens=1500)][:2] == [
        "checkpoint", "over_budget"]
    assert all(r.has_tail for r in requests[first_replan:])
    for request in requests:
        check_request(request)


def test_a_history_that_ends_with_the_models_reply_still_ends_on_a_user_turn() -> None:
    """Anthropic reads a trailing assistant message as a prefill: a whole epoch's request as of a
    reply without calls ends with the current-state tail, a user message."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.operator_message("Summarise the release notes.")
    session.assistant_message("Here is the summary: three fixes, one feature.")
    request = SessionProjector(session.store, layout=Layout.MESSAGES).request(budget_tokens=8192)
    assert request.has_tail
    assert request.anthropic_request()["messages"][-1]["role"] == "user"
    assert request.openai_messages()[-1]["role"] == "user"


def test_a_new_process_continues_the_whole_epoch(tmp_path: Path) -> None:
    """The whole epoch is persisted like any other: a new process with the saved state makes the
    same request (no tail, no re-plan) as the process that walked the ledger."""
    db = tmp_path / "run.db"
    store = _two_work_items(5, 16, db)
    policy = SessionPolicy()
    first = SessionProjector(store, layout=Layout.MESSAGES, session=policy,
                             epochs=SqliteEpochStore(str(db)))
    walked = _requests(store, 32768, first)[-1]
    again = SessionProjector(store, layout=Layout.MESSAGES, session=policy,
                             epochs=SqliteEpochStore(str(db))).request(budget_tokens=32768)
    assert (again.text, again.has_tail, again.replanned) == (walked.text, False, False)
    planned = SessionProjector(store, layout=Layout.MESSAGES,
                               session=SessionPolicy(whole_history=False)).request(
        budget_tokens=32768)
    assert planned.has_tail
    assert TAIL_TITLE in planned.text
