"""Retention facts and classes (holon_ctx/ledger/facts.py, holon_ctx/projection/planning/retention.py).

Table tests for the facts each record gives its turn and the rules that need a neighbour, and the
property the high-turn index rests on: a turn is marked high at append time exactly when the
projection classifies it high.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from strategies import ledgers

from holon_ctx.ledger.facts import HIGH_FACTS, RULES, Priority, marks_high, record_facts
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import (
    Brief,
    BriefKind,
    ExternalEvent,
    Message,
    MessageRole,
    Outcome,
    Record,
    SideEffect,
    TaskResult,
    TaskStatus,
    Tool,
    ToolStatus,
    Trigger,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
    WorkItemStatus,
)
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.base.model import TurnUnit
from holon_ctx.projection.planning.retention import (
    classify,
    in_fold_run,
    judged_beside,
    lowered_by_repeat,
    stored_turn_class,
    turn_facts,
)


def unit(trigger: str, *records: Record, seq: int = 1, outcome: Outcome | None = None) -> TurnUnit:
    turn = Turn(id=f"t{seq}", seq=seq, trigger=trigger, outcome=outcome)
    return TurnUnit(stored=StoredRecord(pos=seq * 10, ref=f"turn:t{seq}", record=turn, tokens=0,
                                        turn_seq=seq),
                    records=tuple(StoredRecord(pos=seq * 10 + i + 1,
                                               ref=f"{type(r).__struct_config__.tag}:{r.id}{seq}",
                                               record=r, tokens=0, turn_seq=seq)
                                  for i, r in enumerate(records)))


def tool(**kw: object) -> Tool:
    fields: dict[str, object] = {"id": "x", "tool_name": "sh", "status": ToolStatus.OK,
                                 "exit_code": 0, **kw}
    return Tool(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("rec", "facts"), [
    (Message(id="m", role=MessageRole.OPERATOR, text="go"), ["operator_input"]),
    (Message(id="m", role=MessageRole.ASSISTANT, text="ok"), ["assistant_message"]),
    (Message(id="m", role=MessageRole.SYSTEM, text="restarted"), ["runtime_note"]),
    (Brief(id="b", kind=BriefKind.RESULT, text="done"), ["result_brief"]),
    (Brief(id="b", kind=BriefKind.COMPLETION_REPORT, text="done"), ["result_brief"]),
    (Brief(id="b", kind=BriefKind.PROGRESS, text="50%"), ["progress_brief"]),
    (Brief(id="b", kind=BriefKind.ACK, text="ok"), []),
    (WorkItem(id="w", work_item_id="wi", status=WorkItemStatus.ACTIVE), ["work_item_transition"]),
    (WorkItem(id="w", work_item_id="wi", status=WorkItemStatus.DONE),
     ["work_item_transition", "completion"]),
    (WorkItem(id="w", work_item_id="wi", status=WorkItemStatus.ABANDONED),
     ["work_item_transition", "completion"]),
    (WorkItem(id="w", work_item_id="wi", completion_report="shipped"),
     ["work_item_transition", "completion"]),
    (TaskResult(id="r", task_id="k", status=TaskStatus.SUCCESS), ["task_result"]),
    (TaskResult(id="r", task_id="k", status=TaskStatus.SUCCESS, spawned_by_turn_id="t0"),
     ["task_result", "task_success_changes_next_action"]),
    (TaskResult(id="r", task_id="k", status=TaskStatus.SUCCESS, wait_id="w"),
     ["task_result", "task_success_changes_next_action"]),
    (TaskResult(id="r", task_id="k", status=TaskStatus.PARTIAL, spawned_by_turn_id="t0"),
     ["task_result", "task_failure"]),
    (TaskResult(id="r", task_id="k", status=TaskStatus.SUCCESS, verification=True),
     ["task_result", "verification_outcome"]),
    (ExternalEvent(id="e", source="ci", text="x"), ["external_event"]),
    (ExternalEvent(id="e", source="ci", text="x", wait_id="w"), ["external_state_change"]),
    (tool(), ["tool_summary"]),
    (tool(status=ToolStatus.ERROR, exit_code=1), ["tool_summary", "tool_failure"]),
    (tool(exit_code=2), ["tool_summary", "tool_failure"]),
    (tool(status=ToolStatus.TIMEOUT, exit_code=None), ["tool_summary", "tool_failure"]),
    (tool(side_effect=SideEffect.PARTIAL), ["tool_summary", "side_effect_unresolved"]),
    (tool(side_effect=SideEffect.UNKNOWN), ["tool_summary", "side_effect_unresolved"]),
    (tool(side_effect=SideEffect.COMPLETED), ["tool_summary"]),
])
def test_record_facts(rec: Record, facts: list[str]) -> None:
    """Each record kind's facts, classifying up: a non-zero exit is a failure whatever the
    status, a partial or unknown side effect is unresolved."""
    assert record_facts(rec) == facts
    assert marks_high(rec) == any(RULES[f] is Priority.HIGH for f in facts)


def test_high_facts_are_the_high_rows_of_the_table() -> None:
    assert {f for f, p in RULES.items() if p is Priority.HIGH} == HIGH_FACTS
    assert "side_effect_unresolved" in HIGH_FACTS
    assert "tool_summary" not in HIGH_FACTS


@pytest.mark.parametrize(("trigger", "high"), [
    ("operator_input", True), ("operator_override", True), ("approval_decision", True),
    ("task_result", False), ("scheduler_tick", False), ("x-hook", False)])
def test_an_operator_trigger_marks_its_turn_high(trigger: str, high: bool) -> None:
    assert marks_high(Turn(id="t", seq=1, trigger=trigger)) is high


def test_a_poll_is_low_only_while_its_result_has_not_changed() -> None:
    """A repeated call with the same output as the turn before is a repeated poll (low); with a
    changed output it is news (normal); a call acting on the world is never a poll."""
    before = unit("timer", tool(args_preview="status", output="pending"), seq=1)
    same = unit("timer", tool(args_preview="status", output="pending"), seq=2)
    changed = unit("timer", tool(args_preview="status", output="done"), seq=2)
    acting = unit("timer", tool(args_preview="status", output="pending",
                                side_effect=SideEffect.COMPLETED), seq=2)
    assert turn_facts(same, before) == ["repeated_pending_poll"]
    assert classify(turn_facts(changed, before)) is Priority.NORMAL
    assert classify(turn_facts(acting, before)) is Priority.NORMAL
    assert turn_facts(same, None) == ["tool_summary"]


def test_low_and_diagnostic_classes_only_when_nothing_else_is_known() -> None:
    """A retry with only its runtime note is diagnostic; with an assistant message it is
    normal; with a failed tool run high. A no-op tick is low unless it holds a failure."""
    note = Message(id="n", role=MessageRole.SYSTEM, text="attempt 2/5")
    assert turn_facts(unit("provider_retry", note)) == ["provider_retry"]
    assert turn_facts(unit("restart")) == ["transport_recovery"]
    assert classify(turn_facts(unit("provider_retry", note, Message(
        id="a", role=MessageRole.ASSISTANT, text="partial answer")))) is Priority.NORMAL
    assert classify(turn_facts(unit("provider_retry", tool(exit_code=1)))) is Priority.HIGH
    assert turn_facts(unit("scheduler_tick")) == ["noop_tick"]
    assert turn_facts(unit("timer", tool(), outcome=Outcome.NOOP)) == ["noop_tick"]
    assert classify(turn_facts(unit("timer", tool(exit_code=1), outcome=Outcome.NOOP))) is \
        Priority.HIGH
    assert turn_facts(unit("x-hook")) == ["unclassified"]
    assert turn_facts(unit("operator_input", Brief(id="b", kind=BriefKind.ACK, text="k"))) == [
        "operator_input"]
    assert turn_facts(unit("x-hook", Brief(id="b", kind=BriefKind.ACK, text="k"))) == ["ack_only"]


def test_a_duplicate_wake_is_low_unless_it_resolves_a_wait() -> None:
    event = ExternalEvent(id="e", source="github", text="ping")
    first = unit("external_event", event, seq=1)
    again = unit("external_event", event, seq=2)
    resolving = unit("external_event", ExternalEvent(id="e", source="github", text="ping",
                                                     wait_id="w"), seq=2)
    assert turn_facts(again, first) == ["duplicate_wake"]
    assert in_fold_run(again, first)
    assert not in_fold_run(resolving, first)
    assert turn_facts(again, unit("timer", event, seq=1)) == ["external_event"]


def test_a_redelivered_wake_naming_a_wait_is_a_duplicate_unless_the_wait_moved_between() -> None:
    """A copy of the wake before it, the same wait named, changes nothing (only a wait
    transition changes a wait): low, also past ticks. When the turn before holds a transition
    of that wait, or the copy names another wait or none, it is not a repeat."""
    event = ExternalEvent(id="e", source="github", text="CI passed", wait_id="ci-1")
    first = unit("external_event", event, seq=1)
    again = unit("external_event", event, seq=2)
    assert turn_facts(first) == ["external_state_change"]
    assert turn_facts(again, first) == ["duplicate_wake"]
    assert in_fold_run(again, first)
    tick = unit("scheduler_tick", seq=2)
    beside = judged_beside(tick, turn_facts(tick, first), first)
    assert turn_facts(unit("external_event", event, seq=3), beside) == ["duplicate_wake"]
    reopened = unit("external_event", event, Wait(id="wt", wait_id="ci-1", status=WaitStatus.OPEN),
                    seq=1)
    other_wait = unit("external_event", ExternalEvent(id="e", source="github", text="CI passed",
                                                      wait_id="ci-2"), seq=2)
    no_wait = unit("external_event", ExternalEvent(id="e", source="github", text="CI passed"),
                   seq=2)
    assert turn_facts(again, reopened) == ["external_state_change"]
    assert turn_facts(other_wait, first) == ["external_state_change"]
    assert turn_facts(no_wait, first) == ["external_event"]
    assert lowered_by_repeat(again)
    assert not lowered_by_repeat(no_wait)
    assert not lowered_by_repeat(reopened)


@settings(max_examples=60, deadline=None)
@given(ledgers(1, 12))
def test_the_high_index_marks_exactly_the_turns_classified_high(records: list[Record]) -> None:
    """For every turn of a generated ledger: in the store's high-turn index ⇔ classified high by
    its facts on its own, so fetching high turns by lookup misses none and adds none. (A
    neighbour only ever lowers a turn: a lookup judges the one high turn it can lower, a
    redelivered wake naming a wait, beside the turns before it.)"""
    store = MemoryStore()
    store.append(records)
    end = store.end_pos()
    indexed = {r.ref for r in store.high_turns_before(1 << 62, 1 << 20, end)}
    turns = store.turns_before(1 << 62, 1 << 20, end)
    for turn in turns:
        seq = turn.turn_seq or 0
        owned = tuple(store.records_of_turns(seq, seq, end))
        facts = turn_facts(TurnUnit(stored=turn, records=owned))
        assert (turn.ref in indexed) == (classify(facts) is Priority.HIGH), (turn.ref, facts)


def test_a_noop_tick_with_only_progress_is_low_and_a_wake_repeats_only_exactly() -> None:
    """A tick whose outcome is noop stays low with nothing but a progress note; a wake is a
    duplicate only when its events equal the previous turn's, not when they are a prefix or
    merely compare greater."""
    progress = Brief(id="p", kind=BriefKind.PROGRESS, text="3/10")
    assert turn_facts(unit("timer", progress, outcome=Outcome.NOOP)) == ["noop_tick"]
    assert turn_facts(unit("timer", progress)) == ["progress_brief"]
    a = ExternalEvent(id="a", source="bot", text="3/10")
    b = ExternalEvent(id="b", source="bot", text="4/10")
    assert turn_facts(unit("external_event", a, b, seq=2), unit("external_event", a, seq=1)) == [
        "external_event"]
    assert turn_facts(unit("external_event", b, seq=2), unit("external_event", a, seq=1)) == [
        "external_event"]
    assert turn_facts(unit("external_event", a, seq=2), unit("external_event", b, seq=1)) == [
        "external_event"]


def test_retention_reads_each_page_turn_beside_its_predecessor() -> None:
    """Facts of a page's turns are judged beside the turn before them (the first beside the
    page's `before`), and pinned turns are pinned whatever their facts."""
    from holon_ctx.projection.base.model import Priority as P
    from holon_ctx.projection.planning.retention import FactsCache, Retention
    from holon_ctx.projection.planning.view import Page

    event = ExternalEvent(id="e", source="bot", text="ping")
    before = unit("external_event", event, seq=1)
    first, second = unit("external_event", event, seq=2), unit("external_event", event, seq=3)
    retention = Retention({"t3": ("operator_pin",)}, FactsCache())
    retention.read(Page(index=0, units=(first, second), before=before, last=True,
                        reached_start=False))
    assert retention.facts(first) == ["duplicate_wake"]
    assert retention.priority(first) == (P.LOW, ("duplicate_wake",))
    assert retention.priority(second) == (P.PINNED, ("operator_pin",))
    alone = unit("external_event", event, seq=9)
    assert retention.facts(alone) == ["external_event"]
    retention.read_alone(alone)
    assert retention.priority(alone) == (P.NORMAL, ("external_event",))


