"""The bounded view: everything one projection may look at, read with indexed queries only.

The window grows backwards from the current turn a page at a time until it holds about
``content_factor`` times the budget in tokens (or ``max_turns`` turns, or the start of the ledger).
So the cost of a projection follows the budget and the window, never the length of the history.
The continuation anchor, the latest operator intent, pinned records, the current work item, its
open waits and the environment are fetched by point queries wherever they lie.
"""

from __future__ import annotations

import attrs

from holon_ctx.errors import UnknownRefError
from holon_ctx.ledger.records import OPERATOR_TRIGGERS, Pin, TaskResult, Turn
from holon_ctx.ledger.state import WaitState, WorkItemState
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.projection.model import TurnUnit

__all__ = ["View", "WindowLimits", "load_view"]


@attrs.frozen
class WindowLimits:
    """How far back the recent window reaches."""

    content_factor: float = 2.0
    min_turns: int = 8
    max_turns: int = 2048
    page_turns: int = 64
    #: Per-record cap used when estimating how much content a turn brings (long outputs clip).
    record_cap_tokens: int = 1200


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
    open_waits: tuple[WaitState, ...]
    environment: StoredRecord | None
    pins: tuple[tuple[StoredRecord, StoredRecord], ...]
    limit_pos: int
    reached_start: bool

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


def _single(store: LedgerStore, turn: StoredRecord, limit_pos: int) -> TurnUnit:
    return _units(store, [turn], limit_pos)[0]


def _unit_cost(unit: TurnUnit, cap: int) -> int:
    return 24 + sum(min(r.tokens, cap) + 12 for r in unit.records)


def resolve_limit(store: LedgerStore, at: str | None) -> tuple[StoredRecord, int]:
    """The current turn and the exclusive position limit for projecting as of ``at``."""
    end = store.end_pos()
    if at is None:
        current = store.latest_turn(end)
        if current is None:
            raise UnknownRefError("turn:<latest>", hint="the ledger has no turns to project")
        return current, end
    turn_id = at.removeprefix("turn:")
    current = store.turn(turn_id)
    if current is None:
        raise UnknownRefError(f"turn:{turn_id}", hint="no such turn in the ledger")
    assert isinstance(current.record, Turn)
    nxt = store.next_turn_pos(current.record.seq)
    return current, end if nxt is None else nxt


def load_view(
    store: LedgerStore, *, budget_tokens: int, at: str | None = None,
    limits: WindowLimits = WindowLimits(),
) -> View:
    current_stored, limit_pos = resolve_limit(store, at)
    cur_turn = current_stored.record
    assert isinstance(cur_turn, Turn)
    current = _single(store, current_stored, limit_pos)

    target_tokens = limits.content_factor * budget_tokens
    window: list[TurnUnit] = []
    acc = 0
    seq = cur_turn.seq
    reached_start = False
    while len(window) < limits.max_turns:
        page = store.turns_before(seq, limits.page_turns, limit_pos)
        if not page:
            reached_start = True
            break
        units = _units(store, page, limit_pos)
        # Newest first, so the window is cut at the oldest turns once it holds enough.
        for unit in reversed(units):
            window.append(unit)
            acc += _unit_cost(unit, limits.record_cap_tokens)
            if len(window) >= limits.max_turns:
                break
        seq = min(u.turn.seq for u in units)
        if acc >= target_tokens and len(window) >= limits.min_turns:
            break
        if len(page) < limits.page_turns:
            reached_start = True
            break
    window.reverse()
    in_window = {u.turn.id for u in window} | {cur_turn.id}

    extra: dict[str, TurnUnit] = {}

    def fetch(turn_id: str | None) -> None:
        if turn_id is None or turn_id in in_window or turn_id in extra:
            return
        stored = store.turn(turn_id)
        if stored is not None and stored.pos < limit_pos:
            extra[turn_id] = _single(store, stored, limit_pos)

    # The continuation anchor: the explicit anchor, else the turn that spawned a task result.
    anchor_id = cur_turn.anchor_turn_id
    if anchor_id is None:
        for rec in current.records:
            if isinstance(rec.record, TaskResult) and rec.record.spawned_by_turn_id:
                anchor_id = rec.record.spawned_by_turn_id
                break
    # Follow anchors back to the operator turn that started the chain (bounded: 16 hops).
    hops = 0
    while anchor_id is not None and hops < 16:
        fetch(anchor_id)
        linked = extra.get(anchor_id) or next(
            (u for u in window if u.turn.id == anchor_id), None)
        if (linked is None or linked.turn.trigger in OPERATOR_TRIGGERS
                or linked.turn.anchor_turn_id is None):
            break
        anchor_id = linked.turn.anchor_turn_id
        hops += 1

    # A new operator intent is itself the latest intent: the previous one is not pinned, so an
    # abandoned request does not ride along into a new topic. Every other trigger keeps the
    # latest trusted intent in view, and without an explicit anchor continues it.
    latest_intent_id = None
    if cur_turn.trigger != "operator_input" or cur_turn.anchor_turn_id is not None:
        intent = store.latest_operator_turn(cur_turn.seq, limit_pos)
        if intent is not None:
            assert isinstance(intent.record, Turn)
            latest_intent_id = intent.record.id
            fetch(latest_intent_id)
    if anchor_id is None and cur_turn.trigger not in ("operator_input", "approval_decision"):
        anchor_id = latest_intent_id

    work_item = None
    wid = cur_turn.work_item_id or (
        extra[anchor_id].turn.work_item_id if anchor_id in extra else None)
    if wid is not None:
        work_item = store.work_item_state(wid, limit_pos)

    pins: list[tuple[StoredRecord, StoredRecord]] = []
    for pin in store.pins(limit_pos, 16):
        assert isinstance(pin.record, Pin)
        target = store.get(pin.record.target)
        if target is not None and target.pos < limit_pos:
            pins.append((pin, target))
            if isinstance(target.record, Turn):
                fetch(target.record.id)
            elif target.turn_seq is not None:
                owner = getattr(target.record, "turn_id", None)
                fetch(owner)

    return View(
        current=current,
        window=tuple(window),
        extra=extra,
        anchor_id=anchor_id,
        latest_intent_id=latest_intent_id,
        work_item=work_item,
        open_waits=tuple(store.open_waits(limit_pos)),
        environment=store.latest_environment(limit_pos),
        pins=tuple(pins),
        limit_pos=limit_pos,
        reached_start=reached_start,
    )
