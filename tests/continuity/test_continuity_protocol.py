"""The compaction and rehydration protocol: order, crash recovery, trace events, integration API."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from continuity_helpers import COMPACTED_AT, RESUMED_AT, make_world

from holon_ctx.continuity import (
    SUMMARY_TRUST,
    CompactionConflictError,
    CompactionRequest,
    CompactionStep,
    ContinuityInputError,
    ContinuityStore,
    DecisionKind,
    GovernedStateError,
    MemoryBackend,
    ReasonCode,
    SideEffectStatus,
    TraceEventType,
    UntrustedClockError,
    encode_envelope,
    prepare_compaction,
    rehydrate,
)
from holon_ctx.continuity.experiment import TAMPER_SUFFIX, run_experiment
from holon_ctx.continuity.scenario import (
    SEED,
    SEED_SUMMARY,
    T0,
    ManualClock,
    apply_history,
    compaction_kwargs,
    fold_history,
    resume_from,
    seed_history,
)

K = DecisionKind
R = ReasonCode


def _fresh(store: ContinuityStore | None = None, **history: Any) -> tuple[ContinuityStore, dict[str, Any]]:
    store = store or ContinuityStore.in_memory()
    events = seed_history(**history)
    apply_history(store, events, T0)
    return store, fold_history(events)


def _prepare(store: ContinuityStore, control: dict[str, Any], **overrides: Any) -> Any:
    kwargs = {**compaction_kwargs(control), **overrides}
    kwargs.setdefault("summary_bytes", SEED_SUMMARY)
    clock = kwargs.pop("clock", lambda: COMPACTED_AT)
    fault_hook = kwargs.pop("fault_hook", None)
    return prepare_compaction(store, CompactionRequest(**kwargs), clock=clock,
                              fault_hook=fault_hook)


def _rehydrate(store: ContinuityStore, control: dict[str, Any], **overrides: Any) -> Any:
    return rehydrate(
        store,
        overrides.pop("envelope_id", SEED.envelope_id),
        summary_bytes=overrides.pop("summary_bytes", SEED_SUMMARY),
        resume=overrides.pop("resume", resume_from(control)),
        clock=overrides.pop("clock", lambda: RESUMED_AT),
    )


def test_normal_path_requires_reauthorization_and_rebuilds_from_governed_state() -> None:
    """A clean rehydration is reauthorization_required with a view built from the store."""
    world = make_world()
    decision = world.rehydrate()
    assert (decision.kind, decision.reason) == (K.REAUTHORIZATION_REQUIRED, R.CONTINUITY_VALIDATED)
    assert decision.authorized is False
    assert decision.requires_reauthorization is True
    view = decision.view
    assert view is not None
    assert [(c.ref, c.text) for c in view.constraints] == [(SEED.constraint_ref, SEED.constraint_text)]
    assert view.pending_obligations == (SEED.obligation,)
    assert view.checkpoint_ref == SEED.checkpoint_ref
    assert view.source_event_range == (SEED.first_event, SEED.last_event)
    assert SEED.constraint_ref in view.selected_event_refs
    assert view.untrusted_summary == SEED_SUMMARY
    assert view.summary_trust == SUMMARY_TRUST
    assert dict(view.reloaded_versions)["policy_version"] == SEED.policy_version


def test_envelope_control_state_comes_from_the_registry_not_the_caller() -> None:
    """Policy, capability version, action digest, expiry and side-effect status are read from the store."""
    world = make_world(side_effect_status=SideEffectStatus.COMMITTED)
    envelope = world.envelope
    assert envelope.policy_version == SEED.policy_version
    assert envelope.capability_version == SEED.capability_version
    assert envelope.action_digest == SEED.action_digest
    assert envelope.approval_expires_at == SEED.approval_expires_at
    assert envelope.side_effect_status is SideEffectStatus.COMMITTED
    assert envelope.requires_reauthorization is True
    assert world.store.latest_envelope(SEED.session_id) == envelope


def test_trace_links_compaction_and_rehydration() -> None:
    """context_compaction then context_rehydration, same envelope id, linked by sequence."""
    world = make_world()
    world.rehydrate()
    compaction, rehydration = world.store.events(envelope_id=world.envelope_id)
    assert compaction.event_type is TraceEventType.CONTEXT_COMPACTION
    assert rehydration.event_type is TraceEventType.CONTEXT_REHYDRATION
    assert rehydration.payload["compaction_event_seq"] == compaction.seq
    assert compaction.payload["summary_sha256"] == world.envelope.summary_sha256
    assert compaction.payload["trigger"] == "context_compaction"
    assert compaction.payload["source_event_range"] == {"first": "event-0001", "last": "event-0142"}
    assert "approval" in compaction.payload["retained_field_classes"]
    assert rehydration.payload["requires_reauthorization"] is True
    assert rehydration.payload["reloaded_versions"]["capability_version"] == SEED.capability_version


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"tamper_summary": True},
        {"current_policy_version": "policy-v5"},
        {"side_effect_status": SideEffectStatus.UNKNOWN},
    ],
)
def test_no_event_carries_summary_or_constraint_text(options: dict[str, Any]) -> None:
    """Trace payloads never contain the summary, injected text or the exact constraint text."""
    result = run_experiment(**options)
    for event in result.events:
        payload = msgspec.json.encode(event.payload)
        assert SEED_SUMMARY not in payload
        assert b"cannot sign in" not in payload
        assert TAMPER_SUFFIX.strip() not in payload
        assert SEED.constraint_text.encode() not in payload
        assert b'"authorized":true' not in payload


def test_unknown_side_effect_blocks_without_rehydration_or_retry() -> None:
    """Blocked: a failure event with unknown_side_effect, no rehydration, ledger untouched."""
    world = make_world(side_effect_status=SideEffectStatus.UNKNOWN)
    before = world.store.side_effects(SEED.session_id)
    decision = world.rehydrate()
    assert decision.kind is K.BLOCKED_ON_RECONCILIATION
    assert decision.view is None
    types = [e.event_type for e in world.store.events(envelope_id=world.envelope_id)]
    assert types == [TraceEventType.CONTEXT_COMPACTION, TraceEventType.CONTINUITY_VALIDATION_FAILED]
    failure = world.store.events(envelope_id=world.envelope_id)[-1].payload
    assert failure["reason"] == "unknown_side_effect"
    assert failure["reconciliation_required"] is True
    assert world.store.side_effects(SEED.session_id) == before
    assert world.store.reconciliation_blocking(SEED.session_id) is True


@pytest.mark.parametrize("step", list(CompactionStep))
def test_crash_after_any_step_never_rehydrates_and_recovers(step: CompactionStep) -> None:
    """After a crash at any step nothing rehydrates; re-running completes with one compaction event."""
    store, control = _fresh()

    def crash(reached: CompactionStep) -> None:
        if reached is step:
            raise SystemExit("crash")

    with pytest.raises(SystemExit):
        _prepare(store, control, fault_hook=crash)
    after_crash = _rehydrate(store, control)
    complete = step is CompactionStep.COMPACTION_EVENT
    assert (after_crash.kind is K.REAUTHORIZATION_REQUIRED) is complete
    if not complete:
        assert store.latest_envelope(SEED.session_id) is None
        types = [e.event_type for e in store.events(session_id=SEED.session_id)]
        assert TraceEventType.CONTEXT_REHYDRATION not in types
    envelope = _prepare(store, control, clock=lambda: RESUMED_AT)
    assert store.latest_envelope(SEED.session_id) == envelope
    recovered = _rehydrate(store, control, clock=lambda: RESUMED_AT + timedelta(minutes=1))
    assert recovered.kind is K.REAUTHORIZATION_REQUIRED
    compactions = [e for e in store.events() if e.event_type is TraceEventType.CONTEXT_COMPACTION]
    assert len(compactions) == 1


class _LosesStepJournal(MemoryBackend):
    """Dies after appending the compaction event but before journaling it (once)."""

    armed = True

    def append_step(self, envelope_id: str, step: str, body: bytes, at: str) -> None:
        if step == "compaction_event" and self.armed:
            self.armed = False
            raise SystemExit("crash between event and journal")
        super().append_step(envelope_id, step, body, at)


def test_crash_between_event_and_journal_does_not_duplicate_the_event() -> None:
    """Recovery reuses the already-appended compaction event."""
    store, control = _fresh(ContinuityStore(_LosesStepJournal()))
    with pytest.raises(SystemExit):
        _prepare(store, control)
    assert _rehydrate(store, control).reason is R.COMPACTION_INCOMPLETE
    _prepare(store, control, clock=lambda: RESUMED_AT)
    compactions = [e for e in store.events() if e.event_type is TraceEventType.CONTEXT_COMPACTION]
    assert len(compactions) == 1
    assert _rehydrate(store, control, clock=lambda: RESUMED_AT).kind is K.REAUTHORIZATION_REQUIRED


def test_rerunning_a_complete_compaction_is_idempotent() -> None:
    """The same inputs under the same id return the same envelope and add nothing."""
    store, control = _fresh()
    first = _prepare(store, control)
    events = store.events()
    assert _prepare(store, control) == first
    assert store.events() == events


@pytest.mark.parametrize(
    ("override", "step"),
    [
        ({"summary_bytes": SEED_SUMMARY + b" "}, "envelope"),
        ({"source_event_range": ("event-0001", "event-0143")}, "boundary"),
        ({"checkpoint_ref": "checkpoint:other"}, "checkpoint"),
        ({"objective": "Something else."}, "governed_snapshot"),
        ({"budget_remaining": 6}, "governed_snapshot"),
    ],
)
def test_reused_envelope_id_with_different_inputs_conflicts(override: dict[str, Any], step: str) -> None:
    """An envelope id reused with different inputs raises a conflict naming the step."""
    store, control = _fresh()
    _prepare(store, control)
    with pytest.raises(CompactionConflictError) as info:
        _prepare(store, control, **override)
    assert info.value.step == step


@pytest.mark.parametrize(
    ("override", "path"),
    [
        ({"tenant_id": "tenant-acme "}, "$.tenant_id"),
        ({"envelope_id": "ce\u200b1"}, "$.envelope_id"),
        ({"budget_remaining": -1}, "$.budget_remaining"),
        ({"authorization_mode": "root"}, "$.authorization_mode"),
        ({"pending_obligations": ["a", "a"]}, "$.pending_obligations[1]"),
        ({"source_event_range": ("event-0001", "")}, "$.source_event_range.last"),
        ({"summary_bytes": "text"}, "summary"),
    ],
)
def test_prepare_refuses_malformed_input(override: dict[str, Any], path: str) -> None:
    """prepare_compaction raises ContinuityInputError naming the bad field, and writes nothing."""
    store, control = _fresh()
    with pytest.raises(ContinuityInputError) as info:
        _prepare(store, control, **override)
    assert info.value.path == path
    assert store.compaction_steps(SEED.envelope_id) == {}


@pytest.mark.parametrize(
    "now",
    [datetime(2026, 7, 21, 12, 1), T0 - timedelta(seconds=1), "12:01"],
)
def test_prepare_refuses_an_untrusted_clock(now: Any) -> None:
    """A naive, backwards or non-datetime clock stops compaction before any step."""
    store, control = _fresh()
    with pytest.raises(UntrustedClockError):
        _prepare(store, control, clock=lambda: now)
    assert store.compaction_steps(SEED.envelope_id) == {}


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ({"approval_id": "apr-999"}, "not in the registry"),
        ({"idempotency_key": "intent-999"}, "no side-effect ledger record"),
        ({"capability_name": "unknown_capability"}, "unknown or withdrawn"),
        ({"tenant_id": "tenant-beta"}, None),
    ],
)
def test_prepare_refuses_missing_governed_state(override: dict[str, Any], match: str | None) -> None:
    """Control state the envelope must carry has to exist in the governed store."""
    store, control = _fresh()
    with pytest.raises((GovernedStateError, ContinuityInputError), match=match):
        _prepare(store, control, **override)
    assert store.latest_envelope(SEED.session_id) is None


def test_rehydrate_is_total_on_a_failing_backend() -> None:
    """A backend that raises everywhere yields a failed decision, not an exception."""

    class Broken(MemoryBackend):
        def __getattribute__(self, name: str) -> Any:
            if name.startswith("_"):
                return super().__getattribute__(name)
            raise OSError("disk on fire")

    decision = rehydrate(
        ContinuityStore(Broken()),
        SEED.envelope_id,
        summary_bytes=SEED_SUMMARY,
        resume=resume_from(fold_history(seed_history())),
        clock=lambda: RESUMED_AT,
    )
    assert (decision.kind, decision.reason) == (
        K.CONTINUITY_VALIDATION_FAILED,
        R.GOVERNED_STATE_UNAVAILABLE,
    )
    assert decision.event_types == ()


def test_integration_api_lists_what_the_projection_must_pin() -> None:
    """The store answers the projection engine's questions for a session."""
    world = make_world(side_effect_status=SideEffectStatus.UNKNOWN)
    store = world.store
    assert store.open_obligations(SEED.session_id) == (SEED.obligation,)
    assert store.constraint_refs(SEED.session_id) == (SEED.constraint_ref,)
    assert [c.text for c in store.constraints(SEED.session_id)] == [SEED.constraint_text]
    assert store.reconciliation_blocking(SEED.session_id) is True
    assert [r.idempotency_key for r in store.unresolved_side_effects(SEED.session_id)] == [
        SEED.idempotency_key
    ]
    latest = store.latest_envelope(SEED.session_id)
    assert latest is not None
    assert latest.pending_obligations == (SEED.obligation,)


