"""Retention priority of each turn, from runtime facts, with reason codes.

Theory of operation: :func:`turn_facts` lists the facts a turn exhibits (``operator_input``,
``task_failure``, ``noop_tick``…): those of its trigger and records
(:mod:`holon_ctx.ledger.facts`, where the store indexes them), then the rules that look at the
turn before it. ``RULES`` (defined beside the facts) maps each fact to a priority class. A turn's class is
the *highest* class among its facts, and the pinned reasons (current turn, anchor, latest intent,
work-item source, operator pin) are added by the caller. A turn with no known fact is ``normal``:
when unsure, classify up, never down. Low and diagnostic facts only count when no other fact does,
which is what guarantees that folding never hides operator input or a state change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from holon_ctx.ledger.facts import RULES, record_facts, trigger_facts
from holon_ctx.ledger.records import (
    Brief,
    BriefKind,
    ExternalEvent,
    Outcome,
    SideEffect,
    Tool,
    Trigger,
    Wait,
)
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.base.model import Priority, TurnUnit
from holon_ctx.projection.planning.view import Page

__all__ = ["RULES", "FactsCache", "Retention", "classify", "extends_fold_run", "in_fold_run",
           "judged_beside", "lowered_by_repeat", "may_join_fold_run", "stored_turn_class",
           "turn_facts"]

#: Triggers whose turn is diagnostic when it holds nothing but the runtime's note, by fact.
_DIAGNOSTIC_TRIGGERS: Final[dict[Trigger, str]] = {
    Trigger.PROVIDER_FALLBACK: "provider_fallback",
    Trigger.PROVIDER_RETRY: "provider_retry",
    Trigger.RECOVERY: "transport_recovery",
    Trigger.RESTART: "transport_recovery",
}
#: Triggers whose turn is a no-op tick when it holds nothing substantive.
_TICK_TRIGGERS: Final = frozenset({Trigger.SCHEDULER_TICK, Trigger.TIMER})
#: Facts that say only that nothing happened: the turn after one is judged beside the turn the
#: tick or retry was judged beside (:func:`judged_beside`).
_NOTHING_HAPPENED: Final = frozenset({"noop_tick", *_DIAGNOSTIC_TRIGGERS.values()})


#: Facts of a wake's events alone: an event naming a wait is a state change until it repeats.
_EVENTS_ONLY: Final = frozenset({"external_event", "external_state_change"})
#: Facts of a wake that brought nothing but its events (new or repeated).
_WAKE_ONLY: Final = _EVENTS_ONLY | {"duplicate_wake"}
#: Sources a run of wakes remembers (the newest): bounds the merged unit below.
_WAKE_SOURCES: Final = 8


def judged_beside(unit: TurnUnit, facts: list[str], beside: TurnUnit | None) -> TurnUnit | None:
    """The turn the turn after ``unit`` is judged beside (``facts`` are ``unit``'s, ``beside``
    the turn it was judged beside): ``unit`` itself, unless it says only that nothing happened
    (a tick, a retry, a recovery) — then ``beside``. So a wake that repeats the one before a run
    of ticks and retries is a duplicate wake still, and folds with them into one line, instead
    of splitting the run wherever a tick came between two copies.

    A wake judged beside a wake is remembered with it: the turn after is judged beside ``unit``
    holding also the events of ``beside``'s other sources (the newest few), so two sources that
    each repeat their own event, interleaved, fold too (issue 12, item 5)."""
    if facts and set(facts) <= _NOTHING_HAPPENED:
        return beside
    if (beside is not None and unit.turn.kind is Trigger.EXTERNAL_EVENT
            and beside.turn.kind is Trigger.EXTERNAL_EVENT and set(facts) <= _WAKE_ONLY):
        return _with_other_sources(unit, beside)
    return unit


def _with_other_sources(unit: TurnUnit, beside: TurnUnit) -> TurnUnit:
    """``unit`` with the events of ``beside`` whose source ``unit`` has no event of (before its
    own records, at most _WAKE_SOURCES sources in all); ``unit`` itself when there are none.

    Its first record is then another turn's, which keeps it apart from ``unit`` in a facts
    cache (:class:`FactsCache`)."""
    mine = {r.record.source for r in unit.records if isinstance(r.record, ExternalEvent)}
    kept: list[str] = []
    for r in reversed(beside.records):
        source = r.record.source if isinstance(r.record, ExternalEvent) else None
        if source is not None and source not in mine and source not in kept:
            kept.append(source)
    kept = kept[:max(0, _WAKE_SOURCES - len(mine))]
    extra = tuple(r for r in beside.records
                  if isinstance(r.record, ExternalEvent) and r.record.source in kept)
    return TurnUnit(stored=unit.stored, records=(*extra, *unit.records)) if extra else unit


def turn_facts(unit: TurnUnit, previous: TurnUnit | None = None) -> list[str]:
    """Facts of one turn; ``previous`` is the turn it is judged beside (for duplicate and repeat
    checks): the turn before it, or the one before a run of ticks and retries
    (:func:`judged_beside`)."""
    records = [r.record for r in unit.records]
    facts = trigger_facts(unit.turn)
    for rec in records:
        facts.extend(record_facts(rec))
    substantive = [f for f in facts if RULES[f] <= Priority.NORMAL]
    only_acks = bool(records) and all(
        isinstance(r, Brief) and r.kind is BriefKind.ACK for r in records)
    # Low and diagnostic classes apply only when nothing else is known about the turn: a retry
    # that carries an assistant message or a tool run is classified by that content (classify
    # up). The two repeat rules look at content by definition and accept only repeats of it.
    if only_acks and not facts:
        return ["ack_only"]
    low = _low_value(unit, previous, facts, substantive)
    if low is not None:
        return [low]
    # Each fact once, in first-seen order: the reasons read as a set, not a tally.
    return list(dict.fromkeys(facts)) or ["unclassified"]


def _low_value(unit: TurnUnit, previous: TurnUnit | None, facts: list[str],
               substantive: list[str]) -> str | None:
    """The turn's low-value or diagnostic class when that is all it is (None: it has content)."""
    turn = unit.turn
    trigger = turn.kind
    # A retry, fallback or recovery whose only content is the runtime's own note about it
    # ("provider error, attempt 3/6") is still diagnostic: the note describes the retry itself.
    if trigger in _DIAGNOSTIC_TRIGGERS and set(substantive) <= {"runtime_note"}:
        return _DIAGNOSTIC_TRIGGERS[trigger]
    if trigger in _TICK_TRIGGERS and not substantive:
        return "noop_tick"
    # The runtime's own verdict: a tick whose outcome is noop changed nothing, even if it polled
    # a status (progress counters differ, the state does not). Failures are not in the set.
    if (trigger in _TICK_TRIGGERS and turn.outcome is Outcome.NOOP
            and set(facts) <= {"tool_summary", "progress_brief"}):
        return "noop_tick"
    if _is_repeated_poll(unit, previous) and set(facts) <= {"tool_summary", "progress_brief"}:
        return "repeated_pending_poll"
    if (trigger is Trigger.EXTERNAL_EVENT and set(facts) <= _EVENTS_ONLY
            and _is_duplicate_wake(unit, previous)):
        return "duplicate_wake"
    return None


