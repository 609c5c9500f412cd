"""Folding (holon_ctx/projection/rendering/folding.py): runs of low-value turns, repeated tool calls.

Unit tests on hand-built turns, then the rules as the projection applies them: a run never spans a
turn shown on its own (the continuation anchor), and never hides operator input or a state change.
"""

from __future__ import annotations

import json

from projection_builders import LedgerBuilder, folded_refs, selected_refs

import holon_ctx
from holon_ctx.ledger.records import Tool, ToolStatus, Turn
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.lowlevel import Projector
from holon_ctx.projection.base.model import FoldManifest, Form, Priority, Section, TurnUnit
from holon_ctx.projection.rendering.folding import (
    BY_TRIGGER,
    fold_item,
    fold_kind,
    hidden_differences,
    repeat_folds,
    segment,
    tool_repeats,
)
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.tokens import default_counter


def unit(tid: str, seq: int, trigger: str = "scheduler_tick") -> TurnUnit:
    turn = Turn(id=tid, seq=seq, trigger=trigger)
    return TurnUnit(stored=StoredRecord(pos=seq, ref=f"turn:{tid}", record=turn, tokens=0,
                                        turn_seq=seq), records=())


def tool(xid: str, name: str = "sh", args: str = "ls", status: ToolStatus = ToolStatus.OK,
         digest: str = "", output: str = "") -> StoredRecord:
    rec = Tool(id=xid, tool_name=name, args_preview=args, args_digest=digest, status=status,
               output=output)
    return StoredRecord(pos=0, ref=f"tool:{xid}", record=rec, tokens=0, turn_seq=1)


def test_segment_makes_runs_of_folding_turns_broken_by_others_and_skips() -> None:
    """Consecutive folding turns form one run; a non-folding turn or a skipped one ends it."""
    units = [unit(f"t{i}", i) for i in range(8)]
    low = {"t0", "t1", "t3", "t4", "t5", "t7"}
    parts = segment(units, skip=lambda u: u.turn.id == "t4",
                    folds=lambda u: u.turn.id in low)
    shape = [[u.turn.id for u in p] if isinstance(p, list) else p.turn.id for p in parts]
    assert shape == [["t0", "t1"], "t2", ["t3"], ["t5"], "t6", ["t7"]]


def test_segment_with_nothing_to_fold_keeps_every_turn_in_order() -> None:
    units = [unit(f"t{i}", i) for i in range(3)]
    assert segment(units, skip=lambda _u: False, folds=lambda _u: False) == units


def test_fold_kind_counts_nothing_happened_facts_under_the_trigger() -> None:
    """A no-op tick or a retry is named by its trigger; any other fact by the fact itself."""
    tick = unit("t1", 1, "timer")
    assert fold_kind(tick, ["noop_tick"]) == "timer"
    assert fold_kind(unit("t2", 2, "provider_fallback"), ["provider_fallback"]) == \
        "provider_fallback"
    assert fold_kind(unit("t3", 3, "recovery"), ["transport_recovery"]) == "recovery"
    assert fold_kind(unit("t4", 4, "external_event"), ["duplicate_wake"]) == "duplicate_wake"
    assert fold_kind(unit("t5", 5, "x-hook"), []) == "x-hook"
    assert {"noop_tick", "provider_retry", "provider_fallback", "transport_recovery"} == BY_TRIGGER