def test_sqlite_file_survives_a_restart_between_compaction_and_rehydration(tmp_path: Path) -> None:
    """Compact through one process's store, rehydrate through a fresh handle on the same file."""
    path = tmp_path / "ledger.db"
    with ContinuityStore(path) as first:
        _, control = _fresh(first)
        _prepare(first, control)
    with ContinuityStore(path) as second:
        decision = _rehydrate(second, control)
        assert decision.kind is K.REAUTHORIZATION_REQUIRED
        assert [e.event_type for e in second.events()] == [
            TraceEventType.CONTEXT_COMPACTION,
            TraceEventType.CONTEXT_REHYDRATION,
        ]


def test_failure_event_uses_the_last_trusted_time_when_the_clock_lies() -> None:
    """An untrusted clock never stamps the trace: the failure is recorded at the latest known time."""
    world = make_world()
    decision = world.rehydrate(clock=lambda: T0)
    assert decision.reason is R.UNTRUSTED_CLOCK
    failure = world.store.events(envelope_id=world.envelope_id)[-1]
    assert failure.recorded_at == COMPACTED_AT


def test_manual_clock_moves_only_when_told() -> None:
    """The injected clock used by the scenarios is deterministic."""
    clock = ManualClock(T0)
    assert clock() == T0
    assert clock.advance(timedelta(minutes=5)) == T0 + timedelta(minutes=5)
    assert clock() == T0 + timedelta(minutes=5)