def test_a_poll_compares_outputs_by_value_not_by_identity() -> None:
    """Outputs decoded from the ledger are distinct string objects even when equal: the same
    result read back twice is still a repeated poll."""
    first, again = ("".join(["pend", "ing"]) for _ in range(2))
    assert first == again
    assert first is not again
    before = unit("timer", tool(args_preview="status", output=first), seq=1)
    same = unit("timer", tool(args_preview="status", output=again), seq=2)
    assert turn_facts(same, before) == ["repeated_pending_poll"]


@pytest.mark.parametrize("trigger", sorted(t.value for t in Trigger
                                           if t is not Trigger.EXTERNAL_EVENT))
def test_a_wake_repeats_only_a_wake(trigger: str) -> None:
    """A wake is a duplicate only of a wake: the same event carried by a turn of any other
    trigger (whatever its name's order) does not make the next wake low."""
    event = ExternalEvent(id="e", source="bot", text="ping")
    assert turn_facts(unit("external_event", event, seq=2), unit(trigger, event, seq=1)) == [
        "external_event"]


def test_asking_before_a_page_is_read_does_not_freeze_the_answer() -> None:
    """A turn's class asked for before its page is read (judged without a neighbour) is not
    remembered: once the page is read, the turn is judged beside its predecessor."""
    from holon_ctx.projection.base.model import Priority as P
    from holon_ctx.projection.planning.retention import FactsCache, Retention
    from holon_ctx.projection.planning.view import Page

    event = ExternalEvent(id="e", source="bot", text="ping")
    before, again = unit("external_event", event, seq=1), unit("external_event", event, seq=2)
    retention = Retention({}, FactsCache())
    assert retention.priority(again) == (P.NORMAL, ("external_event",))
    retention.read(Page(index=0, units=(again,), before=before, last=True, reached_start=False))
    assert retention.priority(again) == (P.LOW, ("duplicate_wake",))


