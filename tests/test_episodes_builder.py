"""The deterministic builder: which record lands in which field, with refs and budgets."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_episodes_kit import INJECTION, Conv, archived, make_stores

from holon_ctx.ledger.records import (
    BriefKind,
    Environment,
    ExternalEvent,
    Message,
    MessageRole,
    Pin,
    Record,
    SideEffect,
    TaskResult,
    TaskStatus,
    Todo,
    Tool,
    ToolStatus,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
    WorkItemStatus,
)
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.ledger.transcripts import import_any
from holon_ctx.memory.archiver import ArchivePolicy, Archiver
from holon_ctx.memory.builder import (
    DECISION_MARKERS,
    SHORT_REPLY,
    FieldBudget,
    _bounded,
    build_episode,
    link_keys,
)
from holon_ctx.memory.episodes import (
    Claim,
    Episode,
    Field,
    decode_episode,
    encode_episode,
    parse_episode_id,
)
from holon_ctx.projection.base.model import TurnUnit
from holon_ctx.projection.rendering.episode_forms import compact_text, full_text, ref_text

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "swe-trajectories"


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


@pytest.mark.parametrize(("reply", "decision"), [
    ("Good question, I talked to the launch team: posts to the release channel start with "
     "MARIGOLD-42 on the first line, then the usual text follows.", True),
    ("发布频道的帖子第一行写 MARIGOLD-42，然后再写正文。", True),
    ("Which channel do you mean?", False),
])
def test_an_unmarked_answer_to_the_assistants_question_is_a_decision(reply: str,
                                                                      decision: bool) -> None:
    """The operator's first words after the assistant asked settle the question, however long
    and with no decision word, unless they ask back (issue 25, item 3)."""
    c = Conv()
    c.operator("Draft the launch posts.")
    asked = c.assistant("How should posts to the release channel be marked?")
    c.say(reply)
    ep = _only_episode(c)
    answers = [d for d in ep.decisions if d.kind == "operator_reply"]
    assert bool(answers) is decision
    if decision:
        assert f"message:{asked}" in answers[0].refs


def test_the_compact_form_puts_the_words_a_decision_cites_before_filler() -> None:
    """Clipped from its end, an episode's compact form loses the operator's filler before the
    words of a decision among them, and the results list a brief before other results."""
    c = Conv()
    c.operator("About the launch checklist, venue and catering.")
    for i in range(2):
        c.say(f"About the launch checklist, venue and catering, item {i}.")
    c.say("Decision: the code word for the release channel is MARIGOLD-42.")
    for i in range(3, 6):
        c.say(f"About the launch checklist, venue and catering, item {i}.")
    for i in range(4):
        c.task(f"t{i}", f"task {i} done")
    c.brief("The release channel code word is MARIGOLD-42.")
    text = compact_text(_only_episode(c))
    words = text.split("operator's words: ", 1)[1]
    assert words.startswith("“Decision: the code word")
    results = text.split("results: ", 1)[1].split("\n", 1)[0]
    assert results.startswith("brief (result")


def test_untrusted_quotes_are_fenced_and_neutralised_in_every_form() -> None:
    """Tool output and external text are fenced in the full text and absent from compact/ref."""
    c = Conv()
    c.operator("Fetch the billing status page.")
    c.tool("http_get", "status page", INJECTION, status=ToolStatus.ERROR, exit_code=1)
    ep = _only_episode(c)
    full = full_text(ep)
    assert '<data tool:x2>' in full
    assert full.count("</data>\n") == full.count("<data ")
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


# -- the walk, record by record (build_episode on hand-built turns, no archiver) --------------


def _build(c: Conv, *, budget: FieldBudget | None = None) -> Episode:
    """The episode of every turn of ``c`` (records join the turn appended before them)."""
    units: list[TurnUnit] = []
    turn: StoredRecord | None = None
    owned: list[StoredRecord] = []
    for pos, rec in enumerate(c.records):
        stored = StoredRecord(pos=pos, ref=f"{type(rec).__struct_config__.tag}:{rec.id}",
                              record=rec, tokens=0, turn_seq=c.seq)
        if isinstance(rec, Turn):
            if turn is not None:
                units.append(TurnUnit(stored=turn, records=tuple(owned)))
            turn, owned = stored, []
        else:
            owned.append(stored)
    assert turn is not None
    units.append(TurnUnit(stored=turn, records=tuple(owned)))
    return build_episode(units, closed_by="test", budget=budget)


def _texts(claims: list[Claim]) -> list[str]:
    return [c.text for c in claims]


def test_an_empty_range_is_refused() -> None:
    """An episode covers at least one turn."""
    with pytest.raises(ValueError, match="at least one turn"):
        build_episode([], closed_by="test")


@pytest.mark.parametrize(("outcome", "reported"), [
    ("error", True), ("interrupted", True), ("result", False), ("noop", False), (None, False)])
def test_only_an_errored_or_interrupted_turn_is_a_result(outcome: str | None,
                                                         reported: bool) -> None:
    """A turn that ended in error or was interrupted says so among the results."""
    c = Conv()
    c.turn("scheduler_tick", outcome=outcome)
    results = _texts(_build(c).results)
    assert results == ([f"turn:t0 ended: {outcome}"] if reported else [])


@pytest.mark.parametrize(("trigger", "anchor", "kind", "decision"), [
    ("operator_input", None, "request", None),
    ("operator_input", "t9", "refinement", None),
    ("operator_override", None, "override", "operator override: “Stop the deploy.”"),
    ("approval_decision", None, "approval_decision",
     "operator approval decision: “Stop the deploy.”"),
])
def test_operator_words_are_an_intent_of_their_trigger_kind(
        trigger: str, anchor: str | None, kind: str, decision: str | None) -> None:
    """A request, a refinement of an anchored turn, an override or an approval: an override or
    an approval is also a decision, in the operator's words."""
    c = Conv()
    mid = c.operator("Stop the deploy.", trigger=trigger, anchor=anchor)
    ep = _build(c)
    [intent] = ep.operator_intents
    label = kind.replace("_", " ")
    assert (intent.kind, intent.text, intent.refs) == (kind, f"operator {label} in turn:t0",
                                                       [f"message:{mid}", "turn:t0"])
    assert _texts(ep.decisions) == ([decision] if decision else [])