def test_fold_item_is_one_high_counted_line_with_its_manifest() -> None:
    """The fold line names its span and counts by kind (most first); it is a HIGH compact item
    with no refs of its own, and the manifest lists every turn it stands for."""
    run = [unit("t3", 3, "provider_retry"), unit("t4", 4, "scheduler_tick"),
           unit("t5", 5, "provider_retry")]
    facts = {"t3": ["provider_retry"], "t4": ["noop_tick"], "t5": ["provider_retry"]}
    item, fold = fold_item(Renderer(default_counter(), "x"), run, lambda u: facts[u.turn.id],
                           order=7, tier=2)
    line = item.forms[Form.COMPACT].text
    assert line == ("- folded turn:t3–turn:t5: provider_retry×2, scheduler_tick×1 "
                    "(3 low-value turns)\n")
    assert (item.key, item.priority, item.order, item.tier, item.position) == (
        "fold:turn:t3", Priority.HIGH, 7, 2, (3,))
    assert item.section is Section.RECENT_TURNS
    assert item.refs == ()
    assert (fold.first, fold.last, fold.count) == ("turn:t3", "turn:t5", 3)
    assert fold.kinds == {"provider_retry": 2, "scheduler_tick": 1}
    assert fold.refs == ["turn:t3", "turn:t4", "turn:t5"]


def test_a_run_of_one_names_its_single_turn() -> None:
    item, fold = fold_item(Renderer(default_counter(), "x"), [unit("t9", 9)],
                           lambda _u: ["noop_tick"], order=0, tier=0)
    assert item.forms[Form.COMPACT].text.startswith("- folded turn:t9: scheduler_tick×1 ")
    assert fold.first == fold.last == "turn:t9"


def test_tool_repeats_groups_identical_calls_by_tool_arguments_and_status() -> None:
    """The last of identical calls stands for the earlier ones; a different status, tool or
    arguments is another call."""
    records = [tool("x1"), tool("x2"), tool("x3", status=ToolStatus.ERROR), tool("x4"),
               tool("x5", name="cat"), tool("x6", args="ls -l"), tool("x7", digest="d1"),
               tool("x8", args="other", digest="d1")]
    assert tool_repeats(records) == {"tool:x4": ["tool:x1", "tool:x2"],
                                     "tool:x8": ["tool:x7"]}


def test_tool_repeats_never_fold_a_call_that_printed_something_else() -> None:
    """The same command with another output is another result: both are shown (issue 12)."""
    records = [tool("x1", output="FAILURE"), tool("x2", output="SUCCESS"),
               tool("x3", output="SUCCESS")]
    assert tool_repeats(records) == {"tool:x3": ["tool:x2"]}


def test_repeat_folds_report_each_group() -> None:
    [fold] = repeat_folds({"tool:x4": ["tool:x1", "tool:x2"]})
    assert (fold.first, fold.last, fold.count) == ("tool:x1", "tool:x4", 3)
    assert fold.kinds == {"repeated_tool_call": 3}
    assert fold.refs == ["tool:x1", "tool:x2", "tool:x4"]


def test_a_fold_run_never_spans_the_continuation_anchor() -> None:
    """Ticks before and after the anchor fold into two runs; the anchor is shown on its own."""
    b = LedgerBuilder()
    b.ticks(3)
    anchor = b.operator("Deploy when the queue drains.")
    b.ticks(4)
    b.task_result("drain", "queue drained", anchor=anchor)
    p = b.project(4096)
    folds = [f for f in p.folds if "repeated_tool_call" not in f.kinds]
    assert [f.count for f in folds] == [3, 4]
    assert f"turn:{anchor}" not in folded_refs(p)
    assert f"turn:{anchor}" in selected_refs(p)


def test_a_fold_never_hides_operator_input_between_ticks() -> None:
    """An operator turn between ticks is shown on its own; the ticks around it fold apart."""
    b = LedgerBuilder()
    b.operator("Watch the queue.")
    b.ticks(2)
    said = b.operator("Also page me if it stalls.")
    b.ticks(2)
    b.task_result("watch", "queue fine")
    p = b.project(4096)
    assert f"turn:{said}" not in folded_refs(p)
    assert f"turn:{said}" in selected_refs(p)


