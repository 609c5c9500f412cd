"""The session's bill against the simple approaches (issue 26, RFC 0025): while the whole history
fits, the request is the history — append-only, no re-plan, no tail the history already says."""

from __future__ import annotations

import importlib.resources
import itertools
import json
import random
import re
from pathlib import Path

import attrs
import pytest
from projection_builders import LedgerBuilder, memory_store
from session_helpers import check_request

import holon_ctx
from holon_ctx.ledger.epochs_sqlite import SqliteEpochStore
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import WorkItem
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.measure.cost import PRICES, shared_prefix_tokens
from holon_ctx.projection.measure.replay import call_points, replay, request_tokens
from holon_ctx.projection.planning.tail import TAIL_TITLE
from holon_ctx.projection.session.session import (
    Layout,
    SessionPolicy,
    SessionProjector,
    SessionRequest,
    cur_id,
)
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


def test_once_the_history_outgrows_the_budget_the_work_state_is_said() -> None:
    """The whole epoch ends when the history outgrows the budget: the re-plan lays out a planned
    epoch, whose history says the current work item — at the re-plan, and again after each
    switch (RFC 0025, decision 5) — where the whole epoch's records said it alone."""
    store = _two_work_items(4, 40)
    projector = SessionProjector(store, layout=Layout.MESSAGES)
    requests = _requests(store, 1500, projector)
    first_replan = next(i for i, r in enumerate(requests[1:], 1) if r.replanned)
    assert not any(r.has_tail for r in requests[:first_replan])
    # The whole epoch ends where the history outgrows the budget (a switch of work item
    # re-plans only in a planned epoch).
    assert [s.reason for s in projector.epoch_starts(budget_tokens=1500)][:2] == [
        "checkpoint", "over_budget"]
    for request in requests[first_replan:]:
        current = [s.record.work_item_id for s in store.records_between(0, request.limit_pos)
                   if isinstance(s.record, WorkItem)][-1]
        said = re.findall(r"^work item (\S+) \(", request.text, re.MULTILINE)
        assert said[-1] == current, request.limit_pos
        assert f"{TAIL_TITLE} as of " in request.text
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
    assert f"{TAIL_TITLE} as of " in planned.text  # its re-plan says the work state


def _tool_loop(output_lines: int, steps: int) -> LedgerStore:
    """An agent loop whose every step prints ``output_lines`` lines (distinct, so no markup
    folds them)."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.operator_message("Find why the parser fails on nested brackets, then fix it.")
    for i in range(steps):
        call = holon_ctx.ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"pytest -x -k case{i}"}))
        session.assistant_message(f"Step {i}: the next case.", tool_calls=[call])
        session.tool_result(call.call_id, "".join(f"case {i}.{k}: token {k * 7919 % 10007} ok\n"
                                                  for k in range(output_lines)))
    return session.store


def _marks(store: LedgerStore, budget: int) -> list[int]:
    """The low-water mark of every planned re-plan (the whole epoch is not planned)."""
    out = []
    for request in _requests(store, budget):
        if request.replanned and request.replan_reason == "over_budget":
            out.append(request.manifest.session["low_water_tokens"])  # type: ignore[index]
    return out


def test_the_low_water_mark_falls_as_the_history_grows_faster() -> None:
    """A re-plan's write pays off over the calls until the next one: where each step adds a few
    lines the mark is the policy's ceiling (half the budget); where each adds a large output, a
    re-plan keeps less so that more calls follow it — never below a tenth of the budget."""
    budget = 4096
    ceiling = int(budget * SessionPolicy().low_water)
    slow = _marks(_tool_loop(3, 220), budget)
    fast = _marks(_tool_loop(60, 60), budget)
    assert slow
    assert fast
    assert set(slow) == {ceiling}
    assert all(budget // 10 <= mark < ceiling for mark in fast), fast


def test_the_derived_mark_bills_less_than_the_fixed_half_on_large_outputs() -> None:
    """On a loop of large outputs, billed at Anthropic's prices, the derived mark re-plans into
    a smaller prefix, which the calls until the next re-plan read more cheaply than the fixed
    half's, and the re-plans come no more often."""
    store = _tool_loop(60, 60)
    counter = default_counter()
    derived = SessionProjector(store, counter, layout=Layout.MESSAGES)
    # Cache prices with no write premium make the derived mark the ceiling: the fixed half.
    fixed = SessionProjector(store, counter, layout=Layout.MESSAGES,
                             session=SessionPolicy(cache_read=0.999, cache_write=1.0))
    [a] = replay(store, 4096, PRICES["anthropic"], counter, session_projector=derived)
    [b] = replay(store, 4096, PRICES["anthropic"], counter, session_projector=fixed)
    assert a.replans <= b.replans
    assert a.billed < b.billed


