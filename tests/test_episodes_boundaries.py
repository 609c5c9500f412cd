"""Boundary rules, one table row per rule, and the segmenter's online behaviour."""

from __future__ import annotations

import pytest
from test_episodes_kit import Conv

from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import BriefKind, Outcome, WorkItemStatus
from holon_ctx.memory.boundaries import CUT_AFTER, CUT_BEFORE, BoundaryPolicy, Segmenter
from holon_ctx.projection.base.model import TurnUnit
from holon_ctx.projection.planning.view import _single


def _units(c: Conv) -> list[TurnUnit]:
    store = MemoryStore()
    store.append(c.records)
    out = []
    for seq in range(c.seq + 1):
        turn = store.turn(f"t{seq}")
        assert turn is not None
        out.append(_single(store, turn, store.end_pos()))
    return out


def _ranges(c: Conv, **policy: object) -> list[tuple[int, int, str]]:
    seg = Segmenter(BoundaryPolicy(**policy))  # type: ignore[arg-type]
    return [(r.first_seq, r.last_seq, r.closed_by) for r in seg.extend(_units(c))]


def _work_item_switch(c: Conv) -> None:
    c.turn("operator_input", work_item="wi1")
    c.say("Fix the flaky billing test.")
    c.turn("task_result", work_item="wi1")
    c.turn("operator_input", work_item="wi2")
    c.say("Also update the website footer.")


def _task_rejoin(c: Conv) -> None:
    asked = c.operator("Run the full billing test suite in the background.")
    c.operator("While that runs: billing replica monitoring dashboards please.")
    c.operator("Add the billing replica lag panel to the monitoring dashboards.")
    c.task("suite", "412 passed", spawned_by="t0")
    del asked


def _wait_start_and_end(c: Conv) -> None:
    c.operator("Deploy billing after CI passes.")
    c.open_wait("ci-1", "CI run 1")
    c.tick()
    c.event("ci", "CI run 1 passed", wait="ci-1")
    c.close_wait("ci-1")


def _completion(c: Conv) -> None:
    c.turn("operator_input", work_item="wi1")
    c.say("Close out the billing migration.")
    c.work("wi1", status=WorkItemStatus.DONE)
    c.turn("operator_input", work_item="wi1")
    c.say("Thanks, and the billing migration follow-ups?")


def _completion_brief(c: Conv) -> None:
    c.operator("Summarise the billing migration for the changelog.")
    c.brief("Billing migration complete.", BriefKind.COMPLETION_REPORT)
    c.operator("And the billing migration changelog entry wording?")


def _outcome_wait(c: Conv) -> None:
    c.turn("operator_input", outcome=Outcome.WAIT.value)
    c.say("Ping me when billing replication catches up.")
    c.tick()


def _new_intent(c: Conv) -> None:
    c.operator("Choose the billing database: PostgreSQL with logical replication.")
    c.assistant("PostgreSQL 16 it is, with logical replication.")
    c.operator("The marketing website hero banner needs a teal gradient and rounded buttons.")


def _short_reply_continues(c: Conv) -> None:
    c.operator("Choose the billing database: PostgreSQL with logical replication.")
    c.assistant("PostgreSQL or DynamoDB?")
    c.operator("可以")
    c.operator("the second one")


def _refinement_continues(c: Conv) -> None:
    c.operator("Choose the billing database: PostgreSQL with logical replication.")
    c.operator("Website hero banner teal gradient rounded buttons now.", anchor="t0")


def _max_range(c: Conv) -> None:
    for i in range(5):
        c.operator(f"billing replication step {i}: keep the billing replica in sync")


@pytest.mark.parametrize(("build", "expected"), [
    (_work_item_switch, [(0, 1, "work_item_switch")]),
    (_task_rejoin, [(0, 0, "new_intent"), (1, 2, "task_rejoin")]),
    (_wait_start_and_end, [(0, 0, "wait_start"), (1, 1, "wait_end")]),
    (_completion, [(0, 0, "completion")]),
    (_completion_brief, [(0, 0, "completion")]),
    (_outcome_wait, [(0, 0, "wait_start")]),
    (_new_intent, [(0, 0, "new_intent")]),
    (_short_reply_continues, []),
    (_refinement_continues, []),
    (_max_range, [(0, 1, "max_range"), (2, 3, "max_range")]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_boundary_rules(build, expected) -> None:  # type: ignore[no-untyped-def]
    """Each rule closes exactly the ranges its row expects (max range 2 for the length rule)."""
    c = Conv()
    build(c)
    assert _ranges(c, max_range_turns=2 if build is _max_range else 16) == expected


def test_rules_are_tables_in_a_fixed_order() -> None:
    """The rule tables name every boundary the docs and RFC list, in evaluation order."""
    assert [code for code, _ in CUT_BEFORE] == ["work_item_switch", "task_rejoin", "wait_end",
                                                "new_intent"]
    assert [code for code, _ in CUT_AFTER] == ["wait_start", "completion", "max_range"]


def test_segmenting_from_a_range_start_equals_segmenting_from_the_beginning() -> None:
    """Ranges found from any closed range's start are the ranges found from turn 0 (online)."""
    c = Conv()
    _task_rejoin(c)
    _wait_start_and_end(c)
    _max_range(c)
    _new_intent(c)
    units = _units(c)
    whole = Segmenter(BoundaryPolicy(max_range_turns=3)).extend(units)
    for cut in whole:
        start = cut.units[0].turn.seq
        again = Segmenter(BoundaryPolicy(max_range_turns=3)).extend(units[start:])
        assert [(r.first_seq, r.last_seq, r.closed_by) for r in again] == [
            (r.first_seq, r.last_seq, r.closed_by) for r in whole if r.first_seq >= start]


def test_a_plain_conversation_is_cut_by_topic_without_any_work_item() -> None:
    """A conversation without work items still gets episodes, cut where the topic changes."""
    c = Conv()
    c.operator("We need a database for the billing service: PostgreSQL or DynamoDB?")
    c.operator("Billing should use PostgreSQL with logical replication.")
    c.operator("Unrelated: the marketing website hero banner needs a teal gradient.")
    c.operator("Make the website hero banner gradient teal to cyan.")
    c.operator("Next topic: rotate the staging TLS certificates before Friday.")
    assert _ranges(c) == [(0, 1, "new_intent"), (2, 3, "new_intent")]