def _is_repeated_poll(unit: TurnUnit, previous: TurnUnit | None) -> bool:
    """Every tool call repeats one of the previous turn's with the same (or no) result yet."""
    if previous is None:
        return False
    mine = [r.record for r in unit.records if isinstance(r.record, Tool)]
    if not mine or any(not isinstance(r.record, Tool | Brief) for r in unit.records):
        return False
    before = {t.run_key: t for t in (r.record for r in previous.records) if isinstance(t, Tool)}
    for tool in mine:
        if tool.side_effect not in (None, SideEffect.NONE):
            return False  # a call that acts on the world is never "just a poll"
        prior = before.get(tool.run_key)
        if prior is None:
            return False
        if not tool.pending and (
                tool.output != prior.output or tool.status is not prior.status):
            return False
    return True


def _is_duplicate_wake(unit: TurnUnit, previous: TurnUnit | None) -> bool:
    """Each source of the wake's events sent exactly these events (same order, same bytes, the
    same wait named or none) in ``previous`` (a wake, holding also the newest events of other
    sources: judged_beside).

    Identical means identical: a text differing in whitespace, a digit or the order of JSON
    keys is another event, shown — a fold never hides text that differs. An event naming a wait
    is a state change the first time; a redelivered copy (a webhook sent again after the wait
    was resolved) changes nothing, since only a wait transition changes a wait, unless
    ``previous`` holds a transition of that wait, after which the copy may be what answers it."""
    if previous is None or previous.turn.kind is not Trigger.EXTERNAL_EVENT:
        return False
    def events(u: TurnUnit) -> dict[str, list[tuple[str, str | None]]]:
        by_source: dict[str, list[tuple[str, str | None]]] = {}
        for r in u.records:
            if isinstance(r.record, ExternalEvent):
                by_source.setdefault(r.record.source, []).append((r.record.text, r.record.wait_id))
        return by_source
    mine, before = events(unit), events(previous)
    waits = {wait for texts in mine.values() for _, wait in texts if wait is not None}
    if any(isinstance(r.record, Wait) and r.record.wait_id in waits for r in previous.records):
        return False
    return bool(mine) and all(before.get(source) == texts for source, texts in mine.items())