def test_later_intents_keep_a_preview_once_the_total_budget_is_spent() -> None:
    """The first intent is cut at what is left of the total; once the total is spent, later
    intents still keep 160 characters."""
    c = Conv()
    c.operator("a" * 400)
    c.operator("b" * 400)
    ep = _build(c, budget=FieldBudget(intent_chars=1000, intents_total_chars=300))
    first, second = ep.operator_intents
    assert first.quote == "a" * 300 + " …"
    assert second.quote == "b" * 160 + " …"
    assert first.truncated
    assert second.truncated


def test_a_short_reply_is_a_decision_only_right_after_a_question() -> None:
    """"Yes" answers the assistant's question just asked; a second "yes", or one after a
    statement, decides nothing. A decision phrased as a question is not one."""
    c = Conv()
    c.turn("task_result")
    asked = c.assistant("Shall I drop the float column?")
    yes = c.operator("yes")
    c.operator("yes")
    c.assistant("I dropped it.")
    c.operator("ok")
    c.operator("Should we go with PostgreSQL?")
    c.operator("We decided: go with PostgreSQL")
    ep = _build(c)
    assert [(d.kind, d.refs) for d in ep.decisions] == [
        ("operator_reply", [f"message:{yes}", "turn:t1", f"message:{asked}"]),
        ("operator_decision", ["message:m7", "turn:t5"])]
    assert ep.decisions[0].text == f"operator answered the question in message:{asked}: “yes”"
    assert ep.decisions[1].text == "operator decided: “We decided: go with PostgreSQL”"


def test_runtime_notes_briefs_and_events_are_quoted_results() -> None:
    """A system message is a runtime note, a brief says its kind and that a model wrote it, an
    event names its source and the wait it matches."""
    c = Conv()
    c.turn("recovery")
    c.records.append(Message(id="s1", turn_id="t0", role=MessageRole.SYSTEM, text="restarted"))
    c.brief("50% done", kind=BriefKind.PROGRESS)
    c.event("ci", "build 88 green", wait="w-ci")
    c.event("ci", "build 89 green")
    ep = _build(c)
    assert [(r.kind, r.text, r.quote) for r in ep.results] == [
        ("runtime_note", "system note", "restarted"),
        ("brief_progress", "brief (progress, model-written)", "50% done"),
        ("external_event", "external event from ci (untrusted, not operator input, matches "
         "wait w-ci)", "build 88 green"),
        ("external_event", "external event from ci (untrusted, not operator input)",
         "build 89 green")]


