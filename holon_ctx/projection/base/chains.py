"""Continuation chains: which turns belong to the current turn's chain, by rule.

A turn is in the current chain when a rule links it to a turn already in the chain: the anchor
link (``anchor_turn_id``), a task result's spawning turn, or a wait matched by an external event
or task result (linked to the newest earlier turn that opened that wait). Links always point
backwards, so :class:`ChainTracker` decides each turn as turns are fed to it newest first: a turn
is decided by the turns after it only. That makes membership the same however deep the window is
read (the planner's monotonicity needs that). Turns of the current work item are in the chain by
the ``work_item`` rule. A turn acting for *another* work item is current-chain evidence only when
a chain turn links to it (the current work needs it: the operator anchored on it, a wait it opened
resolved the current step); its own links are not followed, so another item's history does not
ride along behind it (RFC 0018). An unlinked turn of another item is labelled as belonging
elsewhere.
"""

from __future__ import annotations

from holon_ctx.ledger.records import ExternalEvent, TaskResult, Wait, WaitStatus
from holon_ctx.projection.base.model import TurnUnit

__all__ = ["ChainTracker", "chain_links"]


def chain_links(unit: TurnUnit) -> list[tuple[str, str]]:
    """``(rule, target)`` edges from this turn backwards; a ``wait_match`` target is a wait id."""
    links: list[tuple[str, str]] = []
    if unit.turn.anchor_turn_id:
        links.append(("anchor", unit.turn.anchor_turn_id))
    for rec in unit.records:
        r = rec.record
        if isinstance(r, TaskResult) and r.spawned_by_turn_id:
            links.append(("task_spawn", r.spawned_by_turn_id))
        if isinstance(r, ExternalEvent | TaskResult) and r.wait_id:
            links.append(("wait_match", r.wait_id))
    return links


class ChainTracker:
    """Current-chain membership, decided incrementally over turns fed newest first."""

    def __init__(self, current: TurnUnit, work_item_id: str | None) -> None:
        self.work_item_id = work_item_id
        #: Turn id → the rule that put it in the chain (``current`` for the current turn).
        self.chain: dict[str, str] = {current.turn.id: "current"}
        self._turn_targets: dict[str, str] = {}
        self._wait_targets: set[str] = set()
        self._link(current)

    def _link(self, unit: TurnUnit) -> None:
        for rule, target in chain_links(unit):
            if rule == "wait_match":
                if not _opens(unit, target):
                    self._wait_targets.add(target)
            else:
                self._turn_targets.setdefault(target, rule)

    def peek(self, unit: TurnUnit) -> str | None:
        """The rule that would put ``unit`` in the chain given the turns fed so far, without
        feeding it: for a turn fetched out of order (a high turn read by lookup), whose label is
        then decided by the links of the newer turns read before it."""
        tid = unit.turn.id
        if tid in self.chain:
            return self.chain[tid]
        rule = self._turn_targets.get(tid)
        if rule is None and any(_opens(unit, w) for w in self._wait_targets):
            rule = "wait_match"
        wid = unit.turn.work_item_id
        if rule is not None:
            return rule
        return "work_item" if self.work_item_id and wid == self.work_item_id else None

    def feed(self, unit: TurnUnit) -> str | None:
        """Decide ``unit`` (older than every turn fed before); returns its rule or None."""
        tid = unit.turn.id
        if tid in self.chain:
            return self.chain[tid]
        rule = self._turn_targets.get(tid)
        opened = {w for w in self._wait_targets if _opens(unit, w)}
        self._wait_targets -= opened
        if rule is None and opened:
            rule = "wait_match"
        wid = unit.turn.work_item_id
        if rule is not None:
            self.chain[tid] = rule
            if not (self.work_item_id and wid and wid != self.work_item_id):
                self._link(unit)
            return rule
        if self.work_item_id and wid == self.work_item_id:
            self.chain[tid] = "work_item"
            return "work_item"
        return None


def _opens(unit: TurnUnit, wait_id: str) -> bool:
    return any(isinstance(r.record, Wait) and r.record.wait_id == wait_id
               and r.record.status is WaitStatus.OPEN for r in unit.records)