def test_a_planned_record_may_take_less_where_cache_writes_are_dear() -> None:
    """The most of the budget a record takes in a planned epoch's history is the growth per
    call at which a re-plan can still keep ``low_water`` of the budget: 0.065 at Anthropic's
    prices (a write costs 12.5 reads), ``entry_share`` at OpenAI's (RFC 0025, decision 6)."""
    assert SessionPolicy().planned_entry_share == pytest.approx(0.75 / 11.5)
    assert SessionPolicy(cache_read=0.5, cache_write=1.0).planned_entry_share == 0.25
    assert SessionPolicy(entry_share=0.05).planned_entry_share == 0.05


def _tool_parts(request: SessionRequest) -> list[tuple[str, int, str]]:
    """``(ref, tokens, content)`` of each tool output appended since the epoch's re-plan."""
    return [(ref, part.content_tokens, part.content)
            for part in request.parts[request.frozen_count:request.history_end + 1]
            for ref in part.refs if ref.startswith("tool:")]


def test_a_planned_epoch_clips_an_output_large_against_the_budget_as_it_is_appended() -> None:
    """Outputs of ~1,800 tokens at 8,192: the whole epoch shows them whole (it sends what the
    whole history does); once it is outgrown, each output joins the planned history clipped to
    ``planned_entry_share`` of the budget — head, tail and the ref of its full text — and stays
    so, byte for byte, in every later request of the epoch (the history is append-only)."""
    budget = 8192
    cap = int(budget * SessionPolicy().planned_entry_share)
    requests = _requests(_tool_loop(150, 40), budget)
    first_planned = next(i for i, r in enumerate(requests) if r.replan_reason == "over_budget")
    whole = [tokens for r in requests[:first_planned] for _, tokens, _ in _tool_parts(r)]
    assert whole
    assert min(whole) > 3 * cap
    planned = requests[first_planned:]
    seen: dict[str, str] = {}
    for request in planned:
        for ref, tokens, content in _tool_parts(request):
            assert tokens <= cap + 30, (ref, tokens)
            assert f"full text: {ref}]" in content
            assert seen.setdefault(ref, content) == content
    assert len(seen) > 20


@attrs.frozen
class _EntryShareEverywhere(SessionPolicy):
    """The layout before decision 6: a planned epoch's records take ``entry_share`` too."""

    @property
    def planned_entry_share(self) -> float:
        return self.entry_share


def test_clipping_large_outputs_bills_less_and_re_plans_less() -> None:
    """The same loop at 8,192, Anthropic's prices: clipped as appended, an epoch holds twice
    times as many steps, so the loop re-plans less often and bills less than when every
    output joined the planned history at a quarter of the budget."""
    store = _tool_loop(150, 40)
    counter = default_counter()
    clipped = SessionProjector(store, counter, layout=Layout.MESSAGES)
    quarter = SessionProjector(store, counter, layout=Layout.MESSAGES,
                               session=_EntryShareEverywhere())
    [a] = replay(store, 8192, PRICES["anthropic"], counter, session_projector=clipped)
    [b] = replay(store, 8192, PRICES["anthropic"], counter, session_projector=quarter)
    assert a.replans * 2 <= b.replans
    assert a.billed < 0.8 * b.billed
    assert a.reuse > b.reuse


