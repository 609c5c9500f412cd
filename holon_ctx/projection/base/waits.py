"""Waits as the ledger's latest records leave them: one a task result or an event answered is
not open, whether or not a wait record closed it (issue 25, item 2; RFC 0023).

The store derives a wait's state from its ``wait`` records alone (RFC 0001), so a wait a runtime
opened and never closed with a record stays ``open`` there after the task result that answers it
(``wait_id`` set) has arrived. A prompt that states it as current — ``waiting on task-1`` in the
work item, an entry of the open waits, the session's tail — then contradicts a newer record, and
when that record is left out for room, nothing in the prompt corrects it. :func:`settle_waits`
reads the records after each open wait's latest transition for the first task result or external
event naming it: such a wait is stated as resolved, with that record's ref, never as open.

The governed store's side effects go stale the same way: compaction seals an unknown side effect
as unresolved, and a later run of the same call that reports it ``none`` or ``completed`` resolves
it in the ledger only until the next compaction. :func:`settle_control` reads the same bounded
span for such runs: the effect is stated resolved, with the run's ref, not as blocking.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import attrs

from holon_ctx.ledger.answers import SETTLE_SCAN, answered_waits, keyed_events
from holon_ctx.ledger.records import ExternalEvent, TaskResult, Wait, WaitStatus, WorkItem, WorkItemStatus
from holon_ctx.ledger.state import WaitState, WorkItemState
from holon_ctx.ledger.store import LedgerStore, StoredRecord
from holon_ctx.memory.unresolved import LedgerFacts, is_open, key_work_item, todo_key, tool_events
from holon_ctx.projection.base.model import ControlState

__all__ = ["SETTLE_SCAN", "Settled", "obligation_key", "resolves_listed", "settle_control",
           "settle_waits"]

#: An obligation's key as the governed store's text holds it: ``[wait_id:ci-1; archived in …]``.
_KEY = re.compile(r"\[([a-z_]+:[^;\]\s]+)[;\]]")


@attrs.frozen
class Settled:
    """An open wait (by its records) that a later task result or external event answered."""

    wait: WaitState
    #: The ref of the first record after the wait's latest transition that names it.
    by: str


def settle_waits(store: LedgerStore, waits: Sequence[WaitState],
                 limit_pos: int) -> tuple[list[WaitState], list[Settled]]:
    """``waits`` (open by their records, as of ``limit_pos``) split into those still open and
    those a task result or an external event with their ``wait_id`` answered since."""
    answered = answered_waits(store, waits, limit_pos)
    still = [w for w in waits if w.wait_id not in answered]
    settled = [Settled(w, answered[w.wait_id]) for w in waits if w.wait_id in answered]
    return still, settled


def settle_control(store: LedgerStore, control: ControlState | None,
                   limit_pos: int) -> ControlState | None:
    """``control`` with each blocking side effect that a tool run before ``limit_pos`` resolved
    (the same call, side effect ``none`` or ``completed``, not reopened by a later unknown run)
    moved to ``settled``, and each pending obligation the ledger as of ``limit_pos`` resolved
    (see :func:`_resolved_by`) moved to ``settled_obligations``, with the ref of the record that
    says so.

    The ledger is read from its first record, not from the seal: a compaction carries the
    obligations of the one before it without judging them again (a call answered before the
    third seal was still sealed pending there), so only the records say what is resolved. They
    are read through the store's :func:`~holon_ctx.ledger.answers.keyed_events` index: however
    far back the resolving record lies it is found, and each record is read once per process."""
    if control is None or not (control.blocking or control.obligations):
        return control
    keys = {key for key, _ in control.blocking}
    keys.update(k for o in control.obligations if (k := obligation_key(o)))
    by, closed = _scan_resolutions(store, keys, limit_pos)
    pending, resolved = _split_obligations(store, control, by, closed, limit_pos)
    if not by and not resolved:
        return control
    return attrs.evolve(
        control,
        blocking=tuple((k, st) for k, st in control.blocking if k not in by),
        obligations=tuple(pending),
        settled=tuple((k, by[k]) for k, _ in control.blocking if k in by),
        settled_obligations=tuple(resolved.items()))


def _scan_resolutions(store: LedgerStore, keys: set[str],
                      limit_pos: int) -> tuple[dict[str, str], dict[str, str]]:
    """The record that resolved each of ``keys`` as of ``limit_pos`` (not reopened by a later
    unknown or pending run), and the record that closed each wait (not opened again since)."""
    wanted = {k: 0 for k in keys if k.startswith(("call:", "effect:", "wait_id:"))}
    found = keyed_events(store, "control", _control_events, wanted, limit_pos)
    by: dict[str, str] = {}
    closed: dict[str, str] = {}
    for key, events in found.items():
        for _, at, tag in events:
            if tag == "resolve":
                by[key] = at
            elif tag == "reopen":
                by.pop(key, None)
            elif tag == "closed":
                closed[key.partition(":")[2]] = at
            else:  # "open": the wait was opened again
                closed.pop(key.partition(":")[2], None)
    return by, closed


def _split_obligations(store: LedgerStore, control: ControlState, by: dict[str, str],
                       closed: dict[str, str],
                       limit_pos: int) -> tuple[list[str], dict[str, str]]:
    """The obligations still pending, and the key and resolving ref of each one resolved."""
    resolved: dict[str, str] = {}
    pending: list[str] = []
    blocking = {key for key, _ in control.blocking}
    for text in control.obligations:
        said = obligation_key(text)
        ref = _resolved_by(store, said, by, closed, limit_pos) if said else None
        if said is None or ref is None:
            pending.append(text)
        elif said not in blocking:  # (a blocking one is stated settled with the side effects)
            resolved[said] = ref
    return pending, resolved


def _control_events(stored: StoredRecord) -> Iterable[tuple[str, str]]:
    """What one record does to the keys the governed store can hold open: a wait record opens or
    closes ``wait_id:…``; a tool run resolves or reopens its call's keys (:func:`tool_events`)."""
    rec = stored.record
    if isinstance(rec, Wait):
        return ((f"wait_id:{rec.wait_id}", "open" if rec.status is WaitStatus.OPEN else "closed"),)
    return tool_events(stored)