def test_a_task_result_states_each_of_its_facts() -> None:
    """Verification, the spawning turn, the wait it answers and its output ref, in that order;
    a verification is its own kind."""
    c = Conv()
    c.turn("task_result")
    c.records.append(TaskResult(id="r1", turn_id="t0", task_id="ci", status=TaskStatus.SUCCESS,
                                summary="green", verification=True, spawned_by_turn_id="t7",
                                wait_id="w-ci", output_ref="blob:9"))
    c.records.append(TaskResult(id="r2", turn_id="t0", task_id="lint",
                                status=TaskStatus.FAILURE, summary="3 errors"))
    ep = _build(c)
    assert [(r.kind, r.text, r.quote) for r in ep.results] == [
        ("verification", "task ci success; verification; spawned by turn:t7; answers wait "
         "w-ci; output blob:9", "green"),
        ("task_outcome", "task lint failure", "3 errors")]


def test_pins_and_environment_changes_are_recorded() -> None:
    """A pin is the operator's decision naming its target (with its note when there is one);
    an environment change is an artifact with its workspace and capabilities."""
    c = Conv()
    c.turn("operator_input")
    c.records.append(Pin(id="p1", turn_id="t0", target="message:m9", note="keep this"))
    c.records.append(Pin(id="p2", turn_id="t0", target="message:m8", note="  "))
    c.records.append(Environment(id="v1", turn_id="t0", workspace="/srv/app",
                                 capabilities=["shell", "net"]))
    c.records.append(Environment(id="v2", turn_id="t0"))
    ep = _build(c)
    assert [(d.text, d.refs) for d in ep.decisions] == [
        ('the operator pinned message:m9: "keep this"', ["pin:p1", "message:m9"]),
        ("the operator pinned message:m8", ["pin:p2", "message:m8"])]
    assert _texts(ep.artifact_trail) == [
        "environment: workspace /srv/app; capabilities shell, net",
        "environment: workspace -; capabilities none"]


def test_tool_runs_group_identical_calls_and_state_their_outcome() -> None:
    """Identical calls of one turn are one claim counting them, newest ref first; the line
    states status, exit code, side effect and files; a success keeps a short quote, a failure
    a longer one."""
    c = Conv()
    c.turn("operator_input")
    first = c.tool("sh", "make", "x" * 300)
    again = c.tool("sh", "make", "x" * 300)
    failed = c.tool("sh", "deploy", "y" * 300, status=ToolStatus.ERROR, exit_code=2,
                    side_effect=SideEffect.COMPLETED, files=("a.txt",))
    c.tool("sh", "true", "", exit_code=None)
    ep = _build(c, budget=FieldBudget(tool_output_chars=50, quote_chars=100))
    runs = {c.kind + ":" + c.refs[0]: c for c in ep.artifact_trail}
    ok = runs[f"tool_run:tool:{again}"]
    assert ok.text == "sh `make` → ok exit 0; ×2 identical calls"
    assert ok.refs == [f"tool:{again}", f"tool:{first}"]
    # A third from the head, the rest from the tail; one line cut inside, so '…' on it.
    assert ok.quote == "x" * 16 + " … " + "x" * 34
    bad = runs[f"tool_failed:tool:{failed}"]
    assert bad.text == "sh `deploy` → error exit 2; side effect completed; wrote a.txt"
    assert bad.quote == "y" * 33 + " … " + "y" * 67
    assert ok.truncated
    assert bad.truncated
    bare = next(c for c in ep.artifact_trail if "`true`" in c.text)
    assert bare.text == "sh `true` → ok"
    assert bare.quote == ""
    assert (ep.artifact_trail[-1].kind, ep.artifact_trail[-1].text) == ("file_written",
                                                                        "file written: a.txt")