def _crash_before_journaling(store: ContinuityStore, control: dict[str, Any],
                             at_step: CompactionStep) -> None:
    """A compaction that did the work of ``at_step`` and crashed before journaling it."""
    real = store.record_step

    def crash(envelope_id: str, step: CompactionStep, body: Any, *, at: Any) -> None:
        if step is at_step:
            raise RuntimeError(f"crash before journaling {at_step}")
        real(envelope_id, step, body, at=at)

    store.record_step = crash  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="crash before journaling"):
        _prepare(store, control)
    store.record_step = real  # type: ignore[method-assign]


def _envelope_stored_then_crash(store: ContinuityStore, control: dict[str, Any]) -> bytes:
    """A compaction that stored its envelope and crashed before journaling step 4."""
    _crash_before_journaling(store, control, CompactionStep.ENVELOPE)
    stored = store.envelope_bytes(SEED.envelope_id)
    assert stored is not None
    assert CompactionStep.ENVELOPE not in store.compaction_steps(SEED.envelope_id)
    return stored


def test_a_different_envelope_stored_under_the_id_is_a_conflict_whichever_way_it_sorts() -> None:
    """Resumed with another summary after the envelope was stored but not journaled, the new
    envelope differs from the stored one: a conflict at step ``envelope`` naming the stored one,
    never a journal sealing an envelope the store does not hold — whether the stored bytes sort
    before or after the new ones (summaries are tried until both orders are met)."""
    orders: set[bool] = set()
    for n in range(40):
        store, control = _fresh()
        stored = _envelope_stored_then_crash(store, control)
        summary = SEED_SUMMARY + f" (revised {n})".encode()
        probe_store, probe_control = _fresh()
        _prepare(probe_store, probe_control, summary_bytes=summary)  # the envelope it seals
        new_body = probe_store.envelope_bytes(SEED.envelope_id)
        assert new_body is not None
        assert new_body != stored
        if (new_body < stored) in orders:
            continue
        orders.add(new_body < stored)
        with pytest.raises(CompactionConflictError, match="a different envelope is stored") as info:
            _prepare(store, control, summary_bytes=summary)
        assert info.value.step == "envelope"
        assert store.envelope_bytes(SEED.envelope_id) == stored
        assert CompactionStep.ENVELOPE not in store.compaction_steps(SEED.envelope_id)
        if len(orders) == 2:
            break
    assert orders == {True, False}


