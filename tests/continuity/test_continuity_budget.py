"""A governed budget never rises through compaction; only an explicit grant raises it (RFC 0020)."""

from __future__ import annotations

from typing import Any

import pytest
from continuity_helpers import COMPACTED_AT, make_world

from holon_ctx.continuity import (
    ContinuityInputError,
    ContinuityStore,
    DecisionKind,
    ReasonCode,
    SessionResources,
)
from holon_ctx.continuity.scenario import SEED, T0

R = ReasonCode


def _exhaust(store: ContinuityStore) -> None:
    store.set_session_resources(SessionResources(
        session_id=SEED.session_id, budget_remaining=0,
        sandbox_snapshot_ref=SEED.sandbox_snapshot_ref), at=T0)


def _asks_for(budget: int) -> Any:
    return lambda kwargs: {**kwargs, "budget_remaining": budget}


def test_a_compaction_stating_more_budget_than_governed_seals_the_governed_budget() -> None:
    """Defect 7: after the budget reached 0, ``prepare_compaction(..., budget_remaining=1000)``
    overwrote it and rehydration answered continuity_validated. Now the envelope carries the
    governed 0, the store keeps it, and rehydration answers budget_exhausted."""
    world = make_world(before_compaction=_exhaust, compactor=_asks_for(1000))
    assert world.envelope.budget_remaining == 0
    resources = world.store.session_resources(SEED.session_id)
    assert resources is not None
    assert resources.budget_remaining == 0
    decision = world.rehydrate()
    assert decision.kind is DecisionKind.CONTINUITY_VALIDATION_FAILED
    assert decision.reason is R.BUDGET_EXHAUSTED


def test_a_compaction_may_lower_the_budget() -> None:
    """A runtime that spent budget states less: the governed budget falls with it."""
    world = make_world(compactor=_asks_for(SEED.budget_remaining - 2))
    assert world.envelope.budget_remaining == SEED.budget_remaining - 2
    resources = world.store.session_resources(SEED.session_id)
    assert resources is not None
    assert resources.budget_remaining == SEED.budget_remaining - 2
    assert world.rehydrate().reason is R.CONTINUITY_VALIDATED


def test_set_session_resources_refuses_a_raise_and_a_grant_makes_it() -> None:
    """Raising the budget by a plain resources write is refused, naming the way that works; the
    grant is recorded (with who made it) and then the budget is what it says."""
    store = ContinuityStore.in_memory()
    _exhaust(store)
    with pytest.raises(ContinuityInputError, match="only grant_budget") as raised:
        store.set_session_resources(SessionResources(
            session_id=SEED.session_id, budget_remaining=5), at=COMPACTED_AT)
    assert raised.value.path == "budget_remaining"
    store.grant_budget(SEED.session_id, 5, granted_by="operator-7", at=COMPACTED_AT)
    resources = store.session_resources(SEED.session_id)
    assert resources is not None
    assert (resources.budget_remaining, resources.sandbox_snapshot_ref) == (
        5, SEED.sandbox_snapshot_ref)
    grant = store.budget_grant(SEED.session_id)
    assert grant is not None
    assert (grant.budget_remaining, grant.granted_by) == (5, "operator-7")


def test_after_a_grant_a_compaction_seals_the_granted_budget() -> None:
    """Exhausted, then granted: the next compaction (stating the new budget) validates."""
    def exhaust_then_grant(store: ContinuityStore) -> None:
        _exhaust(store)
        store.grant_budget(SEED.session_id, SEED.budget_remaining, granted_by="operator", at=T0)

    world = make_world(before_compaction=exhaust_then_grant)
    assert world.envelope.budget_remaining == SEED.budget_remaining
    assert world.rehydrate().reason is R.CONTINUITY_VALIDATED