def obligation_key(text: str) -> str | None:
    """The key an obligation's text ends with (``[wait_id:ci-1; archived in episode:e0]``)."""
    found = _KEY.findall(text)
    return found[-1] if found else None


def _resolved_by(store: LedgerStore, key: str | None, by: dict[str, str], closed: dict[str, str],
                 limit_pos: int) -> str | None:
    """The ref of the record that resolves the obligation keyed ``key`` as of ``limit_pos``
    (None: still open, or not known to be resolved), read as episodes judge their open items
    (:mod:`holon_ctx.memory.unresolved`): a call or side effect by a later run of it (``by``);
    a wait that is no longer open by the record that closed it (``closed``, within the span
    read) or by the task result or event that answered it; a todo or a blocker by the work
    item's latest transition once the todo is done or gone, the blocker cleared, or the item
    done or abandoned."""
    if key is None:
        return None
    kind, _, rest = key.partition(":")
    if kind in ("call", "effect"):
        return by.get(key)
    if kind == "wait_id":
        still = [w for w in store.open_waits(limit_pos) if w.wait_id == rest]
        if not still:
            return closed.get(rest)
        return answered_waits(store, still, limit_pos).get(rest)
    wid = key_work_item(key)
    state = store.work_item_state(wid, limit_pos) if wid is not None else None
    if state is None or not _work_item_resolves(key, state):
        return None
    return state.ref


def _work_item_resolves(key: str, state: WorkItemState) -> bool:
    if state.status in (WorkItemStatus.DONE, WorkItemStatus.ABANDONED):
        return True
    if key.startswith("blocked:"):
        return not state.blocker and state.status is not WorkItemStatus.BLOCKED
    return not any(todo_key(state.work_item_id, t.text) == key and not t.done
                   for t in state.todos)


def resolves_listed(store: LedgerStore, keys: frozenset[str], stored: StoredRecord,
                    limit_pos: int) -> bool:
    """Whether ``stored`` resolves one of ``keys`` (open items an episode the session shows
    states ``STILL OPEN``), as the recall judges them: a wait closed by a wait record or
    answered by a task result or event, a call or side effect by a run of it, a todo or
    blocker by a work-item transition (the work item as of ``limit_pos``)."""
    rec = stored.record
    if isinstance(rec, Wait):
        return rec.status is not WaitStatus.OPEN and f"wait_id:{rec.wait_id}" in keys
    if isinstance(rec, TaskResult | ExternalEvent):
        return rec.wait_id is not None and f"wait_id:{rec.wait_id}" in keys
    if isinstance(rec, WorkItem):
        mine = [k for k in keys if key_work_item(k) == rec.work_item_id]
        if not mine:
            return False
        facts = LedgerFacts(open_wait_ids=frozenset(), work_items={
            rec.work_item_id: store.work_item_state(rec.work_item_id, limit_pos)})
        return any(not is_open(k, facts) for k in mine)
    return any(tag == "resolve" and key in keys for key, tag in tool_events(stored))