def test_resuming_after_the_envelope_was_stored_completes_with_the_same_inputs() -> None:
    """The same inputs find their own envelope stored: it is journaled, the event emitted once."""
    store, control = _fresh()
    stored = _envelope_stored_then_crash(store, control)
    envelope = _prepare(store, control)
    assert store.envelope_bytes(SEED.envelope_id) == stored
    assert CompactionStep.COMPACTION_EVENT in store.compaction_steps(SEED.envelope_id)
    assert _rehydrate(store, control).kind is K.REAUTHORIZATION_REQUIRED
    assert envelope.envelope_id == SEED.envelope_id


def test_the_first_bad_field_is_named_with_how_many_more_there_are() -> None:
    """One problem: its detail alone; several: the first (in the request's field order) and
    ``(and N more)``; nothing is written either way."""
    store, control = _fresh()
    with pytest.raises(ContinuityInputError) as one:
        _prepare(store, control, tenant_id="tenant-acme ")
    assert one.value.path == "$.tenant_id"
    assert "more)" not in str(one.value)
    with pytest.raises(ContinuityInputError) as three:
        _prepare(store, control, tenant_id="tenant-acme ", principal_id="p ",
                 budget_remaining=-1)
    assert three.value.path == "$.tenant_id"
    assert str(three.value).endswith("(and 2 more)")
    with pytest.raises(ContinuityInputError) as two:
        _prepare(store, control, principal_id="p ", budget_remaining=-1)
    assert two.value.path == "$.principal_id"
    assert str(two.value).endswith("(and 1 more)")
    assert store.compaction_steps(SEED.envelope_id) == {}