def test_fold_line_counts_most_first_then_by_name_and_spans_by_ref() -> None:
    """Kinds are listed by count (largest first), ties by name; a run from t9 to t10 names both
    ends (refs are compared as refs, not ordered as text)."""
    run = [unit("t9", 9, "external_event"), unit("t10", 10), unit("t11", 11), unit("t12", 12),
           unit("t13", 13, "timer"), unit("t14", 14, "external_event")]
    facts = {"t9": ["duplicate_wake"], "t10": ["noop_tick"], "t11": ["noop_tick"],
             "t12": ["noop_tick"], "t13": ["noop_tick"], "t14": ["duplicate_wake"]}
    item, _ = fold_item(Renderer(default_counter(), "x"), run, lambda u: facts[u.turn.id],
                        order=0, tier=0)
    assert item.forms[Form.COMPACT].text == (
        "- folded turn:t9–turn:t14: scheduler_tick×3, duplicate_wake×2, timer×1 "
        "(6 low-value turns)\n")
    item, _ = fold_item(Renderer(default_counter(), "x"), run[:2], lambda u: facts[u.turn.id],
                        order=0, tier=0)
    assert item.forms[Form.COMPACT].text.startswith(
        "- folded turn:t9–turn:t10: duplicate_wake×1, scheduler_tick×1 ")
    # A tie is ordered by name also when the kinds were met in the other order.
    item, _ = fold_item(Renderer(default_counter(), "x"), run[4:], lambda u: facts[u.turn.id],
                        order=0, tier=0)
    assert item.forms[Form.COMPACT].text.startswith(
        "- folded turn:t13–turn:t14: duplicate_wake×1, timer×1 ")


def test_repeat_folds_count_the_last_call_too() -> None:
    """One earlier identical call: two calls in all (an odd and an even number of earlier calls)."""
    [one] = repeat_folds({"tool:x2": ["tool:x1"]})
    assert (one.count, one.kinds) == (2, {"repeated_tool_call": 2})
    [three] = repeat_folds({"tool:x4": ["tool:x1", "tool:x2", "tool:x3"]})
    assert (three.count, three.kinds) == (4, {"repeated_tool_call": 4})


def _repro_ledger(first_output: str, *, first_exit: int = 1) -> tuple[LedgerBuilder, str, str]:
    """An agent runs a reproduction script, edits the code, runs the script again."""
    b = LedgerBuilder()
    anchor = b.operator("Fix the upload permissions bug; reproduce it first.", work_item="w1")
    b.turn("x-agent-step", anchor=anchor, work_item="w1")
    first = b.tool("bash", "python repro.py", first_output, exit_code=first_exit,
                   status=ToolStatus.ERROR if first_exit else ToolStatus.OK)
    b.turn("x-agent-step", anchor=anchor, work_item="w1")
    b.tool("bash", "sed -i s/0o644/None/ conf.py", "", files=["conf.py"])
    b.turn("x-agent-step", anchor=anchor, work_item="w1")
    last = b.tool("bash", "python repro.py", "checking permissions\nSUCCESS: mode is 0o644")
    b.turn("x-agent-step", anchor=anchor, work_item="w1")
    b.assistant("The fix holds.")
    return b, first, last


def test_a_rerun_that_printed_something_else_keeps_the_lines_that_changed() -> None:
    """FAILURE, then SUCCESS after the fix: the earlier run is not folded as identical; it keeps
    its exit status and the failure line the later run no longer prints (issue 12)."""
    b, first, last = _repro_ledger("checking permissions\nFAILURE: mode is 0o600, want 0o644")
    p = b.project(4096)
    assert "identical" not in p.text
    assert "FAILURE: mode is 0o600, want 0o644" in p.text
    assert (f"ALERT bash `python repro.py` → error exit 1; next run tool:{last} → ok; lines only "
            f"in this run:\n<data tool:{first}>\n" in p.text)
    # The line both runs printed is shown once, with the later run.
    assert p.text.count("checking permissions") == 1
    assert hidden_differences(p.folds, b.store().get) == []
    assert not [f for f in p.folds if f"tool:{first}" in f.refs]


