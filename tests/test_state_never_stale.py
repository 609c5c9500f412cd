"""State never stale (issue 25, item 2; RFC 0023): nothing the prompt states as current
contradicts a newer ledger record.

A wait opened by a ``wait`` record and answered by a task result or an external event naming it
(``wait_id``), with no ``wait`` record closing it, is not open: the work item, the work refs and
a session's tail never say ``waiting on`` it, and when the answering record is left out for room,
the state says it is resolved, with that record's ref. Checked over a generated family of ledgers
(several waits of two work items, answered in each way, buried under work of several sizes) at
several budgets, stateless and in a session, against the ledger's latest state computed here,
independently of the code under test.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import attrs
import pytest
from projection_builders import LedgerBuilder
from session_helpers import check_request, turn_ids

import holon_ctx
from holon_ctx.cli.common import open_control_source
from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.ledger.records import (
    ExternalEvent,
    Record,
    SideEffect,
    TaskResult,
    Tool,
    Turn,
    Wait,
    WaitStatus,
)
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.projection.projector import Projector
from holon_ctx.projection.session import SessionProjector

_WAITING = re.compile(r"^waiting on (\S+?)[: ]", re.MULTILINE)
_OPEN_ENTRY = re.compile(r"^- (\S+) \((wait:\S+?)[,)]", re.MULTILINE)


@attrs.frozen
class Truth:
    """A wait as the ledger's records leave it: open, or closed (by which record, if any)."""

    open: bool
    by: str | None = None


def latest_state(records: list[Record]) -> dict[str, Truth]:
    """Each wait's latest state, read from the records in order."""
    out: dict[str, Truth] = {}
    for rec in records:
        if isinstance(rec, Wait):
            out[rec.wait_id] = Truth(rec.status is WaitStatus.OPEN, rec.resolved_by)
        elif isinstance(rec, TaskResult | ExternalEvent) and rec.wait_id in out \
                and out[rec.wait_id].open:
            kind = "task_result" if isinstance(rec, TaskResult) else "external_event"
            out[rec.wait_id] = Truth(False, f"{kind}:{rec.id}")
    return out


def generated(seed: int, work: int) -> LedgerBuilder:
    """Two work items; waits opened on each, then answered by a task result, by an event, closed
    by a wait record or left open; ``work`` busy turns between (seeded)."""
    rng = random.Random(seed)
    b = LedgerBuilder()
    ask = b.operator("Ship the billing export; wait for CI and the review before merging.",
                     work_item="w1")
    b.work_item("w1", objective="Billing export shipped")
    waits = [f"task-{k}" for k in range(rng.randint(2, 4))]
    for wait_id in waits:
        b.turn("x-agent-step", anchor=ask, work_item=rng.choice(["w1", "w1", "w2"]))
        b.open_wait(wait_id, f"the {wait_id} job reports back")
    b.busy(rng.randint(0, work), anchor=ask, work_item="w1")
    for wait_id in waits:
        how = rng.choice(["task", "event", "record", "open"])
        if how == "task":
            b.task_result(wait_id, f"{wait_id} finished: 42 checks passed", wait=wait_id,
                          anchor=ask, work_item="w1")
        elif how == "event":
            b.external("ci", f"{wait_id}: status success", wait=wait_id, anchor=ask,
                       work_item="w1")
        elif how == "record":
            b.turn("x-agent-step", anchor=ask, work_item="w1")
            b.close_wait(wait_id)
        b.busy(rng.randint(0, work), anchor=ask, work_item="w1")
    b.operator("Status?", work_item="w1", anchor=ask)
    return b


def _check(text: str, truth: dict[str, Truth]) -> None:
    """Every wait the text states as open is open in the ledger; every wait a record answered
    is shown answered: its record is in the text, or a state line names it."""
    for wait_id in _WAITING.findall(text):
        assert truth[wait_id].open, f"stated open, but {wait_id} was closed by {truth[wait_id].by}"
    for wait_id, _ in _OPEN_ENTRY.findall(text):
        if wait_id in truth:
            assert truth[wait_id].open, f"listed open, but {wait_id} closed"
    for wait_id, t in truth.items():
        if not t.open and t.by is not None and not t.by.startswith("wait:"):
            said = f"wait {wait_id} resolved by {t.by}" in text
            shown = re.search(rf"(<data {re.escape(t.by)}[ >]|^{re.escape(t.by)}[: ])", text,
                              re.MULTILINE)
            opened_shown = re.search(rf"^wait {re.escape(wait_id)} open", text, re.MULTILINE)
            if opened_shown or f"waiting on {wait_id}" in text:
                assert said or shown, f"{wait_id}: its opening is shown, its answer {t.by} not"


