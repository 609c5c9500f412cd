"""Pinned turns and the fixed order of pinned items: pure functions of the view, and one table.

A turn is *pinned* for a reason the view states (RFC 0002, retention): it is the current turn,
the continuation anchor, the latest trusted operator intent, the turn of the current work item's
latest transition, a turn holding an operator-pinned record, or an agent loop's previous step (the
turn before the current one with the same trigger and the same anchor). :func:`pinned_turns`
computes them all at once from the view; nothing is added later.

Pinned items enter the plan first (round 0: minimum forms; round 1: upgrades) in the order of
:data:`SLOTS`, not by the fair share of later rounds: these are not competing evidence but the
order in which the prompt must not lose them.
"""

from __future__ import annotations

from typing import Final

import attrs

from holon_ctx.projection.base.model import TurnUnit
from holon_ctx.projection.planning.view import View

__all__ = ["SLOTS", "Slot", "pinned_turns", "previous_step", "tier0_units"]


@attrs.frozen
class Slot:
    """Where a fixed item goes: ``order`` ranks its pinned steps (lower first, across sections);
    ``position`` places it when its section is rendered (lower first)."""

    order: int
    position: tuple[int, ...]


#: The pinned upgrade order (planner rounds 0–1) and render positions of the fixed items.
#: Governed control notices first (a blocked side effect must never be cut), then the current
#: turn, the question it answers, the continuation anchor, an agent loop's previous step and the
#: work item; pinned recent turns and pins follow by their section ranks (orders 0, 1, …).
SLOTS: Final[dict[str, Slot]] = {
    "control:blocking": Slot(-30, (-3,)),
    "control:obligations": Slot(-29, (-2,)),
    "control:constraints": Slot(-28, (-1,)),
    "current_turn": Slot(-20, (2,)),
    "last_exchange": Slot(-19, (1,)),
    "continuation_anchor": Slot(-18, (0,)),
    "previous_step": Slot(-17, (1, 1)),
    "work_item": Slot(-10, (0,)),
    "environment": Slot(0, (0,)),
    "frontier": Slot(0, (-1,)),
}


def tier0_units(view: View) -> list[TurnUnit]:
    """The current turn, window page 0 and the turns fetched by point query, oldest first.

    Everything derived from these (pins, work refs, chain labels of the point-query turns, the
    previous exchange) is the same at every budget; deeper pages never change it.
    """
    return sorted([*view.window, *view.extra.values(), view.current], key=lambda u: u.turn.seq)


def previous_step(view: View) -> TurnUnit | None:
    """The turn before the current one when both are steps of one agent loop (same trigger, same
    anchor): what the current step answers, kept whole like the last exchange of a short reply."""
    units = tier0_units(view)
    cur = view.current.turn
    prev = units[-2] if len(units) > 1 else None
    if (prev is not None and cur.anchor_turn_id is not None
            and prev.turn.anchor_turn_id == cur.anchor_turn_id
            and prev.turn.trigger == cur.trigger):
        return prev
    return None


def pinned_turns(view: View) -> dict[str, tuple[str, ...]]:
    """Turn id → the reasons it is pinned, in the order above (a turn may have several)."""
    units = tier0_units(view)

    def owner_of(ref: str) -> str | None:
        for unit in units:
            if unit.ref == ref or any(r.ref == ref for r in unit.records):
                return unit.turn.id
        return None

    found: list[tuple[str | None, str]] = [(view.current.turn.id, "current_turn"),
                                           (view.anchor_id, "continuation_anchor"),
                                           (view.latest_intent_id, "latest_operator_intent")]
    if view.work_item is not None:
        found.append((owner_of(view.work_item.ref), "current_work_item_transition"))
    found.extend((owner_of(target.ref), "operator_pin") for _, target in view.pins)
    step = previous_step(view)
    if step is not None:
        found.append((step.turn.id, "previous_step"))
    pinned: dict[str, list[str]] = {}
    for turn_id, reason in found:
        if turn_id:
            pinned.setdefault(turn_id, []).append(reason)
    return {turn_id: tuple(reasons) for turn_id, reasons in pinned.items()}
