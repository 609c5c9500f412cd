"""The side-effect check: the envelope's idempotency key, and every side effect of the session.

Theory of operation. The envelope names one idempotency key (the write in flight); the governed
snapshot sealed at compaction step 3 carries *every* side effect of the session with the status it
had then, read from the side-effect ledger, never from the caller. At rehydration the ledger's
current entries are compared with that sealed set, key by key:

* a key in the ledger but not sealed (recorded after sealing, or a compactor that dropped it), or
  sealed but gone from the ledger, or an envelope naming no key while the session has side
  effects: ``idempotency_key_changed`` (fail);
* a status that moved to ``unknown`` or ``partial`` since sealing: only side-effect state changed,
  and the write may already have happened, so ``unknown_side_effect`` / ``partial_side_effect``
  (reconcile: ``blocked_on_reconciliation`` unless something else fails);
* a status that moved to a resolved one (reconciled, committed): ``side_effect_status_changed``
  (fail: the envelope is stale, re-seal);
* an entry still unknown or partial: the reconcile finding.

Without a sealed set (the full-history path) an unresolved effect the control state does not carry
both reconciles and fails, as it always did.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from holon_ctx.continuity.codes import ReasonCode
from holon_ctx.continuity.comparison import CheckContext, compare, show
from holon_ctx.continuity.decision import Finding
from holon_ctx.continuity.envelope import SideEffectStatus
from holon_ctx.continuity.records import UNRESOLVED, SideEffectRecord

__all__ = ["check_side_effects"]

R = ReasonCode


def _reconcile_code(status: SideEffectStatus) -> ReasonCode:
    return R.UNKNOWN_SIDE_EFFECT if status is SideEffectStatus.UNKNOWN else R.PARTIAL_SIDE_EFFECT


def _unresolved(record: SideEffectRecord, path: str) -> Finding:
    detail = f"{show(record.idempotency_key)} is {record.status.value}"
    return Finding(_reconcile_code(record.status), path, detail)


def _status_findings(
    sealed: SideEffectStatus | None, record: SideEffectRecord, path: str
) -> Iterable[Finding]:
    """The ledger's status now against the sealed one (``None``: nothing sealed to compare)."""
    now = record.status
    if sealed is not None and now is not sealed:
        detail = f"{show(record.idempotency_key)} was {sealed.value} when sealed, is now {now.value}"
        if now in UNRESOLVED:
            # Only side-effect state moved, and the effect may already have happened: that is the
            # seed's blocked_on_reconciliation, not a validation failure (RFC 0004).
            yield Finding(_reconcile_code(now), path, detail)
            return
        # Resolved since sealing (reconciled, or a write completed): the envelope is stale.
        yield Finding(R.SIDE_EFFECT_STATUS_CHANGED, path, detail)
    elif now in UNRESOLVED:
        yield _unresolved(record, path)


def _sealed_side_effects(ctx: CheckContext) -> dict[str, SideEffectStatus] | None:
    """Every side effect sealed in the governed snapshot; ``None`` without one (full history)."""
    record = ctx.governed.record
    if not ctx.envelope_mode or record is None or record.snapshot is None:
        return None
    return {entry.idempotency_key: entry.status for entry in record.snapshot.side_effects}