def test_evidence_defaults_to_the_trace_and_the_approval() -> None:
    store, control = _fresh()
    kwargs = {**compaction_kwargs(control), "summary_bytes": SEED_SUMMARY}
    with_approval = CompactionRequest(**kwargs)
    assert with_approval.evidence() == (f"trace:{SEED.source_trace_id}",
                                        f"approval:{SEED.approval_id}")
    assert CompactionRequest(**{**kwargs, "approval_id": None}).evidence() == (
        f"trace:{SEED.source_trace_id}",)
    given = CompactionRequest(**{**kwargs, "evidence_refs": ["trace:other", "file:a"]})
    assert given.evidence() == ("trace:other", "file:a")
    assert CompactionRequest(**{**kwargs, "evidence_refs": []}).evidence() == ()
    envelope = _prepare(store, control)
    assert envelope.evidence_refs == with_approval.evidence()


def _crash_after(step: CompactionStep) -> Any:
    def hook(done: CompactionStep) -> None:
        if done is step:
            raise RuntimeError(f"crash after {step.value}")
    return hook


@pytest.mark.parametrize(("asked", "conflict"), [(7, False), (8, False), (1000, False),
                                                 (6, True), (0, True)])
def test_a_resumed_compaction_may_ask_for_more_budget_than_it_sealed_never_less(
        asked: int, conflict: bool) -> None:
    """The snapshot sealed the governed budget (7): a resume asking for as much or more seals
    it again (a request never raises it); asking for less is another compaction."""
    store, control = _fresh()
    assert control["budget_remaining"] == 7
    with pytest.raises(RuntimeError, match="crash after"):
        _prepare(store, control, fault_hook=_crash_after(CompactionStep.GOVERNED_SNAPSHOT))
    if conflict:
        with pytest.raises(CompactionConflictError, match="budget_remaining differs") as info:
            _prepare(store, control, budget_remaining=asked)
        assert info.value.step == "governed_snapshot"
    else:
        assert _prepare(store, control, budget_remaining=asked).budget_remaining == 7


