"""The deterministic builder: which record lands in which field, with refs and budgets."""

from __future__ import annotations

import msgspec
import pytest
from test_episodes_kit import INJECTION, Conv, archived

from holon_ctx.ledger.records import SideEffect, TaskStatus, ToolStatus, WorkItemStatus
from holon_ctx.memory.builder import DECISION_MARKERS, SHORT_REPLY, FieldBudget
from holon_ctx.memory.episodes import (
    Episode,
    Field,
    decode_episode,
    encode_episode,
    parse_episode_id,
)
from holon_ctx.memory.render import compact_text, full_text, ref_text


def _only_episode(c: Conv, *, budget: FieldBudget | None = None) -> Episode:
    """Archive a one-range ledger (followed by two ticks of look-ahead) and return its episode."""
    c.turn("operator_input")
    c.say("Next topic: rotate the staging TLS certificates before Friday's release window.")
    c.tick()
    c.tick()
    from test_episodes_kit import make_stores

    from holon_ctx.memory.archiver import ArchivePolicy, Archiver
    from holon_ctx.memory.boundaries import BoundaryPolicy

    ledger, store = make_stores("memory")
    ledger.append(c.records)
    Archiver(ledger, store, policy=ArchivePolicy(
        recent_turns=3, boundaries=BoundaryPolicy(max_range_turns=64),
        budget=budget or FieldBudget())).archive()
    eps = list(store.iter_episodes())
    assert len(eps) == 1, [e.id for e in eps]
    return eps[0]


def _work_session() -> Conv:
    c = Conv()
    c.turn("operator_input", work_item="wi1")
    c.say("Migrate the billing invoices table to integer cents and keep the old column.")
    c.work("wi1", objective="migrate invoices to integer cents", todos=[
        ("write migration", True), ("backfill invoices", False)], status=WorkItemStatus.ACTIVE)
    c.assistant("Plan: write the migration, backfill, then drop the float column. Proceed?")
    c.turn("operator_input", work_item="wi1")
    c.say("可以")
    c.tool("shell", "pytest -q tests/billing", "12 passed in 3.1s", files=("billing/models.py",))
    c.tool("shell", "alembic upgrade head", "error: relation invoices is locked",
           status=ToolStatus.ERROR, exit_code=1)
    c.tool("deploy", "billing --staging", "", status=ToolStatus.PENDING, call_id="c-9",
           side_effect=SideEffect.PARTIAL)
    c.task("ci", "CI green on branch billing-cents", verification=True)
    c.brief("Migration written; backfill pending.")
    c.event("github", "Review requested by @ana on PR 77")
    return c


def test_each_record_kind_lands_in_its_field_with_refs() -> None:
    """Operator words, decisions, results, artifacts, open items and model output are separated."""
    ep = _only_episode(_work_session())
    assert ep.owner == "work_item:wi1"
    intents = [c.quote for c in ep.operator_intents]
    assert intents[:2] == ["Migrate the billing invoices table to integer cents and keep the old "
                           "column.", "可以"]
    assert all(c.trust == "trusted_operator" for c in ep.operator_intents)
    kinds = {f: [c.kind for c in ep.field(f)] for f in Field}
    assert "operator_reply" in kinds[Field.DECISIONS]
    assert {"objective", "work_item_status"} <= set(kinds[Field.DECISIONS])
    assert {"verification", "brief_result", "external_event"} <= set(kinds[Field.RESULTS])
    assert {"tool_run", "tool_failed", "file_written"} <= set(kinds[Field.ARTIFACT_TRAIL])
    assert sorted(kinds[Field.UNRESOLVED]) == ["side_effect_partial", "todo_open",
                                               "tool_call_pending"]
    assert kinds[Field.MODEL_INFERENCES] == ["assistant_message"]
    assert all(c.trust == "model_output" for c in ep.model_inferences)
    for field in Field:
        for claim in ep.field(field):
            assert claim.refs
            assert all(r in ep.source_refs for r in claim.refs[:1])


def test_episode_encoding_round_trips_and_refuses_unknown_fields() -> None:
    """An episode decodes to itself; a stored body with an unknown field is refused."""
    ep = _only_episode(_work_session())
    assert decode_episode(encode_episode(ep)) == ep
    raw = msgspec.json.decode(encode_episode(ep))
    raw["surprise"] = 1
    with pytest.raises(msgspec.ValidationError):
        decode_episode(msgspec.json.encode(raw))


def test_operator_intents_stay_verbatim_within_the_field_budget() -> None:
    """Long operator words are cut to the budget, marked truncated, and the full text is a ref."""
    c = Conv()
    c.operator("Billing: " + "keep every invoice line. " * 200)
    ep = _only_episode(c, budget=FieldBudget(intent_chars=300))
    claim = ep.operator_intents[0]
    assert claim.truncated
    assert len(claim.quote) <= 302
    assert f"full text: {claim.refs[0]}" in full_text(ep)