def check_side_effects(ctx: CheckContext) -> Iterable[Finding]:
    """The envelope's key against the ledger, and every side effect of the session.

    Every side effect the session's ledger holds, whatever its status, must be carried by the
    sealed state (the governed snapshot) with the status it had then: one recorded after sealing,
    or one that a compactor left out, fails (``idempotency_key_changed``), so an agent is never
    resumed without knowing that a write already happened. An envelope naming no key claims the
    session has no side effect at all.
    """
    f, governed = ctx.fields, ctx.governed
    if ctx.resume.idempotency_key is not None:
        yield from compare(f, {"idempotency_key": ctx.resume.idempotency_key}, "resume claim")
    session = f.get("session_id")
    key = f.get("idempotency_key")
    sealed = _sealed_side_effects(ctx)
    current: dict[str, SideEffectRecord] = {}
    for record in governed.session_side_effects:
        if session is not None and record.session_id != session:
            # Not this session's record (a claimed other session, or a swapped list).
            detail = f"{show(record.idempotency_key)} belongs to {show(record.session_id)}"
            yield Finding(R.SESSION_MISMATCH, "governed.side_effects", detail)
            if record.status in UNRESOLVED:
                yield _unresolved(record, "governed.side_effects")
            continue
        current[record.idempotency_key] = record
    if key is not None:
        yield from _named_key(ctx, key, sealed)
    else:
        yield from _no_key(ctx, current, sealed)
    for name, record in current.items():
        if name != key:
            yield from _carried(name, record, sealed)
    for name in sorted(set(sealed or ()) - set(current) - {key}):
        # Sealed, but the ledger no longer has it: what happened to that write is now unknown.
        detail = f"sealed {show(name)} is no longer in the side-effect ledger"
        yield Finding(R.IDEMPOTENCY_KEY_CHANGED, "governed.side_effects", detail)
        yield Finding(R.UNKNOWN_SIDE_EFFECT, "governed.side_effects", detail)


def _named_key(ctx: CheckContext, key: str,
               sealed: dict[str, SideEffectStatus] | None) -> Iterable[Finding]:
    """The side effect the envelope names: its ledger record, owner, status and sealing."""
    f = ctx.fields
    named = ctx.governed.side_effect
    if named is not None and named.idempotency_key != key:
        detail = f"the record given is for {show(named.idempotency_key)}"
        yield Finding(R.IDEMPOTENCY_KEY_CHANGED, "governed.side_effect", detail)
        named = None  # a record of another key says nothing about this one
    if named is None:
        # No ledger entry for a declared intent: its outcome cannot be known. Reconcile.
        yield Finding(R.UNKNOWN_SIDE_EFFECT, "$.idempotency_key", "no side-effect ledger record")
    else:
        owner = {"session_id": named.session_id, "tenant_id": named.tenant_id}
        for finding in compare(f, owner, "side-effect ledger"):
            yield attrs.evolve(finding, code=R.IDEMPOTENCY_KEY_CHANGED)
        yield from _status_findings(f.get("side_effect_status"), named, "$.side_effect_status")
    if sealed is not None and key not in sealed:
        yield Finding(R.IDEMPOTENCY_KEY_CHANGED, "$.idempotency_key", "not in the sealed side effects")


def _no_key(ctx: CheckContext, current: dict[str, SideEffectRecord],
            sealed: dict[str, SideEffectStatus] | None) -> Iterable[Finding]:
    """An envelope naming no key claims the session has no side effect at all."""
    f = ctx.fields
    if f.get("side_effect_status") in UNRESOLVED:
        status = f["side_effect_status"]
        yield Finding(_reconcile_code(status), "$.side_effect_status", "declared without a key")
    for name in sorted({*current, *(sealed or ())}):
        detail = f"names no key, but the session has side effect {show(name)}"
        yield Finding(R.IDEMPOTENCY_KEY_CHANGED, "$.idempotency_key", detail)


def _carried(name: str, record: SideEffectRecord,
             sealed: dict[str, SideEffectStatus] | None) -> Iterable[Finding]:
    """Another side effect of the session: carried by the sealed state with its status then."""
    if sealed is None:
        # No sealed set to compare with: an unresolved effect the control state does not
        # carry still blocks (reconcile) and fails (the control state is lossy).
        if record.status in UNRESOLVED:
            yield _unresolved(record, "governed.side_effects")
            detail = f"does not carry unresolved {show(name)}"
            yield Finding(R.IDEMPOTENCY_KEY_CHANGED, "$.idempotency_key", detail)
    elif name not in sealed:
        detail = f"{show(name)} ({record.status.value}) is not carried by the sealed state"
        yield Finding(R.IDEMPOTENCY_KEY_CHANGED, "governed.side_effects", detail)
        if record.status in UNRESOLVED:
            yield _unresolved(record, "governed.side_effects")
    else:
        yield from _status_findings(sealed[name], record, "governed.side_effects")
