"""The session projection's contracts where a runtime meets them: requests between an input and
its reply, governed state that changes outside the ledger, restarts, errors mid-walk, pins and
anchors on old turns, task results rejoining their request, late results, unresolved effects."""

from __future__ import annotations

import pytest
from projection_builders import LedgerBuilder, memory_store
from session_helpers import check_request, content_stream

import holon_ctx
from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.ledger.epochs import MemoryEpochStore
from holon_ctx.ledger.records import SideEffect, Tool, ToolStatus, Turn
from holon_ctx.projection.base.model import ControlState
from holon_ctx.projection.rendering.effects import EFFECTS_HEADING
from holon_ctx.projection.session.session import Layout, SessionPolicy, SessionProjector

#: The planned epochs' layout (RFC 0010): every request ends with the full current-state tail.
#: A small ledger otherwise fits whole, and a whole epoch states only what no record says.
PLANNED = SessionPolicy(whole_history=False)


class _Governed:
    """A governed store whose state the test sets (it changes outside the ledger)."""

    def __init__(self) -> None:
        self.state: ControlState | None = None

    def control_state(self) -> ControlState | None:
        return self.state


def _blocking(*keys: str) -> ControlState:
    return ControlState(envelope_id="ce-1", obligations=(), constraints=(),
                        blocking=tuple((k, "unknown") for k in keys))


@pytest.mark.parametrize("layout", [Layout.MESSAGES, Layout.TEXT])
def test_a_request_made_before_the_reply_is_a_prefix_of_the_next(layout: Layout) -> None:
    """A runtime asks right after an input (before the reply exists): the next request, after
    the reply and the next input, still starts with that request minus its tail."""
    store = holon_ctx.open_session(":memory:", compaction=None).store
    session = holon_ctx.open_session(store, compaction=None)
    projector = SessionProjector(store, layout=layout)
    previous = None
    for i in range(12):
        session.operator_message(f"Question {i}: what does module_{i} do?")
        request = projector.request(budget_tokens=100_000)
        check_request(request)
        if previous is not None:
            assert not request.replanned
            kept = content_stream(previous.parts[:-1])
            assert content_stream(request.parts)[:len(kept)] == kept
            assert request.cached_tokens == previous.request_tokens - previous.tail_tokens
        previous = request
        session.assistant_message(f"Answer {i}: it parses the config.")


def test_governed_notices_follow_the_governed_state_not_the_ledger() -> None:
    """A blocking side effect the governed store gains (or loses) shows in (or leaves) the very
    next request, though no record was appended in between."""
    b = LedgerBuilder()
    b.operator("Deploy the canary.")
    b.assistant("Deploying.")
    governed = _Governed()
    projector = SessionProjector(memory_store(b.records), control=governed)
    assert "BLOCKED ON RECONCILIATION" not in projector.request(budget_tokens=3000).text
    governed.state = _blocking("deploy-1")
    assert "BLOCKED ON RECONCILIATION" in projector.request(budget_tokens=3000).parts[-1].text
    governed.state = None
    assert "BLOCKED ON RECONCILIATION" not in projector.request(budget_tokens=3000).text


def test_a_restarted_process_holds_the_budget_when_the_governed_state_grew() -> None:
    """The saved epoch (here it starts at the ledger's last record) plus a governed state that
    grew since must still fit the budget: the request re-plans rather than go over."""
    b = LedgerBuilder()
    ask = b.operator("Please do the following carefully: "
                     + "step details and more details. " * 190)
    b.turn("x-agent-step", anchor=ask)  # re-plans: the saved epoch starts at the end
    store = memory_store(b.records)
    epochs = MemoryEpochStore()
    SessionProjector(store, layout=Layout.MESSAGES, epochs=epochs,
                     control=_Governed()).request(budget_tokens=1200)
    grown = _Governed()
    grown.state = ControlState(
        envelope_id="ce-1", constraints=(),
        obligations=tuple(f"obligation {i}: reconcile batch {i}" for i in range(15)),
        blocking=tuple((f"deploy-key-{i}", "unknown") for i in range(15)))
    request = SessionProjector(store, layout=Layout.MESSAGES, epochs=epochs,
                               control=grown).request(budget_tokens=1200)
    check_request(request)
    assert "BLOCKED ON RECONCILIATION" in request.parts[-1].text


