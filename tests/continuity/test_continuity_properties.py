"""Hypothesis properties of the validator: totality, no authorisation, sensitivity, digest-only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import msgspec
from continuity_helpers import RESUMED_AT, World, json_values, make_world
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holon_ctx.continuity import (
    ApprovalStatus,
    Decision,
    DecisionKind,
    GovernedState,
    ReasonCode,
    ResumeContext,
    SideEffectRecord,
    SideEffectStatus,
    decode_envelope,
    rehydrate,
    summary_digest,
    verify_envelope,
)
from holon_ctx.continuity.envelope import ENVELOPE_FIELDS
from holon_ctx.continuity.scenario import SEED

WORLD = make_world()  # read-only in these properties: every check below is pure
BASE = WORLD.envelope_dict()
GOVERNED = WORLD.governed()
PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
ids = st.text(min_size=0, max_size=12)


def _verify(raw: object, **overrides: Any) -> Decision:
    kwargs: dict[str, Any] = {
        "envelope_id": WORLD.envelope_id,
        "summary_bytes": WORLD.summary,
        "resume": WORLD.resume,
        "governed": attrs.evolve(GOVERNED, stored_envelope_sha256=None),
        "now": RESUMED_AT,
    }
    kwargs.update(overrides)
    return verify_envelope(raw, **kwargs)


def test_baseline_passes() -> None:
    """The unaltered world is the reference point: reauthorization_required."""
    assert _verify(BASE).kind is DecisionKind.REAUTHORIZATION_REQUIRED


@PROPERTY_SETTINGS
@given(raw=json_values | st.binary(max_size=64) | st.from_type(object))
def test_decoding_never_raises(raw: object) -> None:
    """Any data at all decodes to findings, never an exception."""
    decoded = decode_envelope(raw)
    assert decoded.envelope is None or decoded.findings == ()


@PROPERTY_SETTINGS
@given(
    edits=st.dictionaries(st.sampled_from([*ENVELOPE_FIELDS, "authorized", "x"]), json_values),
    summary=st.binary(max_size=32),
    tenant=ids,
    principal=ids,
    mode=ids,
    now=st.none() | st.datetimes(timezones=st.just(UTC)) | st.datetimes(),
)
def test_no_input_yields_authorisation_and_validation_never_raises(
    edits: dict[str, Any], summary: bytes, tenant: str, principal: str, mode: str, now: Any
) -> None:
    """Arbitrary envelope edits, summaries, claims and times: a decision, never authorised."""
    resume = ResumeContext(
        session_id=SEED.session_id, tenant_id=tenant, principal_id=principal, authorization_mode=mode
    )
    decision = _verify({**BASE, **edits}, summary_bytes=summary, resume=resume, now=now)
    assert decision.authorized is False
    assert decision.to_dict()["authorized"] is False
    assert decision.requires_reauthorization is True


#: Well-formed alternatives per field, so the property is not won by schema errors alone.
_VALID_ALTERNATIVES: dict[str, st.SearchStrategy[Any]] = {
    "reset_reason": st.sampled_from(["context_reset", "process_recovery", "role_handoff"]),
    "authorization_mode": st.sampled_from(["service_account", "operator"]),
    "side_effect_status": st.sampled_from(
        [s.value for s in SideEffectStatus if s is not SideEffectStatus.NONE]
    ),
    "budget_remaining": st.integers(0, 1000),
    "approval_expires_at": st.datetimes(timezones=st.just(UTC)).map(
        lambda d: d.isoformat().replace("+00:00", "Z")
    ),
    "source_event_range": st.fixed_dictionaries(
        {"first": st.sampled_from(["event-0001", "event-0002"]), "last": st.just("event-0141")}
    ),
    "exact_constraint_refs": st.lists(
        st.from_regex(r"event:c-[0-9]{1,3}", fullmatch=True), max_size=2, unique=True
    ),
    "pending_obligations": st.lists(st.from_regex(r"[a-z_]{1,10}", fullmatch=True), max_size=2, unique=True),
    "evidence_refs": st.lists(
        st.from_regex(r"trace:[a-z0-9-]{1,10}", fullmatch=True), max_size=2, unique=True
    ),
    "summary_sha256": st.from_regex(r"sha256:[0-9a-f]{64}", fullmatch=True),
}


def _different(name: str, value: Any) -> st.SearchStrategy[Any]:
    """A JSON value that differs from ``value``: well-formed for its field, or not."""
    candidates = json_values | st.text(min_size=1, max_size=16).map(lambda t: f"x-{t}")
    if name in _VALID_ALTERNATIVES:
        candidates = candidates | _VALID_ALTERNATIVES[name]
    if isinstance(value, str):
        well_formed_id = st.from_regex(r"[a-z][a-z0-9:-]{0,15}", fullmatch=True)
        candidates = candidates | well_formed_id | st.just(value + " ")
    return candidates.filter(lambda v: v != value)


@st.composite
def single_field_change(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(ENVELOPE_FIELDS))
    return {**BASE, name: draw(_different(name, BASE[name]))}


@PROPERTY_SETTINGS
@given(changed=single_field_change())
def test_any_single_envelope_field_change_fails(changed: dict[str, Any]) -> None:
    """Changing any one envelope field (even to a well-formed value) never passes validation."""
    assert _verify(changed).kind is not DecisionKind.REAUTHORIZATION_REQUIRED


def _replace(record: Any, **changes: Any) -> Any:
    return msgspec.structs.replace(record, **changes)


def _governed_mutations(text: str) -> list[GovernedState]:
    g = GOVERNED
    assert g.approval
    assert g.side_effect
    assert g.session_identity
    assert g.resources
    assert g.record
    later = datetime(2026, 7, 21, 17, 0, tzinfo=UTC) + timedelta(seconds=len(text))
    other = f"other-{text}"
    return [
        attrs.evolve(g, policy_version=other),
        attrs.evolve(g, capability=_replace(g.capability, capability_version=other)),
        attrs.evolve(g, capability=_replace(g.capability, capability_version=None)),
        attrs.evolve(g, approval=_replace(g.approval, status=ApprovalStatus.REVOKED)),
        attrs.evolve(g, approval=_replace(g.approval, status=ApprovalStatus.CONSUMED)),
        attrs.evolve(g, approval=_replace(g.approval, expires_at=later)),
        attrs.evolve(g, approval=_replace(g.approval, tenant_id=other)),
        attrs.evolve(g, approval=_replace(g.approval, principal_id=other)),
        attrs.evolve(g, approval=_replace(g.approval, capability_name=other)),
        attrs.evolve(g, approval=_replace(g.approval, action_digest=other)),
        attrs.evolve(g, approval=None),
        attrs.evolve(g, side_effect=_replace(g.side_effect, status=SideEffectStatus.COMMITTED)),
        attrs.evolve(g, side_effect=_replace(g.side_effect, session_id=other)),
        attrs.evolve(g, side_effect=_replace(g.side_effect, tenant_id=other)),
        attrs.evolve(g, session_identity=_replace(g.session_identity, tenant_id=other)),
        attrs.evolve(g, session_identity=_replace(g.session_identity, principal_id=other)),
        attrs.evolve(g, session_identity=_replace(g.session_identity, delegated_scope=other)),
        attrs.evolve(g, session_identity=None),
        attrs.evolve(g, checkpoint_ref=other),
        attrs.evolve(g, resources=_replace(g.resources, budget_remaining=len(text) + 8)),
        attrs.evolve(g, resources=_replace(g.resources, sandbox_snapshot_ref=other)),
        attrs.evolve(g, resources=None),
        attrs.evolve(g, open_obligations=(*g.open_obligations, other)),
        attrs.evolve(g, open_obligations=()),
        attrs.evolve(g, active_constraint_refs=(*g.active_constraint_refs, other)),
        attrs.evolve(g, active_constraint_refs=()),
        attrs.evolve(g, latest_complete_envelope_id=other),
        attrs.evolve(g, record=attrs.evolve(g.record, compaction_event=None)),
        attrs.evolve(g, record=attrs.evolve(g.record, snapshot=_replace(g.record.snapshot, objective=other))),
        attrs.evolve(
            g,
            session_side_effects=(
                SideEffectRecord(
                    idempotency_key=other,
                    tenant_id=SEED.tenant_id,
                    session_id=SEED.session_id,
                    status=SideEffectStatus.UNKNOWN,
                ),
            ),
        ),
    ]


@PROPERTY_SETTINGS
@given(text=st.text(alphabet="abcxyz019-", min_size=1, max_size=8), data=st.data())
def test_any_single_governed_state_change_is_stricter(text: str, data: st.DataObject) -> None:
    """Changing any one governed fact after compaction never passes validation."""
    mutations = _governed_mutations(text)
    index = data.draw(st.integers(0, len(mutations) - 1))
    decision = _verify(BASE, governed=attrs.evolve(mutations[index], stored_envelope_sha256=None))
    assert decision.kind is not DecisionKind.REAUTHORIZATION_REQUIRED


def _sealed_for(world: World, summary: bytes) -> tuple[dict[str, Any], GovernedState]:
    """The same envelope and journal, but sealed over ``summary``."""
    digest = summary_digest(
        envelope_id=world.envelope_id,
        session_id=SEED.session_id,
        source_event_range=(SEED.first_event, SEED.last_event),
        summary_bytes=summary,
    )
    record = GOVERNED.record
    assert record is not None
    assert record.sealed is not None
    sealed = _replace(record.sealed, summary_sha256=digest)
    governed = attrs.evolve(GOVERNED, record=attrs.evolve(record, sealed=sealed))
    return {**BASE, "summary_sha256": digest}, governed


@PROPERTY_SETTINGS
@given(summary=st.binary(max_size=200), other=st.binary(max_size=200))
def test_decision_depends_on_the_summary_only_through_its_digest(summary: bytes, other: bytes) -> None:
    """Whatever a summary says, it is validated only by digest; a different one always mismatches."""
    raw, governed = _sealed_for(WORLD, summary)
    governed = attrs.evolve(governed, stored_envelope_sha256=None)
    sealed = _verify(raw, summary_bytes=summary, governed=governed)
    assert (sealed.kind, sealed.reason, sealed.findings) == (
        DecisionKind.REAUTHORIZATION_REQUIRED,
        ReasonCode.CONTINUITY_VALIDATED,
        (),
    )
    if other != summary:
        swapped = _verify(raw, summary_bytes=other, governed=governed)
        assert [f.code for f in swapped.findings] == [ReasonCode.SUMMARY_DIGEST_MISMATCH]


@PROPERTY_SETTINGS
@given(
    changed=single_field_change() | st.just(BASE),
    key=st.text(alphabet="abcdef-0123", min_size=1, max_size=10),
    status=st.sampled_from([SideEffectStatus.UNKNOWN, SideEffectStatus.PARTIAL]),
    summary=st.binary(max_size=16),
)
def test_an_unresolved_side_effect_always_blocks(
    changed: dict[str, Any], key: str, status: SideEffectStatus, summary: bytes
) -> None:
    """With an unknown or partial effect in the session, reconciliation is always required."""
    effect = SideEffectRecord(
        idempotency_key=key, tenant_id=SEED.tenant_id, session_id=SEED.session_id, status=status
    )
    governed = attrs.evolve(GOVERNED, session_side_effects=(effect,), stored_envelope_sha256=None)
    decision = _verify(changed, governed=governed, summary_bytes=summary)
    assert decision.reconciliation_required is True
    assert decision.kind is not DecisionKind.REAUTHORIZATION_REQUIRED


anything = st.none() | st.integers() | st.text(max_size=12) | st.binary(max_size=8) | json_values


@settings(max_examples=60, deadline=None, database=None)
@given(
    envelope_id=anything,
    summary=anything,
    session=anything,
    tenant=anything,
    mode=anything,
    key=anything,
    clock_value=anything | st.datetimes() | st.datetimes(timezones=st.just(UTC)),
)
def test_rehydrate_never_raises_on_hostile_arguments(
    envelope_id: Any, summary: Any, session: Any, tenant: Any, mode: Any, key: Any, clock_value: Any
) -> None:
    """rehydrate with arbitrary ids, summaries, claims and clock values returns a decision."""
    world = make_world()
    resume = ResumeContext(
        session_id=session,
        tenant_id=tenant,
        principal_id=SEED.principal_id,
        authorization_mode=mode,
        idempotency_key=key,
    )
    decision = rehydrate(
        world.store, envelope_id, summary_bytes=summary, resume=resume, clock=lambda: clock_value
    )
    assert decision.authorized is False
    assert decision.kind is not DecisionKind.REAUTHORIZATION_REQUIRED