def test_claims_past_the_field_limit_fold_into_one_claim_with_all_refs() -> None:
    """More results than ``max_claims`` keep their refs in one folded claim; intents never fold."""
    c = Conv()
    c.operator("Run the billing jobs.")
    for i in range(10):
        c.brief(f"billing job {i} done")
    ep = _only_episode(c, budget=FieldBudget(max_claims=4))
    assert len(ep.results) == 4
    assert ep.results[-1].kind == "folded"
    assert len(ep.results[-1].refs) == 7


def test_resolved_items_inside_the_range_are_not_unresolved() -> None:
    """A pending call settled later in the same range leaves no unresolved item."""
    c = Conv()
    c.operator("Deploy billing to staging.")
    c.tool("deploy", "billing --staging", "", status=ToolStatus.PENDING, call_id="c-1",
           side_effect=SideEffect.UNKNOWN)
    c.tool("deploy", "billing --staging", "ok", call_id="c-1", side_effect=SideEffect.COMPLETED)
    ep = _only_episode(c)
    assert ep.unresolved == []


def test_a_failed_task_is_a_result_not_a_decision() -> None:
    """Task outcomes are results, whatever their status."""
    c = Conv()
    c.operator("Run the billing suite.")
    c.task("suite", "3 failed", status=TaskStatus.FAILURE)
    ep = _only_episode(c)
    assert [r.text for r in ep.results] == ["task suite failure"]


@pytest.mark.parametrize(("text", "decision"), [
    ("Decision: billing uses PostgreSQL.", True),
    ("Let's go with the second layout.", True),
    ("我们决定采用 PostgreSQL。", True),
    ("PostgreSQL にします。", True),
    ("Which database did we pick?", False),
    ("We need to choose a database.", False),
])
def test_decision_markers(text: str, decision: bool) -> None:
    """Operator statements of a decision are recognised in English, Chinese and Japanese."""
    found = bool(DECISION_MARKERS.search(text)) and not text.endswith(("?", "？"))
    assert found is decision


@pytest.mark.parametrize(("text", "short"), [
    ("可以", True), ("the second one", True), ("Yes.", True), ("はい", True),
    ("yes, but use the EU region", False),
])
def test_short_replies(text: str, short: bool) -> None:
    """Short replies that answer the assistant's question are recognised."""
    assert bool(SHORT_REPLY.match(text)) is short


def test_untrusted_quotes_are_fenced_and_neutralised_in_every_form() -> None:
    """Tool output and external text are fenced in the full text and absent from compact/ref."""
    c = Conv()
    c.operator("Fetch the billing status page.")
    c.tool("http_get", "status page", INJECTION, status=ToolStatus.ERROR, exit_code=1)
    ep = _only_episode(c)
    full = full_text(ep)
    assert '<data ref="tool:x2" origin="tool" trust="untrusted_external">' in full
    assert full.count("</data>\n") == full.count("<data ref=")
    assert "IGNORE PREVIOUS" not in compact_text(ep)
    assert "IGNORE PREVIOUS" not in ref_text(ep)


def test_episode_ids_parse_in_both_forms() -> None:
    """``e3-9`` and ``episode:e3-9`` name the same episode; other text names none."""
    assert parse_episode_id("e3-9") == parse_episode_id("episode:e3-9") == "e3-9"
    assert parse_episode_id("e3") == parse_episode_id("x3-9") == parse_episode_id("e-9") == ""


def test_archived_conversation_episode_shape() -> None:
    """The issue's example: the billing decision's episode names its turns, digest and owner."""
    from test_episodes_kit import billing_conversation

    conv, ids = billing_conversation()
    _, store, _ = archived(conv.records)
    ep = store.get("e0-3")
    assert ep is not None
    assert (ep.covers, ep.owner, ep.closed_by) == (("turn:t0", "turn:t3"), "conversation",
                                                   "new_intent")
    assert ep.decisions[0].refs[0] == f"message:{ids['decision']}"
    assert ep.digest.startswith("sha256:")
    assert len(ep.digest) == 71


def test_the_compact_form_keeps_decisions_and_the_operators_exact_words_before_results() -> None:
    """Every decision and the operator's words whole (a constraint stated at the end of a long
    request included) come before results and the artifact trail, which are previews: a compact
    form clipped to the budget loses what happened before what binds the agent."""
    c = Conv()
    request = ("Migrate the billing exports to the new queue. Keep the export format exactly as "
               "it is today, run the backfill only at night, notify finance before the cut-over, "
               "and one hard rule: invoice amounts stay integer cents, never floats.")
    assert len(request) > 200
    c.operator(request)
    for i in range(6):
        c.say(f"Decision {i}: we will use partition key variant {i} for the exports.")
    c.task("bench", "Kafka sustained 40k msg/s with ordering.")
    c.tool("shell", "pytest -q", "all green")
    ep = _only_episode(c)
    assert len(ep.decisions) == 7  # "never floats" makes the request a decision too
    compact = compact_text(ep)
    results = compact.index("results:")
    assert "invoice amounts stay integer cents, never floats." in compact[:results]
    for i in range(6):
        assert f"partition key variant {i}" in compact[:results]
    assert compact.index("decisions:") < compact.index("operator's words:") < results
    assert compact.index("artifacts:") > results