def test_a_cut_tool_output_keeps_its_last_lines() -> None:
    """A tool output over the field budget keeps its first lines and its last ones, cut on line
    boundaries: what the run came to (the timeout, the error, the count passed) is at its end,
    and a head-only cut dropped it (the demo's timed-out deploy lost "Remote state unknown")."""
    c = Conv()
    c.turn("operator_input")
    progress = "".join(f"waiting for rollout: {i} of 9 replicas ready\n" for i in range(9))
    output = "==> kubectl apply -f canary.yaml\n" + progress + "timed out; remote state unknown\n"
    failed = c.tool("sh", "deploy", output, status=ToolStatus.TIMEOUT, exit_code=None)
    passed = c.tool("sh", "pytest", "collected 420 items\n" + "." * 400 + "\n420 passed\n")
    ep = _build(c, budget=FieldBudget(tool_output_chars=60, quote_chars=200))
    quotes = {claim.refs[0]: claim.quote for claim in ep.artifact_trail}
    cut = quotes[f"tool:{failed}"].split("\n")
    assert cut[0] == "==> kubectl apply -f canary.yaml"
    assert cut[1] == "…"
    assert cut[-1] == "timed out; remote state unknown"
    assert all(line in output.split("\n") for line in cut if line != "…")  # no half lines
    assert len(quotes[f"tool:{failed}"]) <= 200 + 3
    assert quotes[f"tool:{passed}"].endswith("\n420 passed")


def test_a_cut_tool_output_keeps_a_line_the_cut_ends_on_and_marks_a_line_cut_inside() -> None:
    """A part whose cut falls at a line's end keeps that whole line (the boundary rule dropped
    it, one line short on each side); a part cut inside a line has its '…' on that line, so
    the half line does not read as a whole one (an `ls -la` line with its file name cut off
    did, in django-10914's episode), and two lines cut inside are not joined into one (the
    demo's `gh run list` header and row were); a whole line keeps its indent."""
    c = Conv()
    c.turn("operator_input")
    lines = "\n".join(f"line{i:02d}" for i in range(20))  # 7 characters a line with its newline
    exact = c.tool("sh", "seq", lines)
    listing = "total 8\n" + "".join(f"-rw-r--r-- 1 root root 4096 Oct 24 file{i}.py\n"
                                     for i in range(9))
    inside = c.tool("sh", "ls", listing)
    code = "def f():\n" + "".join(f"    x{i} = {i}\n" for i in range(20)) + "    return x0\n"
    indented = c.tool("sh", "cat f.py", code)
    table = ("NAME              READY   IMAGE                           STATUS\n"
             "shop-api-canary   2       ghcr.io/acme/shop-api:0d9e4b7   Running")
    two_halves = c.tool("sh", "kubectl get deploy", table)
    # Both parts move back to a line boundary over a middle that is one long line.
    long_middle = c.tool("sh", "make", "head one\n" + "x" * 60 + "\ntail part here, longer")
    # 40 characters: the head's 13 are 'line00\nline01' to the letter, the tail's 27 'line16'
    # to the end.
    ep = _build(c, budget=FieldBudget(tool_output_chars=40))
    quotes = {claim.refs[0]: claim.quote for claim in ep.artifact_trail}
    assert quotes[f"tool:{exact}"] == "line00\nline01\n…\nline16\nline17\nline18\nline19"
    # The tail's 27 characters are inside the last line: kept, with the '…' before them.
    assert quotes[f"tool:{inside}"] == "total 8\n… t root 4096 Oct 24 file8.py"
    # Two lines cut inside: a '…' on each, never one line made of the header and the row.
    assert quotes[f"tool:{two_halves}"] == "NAME …\n… /shop-api:0d9e4b7   Running"
    assert quotes[f"tool:{long_middle}"] == "head one\n…\ntail part here, longer"
    # The tail's first whole line keeps its indent.
    assert quotes[f"tool:{indented}"] == "def f():\n…\n    x19 = 19\n    return x0"


@given(lines=st.lists(st.text("abc", max_size=30), min_size=1, max_size=12),
       limit=st.integers(6, 80))
