"""Derived state: the current form of work items and waits, folded from their transitions.

These are the values the stores keep *beside* the append-only records (RFC 0001): each is a pure
function of the records before it, so a store can drop and rebuild them at any time.
"""

from __future__ import annotations

import msgspec

from holon_ctx.ledger.records import Todo, Wait, WaitStatus, WorkItem, WorkItemStatus

__all__ = ["TurnInfo", "WaitState", "WorkItemState", "fold_wait", "fold_work_item"]


class TurnInfo(msgspec.Struct, frozen=True):
    """What the append path needs to know about an existing turn."""

    id: str
    seq: int
    pos: int
    work_item_id: str | None


class WorkItemState(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A work item as of one transition; ``ref`` is that transition's record ref."""

    work_item_id: str
    ref: str
    pos: int
    first_ref: str
    objective: str = ""
    plan: list[str] = []
    todos: list[Todo] = []
    status: WorkItemStatus = WorkItemStatus.OPEN
    waits: list[str] = []
    blocker: str | None = None
    completion_report: str | None = None
    transitions: int = 1


class WaitState(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    wait_id: str
    ref: str
    pos: int
    opened_ref: str
    status: WaitStatus
    condition: str = ""
    work_item_id: str | None = None
    resolved_by: str | None = None


def fold_work_item(prev: WorkItemState | None, rec: WorkItem, *, ref: str, pos: int) -> WorkItemState:
    """Apply one transition: fields the transition states replace, the others carry over."""
    if prev is None:
        prev = WorkItemState(work_item_id=rec.work_item_id, ref=ref, pos=pos, first_ref=ref,
                             transitions=0)
    return msgspec.structs.replace(
        prev,
        ref=ref,
        pos=pos,
        objective=prev.objective if rec.objective is None else rec.objective,
        plan=prev.plan if rec.plan is None else list(rec.plan),
        todos=prev.todos if rec.todos is None else list(rec.todos),
        status=prev.status if rec.status is None else rec.status,
        waits=prev.waits if rec.waits is None else list(rec.waits),
        blocker=prev.blocker if rec.blocker is None else (rec.blocker or None),
        completion_report=(prev.completion_report if rec.completion_report is None
                           else rec.completion_report),
        transitions=prev.transitions + 1,
    )


def fold_wait(prev: WaitState | None, rec: Wait, *, ref: str, pos: int) -> WaitState:
    return WaitState(
        wait_id=rec.wait_id,
        ref=ref,
        pos=pos,
        opened_ref=prev.opened_ref if prev else ref,
        status=rec.status,
        condition=rec.condition or (prev.condition if prev else ""),
        work_item_id=rec.work_item_id or (prev.work_item_id if prev else None),
        resolved_by=rec.resolved_by,
    )