def lowered_by_repeat(unit: TurnUnit) -> bool:
    """Whether ``unit``, high on its own, may be a low repeat beside the turns before it: a wake
    whose events name a wait (high the first time) may be a redelivered copy
    (:func:`_is_duplicate_wake`). A lookup of high turns judges such a turn in context."""
    if unit.turn.kind is not Trigger.EXTERNAL_EVENT:
        return False
    facts = set(turn_facts(unit))
    return "external_state_change" in facts and facts <= _EVENTS_ONLY


def classify(facts: list[str]) -> Priority:
    """The highest class among the facts (``normal`` when there are none)."""
    return min((RULES[f] for f in facts), default=Priority.NORMAL)


def stored_turn_class(store: LedgerStore, seq: int, limit_pos: int) -> tuple[Priority, list[str]]:
    """The class and facts of the stored turn ``seq`` on its own, as of ``limit_pos``, judged
    beside the turn before it as the projector does (repeated polls and duplicate wakes are only
    visible against their neighbour): for a reader asking why a turn got its priority."""
    turns = store.turns_before(seq + 1, 2, limit_pos)[::-1]
    records = store.records_of_turns(turns[0].turn_seq or 0, seq, limit_pos)
    units = [TurnUnit(stored=t, records=tuple(r for r in records if r.turn_seq == t.turn_seq))
             for t in turns]
    facts = turn_facts(units[-1], units[-2] if len(units) > 1 else None)
    return classify(facts), facts


def in_fold_run(unit: TurnUnit, previous: TurnUnit | None) -> bool:
    """Whether a turn is low or diagnostic by its own facts (a page takes such runs whole)."""
    return classify(turn_facts(unit, previous)) >= Priority.LOW


def extends_fold_run(unit: TurnUnit, previous: TurnUnit | None) -> bool:
    """Whether a page reaching back from ``unit`` to ``previous`` takes ``previous``'s run in
    (``view.load_page``): ``unit`` is low beside it, or ``unit`` is a wake after a turn in which
    nothing happened — judged past the run (:func:`judged_beside`), it may repeat the wake before
    the run, which a page starting at ``unit`` would not see (and show the copy whole)."""
    if in_fold_run(unit, previous):
        return True
    return (unit.turn.kind is Trigger.EXTERNAL_EVENT and previous is not None
            and set(turn_facts(previous)) <= _NOTHING_HAPPENED)