def test_an_error_mid_walk_leaves_no_half_walked_state() -> None:
    """When the governed state is too big for the budget the request fails with one error; once
    it shrinks, the same projector answers exactly as a fresh one does (the record walked before
    the error is not rendered twice)."""
    b = LedgerBuilder()
    b.operator("Deploy.")
    b.assistant("Deploying now.")
    store = memory_store(b.records)
    governed = _Governed()
    projector = SessionProjector(store, layout=Layout.MESSAGES, control=governed)
    projector.request(budget_tokens=400)
    store.append([Tool(id="x7", turn_id=b.turn_id, tool_name="deploy", args_preview="{}",
                       args_digest="d", status=ToolStatus.OK, exit_code=0,
                       output="UNIQUE-OUTPUT deployed\n")])
    governed.state = ControlState(
        envelope_id="ce-1", constraints=(), blocking=(("k", "unknown"),),
        # Ten obligations (a notice lists ten, then counts the rest), each long enough that
        # the notice alone is over the budget.
        obligations=tuple(f"obligation {i}: reconcile batch {i} " + "of the ledger rows " * 12
                          for i in range(10)))
    with pytest.raises(BudgetTooSmallError):
        projector.request(budget_tokens=400)
    governed.state = None
    again = projector.request(budget_tokens=400)
    fresh = SessionProjector(store, layout=Layout.MESSAGES).request(budget_tokens=400)
    assert again.text.count("UNIQUE-OUTPUT") == 1
    assert again.text == fresh.text


def test_a_pin_on_an_old_turn_shows_the_pinned_record() -> None:
    """An operator pin on a record of a turn the history holds only as a one-line digest makes
    the next request show that record (the re-plan pins its turn)."""
    b = LedgerBuilder()
    ask = b.operator("Tune the cache.")
    b.turn("x-agent-step", anchor=ask)
    b.tool("shell", "bench --baseline", "BASELINE p99=412ms p50=88ms\n" + "noise\n" * 40)
    for i in range(40):
        b.turn("x-agent-step", anchor=ask)
        b.assistant(f"tried setting {i}: " + "no change; " * 20)
    old_tool = next(r for r in b.records if isinstance(r, Tool))
    b.operator("Keep the baseline numbers in view.")
    b.pin(f"tool:{old_tool.id}", "the baseline")
    for i in range(5):
        b.turn("x-agent-step")
        b.assistant(f"comparing {i}")
    projector = SessionProjector(memory_store(b.records))
    ids = [r.id for r in b.records if isinstance(r, Turn)]
    for turn_id in ids[-5:]:
        request = projector.request(budget_tokens=2500, at=turn_id)
        check_request(request)
        assert "BASELINE p99=412ms" in request.text


def test_resuming_an_older_request_brings_its_words_back() -> None:
    """After an unrelated exchange that pushed it out of the history's full forms, a turn that
    continues the earlier request has that request's words in full (the tail holds only a
    one-line pointer)."""
    b = LedgerBuilder()
    first = b.operator("Refactor billing into three services. " + "Keep the public API stable. "
                       * 15 + "CONSTRAINT-Z: never touch the invoices table.")
    for i in range(6):
        b.turn("x-agent-step", anchor=first)
        b.assistant(f"refactor {i} " + "editing " * 50)
        b.tool("shell", f"edit {i}", "ok\n" * 30)
    for j in range(25):
        b.operator(f"Unrelated {j}: " + "context " * 40)
        b.assistant("10am " * 30)
    resumed = []
    for i in range(5):
        resumed.append(b.turn("x-agent-step", anchor=first))
        b.assistant(f"back to it {i} " + "editing " * 50)
        b.tool("shell", f"edit b{i}", "ok\n" * 30)
    projector = SessionProjector(memory_store(b.records))
    for turn_id in [r.id for r in b.records if isinstance(r, Turn)]:
        request = projector.request(budget_tokens=5000, at=turn_id)
        check_request(request)
        if turn_id in resumed:
            assert "CONSTRAINT-Z" in request.text
            assert request.manifest.anchor_turn == f"turn:{first}"