def test_the_caches_remember_and_stay_bounded() -> None:
    """A turn's facts and a read turn's class are computed once and then handed back as they
    are; the facts cache never holds more than ``_FACTS_CACHE`` turns (it starts over when
    full), however many a long-lived projector meets."""
    from holon_ctx.projection.planning.retention import _FACTS_CACHE, FactsCache, Retention
    from holon_ctx.projection.planning.view import Page

    cache = FactsCache()
    first, second = unit("timer", seq=1), unit("timer", seq=2)
    remembered = cache.facts(second, first)
    cache.facts(first, None)
    assert cache.facts(second, first) is remembered
    retention = Retention({}, cache)
    retention.read(Page(index=0, units=(second,), before=first, last=True, reached_start=False))
    judged = retention.priority(second)
    # The class read with its page (a tick after a tick), handed back as the same object.
    assert judged == (Priority.LOW, ("noop_tick",))
    assert retention.priority(second) is judged
    for seq in range(3, _FACTS_CACHE + 10):
        cache.facts(unit("timer", seq=seq), None)
        assert len(cache._facts) <= _FACTS_CACHE


def test_a_wake_is_judged_past_the_ticks_and_retries_before_it() -> None:
    """A wake repeating the one before a run of ticks and retries is still a duplicate (the run
    folds into one line); a turn that did something, or a different wake, ends that: the next
    wake is judged beside it."""
    from holon_ctx.projection.planning.retention import FactsCache, Retention, judged_beside
    from holon_ctx.projection.planning.view import Page

    ping = ExternalEvent(id="e", source="bot", text="ping")
    other = ExternalEvent(id="o", source="bot", text="pong")

    def facts_of_last(*middle: TurnUnit) -> list[str]:
        first = unit("external_event", ping, seq=1)
        last = unit("external_event", ping, seq=len(middle) + 2)
        retention = Retention({}, FactsCache())
        retention.read(Page(index=0, units=(first, *middle, last), before=None, last=True,
                            reached_start=True))
        return retention.facts(last)

    tick, retry = unit("timer", seq=2), unit("provider_retry", seq=3)
    assert facts_of_last(tick, retry) == ["duplicate_wake"]
    assert facts_of_last(unit("operator_input", Message(id="m", role=MessageRole.OPERATOR,
                                                        text="go"), seq=2)) == ["external_event"]
    assert facts_of_last(unit("external_event", other, seq=2), tick) == ["external_event"]
    # Directly: a turn of any fact that says something happened is the next one's neighbour.
    before = unit("external_event", ping, seq=1)
    assert judged_beside(tick, ["noop_tick"], before) is before
    assert judged_beside(retry, ["provider_retry", "noop_tick"], before) is before
    assert judged_beside(tick, ["noop_tick", "progress_brief"], before) is tick
    assert judged_beside(tick, [], before) is tick