# Both parts moved back to a line boundary over a middle inside one line: two whole lines, not
# joined as one line's ends.
@example(lines=["a", "b" * 20, "ccc"], limit=12)
@settings(max_examples=400)
def test_a_cut_tool_output_shows_whole_lines_or_marked_parts_of_one(lines: list[str],
                                                                    limit: int) -> None:
    """Any output over its budget: each line of the cut is a whole line of the output, or a part
    of one line marked '…' where it was cut (a head with '… ' after it, a tail with it before,
    both ends of one line around it), or the '…' line between whole lines; one gap, so at most
    two marks; it opens as the output does and ends as it does; within the budget and its marks."""
    text = "\n".join(lines).strip("\n")
    if len(text) <= limit:
        return
    kept, cut = _bounded(text, limit, tail=True)
    assert cut
    assert kept.count("…") in (1, 2)
    assert len(kept) <= limit + len(" …\n… ")
    assert kept[0] == text[0]
    assert kept[-1] == text[-1]
    for line in kept.split("\n"):
        head, mark, tail = line.partition(" … ")
        if mark:  # one line cut in its middle
            assert any(w.startswith(head) and w.endswith(tail) for w in lines), line
        elif line.endswith(" …"):
            assert any(w.startswith(line[:-2]) for w in lines), line
        elif line.startswith("… "):
            assert any(w.endswith(line[2:]) for w in lines), line
        else:
            assert line == "…" or line in lines, line


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")
@pytest.mark.parametrize(("name", "ref", "last"), [
    ("pytest-dev__pytest-7324", "tool:x60",
     "========================= 2 failed, 80 passed in 0.08s ========================="),
    ("psf__requests-1724", "tool:x48", "FAILED (errors=1)")])
def test_a_real_failing_test_run_keeps_its_summary_lines(name: str, ref: str, last: str) -> None:
    """Two failing test runs of the shared corpus (3,978 and 10,048 characters, the failed-
    output budget 400): the archived episode's quote ends with the run's verdict, the failures
    named above it; the head-only cut kept the session banner and the warnings."""
    ledger, store = make_stores("memory")
    import_any(CORPUS / f"{name}.traj.json", ledger)
    Archiver(ledger, store, policy=ArchivePolicy(recent_turns=2)).archive(to_edge=True)
    claim = next(c for ep in store.iter_episodes() for c in ep.artifact_trail
                 if c.refs[0] == ref)
    assert claim.kind == "tool_failed"
    assert claim.truncated
    assert claim.quote.split("\n")[-1] == last
    assert len(claim.quote) <= FieldBudget().quote_chars + 3
    if name.startswith("pytest"):
        assert claim.quote.split("\n")[-3:-1] == [
            f"FAILED testing/test_mark_expression.py::test_valid_idents[{v}] - ValueError"
            + ":" * (v == "True") + "..." for v in ("True", "False")]
    else:
        assert "Ran 87 tests in 52.584s" in claim.quote.split("\n")


@pytest.mark.parametrize(("effect", "kind"), [
    (SideEffect.UNKNOWN, "side_effect_unknown"), (SideEffect.PARTIAL, "side_effect_partial")])
def test_an_unresolved_side_effect_stays_open_until_known(effect: SideEffect, kind: str) -> None:
    """An unknown or partial side effect is carried as unresolved, of its own kind, until a
    later run of the same call reports it completed."""
    c = Conv()
    c.turn("operator_input")
    c.tool("deploy", "prod", "?", call_id="c1", side_effect=effect)
    ep = _build(c)
    # Keyed by the call's id, tool and arguments (a reused id is another call: RFC 0008 d9).
    assert [u.kind for u in ep.unresolved] == [kind]
    assert ep.unresolved[0].key.startswith("effect:c1/deploy#")
    assert ep.unresolved[0].text == f"side effect {effect.value}: deploy `prod` (call c1)"
    c.tool("deploy", "prod", "done", call_id="c1", side_effect=SideEffect.COMPLETED)
    assert _build(c).unresolved == []