def test_a_task_result_rejoins_the_request_that_spawned_it() -> None:
    """The anchor of a task-result turn is the turn that spawned the task (known only from the
    result record): the request shows that turn's words and names it as the anchor."""
    b = LedgerBuilder()
    spawner = b.operator("Run the nightly export in the background and tell me when it is done.")
    for i in range(25):
        b.operator(f"Meanwhile, question {i}?")
        b.assistant(f"answer {i}: " + "details; " * 10)
    b.task_result("export", "the export finished: 18,204 rows", spawned_by=spawner)
    store = memory_store(b.records)
    request = SessionProjector(store).request(budget_tokens=1800)
    check_request(request)
    assert request.manifest.anchor_turn == f"turn:{spawner}"
    assert "nightly export" in request.text


def test_a_late_result_counts_for_the_work_item_of_its_own_turn() -> None:
    """The frontier of the current work item does not count a late tool result that belongs to
    a turn of another work item."""
    b = LedgerBuilder()
    w1 = b.operator("Fix the login page.", work_item="w1")
    b.work_item("w1", objective="Fix the login page")
    b.add(Tool(id="xlate", turn_id=w1, tool_name="edit", args_preview="src/login.py",
               status=ToolStatus.PENDING, call_id="c9"))
    b.operator("Now the docs index.", work_item="w2")
    b.work_item("w2", objective="Rewrite the docs index")
    b.tool("edit", "docs/index.md", "ok", files=["docs/index.md"])
    b.add(Tool(id="xlate2", turn_id=w1, tool_name="edit", args_preview="src/login.py",
               status=ToolStatus.OK, exit_code=0, output="ok", call_id="c9",
               files_written=["src/login.py"]))
    # Ended by the model's reply: the request must end on a user turn, so the tail states the
    # work item and its frontier (a planned epoch's history says them otherwise, RFC 0025
    # decision 5, and the tally counted along the walk is what this tail reads).
    b.assistant("The docs index is rewritten.")
    request = SessionProjector(memory_store(b.records), session=PLANNED,
                               layout=Layout.MESSAGES).request(budget_tokens=4000)
    tail = request.parts[-1].text
    assert "docs/index.md" in tail
    assert "src/login.py" not in tail
    assert "1 files modified" in tail


def test_an_unresolved_side_effect_stays_in_the_tail_until_a_run_resolves_it() -> None:
    """Before any compaction, a run whose side effect is unknown is named in every request's
    tail until a later run of the same call reports it done."""
    b = LedgerBuilder()
    ask = b.operator("Ship release 2.5.")
    b.add(Tool(id="xdeploy", turn_id=ask, tool_name="deploy", args_preview="prod 2.5",
               status=ToolStatus.TIMEOUT, call_id="cd1", side_effect=SideEffect.UNKNOWN))
    turns = [b.turn("x-agent-step", anchor=ask) for _ in range(20)]
    for i, _ in enumerate(turns):
        b.assistant(f"checking the rollout {i}: " + "status pending; " * 12)
    b.turn("x-agent-step", anchor=ask)
    b.add(Tool(id="xcheck", turn_id=b.turn_id or "", tool_name="deploy", args_preview="prod 2.5",
               status=ToolStatus.OK, exit_code=0, call_id="cd1",
               side_effect=SideEffect.COMPLETED))
    projector = SessionProjector(memory_store(b.records))
    ids = [r.id for r in b.records if isinstance(r, Turn)]
    for turn_id in ids[:-1]:
        request = projector.request(budget_tokens=1500, at=turn_id)
        check_request(request)
        assert EFFECTS_HEADING in request.parts[-1].text
        assert "- tool:xdeploy: deploy `prod 2.5` → unknown\n" in request.parts[-1].text
    last = projector.request(budget_tokens=1500, at=ids[-1])
    assert "UNRESOLVED SIDE EFFECT" not in last.parts[-1].text