def test_a_turn_read_as_it_arrives_may_join_a_fold_run_only_if_it_may_prove_low() -> None:
    """A session reads a turn before its records arrive: a turn already low may join a fold run,
    and so may a wake with no event yet right after a wake (its event may repeat that one's);
    a wake after anything else, a wake with a new event, or another empty turn may not."""
    from holon_ctx.projection.planning.retention import may_join_fold_run

    wake = unit("external_event", ExternalEvent(id="e", source="bot", text="ping"), seq=1)
    empty_wake = unit("external_event", seq=2)
    assert may_join_fold_run(unit("timer", seq=2), None)
    assert may_join_fold_run(empty_wake, wake)
    assert not may_join_fold_run(empty_wake, None)
    assert not may_join_fold_run(empty_wake, unit("timer", seq=1))
    assert not may_join_fold_run(
        unit("external_event", ExternalEvent(id="n", source="bot", text="new"), seq=2), wake)
    assert not may_join_fold_run(unit("operator_input", seq=2), wake)
    # Whatever the triggers' names' order: "approval_decision" sorts before "external_event".
    assert not may_join_fold_run(empty_wake, unit("approval_decision", seq=1))
    assert not may_join_fold_run(unit("approval_decision", seq=2), wake)


def test_a_repeated_poll_with_a_progress_note_is_still_a_poll() -> None:
    """A poll that repeats the turn before and also reports progress ("3/10") is a repeated
    poll: its facts are all a poll may have, tool summary and progress together."""
    before = unit("timer", tool(args_preview="status", output="pending"), seq=1)
    again = unit("timer", tool(args_preview="status", output="pending"),
                 Brief(id="p", kind=BriefKind.PROGRESS, text="3/10"), seq=2)
    assert turn_facts(again, before) == ["repeated_pending_poll"]