def test_waits_open_resolve_and_close_as_decisions() -> None:
    """An open wait is unresolved (an approval as such); resolving it is a result naming who
    resolved it, cancelling or expiring one is a decision; either ends it."""
    c = Conv()
    c.turn("operator_input")
    c.open_wait("w-ci", "CI green")
    c.open_wait("approve-deploy", "ops signs off")
    c.open_wait("w-old", "old build")
    ep = _build(c)
    assert [(u.kind, u.text) for u in ep.unresolved] == [
        ("wait_open", 'waiting: wait w-ci: "CI green"'),
        ("approval_pending", 'approval pending: wait approve-deploy: "ops signs off"'),
        ("wait_open", 'waiting: wait w-old: "old build"')]
    c.records.append(Wait(id="wr", wait_id="w-ci", status=WaitStatus.RESOLVED, turn_id="t0",
                          resolved_by="task_result:r1"))
    c.close_wait("w-old", WaitStatus.EXPIRED)
    ep = _build(c)
    assert [u.key for u in ep.unresolved] == ["wait_id:approve-deploy"]
    assert [(r.text, r.refs) for r in ep.results] == [
        ("wait w-ci resolved by task_result:r1", ["wait:wr", "task_result:r1"])]
    assert _texts(ep.decisions) == ["wait w-old expired"]


def test_a_closed_work_item_leaves_no_open_todo_or_blocker() -> None:
    """Open todos and a blocker are unresolved while the work item is open; a cleared blocker
    is gone; once the item is done, neither is carried."""
    c = Conv()
    c.turn("operator_input", work_item="wi1")
    c.work("wi1", todos=[("write", True), ("ship", False)], blocker="waiting on ops")
    c.work("wi2", blocker="no access")
    c.work("wi2", blocker="")
    ep = _build(c)
    assert [(u.kind, u.text) for u in ep.unresolved] == [
        ("todo_open", "open todo of work item wi1: ship"),
        ("work_item_blocked", 'work item wi1 blocked: "waiting on ops"')]
    assert all((u.origin, u.trust) == ("runtime", "runtime_fact") for u in ep.unresolved)
    c.work("wi1", status=WorkItemStatus.DONE)
    ep = _build(c)
    assert ep.unresolved == []
    assert [(r.kind, r.text) for r in ep.results] == [("completion", "work item wi1 done")]


def test_a_work_item_states_objective_plan_status_and_report() -> None:
    """Objective, numbered plan (or that it was cleared) and a status that is not closed are
    decisions; a completion report is a quoted result."""
    c = Conv()
    c.turn("operator_input", work_item="wi1")
    c.records.append(WorkItem(id="a", work_item_id="wi1", turn_id="t0", objective="cents",
                              plan=["migrate", "backfill"], status=WorkItemStatus.BLOCKED))
    c.records.append(WorkItem(id="b", work_item_id="wi1", turn_id="t0", plan=[],
                              completion_report="shipped v2"))
    ep = _build(c)
    assert _texts(ep.decisions) == ["work item wi1 objective: cents",
                                    "work item wi1 plan: 1. migrate; 2. backfill",
                                    "work item wi1 status blocked",
                                    "work item wi1 plan: cleared"]
    assert [(r.kind, r.quote) for r in ep.results] == [("completion_report", "shipped v2")]
    assert ep.owner == "work_item:wi1"


def test_the_owner_is_the_first_work_item_of_the_range() -> None:
    """Turns without a work item do not own the episode; the first with one does."""
    c = Conv()
    c.turn("operator_input")
    c.turn("operator_input", work_item="wi2")
    c.turn("operator_input", work_item="wi3")
    assert _build(c).owner == "work_item:wi2"


def test_overflow_folds_into_one_claim_naming_its_kinds_but_never_unresolved_items() -> None:
    """Past ``max_claims`` the rest of a field is one claim counting them and listing their
    kinds in name order; unresolved items keep a claim each."""
    c = Conv()
    c.turn("operator_input")
    c.brief("one")
    c.brief("two", kind=BriefKind.PROGRESS)
    c.brief("three")
    c.records.append(Message(id="s1", turn_id="t0", role=MessageRole.SYSTEM, text="note"))
    for i in range(4):
        c.open_wait(f"w{i}", "later")
    ep = _build(c, budget=FieldBudget(max_claims=2))
    assert ep.results[-1].text == "… and 3 more (brief_progress, brief_result, runtime_note)"
    assert len(ep.results) == 2
    assert len(ep.unresolved) == 4