def test_the_tail_stays_small_however_much_is_unresolved() -> None:
    """Thirty unresolved side effects and twelve open waits: the tail, re-sent with every
    request, names the newest few of each in full and the older ones by ref or id, so every
    one of them stays findable without the tail growing with them."""
    b = LedgerBuilder()
    ask = b.operator("Roll the fleet to 2.5, host by host.")
    b.work_item("roll", objective="roll the fleet to 2.5")
    for i in range(12):
        b.open_wait(f"host{i}", f"host {i} reports healthy after the restart", work_item="roll")
    for i in range(30):
        b.turn("x-agent-step", anchor=ask, work_item="roll")
        b.add(Tool(id=f"xr{i}", turn_id=b.turn_id or "", tool_name="restart",
                   args_preview=f"host{i}", status=ToolStatus.TIMEOUT, call_id=f"cr{i}",
                   side_effect=SideEffect.UNKNOWN))
    request = SessionProjector(memory_store(b.records), session=PLANNED).request(budget_tokens=4000)
    check_request(request)
    tail = request.parts[-1].text
    lines = tail.splitlines()
    named = [f"tool:xr{i}" for i in range(30) if f"- tool:xr{i}: restart" in tail]
    assert named == [f"tool:xr{i}" for i in range(25, 30)]
    older = next(line for line in lines if line.startswith("- … 25 older"))
    assert all(f"tool:xr{i}" in older for i in range(20, 25))
    waits = [line for line in lines if line.startswith("waiting on ")]
    assert [w.split(":")[0] for w in waits] == [f"waiting on host{i}" for i in (9, 10, 11)]
    more = next(line for line in lines if "more open waits" in line)
    assert more.startswith("… 9 more open waits:")
    assert "host8" in more
    assert len(lines) <= 20


@pytest.mark.parametrize("budget", [5, 12, 20])
def test_a_budget_too_small_is_said_against_the_callers_budget(budget: int) -> None:
    """The error names the budget the caller gave and a need above it, never the share of it
    that an internal re-plan tried."""
    b = LedgerBuilder()
    b.operator("Migrate the billing tables to the new schema; keep the old views working. " * 3)
    b.work_item("bill", objective="migrate the billing tables " * 5)
    with pytest.raises(BudgetTooSmallError) as caught:
        SessionProjector(memory_store(b.records), layout=Layout.MESSAGES).request(
            budget_tokens=budget)
    assert caught.value.available_tokens == budget
    assert caught.value.required_tokens > budget
    assert f"only {budget} available" in str(caught.value)


def test_state_saved_beside_another_ledger_is_rebuilt_not_trusted() -> None:
    """Saved session state that names turns this ledger does not hold (a ledger replaced at the
    same path, a state table copied) is derived data that does not match: the request is the one
    a fresh walk makes, never an error and never the other ledger's history."""
    epochs = MemoryEpochStore()
    first = LedgerBuilder()
    first.operator("Summarise the incident for the status page.")
    for i in range(30):
        first.turn("x-agent-step")
        first.assistant(f"drafting paragraph {i}: " + "timeline and impact; " * 20)
    SessionProjector(memory_store(first.records), epochs=epochs).request(budget_tokens=1200)
    other = LedgerBuilder()
    other.operator("Rotate the API keys of the staging project.")
    for i in range(40):  # longer than the first ledger: its saved epoch's position lies inside
        other.turn("x-agent-step", turn_id=f"zz{i}")
        other.assistant(f"rotated key {i} of the staging project")
    store = memory_store(other.records)
    reused = SessionProjector(store, epochs=epochs).request(budget_tokens=1200)
    fresh = SessionProjector(store).request(budget_tokens=1200)
    assert reused.text == fresh.text
    assert "incident" not in reused.text
