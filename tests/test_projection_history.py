"""Priority across the whole history (issue 11, part 1; RFC 0002, decision 8).

Ledgers of several hundred turns with high turns on every window page, at budgets that bind
(each test asserts that it does, instead of skipping its check when it does not). The rule under
test: the n-th newest high turn, wherever it lies, competes in tier ``n // 64`` — so the newest 64
high turns all come before any normal turn, and no normal turn of window page k is shown while a
high turn of tier <= k is left out. High turns are fetched by lookup, so what a projection reads
follows its budget.
"""

from __future__ import annotations

import pytest
from projection_builders import LedgerBuilder, selected_refs

from holon_ctx.ledger.records import TaskStatus, Tool, ToolStatus
from holon_ctx.projection.base.model import Form, Priority
from holon_ctx.projection.planning.projector import Projection, Projector

BUDGETS = [512, 1024, 2048, 4096, 8192, 16384]
PER_TIER = 64  # Policy().high_turns_per_tier


def _binds(p: Projection, full: Projection) -> None:
    """The budget binds: the projection at it leaves something out and uses >= 90% of it."""
    assert p.budget_tokens < full.used_tokens, "the ledger must not fit the budget"
    assert any(s.omitted for s in p.manifest.sections), "something must be left out"
    assert p.used_tokens >= 0.9 * p.budget_tokens


def _shown(p: Projection) -> set[str]:
    return set(selected_refs(p))


def _full(p: Projection) -> set[str]:
    return {d.key for d in p.decisions if d.form is Form.FULL and not d.clipped}


# -- the review's own scenario, enlarged ----------------------------------------------------
def _tight_mix(rounds: int) -> tuple[LedgerBuilder, dict[str, set[str]]]:
    """A request, then ``rounds`` times: a task result (failure = high, success = normal) with a
    30-line test log, two retries and two ticks (low). High turns on every page."""
    b = LedgerBuilder()
    ask = b.operator("Get the payments service green again; it has been failing since the "
                     "dependency bump.")
    kinds: dict[str, set[str]] = {"high": set(), "normal": set(), "low": set()}
    for i in range(rounds):
        t = b.task_result(f"fix-{i}", f"attempt {i}: " + (
            "tests still failing in test_refund_rounding" if i % 2 == 0 else "partial progress"),
            anchor=ask, status=TaskStatus.FAILURE if i % 2 == 0 else TaskStatus.SUCCESS)
        kinds["high" if i % 2 == 0 else "normal"].add(f"turn:{t}")
        b.tool("shell", f"pytest tests/payments -x #{i}", "\n".join(
            f"tests/payments/test_refund.py::test_case_{i}_{k} PASSED" for k in range(30)))
        kinds["low"].update(f"turn:{t}" for t in [*b.retries(2), *b.ticks(2)])
    kinds["ask"] = {f"turn:{ask}"}
    kinds["current"] = {f"turn:{b.task_result('fix-final', 'all payment tests pass', anchor=ask)}"}
    return b, kinds


@pytest.mark.parametrize("budget", BUDGETS)
def test_two_hundred_turns_no_normal_turn_while_a_high_one_is_left_out(budget: int) -> None:
    """202 turns (20 high, on every page): whatever the budget, no normal turn is shown while a
    high one is left out, and none is shown in full while a high one is not (page-bound priority
    failed this at 8,192 and 16,384)."""
    b, kinds = _tight_mix(40)
    projector = Projector(b.store())
    p = projector.project(budget_tokens=budget, verify=True)
    full = projector.project(budget_tokens=400_000, verify=True)
    _binds(p, full)
    shown = _shown(p)
    assert kinds["ask"] | kinds["current"] <= shown
    assert not (kinds["low"] & shown)
    if kinds["normal"] & shown:
        assert kinds["high"] <= shown
    if kinds["normal"] & _full(p):
        assert kinds["high"] <= _full(p)


# -- more high turns than a tier holds --------------------------------------------------------
def _many_pages(turns: int) -> tuple[LedgerBuilder, list[str], list[str]]:
    """``turns`` turns after a request: every fourth a failed test run (high), the others
    routine task results (normal). No low turns, so every window page is exactly 64 turns."""
    b = LedgerBuilder()
    ask = b.operator("Keep the nightly build green and report every failure.")
    high: list[str] = []
    normal: list[str] = []
    for i in range(turns):
        if i % 4 == 0:
            t = b.task_result(f"nightly-{i}", f"nightly run {i} failed: test_ledger_{i} timed "
                              "out after 30 s", anchor=ask, status=TaskStatus.FAILURE)
            high.append(f"turn:{t}")
        else:
            t = b.task_result(f"check-{i}", f"routine check {i} passed; nothing to do",
                              anchor=ask)
            normal.append(f"turn:{t}")
    b.operator("What failed most recently?")
    return b, high[::-1], normal[::-1]  # newest first