FAMILY = [(seed, work) for seed in range(6) for work in (2, 12)]
BUDGETS = (700, 1200, 2500, 6000, 30_000)


@pytest.mark.parametrize(("seed", "work"), FAMILY)
def test_no_state_line_contradicts_a_newer_record(seed: int, work: int) -> None:
    b = generated(seed, work)
    truth = latest_state(b.records)
    projector = Projector(b.store())
    for budget in BUDGETS:
        try:
            p = projector.project(budget_tokens=budget, verify=True)
        except BudgetTooSmallError:
            continue
        _check(p.text, truth)


@pytest.mark.parametrize("seed", range(3))
def test_a_session_states_no_stale_wait(seed: int) -> None:
    """Every request of a session (appends and re-plans, the tail included), as of every turn,
    against the ledger's state as of that turn."""
    b = generated(seed, 6)
    store = b.store()
    session = SessionProjector(store)
    starts = [i for i, r in enumerate(b.records) if isinstance(r, Turn)] + [len(b.records)]
    for k, turn_id in enumerate(turn_ids(store)):
        end = starts[k + 1]  # the turn's records, up to the next turn
        request = session.request(budget_tokens=1500, at=turn_id)
        check_request(request)
        _check(request.text, latest_state(b.records[:end]))


def test_the_answer_left_out_is_named_in_the_state() -> None:
    """Holon's shape: a wait opened, long work, then the task result that answers it; at a
    budget that leaves the result's turn out, the work item says the wait is resolved by it."""
    b = LedgerBuilder()
    ask = b.operator("Run the migration job and continue when it reports back.", work_item="w1")
    b.work_item("w1", objective="Migration done")
    b.open_wait("task-1", "the migration task reports")
    b.task_result("task-1", "migration finished: 120 tables", wait="task-1", anchor=ask,
                  work_item="w1")
    b.busy(30, anchor=ask, work_item="w1")
    b.operator("Next step?", work_item="w1", anchor=ask)
    [result] = [r for r in b.records if isinstance(r, TaskResult) and r.wait_id == "task-1"]
    p = Projector(b.store()).project(budget_tokens=900)
    assert "waiting on task-1" not in p.text
    assert f"wait task-1 resolved by task_result:{result.id}" in p.text


# -- side effects: the session's tail and the governed store's notices --------------------------
_BLOCKING_KEY = re.compile(r'^- idempotency key "?(effect:[^":\s]+)"?: ', re.MULTILINE)
_OBLIGATION_KEY = re.compile(r"\[(effect:[^;\]\s]+)[;\]]")
_TAIL_EFFECT = re.compile(r"^- (tool:\S+): .* → (unknown|partial)$", re.MULTILINE)


def effects_state(records: list[Record]) -> tuple[dict[str, Truth], dict[str, str]]:
    """Each side effect's latest state by its call (tool name and argument digest, read from
    the records), and each tool run's ref → its key, independently of the code under test."""
    out: dict[str, Truth] = {}
    keys: dict[str, str] = {}
    for rec in records:
        if not isinstance(rec, Tool) or rec.side_effect is None:
            continue
        key = f"effect:{rec.tool_name}#{rec.args_digest}"
        keys[f"tool:{rec.id}"] = key
        if rec.side_effect in (SideEffect.UNKNOWN, SideEffect.PARTIAL):
            out[key] = Truth(True)
        elif key in out:
            out[key] = Truth(False, f"tool:{rec.id}")
    return out, keys


def _check_effects(text: str, truth: dict[str, Truth], keys: dict[str, str]) -> None:
    """No line states as unresolved a side effect a newer run resolved: the governed store's
    blocking keys and obligations, and the tail's unresolved runs."""
    for key in _BLOCKING_KEY.findall(text) + _OBLIGATION_KEY.findall(text):
        assert truth[key].open, f"stated blocking, but {key} was resolved by {truth[key].by}"
    for ref, _ in _TAIL_EFFECT.findall(text):
        key = keys[ref]
        assert truth[key].open, f"stated unresolved, but {ref} was resolved by {truth[key].by}"


