"""Continuation chains: which window turns belong to the current turn's chain, by rule.

A turn is in the current chain when any rule links it (transitively, over the bounded view):
the anchor link (``anchor_turn_id``), a task result's spawning turn, a wait matched by an external
event or task result (linked to the turn that opened the wait), and the current work item.
A turn acting for *another* work item is never current-chain evidence even if linked, so the
prompt can label it as belonging elsewhere.
"""

from __future__ import annotations

from holon_ctx.ledger.records import ExternalEvent, TaskResult, Wait
from holon_ctx.projection.model import TurnUnit

__all__ = ["chain_links", "current_chain"]


def chain_links(unit: TurnUnit, wait_openers: dict[str, str]) -> list[tuple[str, str]]:
    """``(rule, turn_id)`` edges from this turn to earlier turns it continues."""
    links: list[tuple[str, str]] = []
    if unit.turn.anchor_turn_id:
        links.append(("anchor", unit.turn.anchor_turn_id))
    for rec in unit.records:
        r = rec.record
        if isinstance(r, TaskResult) and r.spawned_by_turn_id:
            links.append(("task_spawn", r.spawned_by_turn_id))
        if isinstance(r, ExternalEvent | TaskResult) and r.wait_id and r.wait_id in wait_openers:
            links.append(("wait_match", wait_openers[r.wait_id]))
    return links


def current_chain(
    current: TurnUnit, units: list[TurnUnit], work_item_id: str | None
) -> dict[str, str]:
    """Turn id → the rule that put it in the current chain (``current`` maps to ``"current"``)."""
    wait_openers: dict[str, str] = {}
    for unit in units:
        for rec in unit.records:
            if isinstance(rec.record, Wait) and rec.record.wait_id not in wait_openers:
                wait_openers[rec.record.wait_id] = unit.turn.id
    by_id = {u.turn.id: u for u in units}
    chain: dict[str, str] = {current.turn.id: "current"}
    frontier = [current]
    while frontier:
        unit = frontier.pop()
        for rule, target in chain_links(unit, wait_openers):
            if target in chain:
                continue
            linked = by_id.get(target)
            if linked is None:
                continue
            wid = linked.turn.work_item_id
            if work_item_id and wid and wid != work_item_id:
                continue
            chain[target] = rule
            frontier.append(linked)
    if work_item_id:
        for unit in units:
            if unit.turn.work_item_id == work_item_id and unit.turn.id not in chain:
                chain[unit.turn.id] = "work_item"
    return chain
