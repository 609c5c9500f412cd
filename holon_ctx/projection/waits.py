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

from collections.abc import Sequence
from typing import Final

import attrs

from holon_ctx.ledger.records import ExternalEvent, TaskResult, Tool
from holon_ctx.ledger.state import WaitState
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.memory.unresolved import call_key, resolves
from holon_ctx.projection.model import ControlState

__all__ = ["SETTLE_SCAN", "Settled", "settle_control", "settle_waits"]

#: Records read back from the position asked for, at most, to find what answered the open waits:
#: a wait opened longer ago than this is judged on the newest records only (its answer, if any,
#: came within them or the wait is stated open, as the store has it). The read is the price of
#: every projection while a wait stays open: measured on a 6,000-record SQLite ledger with one
#: wait never closed, 8,192 tokens, 2026-12-03 (load 15), a projection took 8.8 ms without the
#: read, 11.2 ms reading 4,096 records and 13.0 ms reading all 6,000.
SETTLE_SCAN: Final = 4096


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
    if not waits:
        return [], []
    by_id = {w.wait_id: w for w in waits}
    lo = max(min(w.pos for w in waits) + 1, limit_pos - SETTLE_SCAN, 0)
    answered: dict[str, str] = {}
    for stored in store.records_between(lo, limit_pos):
        rec = stored.record
        if not isinstance(rec, TaskResult | ExternalEvent) or rec.wait_id is None:
            continue
        wait = by_id.get(rec.wait_id)
        if wait is not None and stored.pos > wait.pos and rec.wait_id not in answered:
            answered[rec.wait_id] = stored.ref
    still = [w for w in waits if w.wait_id not in answered]
    settled = [Settled(w, answered[w.wait_id]) for w in waits if w.wait_id in answered]
    return still, settled


def settle_control(store: LedgerStore, control: ControlState | None,
                   limit_pos: int) -> ControlState | None:
    """``control`` with each blocking side effect that a tool run among the last
    :data:`SETTLE_SCAN` records before ``limit_pos`` resolved (the same call, side effect
    ``none`` or ``completed``, not reopened by a later unknown run) moved to ``settled``, and
    the obligations that name it dropped."""
    if control is None or not control.blocking:
        return control
    keys = {key for key, _ in control.blocking}
    by: dict[str, str] = {}
    for stored in store.records_between(max(limit_pos - SETTLE_SCAN, 0), limit_pos):
        rec = stored.record
        if not isinstance(rec, Tool):
            continue
        for key in resolves(rec, stored.ref):
            if key in keys:
                by[key] = stored.ref
        if rec.side_effect_unresolved:
            by.pop(f"effect:{call_key(rec, stored.ref)}", None)
    if not by:
        return control
    return attrs.evolve(
        control,
        blocking=tuple((k, st) for k, st in control.blocking if k not in by),
        obligations=tuple(o for o in control.obligations
                          if not any(f"[{k};" in o or f"[{k}]" in o for k in by)),
        settled=tuple((k, by[k]) for k, _ in control.blocking if k in by))