@pytest.mark.parametrize("trigger", sorted(t.value for t in Trigger
                                           if t is not Trigger.EXTERNAL_EVENT))
def test_only_a_wake_is_a_duplicate_wake(trigger: str) -> None:
    """A turn of any other trigger carrying the same event as the wake before it is judged as it
    would be alone: only a wake repeats a wake (whatever the trigger's name's order)."""
    event = ExternalEvent(id="e", source="bot", text="ping")
    carrier = unit(trigger, event, seq=2)
    assert turn_facts(carrier, unit("external_event", event, seq=1)) == turn_facts(carrier)


@pytest.mark.parametrize(("was", "now"), [(ToolStatus.OK, ToolStatus.CANCELLED),
                                          (ToolStatus.CANCELLED, ToolStatus.OK)])
def test_a_poll_whose_status_changed_is_news_with_the_same_output(was: ToolStatus,
                                                                  now: ToolStatus) -> None:
    """The same output with another status (a run cancelled this time, or done after being
    cancelled) is a changed result, whichever way the status names sort."""
    before = unit("timer", tool(args_preview="status", output="pending", status=was), seq=1)
    again = unit("timer", tool(args_preview="status", output="pending", status=now), seq=2)
    assert turn_facts(again, before) == ["tool_summary"]


def test_low_and_diagnostic_turns_both_join_a_fold_run() -> None:
    """A fold run takes ticks (low) and retries with only their runtime note (diagnostic) alike;
    a turn of normal or high class never joins one."""
    note = Message(id="n", role=MessageRole.SYSTEM, text="attempt 2/5")
    assert classify(turn_facts(unit("provider_retry", note))) is Priority.DIAGNOSTIC
    assert in_fold_run(unit("provider_retry", note), None)
    assert classify(turn_facts(unit("scheduler_tick"))) is Priority.LOW
    assert in_fold_run(unit("scheduler_tick"), None)
    assert not in_fold_run(unit("x-hook"), None)
    assert not in_fold_run(unit("provider_retry", tool(exit_code=1)), None)