def test_a_compaction_event_appended_but_not_journaled_is_not_emitted_again() -> None:
    """A crash between appending the trace event and journaling step 5: the rerun journals the
    event already there."""
    store, control = _fresh()
    _crash_before_journaling(store, control, CompactionStep.COMPACTION_EVENT)
    emitted = [e for e in store.events(envelope_id=SEED.envelope_id)
               if e.event_type is TraceEventType.CONTEXT_COMPACTION]
    assert len(emitted) == 1
    _prepare(store, control)
    again = [e for e in store.events(envelope_id=SEED.envelope_id)
             if e.event_type is TraceEventType.CONTEXT_COMPACTION]
    assert again == emitted
    steps = store.compaction_steps(SEED.envelope_id)
    assert steps[CompactionStep.COMPACTION_EVENT].event_seq == emitted[0].seq



@pytest.mark.parametrize(("stored_as", "conflict"), [
    (lambda body: json.dumps(json.loads(body), indent=1, sort_keys=True).encode(), False),
    (lambda _body: b"{}", True),
    (lambda _body: b"not json", True),
], ids=["reencoded", "no_envelope", "not_json"])
def test_an_envelope_stored_in_another_encoding_is_compared_by_meaning(
        stored_as: Any, conflict: bool) -> None:
    """The envelope was stored (in another encoding: an older writer's) and the crash came
    before step 4's journal: the same envelope in other bytes completes; bytes that decode to
    no envelope are a conflict."""
    store, control = _fresh()
    real_append, real_step = store.append_envelope, store.record_step

    def append_other_bytes(envelope: Any, *, at: Any) -> bytes:
        body = stored_as(encode_envelope(envelope))
        store.backend.append_envelope(envelope.envelope_id, envelope.session_id, body,
                                      store.stamp(at))
        return body

    def crash_at_envelope(envelope_id: str, step: CompactionStep, body: Any, *, at: Any) -> None:
        if step is CompactionStep.ENVELOPE:
            raise RuntimeError("crash between storing the envelope and journaling it")
        real_step(envelope_id, step, body, at=at)

    store.append_envelope = append_other_bytes  # type: ignore[method-assign]
    store.record_step = crash_at_envelope  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="crash between"):
        _prepare(store, control)
    store.append_envelope, store.record_step = real_append, real_step  # type: ignore[method-assign]
    stored = store.envelope_bytes(SEED.envelope_id)
    if conflict:
        with pytest.raises(CompactionConflictError, match="a different envelope is stored"):
            _prepare(store, control)
    else:
        envelope = _prepare(store, control)
        assert encode_envelope(envelope) != stored
        assert CompactionStep.COMPACTION_EVENT in store.compaction_steps(SEED.envelope_id)
    assert store.envelope_bytes(SEED.envelope_id) == stored


@pytest.mark.parametrize("override", [{"principal_id": "principal-mallory"},
                                      {"delegated_scope": "tickets:delete"}])
def test_a_compaction_under_another_identity_is_refused_and_changes_nothing(
        override: dict[str, Any]) -> None:
    """The governed identity is the runtime's truth: a compaction stating another one must
    record the change first; the stored identity stays and no snapshot is journaled."""
    store, control = _fresh()
    before = store.session_identity(control["session_id"])
    assert before is not None
    with pytest.raises(ContinuityInputError, match="identity differs") as info:
        _prepare(store, control, **override)
    assert info.value.path == "tenant_id"
    assert store.session_identity(control["session_id"]) == before
    assert CompactionStep.GOVERNED_SNAPSHOT not in store.compaction_steps(SEED.envelope_id)



def test_the_checkpoint_opens_each_pending_obligation_once() -> None:
    """After step 2 every pending obligation is open in the governed store, once, whether it
    was open before or not."""
    store, control = _fresh()
    store.open_obligation(control["session_id"], "answer the operator", at=T0)
    before = list(store.open_obligations(control["session_id"]))
    _prepare(store, control, pending_obligations=["answer the operator", "rerun CI"])
    after = list(store.open_obligations(control["session_id"]))
    assert sorted(after) == sorted([*before, "rerun CI"])


def test_a_resumed_compaction_with_other_evidence_conflicts_whatever_budget_it_asks() -> None:
    """The budget's exemption (a request may ask for more than was sealed) covers the budget
    alone: the fields checked after it still are."""
    store, control = _fresh()
    with pytest.raises(RuntimeError, match="crash after"):
        _prepare(store, control, fault_hook=_crash_after(CompactionStep.GOVERNED_SNAPSHOT))
    with pytest.raises(CompactionConflictError, match="evidence_refs differs"):
        _prepare(store, control, budget_remaining=1000, evidence_refs=["trace:other"])