def test_a_rerun_with_the_same_result_still_folds_the_earlier_output() -> None:
    """The same command printing the same thing folds, and the fold is faithful."""
    b, first, last = _repro_ledger("checking permissions\nSUCCESS: mode is 0o644", first_exit=0)
    p = b.project(4096)
    assert (f"tool:{first}: bash `python repro.py` → ok; output folded: same as its re-run "
            f"tool:{last}") in p.text
    assert [f.refs for f in p.folds if "repeated_tool_call" in f.kinds] == [
        [f"tool:{first}", f"tool:{last}"]]
    assert hidden_differences(p.folds, b.store().get) == []


def test_a_changed_run_keeps_key_lines_first_when_its_lines_must_be_cut() -> None:
    """Past the line limit, the error lines stay and the count of the rest and the full text's
    ref are stated."""
    noise = "\n".join(f"progress step {i}" for i in range(30))
    b, first, _ = _repro_ledger(f"{noise}\nTraceback (most recent call last):\n"
                                "AssertionError: mode is 0o600")
    p = b.project(4096)
    assert "AssertionError: mode is 0o600" in p.text
    assert "Traceback (most recent call last):" in p.text
    assert (f"lines only in this run (12 of 32):\n<data tool:{first}>\n"
            in p.text)
    assert "progress step 29" not in p.text


def test_hidden_differences_counts_folds_over_a_different_result() -> None:
    """The count of the benchmark: an earlier run folded into a run whose result differs."""
    runs = {s.ref: s for s in (tool("x1", output="FAILURE"), tool("x2", output="SUCCESS"),
                               tool("x3", output="SUCCESS"))}
    folds = repeat_folds({"tool:x2": ["tool:x1"], "tool:x3": ["tool:x2"]})
    assert hidden_differences(folds, runs.get) == [("tool:x1", "tool:x2")]


def _wakes_among_noise() -> tuple[LedgerBuilder, str, list[str], str]:
    """The same deploy-bot wake repeating among retries and ticks, then the wake that matters."""
    b = LedgerBuilder()
    ask = b.operator("Watch the rollout of build 8812.")
    first = b.external("deploy-bot", "rollout 8812: 3/10 pods updated")
    run: list[str] = []
    for i in range(6):
        run.extend(b.retries(1) if i % 2 else b.ticks(1))
        run.append(b.external("deploy-bot", "rollout 8812: 3/10 pods updated"))
    live = b.external("deploy-bot", "rollout 8812 complete: 10/10 pods healthy", anchor=ask)
    return b, first, run, live


def test_duplicate_wakes_fold_also_when_ticks_and_retries_come_between() -> None:
    """Six copies of a wake, each after a tick or a retry, fold with them into one counted line
    (issue 12, item 5): none is shown in full, and the fold is not split into many lines."""
    b, first, run, _live = _wakes_among_noise()
    p = b.project(4096)
    folds = [f for f in p.folds if "repeated_tool_call" not in f.kinds]
    assert [(f.first, f.last, f.count) for f in folds] == [
        (f"turn:{run[0]}", f"turn:{run[-1]}", 12)]
    assert folds[0].kinds == {"duplicate_wake": 6, "scheduler_tick": 3, "provider_retry": 3}
    assert p.text.count("rollout 8812: 3/10 pods updated") == 1  # the first wake only
    assert f"turn:{first}" in selected_refs(p)
    assert "10/10 pods healthy" in p.text


def test_a_session_folds_duplicate_wakes_among_ticks_too() -> None:
    """The session projection judges each wake past the ticks and retries before it, as the
    planner does: the copies join the fold run instead of the history."""
    from holon_ctx.projection.session.session import SessionProjector

    b, _first, _run, live = _wakes_among_noise()
    store = b.store()
    request = SessionProjector(store).request(budget_tokens=4096, at=live)
    assert request.text.count("rollout 8812: 3/10 pods updated") == 1
    assert "duplicate_wake×6" in request.text