@pytest.mark.parametrize(("was", "now"), [("pending", "done"), ("done", "pending")])
def test_a_poll_whose_output_changed_is_news_whichever_way_it_sorts(was: str, now: str) -> None:
    """Outputs are compared for equality: "done" after "pending" and back are both news."""
    before = unit("timer", tool(args_preview="status", output=was), seq=1)
    assert turn_facts(unit("timer", tool(args_preview="status", output=now), seq=2), before) == [
        "tool_summary"]


def test_a_wake_repeating_the_event_with_more_content_is_not_a_duplicate() -> None:
    """A wake with the same event as the wake before it but also a message or a tool run is
    judged by what it holds: only a wake that holds nothing but the repeated event is low."""
    event = ExternalEvent(id="e", source="bot", text="ping")
    first = unit("external_event", event, seq=1)
    said = unit("external_event", event, Message(id="a", role=MessageRole.ASSISTANT, text="ok"),
                seq=2)
    ran = unit("external_event", event, tool(), seq=2)
    assert turn_facts(said, first) == ["external_event", "assistant_message"]
    assert turn_facts(ran, first) == ["external_event", "tool_summary"]


def test_a_repeated_failing_poll_stays_a_failure() -> None:
    """A check that fails again with the same output is not a quiet repeated poll: its failure
    keeps it high."""
    failing = {"args_preview": "status", "output": "connection refused",
               "status": ToolStatus.ERROR, "exit_code": 1}
    before = unit("timer", tool(**failing), seq=1)
    facts = turn_facts(unit("timer", tool(**failing), seq=2), before)
    assert "repeated_pending_poll" not in facts
    assert classify(facts) is Priority.HIGH


def test_a_noop_tick_with_a_poll_and_a_progress_note_is_low() -> None:
    """The runtime's noop verdict covers a tick that polled a status and noted progress both."""
    tick = unit("timer", tool(args_preview="status"), Brief(id="p", kind=BriefKind.PROGRESS,
                                                            text="3/10"), outcome=Outcome.NOOP)
    assert turn_facts(tick) == ["noop_tick"]


