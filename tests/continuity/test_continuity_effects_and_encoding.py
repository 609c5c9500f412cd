"""Adversarial cases for issue 10 items 15-18: side effects, swapped records, re-encodings.

Item 15: every side effect of the session, whatever its status, is sealed in governed state and
checked at rehydration; dropping or changing an idempotency key never passes. Item 16: the pure
validator checks that the records it is given are the ones the envelope names. Item 17: a side
effect that becomes unknown or partial after sealing blocks on reconciliation. Item 18: a stored
envelope re-encoded without changing its meaning stays valid; any change of meaning fails.

Each case asserts the decision and the primary reason, as in ``test_continuity_adversarial``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta, timezone
from typing import Any

import attrs
import msgspec
import pytest
from continuity_helpers import World, make_world
from test_continuity_adversarial import (
    BLOCKED,
    DRIFT_AT,
    FAILED,
    OK,
    Case,
    approval,
    assert_case,
    drift,
    pure,
    record_effect,
    side_effect_record,
    stored,
)

from holon_ctx.continuity import (
    ContinuityStore,
    Decision,
    ReasonCode,
    SideEffectRecord,
    SideEffectStatus,
    encode_envelope,
    envelope_sha256,
)
from holon_ctx.continuity.records import SideEffectEntry
from holon_ctx.continuity.scenario import SEED

R = ReasonCode
KEY = SEED.idempotency_key
OTHER_KEY = "ticket-intent-016"


def _forget_key(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A lossy compactor: seals with no idempotency key at all."""
    return {**kwargs, "idempotency_key": None}


def _effect(key: str, status: SideEffectStatus, session: str = SEED.session_id) -> SideEffectRecord:
    return SideEffectRecord(
        idempotency_key=key, tenant_id=SEED.tenant_id, session_id=session, status=status
    )


def _earlier_effect(status: SideEffectStatus) -> Callable[[ContinuityStore], None]:
    """A second side effect of the session, recorded before compaction (not the envelope's key)."""

    def record(store: ContinuityStore) -> None:
        store.record_side_effect(_effect(OTHER_KEY, status), at=store.last_recorded_at() or DRIFT_AT)

    return record


def _rehydrate(w: World) -> Decision:
    return w.rehydrate()


def _governed(**changes: Any) -> Callable[[World], Decision]:
    """The pure validator with governed state altered (no stored-bytes hash)."""
    return lambda w: w.verify(governed=attrs.evolve(w.governed(), **changes))


def _record(field: str, **changes: Any) -> Callable[[World], Decision]:
    """The pure validator given a record of another entity (one field of the record swapped)."""

    def act(w: World) -> Decision:
        state = w.governed()
        current = getattr(state, field)
        assert current is not None
        return w.verify(governed=attrs.evolve(state, **{field: msgspec.structs.replace(current, **changes)}))

    return act


def _stored_bytes(encode: Callable[[dict[str, Any]], bytes]) -> Callable[[World], Decision]:
    """Replace the stored envelope row with another encoding of its content."""

    def act(w: World) -> Decision:
        w.tamper_envelope(encode(w.envelope_dict()))
        return w.rehydrate()

    return act


def _with_expiry(text: str) -> Callable[[dict[str, Any]], bytes]:
    return lambda body: msgspec.json.encode({**body, "approval_expires_at": text})