def test_link_keys_name_files_calls_tasks_and_waits() -> None:
    """What a later turn can share with a range: written files, call ids, task ids and every
    wait named by a task, a wait or an event."""
    records: list[Record] = [
        Tool(id="x", tool_name="sh", status=ToolStatus.OK, files_written=["a.py"],
             call_id="c1"),
        Tool(id="y", tool_name="sh", status=ToolStatus.OK),
        TaskResult(id="r", task_id="ci", status=TaskStatus.SUCCESS, wait_id="w1"),
        TaskResult(id="r2", task_id="lint", status=TaskStatus.SUCCESS),
        Wait(id="w", wait_id="w2", status=WaitStatus.OPEN),
        ExternalEvent(id="e", source="gh", text="hi", wait_id="w3"),
        ExternalEvent(id="e2", source="gh", text="hi"),
        Message(id="m", role=MessageRole.OPERATOR, text="go"),
    ]
    assert link_keys(records) == {"file:a.py", "call:c1", "task:ci", "wait_id:w1", "task:lint",
                                  "wait_id:w2", "wait_id:w3"}


def test_every_free_text_value_in_a_claim_line_is_cut_to_its_bound() -> None:
    """Claim lines are one line each, and each value in them (ids, names, paths, conditions,
    notes, previews) is cut to its own bound, whatever its length: an episode stays small
    however large the records it summarises. Quotes are bounded by FieldBudget instead."""
    import re

    def long(ch: str) -> str:
        return ch * 1000

    c = Conv()
    c.operator(long("O"), trigger="operator_override", work_item=long("I"))
    c.records.append(Pin(id="p", turn_id="t0", target="message:m1", note=long("N")))
    c.records.append(Environment(id="v", turn_id="t0", workspace=long("S"),
                                 capabilities=[long("C")]))
    c.tool(long("T"), long("A"), "", status=ToolStatus.PENDING, call_id=long("K"),
           files=(long("P"),))
    c.records.append(WorkItem(id="w1", work_item_id=long("I"), turn_id="t0", objective=long("B"),
                              plan=[long("L")] * 10, todos=[Todo(text=long("D"))], blocker=long("X")))
    c.open_wait(long("W"), long("Y"))
    c.event(long("E"), "text", wait=long("V"))
    c.records.append(TaskResult(id="r", turn_id=c.turn_id, task_id=long("J"),
                                status=TaskStatus.SUCCESS, wait_id=long("G"),
                                output_ref=long("R")))
    ep = _build(c)
    lines = [claim.text for field in Field for claim in ep.field(field)]
    assert all("\n" not in line for line in lines)
    [plan] = [line for line in lines if " plan: " in line]
    cut = {ch: {len(run) + 1 for line in lines if line is not plan
                for run in re.findall(f"({ch}+)…", line)}
           for ch in "OINSCTAKPBDXWYEVJGR"}
    assert cut == {
        "O": {200},       # the operator's words previewed in a decision
        "I": {60},        # a work item's name
        "N": {160},       # a pin's note
        "S": {120},       # a workspace
        "C": {30},        # each capability
        "T": {40},        # a tool's name
        "A": {100},       # its arguments
        "K": {80},        # the call it belongs to
        "P": {200, 80},   # a written file, on its own claim and on the tool's line
        "B": {300},       # an objective
        "D": {200},       # a todo
        "X": {200},       # a blocker
        "W": {60},        # a wait's id
        "Y": {200},       # its condition
        "E": {40},        # an event's source
        "V": {60},        # the wait an event matches
        "J": {60},        # a task's id
        "G": {60},        # the wait a task answers
        "R": {80},        # a task's output ref
    }
    # A plan: each step cut to 120, the whole to 600.
    steps = plan.partition(" plan: ")[2]
    assert steps.startswith(f"1. {'L' * 119}…; 2. {'L' * 119}…; ")
    assert len(steps) == 600


def test_a_tool_line_names_its_first_six_files_and_each_gets_a_claim() -> None:
    """The tool's line lists six files at most; every written file still has its own claim."""
    c = Conv()
    c.turn("operator_input")
    c.tool("sh", "gen", "", files=tuple(f"f{i}.py" for i in range(8)))
    ep = _build(c)
    [run] = [a for a in ep.artifact_trail if a.kind == "tool_run"]
    assert run.text.endswith("; wrote f0.py, f1.py, f2.py, f3.py, f4.py, f5.py")
    assert [a.text for a in ep.artifact_trail if a.kind == "file_written"] == [
        f"file written: f{i}.py" for i in range(8)]