def test_a_wake_repeats_the_last_event_of_each_of_its_sources() -> None:
    """Two sources interleaved: each copy repeats its own source's last event (issue 12, item 5);
    a source whose last event differs, or a wake adding a new source, is news."""
    from holon_ctx.projection.planning.retention import FactsCache, Retention
    from holon_ctx.projection.planning.view import Page

    a, b = ExternalEvent(id="a", source="deploy", text="3/10"), ExternalEvent(
        id="b", source="canary", text="0.2%")

    def facts(*events: ExternalEvent) -> list[list[str]]:
        units = [unit("external_event", a, seq=1), unit("external_event", b, seq=2),
                 unit("timer", seq=3)]
        units += [unit("external_event", e, seq=4 + i) for i, e in enumerate(events)]
        retention = Retention({}, FactsCache())
        retention.read(Page(index=0, units=tuple(units), before=None, last=True,
                            reached_start=True))
        return [retention.facts(u) for u in units[3:]]

    assert facts(a, b, a) == [["duplicate_wake"]] * 3
    assert facts(ExternalEvent(id="a2", source="deploy", text="4/10"), a) == [
        ["external_event"], ["external_event"]]  # deploy moved on, then back: both news
    assert facts(ExternalEvent(id="c", source="ci", text="green"), b) == [
        ["external_event"], ["duplicate_wake"]]


def test_the_facts_cache_tells_a_wake_with_other_sources_from_the_wake_alone() -> None:
    """The same neighbour turn with the same number of records, once holding another source's
    event first (judged_beside's merged unit), once its own events only: two entries."""
    from holon_ctx.projection.planning.retention import FactsCache

    mine = ExternalEvent(id="m", source="deploy", text="3/10")
    theirs = ExternalEvent(id="t", source="canary", text="0.2%")
    alone = unit("external_event", mine, ExternalEvent(id="n", source="deploy", text="4/10"),
                 seq=2)
    merged = TurnUnit(stored=alone.stored,
                      records=(unit("external_event", theirs, seq=1).records[0],
                               alone.records[0]))
    wake = unit("external_event", theirs, seq=3)
    cache = FactsCache()
    assert cache.facts(wake, alone) == ["external_event"]
    assert cache.facts(wake, merged) == ["duplicate_wake"]


def test_a_run_remembers_the_last_events_of_eight_sources() -> None:
    """A run of wakes remembers the last event of at most eight sources (its own among them,
    _WAKE_SOURCES): with nine, the oldest is forgotten and its repeat is news again; with
    eight, its repeat is still a duplicate wake."""
    from holon_ctx.projection.planning.retention import FactsCache, Retention
    from holon_ctx.projection.planning.view import Page

    def last_facts(sources: int) -> list[str]:
        events = [ExternalEvent(id=f"e{k}", source=f"s{k}", text=f"state {k}")
                  for k in range(sources)]
        units = [unit("external_event", e, seq=1 + k) for k, e in enumerate(events)]
        units.append(unit("external_event", ExternalEvent(id="again", source="s0",
                                                          text="state 0"), seq=sources + 1))
        retention = Retention({}, FactsCache())
        retention.read(Page(index=0, units=tuple(units), before=None, last=True,
                            reached_start=True))
        return retention.facts(units[-1])

    assert last_facts(8) == ["duplicate_wake"]
    assert last_facts(9) == ["external_event"]


def test_a_stored_turn_is_classed_beside_the_turn_before_it() -> None:
    """stored_turn_class reads a turn and the one before it from the store, as the projector
    judges them: a poll repeating the turn before's output is low; the first poll, with no turn
    before it, is a tool summary (normal)."""
    store = MemoryStore()
    store.append([Turn(id="t1", seq=1, trigger="timer"),
                  tool(id="x1", args_preview="status", output="pending"),
                  Turn(id="t2", seq=2, trigger="timer"),
                  tool(id="x2", args_preview="status", output="pending")])
    end = store.end_pos()
    assert stored_turn_class(store, 2, end) == (Priority.LOW, ["repeated_pending_poll"])
    assert stored_turn_class(store, 1, end) == (Priority.NORMAL, ["tool_summary"])