def _update(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda body: body.update(values)


def _reverse(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda body: body.update({name: list(reversed(body[name]))})


def _second_obligation(store: ContinuityStore) -> None:
    store.open_obligation(SEED.session_id, "answer_customer", at=store.last_recorded_at() or DRIFT_AT)


#: A session with two open obligations, both sealed (so their order can be changed).
TWO_OBLIGATIONS = {
    "before_compaction": _second_obligation,
    "compactor": lambda kwargs: {**kwargs, "pending_obligations": (SEED.obligation, "answer_customer")},
}


COMMITTED = {"side_effect_status": SideEffectStatus.COMMITTED}
#: An envelope claiming no side effect at all (no key, status none).
DROPPED = {"idempotency_key": None, "side_effect_status": "side_effect_none"}
NONE = {"side_effect_status": SideEffectStatus.NONE}

CASES = [
    # --- item 15: a dropped or changed idempotency key never passes ---------------------------
    *(
        Case(f"sealed_without_key_while_{status.value}", _rehydrate, FAILED, R.IDEMPOTENCY_KEY_CHANGED,
             reconcile=False, world={"side_effect_status": status, "compactor": _forget_key})
        for status in (SideEffectStatus.COMMITTED, SideEffectStatus.NONE, SideEffectStatus.NOT_APPLIED)
    ),
    Case("sealed_without_key_while_unknown", _rehydrate, FAILED, R.IDEMPOTENCY_KEY_CHANGED,
         also=frozenset({R.UNKNOWN_SIDE_EFFECT}), reconcile=True,
         world={"side_effect_status": SideEffectStatus.UNKNOWN, "compactor": _forget_key}),
    *(
        Case(f"{status.value}_key_recorded_after_sealing", record_effect("ticket-intent-018", status),
             FAILED, R.IDEMPOTENCY_KEY_CHANGED, reconcile=False)
        for status in (SideEffectStatus.COMMITTED, SideEffectStatus.NONE, SideEffectStatus.NOT_APPLIED)
    ),
    Case("committed_key_recorded_after_sealing_in_committed_world",
         record_effect("ticket-intent-018", SideEffectStatus.COMMITTED), FAILED,
         R.IDEMPOTENCY_KEY_CHANGED, world=COMMITTED),
    Case("second_effect_sealed_and_unchanged", _rehydrate, OK, R.CONTINUITY_VALIDATED,
         world={"before_compaction": _earlier_effect(SideEffectStatus.COMMITTED)}),
    Case("second_effect_reconciled_after_sealing",
         record_effect(OTHER_KEY, SideEffectStatus.NOT_APPLIED), FAILED,
         R.SIDE_EFFECT_STATUS_CHANGED,
         world={"before_compaction": _earlier_effect(SideEffectStatus.COMMITTED)}),
    Case("committed_after_sealing", record_effect(KEY, SideEffectStatus.COMMITTED), FAILED,
         R.SIDE_EFFECT_STATUS_CHANGED, reconcile=False),
    Case("not_applied_after_sealing_committed", record_effect(KEY, SideEffectStatus.NOT_APPLIED),
         FAILED, R.SIDE_EFFECT_STATUS_CHANGED, world=COMMITTED),
    Case("stored_key_dropped", stored(_update(**DROPPED)), FAILED,
         R.ENVELOPE_RECORD_MISMATCH, also=frozenset({R.IDEMPOTENCY_KEY_CHANGED}), world=COMMITTED),
    Case("pure_key_dropped", pure(_update(**DROPPED)), FAILED,
         R.IDEMPOTENCY_KEY_CHANGED, world=COMMITTED),
    Case("pure_key_dropped_and_snapshot_agrees",
         lambda w: w.verify(
             {**w.envelope_dict(), **DROPPED},
             governed=_snapshot_without_key(w)),
         FAILED, R.IDEMPOTENCY_KEY_CHANGED, world=COMMITTED),
    Case("pure_key_to_other_sealed_key", pure(_update(idempotency_key=OTHER_KEY)), FAILED,
         R.IDEMPOTENCY_KEY_CHANGED,
         world={"before_compaction": _earlier_effect(SideEffectStatus.NONE)}),
    Case("pure_key_cyrillic_lookalike", pure(_update(idempotency_key="ticket-\u0456ntent-017")),
         FAILED, R.IDEMPOTENCY_KEY_CHANGED, world=COMMITTED),
    Case("pure_key_case_changed", pure(_update(idempotency_key="Ticket-intent-017")), FAILED,
         R.IDEMPOTENCY_KEY_CHANGED, world=COMMITTED),
    Case("pure_key_fullwidth", pure(_update(idempotency_key="ｔicket-intent-017")), FAILED,
         R.IDEMPOTENCY_KEY_CHANGED, world=COMMITTED),
    Case("stored_key_zero_width", stored(_update(idempotency_key="ticket-intent-017\u200b")),
         FAILED, R.MALFORMED_FIELD, world=COMMITTED),
    Case("stored_key_trailing_space", stored(_update(idempotency_key="ticket-intent-017 ")),
         FAILED, R.MALFORMED_FIELD, world=COMMITTED),
    Case("stored_key_as_number", stored(_update(idempotency_key=17)), FAILED, R.MALFORMED_FIELD),
    Case("stored_key_as_list", stored(_update(idempotency_key=[KEY])), FAILED, R.MALFORMED_FIELD),
    Case("stored_status_uppercase", stored(_update(side_effect_status="SIDE_EFFECT_COMMITTED")),
         FAILED, R.MALFORMED_FIELD, world=COMMITTED),
    Case("stored_status_rewritten_to_none", stored(_update(side_effect_status="side_effect_none")),
         FAILED, R.ENVELOPE_RECORD_MISMATCH, also=frozenset({R.SIDE_EFFECT_STATUS_CHANGED}),
         world=COMMITTED),
    Case("sealed_effect_gone_from_ledger",
         _governed(session_side_effects=(_effect(KEY, SideEffectStatus.NONE),)), FAILED,
         R.IDEMPOTENCY_KEY_CHANGED, also=frozenset({R.UNKNOWN_SIDE_EFFECT}), reconcile=True,
         world={"before_compaction": _earlier_effect(SideEffectStatus.COMMITTED)}),
    Case("journal_from_before_side_effects_were_sealed",
         lambda w: w.verify(governed=_snapshot_side_effects(w, ())), FAILED,
         R.IDEMPOTENCY_KEY_CHANGED, world=COMMITTED),
    # --- item 16: the records given must be the ones the envelope names -----------------------
    Case("approval_record_of_other_approval", approval(approval_id="apr-099"), FAILED,
         R.APPROVAL_RECORD_MISMATCH),
    Case("capability_record_of_other_capability", _record("capability", capability_name="delete_ticket"),
         FAILED, R.CAPABILITY_CHANGED),
    Case("side_effect_record_of_other_key", side_effect_record(idempotency_key="ticket-intent-099"),
         FAILED, R.IDEMPOTENCY_KEY_CHANGED),
    Case("identity_record_of_other_session", _record("session_identity", session_id="session-x"),
         FAILED, R.SESSION_MISMATCH),
    Case("resources_record_of_other_session", _record("resources", session_id="session-x"),
         FAILED, R.SESSION_MISMATCH),
    Case("session_side_effects_of_other_session",
         _governed(session_side_effects=(_effect(KEY, SideEffectStatus.NONE, "session-x"),)),
         FAILED, R.SESSION_MISMATCH),
    Case("capability_record_as_plain_dict",
         _governed(capability={"capability_name": SEED.capability_name, "capability_version": "v"}),
         FAILED, R.MALFORMED_FIELD),
    # --- item 17: a side effect that becomes unknown or partial after sealing blocks -------------
    Case("became_partial_after_sealing", record_effect(KEY, SideEffectStatus.PARTIAL), BLOCKED,
         R.PARTIAL_SIDE_EFFECT, reconcile=True),
    Case("committed_became_unknown", record_effect(KEY, SideEffectStatus.UNKNOWN), BLOCKED,
         R.UNKNOWN_SIDE_EFFECT, reconcile=True, world=COMMITTED),
    Case("not_applied_became_partial", record_effect(KEY, SideEffectStatus.PARTIAL), BLOCKED,
         R.PARTIAL_SIDE_EFFECT, reconcile=True,
         world={"side_effect_status": SideEffectStatus.NOT_APPLIED}),
    Case("unknown_became_partial", record_effect(KEY, SideEffectStatus.PARTIAL), BLOCKED,
         R.PARTIAL_SIDE_EFFECT, reconcile=True, world={"side_effect_status": SideEffectStatus.UNKNOWN}),
    Case("second_sealed_effect_became_unknown", record_effect(OTHER_KEY, SideEffectStatus.UNKNOWN),
         BLOCKED, R.UNKNOWN_SIDE_EFFECT, reconcile=True,
         world={"before_compaction": _earlier_effect(SideEffectStatus.COMMITTED)}),
    Case("became_unknown_and_policy_drifted",
         lambda w: (
             w.store.record_side_effect(_effect(KEY, SideEffectStatus.UNKNOWN), at=DRIFT_AT),
             drift(lambda s: s.set_policy_version(SEED.tenant_id, "policy-v5", at=DRIFT_AT))(w),
         )[1],
         FAILED, R.POLICY_VERSION_CHANGED, also=frozenset({R.UNKNOWN_SIDE_EFFECT}), reconcile=True),
    # --- item 18: semantically identical re-encodings stay valid --------------------------------
    Case("stored_pretty_printed", _stored_bytes(lambda b: json.dumps(b, indent=4).encode()), OK,
         R.CONTINUITY_VALIDATED),
    Case("stored_ascii_escaped", _stored_bytes(lambda b: json.dumps(b, ensure_ascii=True).encode()),
         OK, R.CONTINUITY_VALIDATED),
    Case("stored_every_char_escaped",
         _stored_bytes(lambda b: msgspec.json.encode(b).replace(b'"tenant-acme"',
                                                                b'"\\u0074enant-acme"')),
         OK, R.CONTINUITY_VALIDATED),
    Case("stored_trailing_newline", _stored_bytes(lambda b: msgspec.json.encode(b) + b"\n"), OK,
         R.CONTINUITY_VALIDATED),
    Case("stored_expiry_plus_zero", _stored_bytes(_with_expiry("2026-07-21T18:00:00+00:00")), OK,
         R.CONTINUITY_VALIDATED),
    Case("stored_expiry_other_offset", _stored_bytes(_with_expiry("2026-07-21T20:00:00+02:00")), OK,
         R.CONTINUITY_VALIDATED),
    Case("stored_expiry_with_fraction", _stored_bytes(_with_expiry("2026-07-21T18:00:00.000000Z")), OK,
         R.CONTINUITY_VALIDATED),
    Case("stored_expiry_one_second_later", _stored_bytes(_with_expiry("2026-07-21T18:00:01Z")), FAILED,
         R.ENVELOPE_RECORD_MISMATCH, also=frozenset({R.APPROVAL_RECORD_MISMATCH})),
    Case("stored_obligations_reordered", stored(_reverse("pending_obligations")), OK,
         R.CONTINUITY_VALIDATED, world=TWO_OBLIGATIONS),
    Case("stored_obligation_dropped", stored(lambda b: b["pending_obligations"].pop()), FAILED,
         R.ENVELOPE_RECORD_MISMATCH, also=frozenset({R.OBLIGATION_DROPPED}), world=TWO_OBLIGATIONS),
    Case("stored_evidence_reordered", stored(_reverse("evidence_refs")), FAILED,
         R.ENVELOPE_RECORD_MISMATCH),
    Case("stored_range_swapped",
         stored(_update(source_event_range={"first": SEED.last_event, "last": SEED.first_event})),
         FAILED, R.ENVELOPE_RECORD_MISMATCH, also=frozenset({R.EVENT_RANGE_MISMATCH})),
    Case("pure_tenant_and_principal_swapped",
         pure(_update(tenant_id=SEED.principal_id, principal_id=SEED.tenant_id)), FAILED,
         R.TENANT_MISMATCH, also=frozenset({R.PRINCIPAL_MISMATCH})),
    Case("stored_budget_as_bool", stored(_update(budget_remaining=True)), FAILED, R.MALFORMED_FIELD),
    Case("stored_budget_as_float", stored(_update(budget_remaining=7.0)), FAILED, R.MALFORMED_FIELD),
    Case("stored_flag_as_one", stored(_update(requires_reauthorization=1)), FAILED, R.MALFORMED_FIELD),
    Case("stored_with_bom", _stored_bytes(lambda b: b"\xef\xbb\xbf" + msgspec.json.encode(b)), FAILED,
         R.ENVELOPE_UNDECODABLE),
    Case("stored_tenant_cyrillic_escaped",
         _stored_bytes(lambda b: msgspec.json.encode(b).replace(b'"tenant-acme"',
                                                                b'"tenant-\\u0430cme"')),
         FAILED, R.ENVELOPE_RECORD_MISMATCH, also=frozenset({R.TENANT_MISMATCH})),
    Case("stored_objective_nfd",
         _stored_bytes(lambda b: msgspec.json.encode({**b, "objective": b["objective"] + "e\u0301"})),
         FAILED, R.ENVELOPE_RECORD_MISMATCH),
]


def _snapshot_side_effects(w: World, entries: tuple[SideEffectEntry, ...]) -> Any:
    state = w.governed()
    assert state.record is not None
    assert state.record.snapshot is not None
    snapshot = msgspec.structs.replace(state.record.snapshot, side_effects=entries)
    return attrs.evolve(state, record=attrs.evolve(state.record, snapshot=snapshot))


def _snapshot_without_key(w: World) -> Any:
    """Journal and envelope agree on "no key" (a compactor that forgot it consistently)."""
    state = _snapshot_side_effects(w, ())
    assert state.record.snapshot is not None
    snapshot = msgspec.structs.replace(
        state.record.snapshot, idempotency_key=None, side_effect_status=SideEffectStatus.NONE
    )
    return attrs.evolve(state, record=attrs.evolve(state.record, snapshot=snapshot))


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_case(case: Case) -> None:
    """The attack yields exactly the expected decision and primary reason, never authorisation."""
    assert_case(case)


def test_sealed_without_key_emits_no_rehydration() -> None:
    """A committed write the envelope does not name never yields context_rehydration."""
    world = make_world(side_effect_status=SideEffectStatus.COMMITTED, compactor=_forget_key)
    decision = world.rehydrate()
    assert decision.event_types == ("continuity_validation_failed",)
    assert "context_rehydration" not in [e.event_type.value for e in world.store.events()]


def test_the_sealed_snapshot_carries_every_side_effect() -> None:
    """Step 3 seals every side effect of the session with its status, whatever the caller names."""
    world = make_world(side_effect_status=SideEffectStatus.COMMITTED, compactor=_forget_key,
                       before_compaction=_earlier_effect(SideEffectStatus.NOT_APPLIED))
    snapshot = world.governed().record.snapshot  # type: ignore[union-attr]
    assert snapshot is not None
    assert snapshot.side_effects == (
        SideEffectEntry(idempotency_key=OTHER_KEY, status=SideEffectStatus.NOT_APPLIED),
        SideEffectEntry(idempotency_key=KEY, status=SideEffectStatus.COMMITTED),
    )


def test_a_passing_view_tells_the_agent_every_side_effect() -> None:
    """The rebuilt view and the rehydration event list every side effect and its status."""
    world = make_world(side_effect_status=SideEffectStatus.COMMITTED,
                       before_compaction=_earlier_effect(SideEffectStatus.NOT_APPLIED))
    decision = world.rehydrate()
    assert decision.view is not None
    assert dict(decision.view.side_effects) == {
        KEY: "side_effect_committed", OTHER_KEY: "side_effect_not_applied"}
    event = world.store.events(envelope_id=world.envelope_id)[-1]
    assert event.payload["side_effects"] == dict(decision.view.side_effects)


def test_stored_envelope_is_canonical_and_hashed_as_such() -> None:
    """The stored bytes are the canonical encoding (UTC expiry) and the journal seals their hash."""
    plus_two = timezone(timedelta(hours=2))
    seed = attrs.evolve(SEED, approval_expires_at=SEED.approval_expires_at.astimezone(plus_two))
    world = make_world(seed=seed)
    raw = world.store.envelope_bytes(world.envelope_id)
    assert raw is not None
    assert b'"approval_expires_at":"2026-07-21T18:00:00Z"' in raw
    assert raw == encode_envelope(world.envelope)
    sealed = world.governed().record.sealed  # type: ignore[union-attr]
    assert sealed is not None
    assert sealed.envelope_sha256 == envelope_sha256(world.envelope)
    assert world.rehydrate().kind is OK


def test_an_envelope_sealed_before_canonical_hashing_stays_valid() -> None:
    """Bytes and journal hash written by the old (plain msgspec) encoder still validate."""
    plus_two = timezone(timedelta(hours=2))
    seed = attrs.evolve(SEED, approval_expires_at=SEED.approval_expires_at.astimezone(plus_two))
    world = make_world(seed=seed)
    legacy = msgspec.json.encode(world.envelope)  # what the store held before canonical form
    assert b"+02:00" in legacy
    old_hash = "sha256:" + hashlib.sha256(legacy).hexdigest()
    world.tamper_envelope(legacy)
    world.conn.execute("DROP TRIGGER continuity_journal_no_update")
    body = msgspec.json.encode({"summary_sha256": world.envelope.summary_sha256,
                                "envelope_sha256": old_hash})
    world.conn.execute("UPDATE continuity_journal SET body = ? WHERE envelope_id = ? AND step = ?",
                       (body, world.envelope_id, "envelope"))
    assert world.rehydrate().kind is OK
    # ... and it is still bound to its meaning: a changed field fails.
    changed = msgspec.json.encode({**msgspec.json.decode(legacy), "budget_remaining": 6})
    world.conn.execute("UPDATE continuity_envelopes SET body = ? WHERE envelope_id = ?",
                       (changed, world.envelope_id))
    assert world.rehydrate().reason is R.ENVELOPE_RECORD_MISMATCH