def _switches(store: LedgerStore, budget: int) -> list[SessionRequest]:
    projector = SessionProjector(store, layout=Layout.MESSAGES,
                                 session=SessionPolicy(whole_history=False))
    return _requests(store, budget, projector)


def test_a_switch_that_would_not_pay_keeps_the_epoch_and_states_the_new_item() -> None:
    """In a planned epoch whose history is below the low-water mark, a re-plan at a work-item
    switch would write as much as it saves: none happens, and the history states the new item
    after the switch (RFC 0025, decision 5), not the tail of every call."""
    store = _two_work_items(6, 16)
    requests = _switches(store, 32768)
    assert not any(r.replan_reason == "work_item_changed" for r in requests)
    last = requests[-1]
    assert not last.has_tail
    newest = last.text.rsplit(f"{TAIL_TITLE} as of ", 1)[1].splitlines()
    assert newest[1].startswith("work item fix-docs (")  # the last four steps' item
    assert "port-importer" not in "\n".join(newest[:2])


def test_a_switch_re_plans_when_the_saving_exceeds_the_write() -> None:
    """A long history of short turns for one item, near the budget, then a switch: the calls
    until the next forced re-plan would read far more than the mark, so the re-plan pays."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    for i in range(150):
        session.operator_message(f"Note {i} on the importer: keep the old flags.", work_item="a")
    session.operator_message("Now the docs index, please.", work_item="b")
    session.assistant_message("On it.")
    requests = _switches(session.store, 4096)
    # The call made as the switch's turn asks for a reply re-plans, and it is the only one since
    # the first request (the short notes never outgrow the budget).
    assert [r.replan_reason for r in requests[1:] if r.replanned] == ["work_item_changed"]
    assert requests[-2].replan_reason == "work_item_changed"


def test_a_turn_continuing_a_folded_tick_keeps_the_whole_epoch() -> None:
    """A whole epoch folds a run of ticks into one line; a turn continuing one of them does not
    re-plan (the history holds every other turn): the tail states what it continues."""
    b = LedgerBuilder()
    b.operator("Watch the nightly build and report when it is green.")
    b.assistant("Watching it.")
    ticks = b.ticks(4)
    b.turn("timer", anchor=ticks[-1], label="the nightly build finished")
    b.say("The nightly build is green.")
    store = memory_store(b.records)
    projector = SessionProjector(store, layout=Layout.MESSAGES)
    requests = _requests(store, 32768, projector)
    assert [r.replanned for r in requests[1:]] == [False] * (len(requests) - 1)
    last = projector.request(budget_tokens=32768)
    assert last.has_tail
    assert f"continuing turn:{ticks[-1]}" in last.parts[-1].text
    # A planned epoch does the same where a re-plan would not pay for itself (this history
    # is a sliver of the budget): the tail states the anchor (RFC 0025, decision 4).
    planned = SessionProjector(store, layout=Layout.MESSAGES,
                               session=SessionPolicy(whole_history=False))
    requests = _requests(store, 32768, planned)
    assert [r.replanned for r in requests[1:]] == [False] * (len(requests) - 1)
    assert f"continuing turn:{ticks[-1]}" in requests[-1].parts[-1].text


def _large_guidance_loop(steps: int, seed: int = 3) -> LedgerStore:
    """An agent loop under a long runtime guidance (a mini-swe-agent system prompt takes 1-2k
    tokens), each step printing 10-60 lines."""
    rng = random.Random(seed)
    session = holon_ctx.open_session(":memory:", compaction=None)
    guidance = "\n".join(f"- Rule {k}: run one command per reply; never chain {k} commands."
                         for k in range(90))
    session.set_environment(guidance=guidance, workspace="/testbed")
    session.operator_message("Find why the parser fails on nested brackets, then fix it.")
    for i in range(steps):
        call = holon_ctx.ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"pytest -x -k case{i}"}))
        session.assistant_message(f"Step {i}: the next case.", tool_calls=[call])
        session.tool_result(call.call_id, "".join(
            f"case {i}.{k}: token {k * 7919 % 10007} ok\n" for k in range(rng.randint(10, 60))))
    return session.store


@pytest.mark.parametrize(("budget", "whole"), [(4096, False), (8192, True)])
def test_every_epoch_sends_the_same_environment(budget: int, whole: bool) -> None:
    """The stable prefix does not move at a re-plan: every epoch's system message, the whole
    epoch's included, is the same bytes, whatever budget each re-plan gave its planner — the
    guidance whole where it takes at most a quarter of the budget (8,192: ~1,200 tokens), the
    environment's compact lines where it takes more (4,096). Left to the planner, at 4,096 the
    guidance was whole in one epoch, clipped at one point or another in the next ones or left
    out, and every re-plan rewrote the request from its first token; with the whole epoch
    sending it whole (as the baselines do), the first re-plan still did (RFC 0025, decision 8)."""
    store = _large_guidance_loop(90)
    requests = [r for r in _requests(store, budget) if r.replanned]
    systems = [str(r.openai_messages()[0]["content"]) for r in requests]
    assert len(systems) >= 5
    assert all(m == systems[0] for m in systems), [len(m) for m in systems]
    assert "clipped" not in systems[0]
    assert ("Rule 89" in systems[0]) is whole


def test_the_first_re_plan_keeps_the_system_message_cached() -> None:
    """Where the guidance takes more than a quarter of the budget, the whole epoch sends the
    environment's compact lines too, so the request of the first re-plan shares the system
    message with the request before it (it shared nothing when the whole epoch sent the guidance
    whole and the planned epoch its compact lines)."""
    store = _large_guidance_loop(90)
    counter = default_counter()
    requests = _requests(store, 4096)
    first = next(i for i, r in enumerate(requests) if i and r.replanned)
    assert not requests[first - 1].replanned
    before, after = (request_tokens(requests[k].openai_messages(), counter)
                     for k in (first - 1, first))
    system = requests[first].openai_messages()[:1]
    assert requests[first - 1].openai_messages()[:1] == system
    assert shared_prefix_tokens(before, after) >= len(request_tokens(system, counter))


def test_a_planned_tail_names_no_anchor_the_history_shows() -> None:
    """In a planned epoch of an agent loop, the task's turn is pinned in the history at every
    re-plan: the tail restates neither its words (the anchor line) nor that the turn is the
    loop's next step on it (the relation line) — the history's last records say both. With no
    work item either, nothing is left to state: no tail part, as in a whole epoch."""
    store = _tool_loop(60, 60)
    requests = _requests(store, 4096)
    first_planned = next(i for i, r in enumerate(requests) if i and r.replanned)
    planned = requests[first_planned:]
    assert len(planned) > 10
    for request in planned:
        assert "Find why the parser fails on nested brackets" in request.text
        assert "## Current state" not in request.text
        assert not request.has_tail
        assert request.openai_messages()[-1]["role"] == "tool"


def test_a_return_to_an_earlier_request_re_plans_only_when_it_pays() -> None:
    """A turn continuing a request the history no longer shows re-plans (to show it whole) only
    when the re-plan pays for itself, as a work-item switch does (RFC 0025, decision 4);
    otherwise the epoch goes on and the tail states the anchor's words. The demo's operator
    returns to earlier requests often: at 4,096 both happen."""
    store = MemoryStore(default_counter())
    resource = importlib.resources.files("holon_ctx").joinpath("data/demo.jsonl")
    with importlib.resources.as_file(resource) as path:
        import_jsonl(path, store)
    projector = SessionProjector(store, layout=Layout.MESSAGES)
    outcomes = set()
    for _, limit in call_points(store):
        request = projector.request(budget_tokens=4096, limit_pos=limit)
        state = projector._states[4096]
        anchor = state.anchor
        if request.replanned and request.replan_reason == "anchor_not_in_history":
            outcomes.add("re-planned")
        elif (not state.whole and anchor is not None and anchor.turn.id not in state.shown
              and anchor.turn.id != cur_id(state)):
            assert f"continuing {anchor.ref}" in request.parts[-1].text
            outcomes.add("kept")
    assert outcomes == {"re-planned", "kept"}