def effects_session(seed: int, path: Path) -> tuple[list[str], int]:
    """A session that deploys several services, some with an unknown side effect; compaction
    seals them into the governed store; later runs of the same calls resolve some (completed),
    reopen others (unknown again) or leave them. Returns the request texts, one per turn."""
    rng = random.Random(seed)
    budget = rng.choice((1500, 3000, 8000))
    texts: list[str] = []
    with holon_ctx.open_session(str(path)) as s:
        s.operator_message("Roll out build 77 to the services, one by one.")
        services = [f"svc-{k}" for k in range(rng.randint(2, 4))]
        for svc in services:
            s.tool_run("deploy", f"./deploy.sh {svc} --build 77", "timeout waiting for rollout",
                       status="timeout", side_effect=rng.choice(["unknown", "partial"]))
            texts.append(s.next_request(budget).text)
        for i in range(rng.randint(20, 60)):
            s.operator_message(f"Dashboard chart {i}: amber palette, stacked bars, a legend.")
            s.assistant_message(f"Chart {i} updated.")
            texts.append(s.next_request(budget).text)
        s.compact()
        hows = [rng.choice(["completed", "none", "unknown", "leave"]) for _ in services]
        if not {"completed", "none"} & set(hows):
            hows[rng.randrange(len(hows))] = "completed"  # every ledger resolves one at least
        for svc, how in zip(services, hows, strict=True):
            s.operator_message(f"Check the rollout of {svc}.")
            if how != "leave":
                s.tool_run("deploy", f"./deploy.sh {svc} --build 77", f"{svc}: {how}",
                           status="ok" if how != "unknown" else "timeout", side_effect=how)
            texts.append(s.next_request(budget).text)
            s.assistant_message(f"{svc} checked.")
            texts.append(s.next_request(budget).text)
    return texts, budget


@pytest.mark.parametrize("seed", range(4))
def test_no_side_effect_is_stated_unresolved_after_a_newer_run_resolved_it(
        seed: int, tmp_path: Path) -> None:
    """Every request of the session, as of its turn, and the stateless prompt at every budget
    over the compacted ledger (with the governed store's notices), against the ledger's latest
    state of every side effect."""
    db = tmp_path / "effects.db"
    texts, budget = effects_session(seed, db)
    store = SqliteStore(db)
    try:
        records = [s.record for s in store.records_between(0, store.end_pos())]
        truth, keys = effects_state(records)
        assert any(not t.open for t in truth.values())
        # The last request is as of the ledger's end; earlier ones were checked by their turn
        # (the tail is made from what the walk saw, the notices are read at the request).
        _check_effects(texts[-1], truth, keys)
        control = open_control_source(store)
        assert control is not None
        projector = Projector(store, control=control)
        for b in (*BUDGETS, budget):
            try:
                p = projector.project(budget_tokens=b)
            except BudgetTooSmallError:
                continue
            _check_effects(p.text, truth, keys)
    finally:
        store.close()


def test_a_governed_side_effect_a_newer_run_resolved_is_stated_resolved(tmp_path: Path) -> None:
    """The shape found here: an unknown deploy, sealed by compaction into the governed store,
    then the same call completed: no request says BLOCKED ON RECONCILIATION; the notice names
    the run that resolved it."""
    db = tmp_path / "one.db"
    with holon_ctx.open_session(str(db)) as s:
        s.operator_message("Deploy the canary of build 77 to production.")
        s.tool_run("deploy", "./deploy.sh production --canary", "timeout", status="timeout",
                   side_effect="unknown")
        for i in range(40):
            s.operator_message(f"Chart {i}: amber palette with stacked bars and a legend.")
            s.assistant_message(f"Chart {i} updated.")
        s.compact()
        assert "BLOCKED ON RECONCILIATION" in s.next_request(4096).text
        s.operator_message("Check the canary rollout.")
        done = s.tool_run("deploy", "./deploy.sh production --canary", "rollout complete",
                          side_effect="completed")
        text = s.next_request(4096).text
    assert "BLOCKED ON RECONCILIATION" not in text
    assert f"resolved by {done}, a newer record" in text