def may_join_fold_run(unit: TurnUnit, previous: TurnUnit | None) -> bool:
    """Whether a turn read as it arrives (records may follow) may still prove low: low already,
    or a wake with no event yet beside a wake (its event may repeat the earlier one's)."""
    if in_fold_run(unit, previous):
        return True
    return (not unit.records and unit.turn.kind is Trigger.EXTERNAL_EVENT
            and previous is not None and previous.turn.kind is Trigger.EXTERNAL_EVENT)


#: Turns whose retention facts a :class:`FactsCache` remembers (cleared when full).
_FACTS_CACHE = 16_384


class FactsCache:
    """Facts by turn and neighbour, kept by a projector across calls.

    Facts depend on the turn and the turn before it only, and records never change; a turn can
    only gain records, hence the record counts in the key.
    """

    def __init__(self) -> None:
        self._facts: dict[tuple[str, int, str | None, int, str | None], list[str]] = {}

    def facts(self, unit: TurnUnit, previous: TurnUnit | None) -> list[str]:
        # The neighbour's first record tells a wake holding other sources' events
        # (judged_beside: they come first, from older turns) from the wake alone, whatever
        # records either gains later.
        key = (unit.ref, len(unit.records), previous.ref if previous else None,
               len(previous.records) if previous else 0,
               previous.records[0].ref if previous and previous.records else None)
        found = self._facts.get(key)
        if found is None:
            if len(self._facts) >= _FACTS_CACHE:
                self._facts.clear()
            found = self._facts[key] = turn_facts(unit, previous)
        return found


class Retention:
    """The retention class of each turn one projection reads: pins from the view (fixed for the
    call), facts of every page read so far, each turn judged beside the turn before it."""

    def __init__(self, pinned: Mapping[str, tuple[str, ...]], cache: FactsCache) -> None:
        self.pinned = pinned
        self._cache = cache
        self._facts: dict[str, list[str]] = {}
        self._known: dict[str, tuple[Priority, tuple[str, ...]]] = {}

    def read(self, page: Page) -> None:
        """Classify the turns of ``page`` (each beside its predecessor, past ticks and retries
        (:func:`judged_beside`), the first beside ``page.before``)."""
        prev = page.before
        for unit in page.units:
            facts = self._facts[unit.turn.id] = self._cache.facts(unit, prev)
            prev = judged_beside(unit, facts, prev)

    def read_alone(self, unit: TurnUnit, before: Sequence[TurnUnit] = ()) -> None:
        """Classify a turn read on its own (by lookup), judged beside the turns ``before`` it
        (oldest first; none: without a neighbour). The repeat rules that need a neighbour only
        ever make a turn low, never high, so a turn judged alone is classified up; ``before`` is
        given for the one high turn a neighbour can make low (:func:`lowered_by_repeat`)."""
        prev: TurnUnit | None = None
        for earlier in before:
            prev = judged_beside(earlier, self._cache.facts(earlier, prev), prev)
        self._facts[unit.turn.id] = self._cache.facts(unit, prev)

    def facts(self, unit: TurnUnit) -> list[str]:
        """Facts of a turn read in a page; a turn fetched on its own is judged without a
        neighbour (only the low-value repeat rules look at one)."""
        return self._facts.get(unit.turn.id) or turn_facts(unit)

    def priority(self, unit: TurnUnit) -> tuple[Priority, tuple[str, ...]]:
        """``(class, reasons)``: pinned reasons when pinned, else the class of its facts."""
        tid = unit.turn.id
        known = self._known.get(tid)
        if known is not None:
            return known
        reasons = self.pinned.get(tid)
        if reasons is not None:
            found = Priority.PINNED, reasons
        else:
            facts = self.facts(unit)
            found = classify(facts), tuple(facts)
        if reasons is not None or tid in self._facts:
            self._known[tid] = found  # asked for thousands of times a call
        return found