def test_hidden_differences_compares_results_for_equality_not_order() -> None:
    """A run whose output sorts after the shown one's ("b" > "a") differs from it as much as one
    that sorts before."""
    runs = {s.ref: s for s in (tool("x1", output="b"), tool("x2", output="a"))}
    assert hidden_differences(repeat_folds({"tool:x2": ["tool:x1"]}), runs.get) == [
        ("tool:x1", "tool:x2")]


def test_hidden_differences_checks_every_earlier_run_of_every_fold() -> None:
    """Each earlier run of a repeated-call fold is compared with the shown one (not only the
    first); a fold of low-value turns, and a fold whose shown run cannot be looked up or is not
    a tool run, are passed over, not the end of the count."""
    turn = StoredRecord(pos=0, ref="turn:t2", record=Turn(id="t2", seq=2, trigger="timer"),
                        tokens=0, turn_seq=2)
    runs = {s.ref: s for s in (tool("x1", output="SUCCESS"), tool("x2", output="FAILURE"),
                               tool("x3", output="SUCCESS"), tool("y1", output="old"),
                               tool("y2", output="new"), turn)}
    ticks = FoldManifest(first="turn:t1", last="turn:t2", count=2, kinds={"scheduler_tick": 2},
                         refs=["turn:t1", "turn:t2"])
    folds = [ticks, *repeat_folds({"tool:gone": ["tool:x1"], "turn:t2": ["tool:x2"],
                                   "tool:x3": ["tool:x1", "tool:x2"], "tool:y2": ["tool:y1"]})]
    assert hidden_differences(folds, runs.get) == [("tool:x2", "tool:x3"), ("tool:y1", "tool:y2")]


def _redelivered_webhook(copies: int) -> holon_ctx.Session:
    """A CI webhook resolves a wait, then is delivered again ``copies`` times (at-least-once
    delivery) among scheduler ticks; then the agent works on, past the recent window."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.operator_message("Deploy v2 once CI is green.")
    session.open_wait("ci-1", "CI for v2 green")
    session.external_event("github", "CI passed for v2", wait="ci-1")
    session.close_wait("ci-1")
    session.assistant_message("CI is green; deploying.")
    for i in range(copies):
        session.external_event("github", "CI passed for v2", wait="ci-1")
        if i % 3 == 0:
            session.wake("scheduler_tick", noop=True)
    return session


def test_a_redelivered_webhook_naming_a_resolved_wait_folds_into_one_line() -> None:
    """Copies of an event naming a wait it no longer changes fold with the ticks between them
    into one counted line (the original, which resolved the wait, and the first copy after the
    transition stay whole), in the session's request and in a stateless projection."""
    session = _redelivered_webhook(40)
    request = session.next_request(8000)
    assert request.text.count("CI passed for v2") == 2
    assert "duplicate_wake×39, scheduler_tick×14" in request.text
    stateless = Projector(session.store).project(budget_tokens=8000)
    assert stateless.text.count("CI passed for v2") == 2
    assert any(f.kinds.get("duplicate_wake") == 39 for f in stateless.manifest.folded)


def test_redelivered_copies_beyond_the_window_are_not_looked_up_as_high_turns() -> None:
    """Past the recent window high turns are fetched by lookup, each judged on its own; a copy
    of a wait-naming wake is judged beside the turns before it there too, so 100 copies do not
    come back one by one."""
    session = _redelivered_webhook(100)
    session.operator_message("Now tidy the changelog.")
    for i in range(120):
        session.tool_run("bash", {"step": i}, f"edited entry {i}")
    for budget in (3000, 30000):
        messages = json.dumps(session.next_request(budget).openai_messages)
        assert messages.count("CI passed for v2") <= 2, budget
    stateless = Projector(session.store).project(budget_tokens=30000)
    assert stateless.text.count("CI passed for v2") == 2
