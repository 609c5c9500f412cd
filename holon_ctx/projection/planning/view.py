"""The bounded view: everything one projection may look at, read with indexed queries only.

The recent window is read in *pages* of ``page_turns`` turns, newest first. :func:`load_view`
reads page 0 together with the point queries; :func:`load_page` reads page k when the planner
asks for it, which it does only once every step of pages 0..k-1 fitted (RFC 0002, "lazy pages").
So the window is exactly as deep as the budget needs (never estimated), a projection costs
O(budget + page), never O(history), and every page is the same whatever the budget, which the
planner's monotonicity rests on. The window stops at ``max_turns`` turns.

Each page carries the turn just before it (``before``), so that repeat and duplicate checks of
its oldest turn see the same neighbour at every budget. The continuation anchor, the latest
operator intent, the owner of the current work item's latest transition, pinned records, the
current work item, its open waits and the environment are fetched by point queries wherever
they lie (``extra``); a page skips the turns already held there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from holon_ctx.ledger.limits import resolve_limit
from holon_ctx.ledger.records import Pin, TaskResult, Trigger, Turn
from holon_ctx.ledger.state import WaitState, WorkItemState
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.projection.base.model import TurnUnit
from holon_ctx.projection.base.policy import Policy, WindowLimits
from holon_ctx.projection.base.waits import Settled, settle_waits

__all__ = ["Page", "View", "WindowLimits", "continuation_anchor", "load_page", "load_view",
           "resolve_limit", "units_of"]


@attrs.frozen
class Page:
    """Page ``index`` of the recent window: its turns oldest first, and the turn just before."""

    index: int
    units: tuple[TurnUnit, ...]
    before: TurnUnit | None
    #: True when no older page exists (start of the ledger, or the ``max_turns`` limit).
    last: bool
    #: True when the page reaches the first turn of the ledger.
    reached_start: bool


@attrs.frozen
class View:
    current: TurnUnit
    #: Window turns older than the current one, oldest first.
    window: tuple[TurnUnit, ...]
    #: Turns outside the window that the projection must still see, by turn id.
    extra: dict[str, TurnUnit]
    anchor_id: str | None
    latest_intent_id: str | None
    work_item: WorkItemState | None
    #: Waits open as of the position: by their records, and answered by no task result or
    #: external event since (:func:`~.waits.settle_waits`).
    open_waits: tuple[WaitState, ...]
    environment: StoredRecord | None
    pins: tuple[tuple[StoredRecord, StoredRecord], ...]
    limit_pos: int
    reached_start: bool
    #: Page 0 of the window (``window`` is its units).
    first_page: Page
    #: Waits open by their records that a later task result or external event answered: stated
    #: as resolved, with that record's ref (RFC 0023).
    settled_waits: tuple[Settled, ...] = ()

    def unit(self, turn_id: str) -> TurnUnit | None:
        if self.current.turn.id == turn_id:
            return self.current
        for unit in self.window:
            if unit.turn.id == turn_id:
                return unit
        return self.extra.get(turn_id)


def _units(store: LedgerStore, turns: list[StoredRecord], limit_pos: int) -> list[TurnUnit]:
    """Attach owned records to turns (turns given in any order; returned oldest first)."""
    if not turns:
        return []
    turns = sorted(turns, key=lambda t: t.pos)
    lo = min(t.turn_seq or 0 for t in turns)
    hi = max(t.turn_seq or 0 for t in turns)
    owned: dict[int, list[StoredRecord]] = {}
    for rec in store.records_of_turns(lo, hi, limit_pos):
        if rec.turn_seq is not None:
            owned.setdefault(rec.turn_seq, []).append(rec)
    return [TurnUnit(stored=t, records=tuple(owned.get(t.turn_seq or 0, ()))) for t in turns]


#: Scattered turns closer than this (in sequence numbers) are read in one range query: reading the
#: few records between them costs less than another query.
_NEAR_SEQS = 8


def units_of(store: LedgerStore, turns: list[StoredRecord], limit_pos: int) -> list[TurnUnit]:
    """Scattered turns (any order) with their records, oldest first: one read per group of near
    turns, so far-apart turns never read the records of the history between them."""
    runs: list[list[StoredRecord]] = []
    for turn in sorted(turns, key=lambda t: t.turn_seq or 0):
        if runs and (turn.turn_seq or 0) - (runs[-1][-1].turn_seq or 0) <= _NEAR_SEQS:
            runs[-1].append(turn)
        else:
            runs.append([turn])
    return [unit for run in runs for unit in _units(store, run, limit_pos)]


def _single(store: LedgerStore, turn: StoredRecord, limit_pos: int) -> TurnUnit:
    return _units(store, [turn], limit_pos)[0]


#: ``extend(unit, previous)``: does ``unit`` (preceded by ``previous``) continue a fold run?
RunTest = Callable[[TurnUnit, "TurnUnit | None"], bool]


def load_page(store: LedgerStore, *, before_seq: int, index: int, limit_pos: int,
              limits: WindowLimits, extend: RunTest | None = None) -> Page:
    """Page ``index``: the ``page_turns`` turns before sequence ``before_seq`` (and one more).

    When ``extend`` says the page's oldest turn and the turn before it both belong to a run of
    low-value turns, the page takes in the whole run (one fold line per run, never split at a
    page boundary); so a page may hold more than ``page_turns`` turns.
    """
    turns = store.turns_before(before_seq, limits.page_turns + 1, limit_pos)
    units = _units(store, turns, limit_pos)
    before = None if len(turns) <= limits.page_turns else units[0]
    page = units if before is None else units[1:]
    older: list[TurnUnit] = []  # turns before `before`, oldest first, read a page at a time
    exhausted = before is None
    while (extend is not None and before is not None and page
           and len(page) < limits.max_turns and extend(page[0], before)):
        if not older and not exhausted:
            more = store.turns_before(before.turn.seq, limits.page_turns, limit_pos)
            older = _units(store, more, limit_pos)
            exhausted = len(more) < limits.page_turns
        if not extend(before, older[-1] if older else None):
            break
        page.insert(0, before)
        before = older.pop() if older else None
    return Page(index=index, units=tuple(page), before=before,
                last=before is None or index + 1 >= limits.max_pages,
                reached_start=before is None)


def load_view(
    store: LedgerStore, *, at: str | None = None, limits: WindowLimits | None = None,
    extend: RunTest | None = None, policy: Policy | None = None, limit_pos: int | None = None,
) -> View:
    """The current turn, window page 0 and the point queries (the planner reads deeper pages).

    ``limits`` overrides ``policy.window`` (kept for callers that only size the window).
    """
    policy = policy or Policy()
    limits = limits or policy.window
    current_stored, limit_pos = resolve_limit(store, at, limit_pos)
    cur_turn = current_stored.record
    assert isinstance(cur_turn, Turn)
    current = _single(store, current_stored, limit_pos)

    first_page = load_page(store, before_seq=cur_turn.seq, index=0, limit_pos=limit_pos,
                           limits=limits, extend=extend)
    window = list(first_page.units)
    by_id = {u.turn.id: u for u in window}
    in_window = {*by_id, cur_turn.id}

    extra: dict[str, TurnUnit] = {}

    def fetch(turn_id: str | None) -> None:
        if turn_id is None or turn_id in in_window or turn_id in extra:
            return
        stored = store.turn(turn_id)
        if stored is not None and stored.pos < limit_pos:
            extra[turn_id] = _single(store, stored, limit_pos)

    anchor_id, latest_intent_id = continuation_anchor(store, current, by_id, limit_pos, policy)
    fetch(anchor_id)
    fetch(latest_intent_id)

    work_item = None
    anchor_unit = None if anchor_id is None else by_id.get(anchor_id) or extra.get(anchor_id)
    wid = cur_turn.work_item_id or (anchor_unit.turn.work_item_id if anchor_unit else None)
    if wid is not None:
        work_item = store.work_item_state(wid, limit_pos)
    if work_item is not None:
        # The turn of the latest transition is pinned: fetch it wherever it lies.
        transition = store.get(work_item.ref)
        if transition is not None:
            fetch(getattr(transition.record, "turn_id", None))

    pins: list[tuple[StoredRecord, StoredRecord]] = []
    for pin in store.pins(limit_pos, policy.pins):
        assert isinstance(pin.record, Pin)
        target = store.get(pin.record.target)
        if target is not None and target.pos < limit_pos:
            pins.append((pin, target))
            if isinstance(target.record, Turn):
                fetch(target.record.id)
            elif target.turn_seq is not None:
                owner = getattr(target.record, "turn_id", None)
                fetch(owner)

    still, settled = settle_waits(store, store.open_waits(limit_pos), limit_pos)
    return View(
        current=current,
        window=tuple(window),
        extra=extra,
        anchor_id=anchor_id,
        latest_intent_id=latest_intent_id,
        work_item=work_item,
        open_waits=tuple(still),
        settled_waits=tuple(settled),
        environment=store.latest_environment(limit_pos),
        pins=tuple(pins),
        limit_pos=limit_pos,
        reached_start=first_page.reached_start,
        first_page=first_page,
    )


def continuation_anchor(store: LedgerStore, current: TurnUnit, known: Mapping[str, TurnUnit],
                        limit_pos: int, policy: Policy) -> tuple[str | None, str | None]:
    """``(anchor, latest intent)``: the turn the current one continues, and the latest trusted
    operator intent it keeps in view (None where there is none). ``known`` holds turns already
    read (any turn not in it is read by point query)."""
    cur_turn = current.turn
    # The continuation anchor: the explicit anchor, else the turn that spawned a task result.
    anchor_id = cur_turn.anchor_turn_id
    if anchor_id is None:
        for rec in current.records:
            if isinstance(rec.record, TaskResult) and rec.record.spawned_by_turn_id:
                anchor_id = rec.record.spawned_by_turn_id
                break
    # Follow anchors back to the operator turn that started the chain (bounded hops). The
    # turns passed on the way are read as point queries only: they are window turns like any
    # other, so whether they show does not depend on how deep the window is read.
    hops = 0
    while anchor_id is not None and hops < policy.anchor_hops:
        linked_unit = known.get(anchor_id)
        linked_stored = None if linked_unit is not None else store.turn(anchor_id)
        linked = (linked_unit.turn if linked_unit is not None
                  else linked_stored.record if linked_stored is not None else None)
        if not isinstance(linked, Turn) or linked.by_operator or linked.anchor_turn_id is None:
            break
        anchor_id = linked.anchor_turn_id
        hops += 1
    # A new operator intent is itself the latest intent: the previous one is not pinned, so an
    # abandoned request does not ride along into a new topic. Every other trigger keeps the
    # latest trusted intent in view, and without an explicit anchor continues it.
    latest_intent_id = None
    if cur_turn.kind is not Trigger.OPERATOR_INPUT or cur_turn.anchor_turn_id is not None:
        intent = store.latest_operator_turn(cur_turn.seq, limit_pos)
        if intent is not None:
            assert isinstance(intent.record, Turn)
            latest_intent_id = intent.record.id
    if anchor_id is None and cur_turn.kind not in (Trigger.OPERATOR_INPUT,
                                                   Trigger.APPROVAL_DECISION):
        anchor_id = latest_intent_id
    return anchor_id, latest_intent_id