@pytest.mark.parametrize("budget", [2048, 4096, 8192, 16384])
def test_six_hundred_turns_follow_the_tier_rule(budget: int) -> None:
    """600 turns, 150 high (more than one tier's 64): the newest 64 high turns all come before
    any normal turn, and a normal turn on window page k is shown only when every high turn of
    tiers 0..k is."""
    b, high, normal = _many_pages(600)
    projector = Projector(b.store())
    p = projector.project(budget_tokens=budget, verify=True)
    full = projector.project(budget_tokens=1_000_000, verify=True)
    _binds(p, full)
    shown = _shown(p)
    # Every window page has high turns (1 in 4): they sit on every page.
    assert len(high) > 2 * PER_TIER
    shown_normal = [i for i, ref in enumerate(normal) if ref in shown]
    if shown_normal:
        assert set(high[:PER_TIER]) <= shown
        # Turns newest first, one in four high: normal i is about 4i/3 turns back, on page k.
        deepest_page = max((4 * i // 3 + 1) // 64 for i in shown_normal)
        assert set(high[:PER_TIER * (deepest_page + 1)]) <= shown
    # A high turn never waits behind a normal one of an earlier page.
    assert any(ref in shown for ref in high)


def test_a_failed_tool_a_hundred_turns_back_competes_with_the_recent_window() -> None:
    """The review's measurement: a failed tool run 101 turns back was not even considered at
    3,000 tokens while 64 routine turns were shown. It is now kept, ahead of routine turns."""
    b = LedgerBuilder()
    ask = b.operator("Migrate the invoices table and keep the API green.")
    failed_turn = b.task_result("migrate", "migration attempt 1", anchor=ask)
    b.tool("shell", "alembic upgrade head", "ERROR: column invoice_cents already exists",
           status=ToolStatus.ERROR, exit_code=1)
    routine = b.busy(100, anchor=ask)
    b.operator("Where do we stand?")
    projector = Projector(b.store())
    p = projector.project(budget_tokens=3000, verify=True)
    full = projector.project(budget_tokens=400_000, verify=True)
    _binds(p, full)
    shown = _shown(p)
    assert f"turn:{failed_turn}" in shown
    assert any(f"turn:{t}" in shown for t in routine)  # the recent window still shows
    decision = next(d for d in p.decisions if d.key == f"turn:{failed_turn}")
    assert decision.priority is Priority.HIGH
    assert "tool_failure" in decision.reasons


def test_reads_follow_the_budget() -> None:
    """High turns are read by lookup a chunk at a time, only as far as the budget needs: a small
    budget reads a few, a larger one more, and never more than one chunk beyond those chosen."""
    b, high, _ = _many_pages(2000)
    projector = Projector(b.store())
    reads = {}
    for budget in (1024, 4096, 16384):
        p = projector.project(budget_tokens=budget)
        read = p.manifest.window["high_turns_read"]
        assert isinstance(read, int)
        chosen = sum(1 for d in p.decisions if d.form is not None and d.key in set(high[16:]))
        # Reads come a chunk (16) at a time: the chunks the chosen turns fill, and at most one
        # more (with a topic a chunk is read at its round's start, RFC 0030).
        assert read <= -(-chosen // 16) * 16 + 16
        reads[budget] = read
    # With a topic (the current operator words) a chunk is read at its round's start, so a
    # small budget may read one chunk more than it fills (RFC 0030): equal at 1k and 4k here.
    assert reads[1024] <= reads[4096] < reads[16384]
    assert reads[1024] <= 48


def test_a_late_record_marks_an_older_turn_high_only_from_its_position() -> None:
    """A tool failure appended later to an old turn makes it high as of that record: projected
    before it, the turn is routine; after it, the turn competes as high."""
    b = LedgerBuilder()
    ask = b.operator("Rotate the signing keys on every node.")
    old = b.task_result("rotate-a", "node a rotated", anchor=ask)
    b.busy(80, anchor=ask)
    before = b.operator("Is node a done?")
    b.busy(1, anchor=ask)
    b.add(Tool(id="late1", turn_id=old, tool_name="verify", args_preview="node a",
               status=ToolStatus.ERROR, exit_code=2, output="signature check failed"))
    b.busy(2, anchor=ask)
    projector = Projector(b.store())
    early = projector.project(budget_tokens=2048, at=before)
    late = projector.project(budget_tokens=2048)
    assert f"turn:{old}" not in _shown(early)
    assert f"turn:{old}" in _shown(late)
    assert next(d for d in late.decisions if d.key == f"turn:{old}").priority is Priority.HIGH
