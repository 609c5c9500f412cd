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
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs
import pytest
from projection_builders import LedgerBuilder
from session_helpers import check_request, turn_ids

import holon_ctx
from holon_ctx.cli.common import control_source
from holon_ctx.cli.episodes_cmd import open_episode_source
from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.ledger import answers
from holon_ctx.ledger.records import (
    ExternalEvent,
    Record,
    SideEffect,
    TaskResult,
    Tool,
    ToolStatus,
    Turn,
    Wait,
    WaitStatus,
    WorkItem,
    WorkItemStatus,
)
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.memory import source
from holon_ctx.memory.unresolved import call_key, todo_key
from holon_ctx.projection.base import waits
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.session.session import SessionProjector

_WAITING = re.compile(r"^waiting on (\S+?)[: ]", re.MULTILINE)
_OPEN_ENTRY = re.compile(r"^- (\S+) \((wait:\S+?)[,)]", re.MULTILINE)


@attrs.frozen
class Truth:
    """A wait as the ledger's records leave it: open, or closed (by which record, if any)."""

    open: bool
    by: str | None = None


def texts_at(projector: Projector, budgets: Iterable[int], *, verify: bool = False) -> Iterator[str]:
    """The stateless prompt's text at each budget that fits (a budget too small is skipped)."""
    for budget in budgets:
        try:
            yield projector.project(budget_tokens=budget, verify=verify).text
        except BudgetTooSmallError:
            continue


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
    for text in texts_at(projector, BUDGETS, verify=True):
        _check(text, truth)


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
        with control_source(store) as control:
            assert control is not None
            projector = Projector(store, control=control)
            for text in texts_at(projector, (*BUDGETS, budget)):
                _check_effects(text, truth, keys)
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


# -- every state line: the work item's lines, the frontier, waits (issue 25 item 2, completed) --
_HEAD = re.compile(r"^work item (\S+) · status (\S+) · ", re.MULTILINE)
_TAIL_HEAD = re.compile(r"^work item (\S+) \((\S+), [^)]*\): .*?(?:; todos (\d+)/(\d+) done)?$",
                        re.MULTILINE)
_TODOS = re.compile(r"^todos: (\d+)/(\d+) done", re.MULTILINE)
_TODO_LINE = re.compile(r"^- \[([x ])\] (.+)$", re.MULTILINE)
_BLOCKER = re.compile(r"^blocker: (.+)$", re.MULTILINE)
_PENDING = re.compile(r"(?:tool runs \(.*?|tool runs, .*?), (\d+) pending", re.MULTILINE)


@attrs.define
class ItemTruth:
    """A work item folded from its transitions here (a field a transition leaves out keeps its
    value), independently of the store's fold."""

    status: str = "open"
    blocker: str = ""
    todos: list[tuple[str, bool]] = attrs.Factory(list)


def items_state(records: list[Record]) -> dict[str, ItemTruth]:
    out: dict[str, ItemTruth] = {}
    for rec in records:
        if isinstance(rec, WorkItem):
            t = out.setdefault(rec.work_item_id, ItemTruth())
            if rec.status is not None:
                t.status = rec.status.value
            if rec.blocker is not None:
                t.blocker = rec.blocker
            if rec.todos is not None:
                t.todos = [(td.text, td.done) for td in rec.todos]
    return out


def calls_state(records: list[Record]) -> tuple[set[str], dict[str, str]]:
    """The refs of pending runs no later run of the same call answered, and each answered
    pending run's ref → the answering run's ref (calls keyed by tool name and digest)."""
    open_: dict[str, str] = {}
    answered: dict[str, str] = {}
    for rec in records:
        if not isinstance(rec, Tool):
            continue
        key = f"{rec.tool_name}#{rec.args_digest}"
        if rec.status is ToolStatus.PENDING:
            open_[key] = f"tool:{rec.id}"
        elif key in open_:
            answered[open_.pop(key)] = f"tool:{rec.id}"
    return set(open_.values()), answered


#: A planned epoch's work state, said in its history and dated (RFC 0025 decision 5): the lines
#: up to the next heading state the work item and frontier as of that turn, not as current.
_DATED = re.compile(r"^## Current state as of turn:(\S+)\n(.*?)(?=^#|\Z)", re.MULTILINE | re.DOTALL)


def _within(records: list[Record], turn_id: str) -> list[list[Record]]:
    """The ledger as of each record of turn ``turn_id``: a planned epoch freezes its history at
    a record, and the dated block names the turn that record is in."""
    starts = [i for i, rec in enumerate(records) if isinstance(rec, Turn)] + [len(records)]
    for k, i in enumerate(starts[:-1]):
        if getattr(records[i], "id", None) == turn_id:
            return [records[:j] for j in range(i + 1, starts[k + 1] + 1)]
    raise AssertionError(f"a dated state names turn:{turn_id}, which is not in the ledger")


def _check_all(text: str, records: list[Record]) -> None:
    """Every state line the prompt states as current, against the ledger's latest state; every
    dated state block (``## Current state as of turn:X``) against the ledger as of some record
    of turn X."""
    for m in _DATED.finditer(text):
        errors = []
        for prefix in _within(records, m.group(1)):
            try:
                _check_lines(m.group(2), prefix)
                break
            except AssertionError as exc:
                errors.append(str(exc))
        else:
            raise AssertionError(f"as of turn:{m.group(1)}: {errors[-1]}")
    _check_lines(_DATED.sub("", text), records, whole=text)


def _check_lines(text: str, records: list[Record], whole: str | None = None) -> None:
    """The waits (:func:`_check`), the work item's status, todos and blocker (the pinned
    section and the session's tail), and the frontier's pending calls; a pending run whose turn
    the prompt names while its answer is left out is stated answered (anywhere in ``whole``, the
    prompt, a dated block included)."""
    _check(text, latest_state(records))
    items = items_state(records)
    for wid, status in _HEAD.findall(text):
        assert items[wid].status == status, f"{wid} stated {status}, is {items[wid].status}"
    for wid, status, done, total in _TAIL_HEAD.findall(text):
        t = items[wid]
        assert t.status == status, f"{wid} stated {status} in the tail, is {t.status}"
        if total:
            assert (int(done), int(total)) == (sum(d for _, d in t.todos), len(t.todos))
    if _HEAD.search(text) or _TAIL_HEAD.search(text):
        [wid] = {w for w, *_ in _HEAD.findall(text) + _TAIL_HEAD.findall(text)}
        t = items[wid]
        for done, total in _TODOS.findall(text):
            assert (int(done), int(total)) == (sum(d for _, d in t.todos), len(t.todos))
        for mark, todo in _TODO_LINE.findall(text):
            assert (todo.strip('"'), mark == "x") in t.todos, f"todo {todo} stated {mark!r}"
        blockers = _BLOCKER.findall(text)
        assert [b.strip('"') for b in blockers][:1] == ([t.blocker] if t.blocker else []), \
            f"blocker stated {blockers}, is {t.blocker!r}"
    still, answered = calls_state(records)
    for n in _PENDING.findall(text):
        assert int(n) <= len(still), f"{n} pending stated, {len(still)} pending in the ledger"
    for asked, by in answered.items():
        said = f"{asked} answered by {by}" in (whole or text)
        shown = re.search(rf"(<data {re.escape(by)}[ >]|^{re.escape(by)}[: ])", text, re.MULTILINE)
        if "→ pending" in text or re.search(rf"\b{re.escape(asked)}\b", text):
            assert said or shown, f"{asked} reads pending, its answer {by} is not said"


def generated_state(seed: int, work: int, tail: int = 0) -> LedgerBuilder:
    """:func:`generated`'s waits, and besides: calls left pending that a later run of the same
    call answers (or not), and work-item transitions (blocked with a blocker, todos ticked off
    or replaced, the blocker cleared, done) between bursts of work (seeded); ``tail`` busy turns
    before the last operator turn."""
    rng = random.Random(seed)
    b = LedgerBuilder()
    ask = b.operator("Ship the billing export; wait for CI and the review before merging.",
                     work_item="w1")
    todos = [("write the exporter", False), ("add the tests", False), ("update the docs", False)]
    b.work_item("w1", objective="Billing export shipped", todos=todos)
    waits = [f"task-{k}" for k in range(rng.randint(1, 3))]
    for wait_id in waits:
        b.turn("x-agent-step", anchor=ask, work_item="w1")
        b.open_wait(wait_id, f"the {wait_id} job reports back")
    calls = [f"./deploy.sh svc-{k}" for k in range(rng.randint(1, 3))]
    for cmd in calls:
        b.turn("x-agent-step", anchor=ask, work_item="w1")
        b.tool("deploy", cmd, status=ToolStatus.PENDING, exit_code=None)
    steps: list[str] = [*(f"wait:{w}" for w in waits), *(f"call:{c}" for c in calls),
                        "blocked", "tick", "tick", "unblock", "replace"]
    rng.shuffle(steps)
    if rng.random() < 0.3:
        steps.append("done")
    for step in steps:
        b.busy(rng.randint(0, work), anchor=ask, work_item="w1")
        kind, _, what = step.partition(":")
        if kind == "wait":
            how = rng.choice(["task", "event", "record", "open"])
            if how == "task":
                b.task_result(what, f"{what} finished: 42 checks passed", wait=what, anchor=ask,
                              work_item="w1")
            elif how == "event":
                b.external("ci", f"{what}: status success", wait=what, anchor=ask, work_item="w1")
            elif how == "record":
                b.turn("x-agent-step", anchor=ask, work_item="w1")
                b.close_wait(what)
            continue
        b.turn("x-agent-step", anchor=ask, work_item="w1")
        if kind == "call":
            if rng.random() < 0.75:
                b.tool("deploy", what, f"{what}: rollout complete")
        elif kind == "blocked":
            b.work_item("w1", status=WorkItemStatus.BLOCKED, blocker="the staging DB is down")
        elif kind == "unblock":
            b.work_item("w1", status=WorkItemStatus.ACTIVE, blocker="")
        elif kind == "tick":
            i = next((k for k, (_, d) in enumerate(todos) if not d), None)
            if i is not None:
                todos[i] = (todos[i][0], True)
                b.work_item("w1", todos=todos)
        elif kind == "replace":
            todos = [*todos[:1], ("announce the export", False)]
            b.work_item("w1", todos=todos)
        elif kind == "done":
            b.work_item("w1", status=WorkItemStatus.DONE, completion_report="exporter shipped")
    b.busy(tail, anchor=ask, work_item="w1")
    b.operator("Status?", work_item="w1", anchor=ask)
    return b


STATE_FAMILY = [(seed, work) for seed in range(8) for work in (1, 10)]


@pytest.mark.parametrize(("seed", "work"), STATE_FAMILY)
def test_no_state_line_of_any_kind_contradicts_a_newer_record(seed: int, work: int) -> None:
    """The stateless prompt at every budget, from the smallest that fits up."""
    b = generated_state(seed, work)
    projector = Projector(b.store())
    for text in texts_at(projector, (500, 800, *BUDGETS), verify=True):
        _check_all(text, b.records)


@pytest.mark.parametrize(("seed", "budget"), [(s, b) for s in range(4) for b in (900, 1500, 4000)])
def test_a_session_states_nothing_stale(seed: int, budget: int) -> None:
    """Every request of a session (appends and re-plans, the tail included), as of every turn,
    against the ledger's state as of that turn."""
    b = generated_state(seed, 4)
    store = b.store()
    session = SessionProjector(store)
    starts = [i for i, r in enumerate(b.records) if isinstance(r, Turn)] + [len(b.records)]
    for k, turn_id in enumerate(turn_ids(store)):
        request = session.request(budget_tokens=budget, at=turn_id)
        check_request(request)
        _check_all(request.text, b.records[:starts[k + 1]])


# -- the governed store's obligations and the episodes' open items, after compaction ------------
_OBLIGATION = re.compile(r'^- ".*\[([a-z_]+:[^;\]\s]+); archived in episode:\S+\]"$', re.MULTILINE)
_STILL_OPEN_WAIT = re.compile(r"\[STILL OPEN[^\]]*\] waiting: wait (\S+?):", re.MULTILINE)


def open_keys(records: list[Record]) -> dict[str, bool]:
    """Whether each obligation key the family can leave is open in the ledger, read here from
    the records: waits (:func:`latest_state`), the work item's todos and blocker, pending calls
    (the session keys a call by its provider id, tool and arguments: ``call_key``)."""
    out = {f"wait_id:{w}": t.open for w, t in latest_state(records).items()}
    for wid, t in items_state(records).items():
        finished = t.status in ("done", "abandoned")
        out[f"blocked:{wid}"] = not finished and (bool(t.blocker) or t.status == "blocked")
        for text, done in t.todos:
            out[todo_key(wid, text)] = not finished and not done
    for rec in records:
        if isinstance(rec, Tool) and rec.call_id:
            out[f"call:{call_key(rec, '')}"] = rec.status is ToolStatus.PENDING
    return out


def obligations_session(seed: int, path: Path, *,
                        chatter: int = 0) -> tuple[list[tuple[str, int]], int]:
    """A session that opens waits, a blocker, todos and leaves a call pending, compacts them
    into the governed store, then resolves some (a task result, an event, a wait record, todos
    ticked, the blocker cleared, the call answered) among chatter (``chatter`` more exchanges
    after each step: the resolving records then lie that far back). Returns each request's
    text with the number of records as of it, and the budget."""
    rng = random.Random(seed)
    budget = rng.choice((1500, 3000, 8000))
    out: list[tuple[str, int]] = []
    with holon_ctx.open_session(str(path)) as s:
        def ask() -> None:
            request = s.next_request(budget)
            # Settled lines replace pending ones: the request still holds its budget.
            assert request.used_tokens <= budget
            assert request.request_tokens <= budget
            out.append((request.text, s.store.end_pos()))

        s.operator_message("Roll out build 77, then merge once CI and the review pass.")
        s.set_work_item("w1", objective="Build 77 rolled out",
                        todos={"deploy": False, "merge": False, "announce": False},
                        status="blocked", blocker="CI is red")
        waits = [f"ci-{k}" for k in range(rng.randint(1, 3))]
        for w in waits:
            s.open_wait(w, f"CI job {w} reports on build 77")
        s.assistant_message("Starting the rollout.", tool_calls=[holon_ctx.ToolCall(
            "call_deploy1", "deploy", '{"service": "svc-a"}')])
        for i in range(rng.randint(30, 50)):
            s.operator_message(f"Dashboard chart {i}: amber palette, stacked bars, a legend.")
            s.assistant_message(f"Chart {i} updated.")
            if i % 5 == 0:
                ask()
        s.compact()
        ask()
        steps = [*(f"wait:{w}" for w in waits), "todo", "unblock", "call", "chat", "chat"]
        rng.shuffle(steps)
        todos = {"deploy": False, "merge": False, "announce": False}
        for step in steps:
            kind, _, what = step.partition(":")
            how = rng.choice(["task", "event", "record", "leave"])
            if kind == "wait" and how == "task":
                s.task_result(what, "success", f"{what} green", wait=what)
            elif kind == "wait" and how == "event":
                s.external_event("ci", f"{what}: success", wait=what)
            elif kind == "wait" and how == "record":
                s.operator_message(f"{what} passed, I checked it by hand.")
                s.close_wait(what)
            elif kind == "todo":
                todos["deploy"] = True
                s.operator_message("The deploy is done.")
                s.set_work_item("w1", todos=todos)
            elif kind == "unblock":
                s.operator_message("CI is green again.")
                s.set_work_item("w1", status="active", blocker="")
            elif kind == "call" and how != "leave":
                s.tool_result("call_deploy1", "svc-a rolled out", status="ok")
            else:
                s.operator_message("Dashboard colours: keep the amber palette.")
            for i in range(chatter):
                s.operator_message(f"Footer note {i}: the amber palette stays.")
                s.assistant_message(f"Footer {i} noted.")
            ask()
    return out, budget


def _check_obligations(text: str, truth: dict[str, bool], records: list[Record]) -> None:
    """No pending obligation the ledger resolved; no episode's STILL OPEN wait the ledger
    resolved unless the prompt says so after it (a session's episodes are as of its last
    re-plan, and the history it appended since holds the resolving record, or the tail names
    it, as for a ``wait … open`` line of an older turn: :func:`_check`)."""
    for key in _OBLIGATION.findall(text):
        if key.startswith(("wait_id:", "todo:", "blocked:", "call:")):
            assert truth[key], f"obligation {key} stated pending, resolved in the ledger"
    waits = latest_state(records)
    for wait_id in _STILL_OPEN_WAIT.findall(text):
        if truth[f"wait_id:{wait_id}"]:
            continue
        by = waits[wait_id].by
        said = re.search(rf"^(- obligation wait_id:{wait_id}|wait {wait_id}) resolved", text,
                         re.MULTILINE)
        shown = by is not None and re.search(rf"(<data {re.escape(by)}[ >]|^{re.escape(by)}[: ])",
                                              text, re.MULTILINE)
        closed = re.search(rf"^wait {wait_id} (resolved|cancelled|expired)\b", text, re.MULTILINE)
        assert said or shown or closed, f"episode states wait {wait_id} STILL OPEN, resolved by {by}"


@pytest.mark.parametrize("seed", range(4))
def test_no_obligation_is_stated_pending_after_a_newer_record_resolved_it(
        seed: int, tmp_path: Path) -> None:
    """Every request of the session after the compaction, as of its position, and the stateless
    prompt at every budget over the ledger (with the governed store's notices and the episodes),
    against what the ledger's records leave open."""
    db = tmp_path / "obligations.db"
    texts, budget = obligations_session(seed, db)
    store = SqliteStore(db)
    try:
        records = [s.record for s in store.records_between(0, store.end_pos())]
        truth = open_keys(records)
        assert not all(truth.values())
        for text, end in texts:
            _check_obligations(text, open_keys(records[:end]), records[:end])
        assert "pending obligations" in texts[-len(texts) // 2][0] or any(
            "each resolved since" in t for t, _ in texts)
        episodes = open_episode_source(store)
        with control_source(store) as control:
            assert control is not None
            projector = Projector(store, control=control, episodes=episodes)
            for text in texts_at(projector, (*BUDGETS, budget)):
                _check_obligations(text, truth, records)
        if episodes is not None:
            episodes.close()
    finally:
        store.close()


# -- the resolving record far back: beyond any bounded read (issue 25 item 2, the class) ---------
#: The read-back bound the state lines had (``SETTLE_SCAN`` records, ``TAIL_TURNS`` turns of the
#: recall's tail), shrunk so that a small ledger puts the resolving records beyond it; today the
#: first is only the page size of an index's catch-up and the second is gone.
_SMALL = 16


@pytest.fixture
def small_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(answers, "SETTLE_SCAN", _SMALL)
    monkeypatch.setattr(waits, "SETTLE_SCAN", _SMALL)
    monkeypatch.setattr(source, "TAIL_TURNS", 2, raising=False)


def _answered_at(records: list[Record]) -> list[int]:
    """The positions of the records that answer or close a wait."""
    return [i for i, r in enumerate(records)
            if (isinstance(r, TaskResult | ExternalEvent) and r.wait_id is not None)
            or (isinstance(r, Wait) and r.status is not WaitStatus.OPEN)]


@pytest.mark.usefixtures("small_reads")
@pytest.mark.parametrize(("seed", "work"), [(seed, work) for seed in range(6) for work in (5, 12)])
def test_a_state_line_is_not_stale_however_far_back_its_answer(seed: int, work: int) -> None:
    """The families above with their answers buried under more work than the read-back bound
    once was: the stateless prompt at every budget and the session's request at the end (a walk
    of every record, appended and re-planned) state no wait open that a record answered."""
    b = generated_state(seed, 1, tail=work)
    assert all(len(b.records) - i > _SMALL for i in _answered_at(b.records))
    for text in texts_at(Projector(b.store()), (500, 800, *BUDGETS), verify=True):
        _check_all(text, b.records)
    session = SessionProjector(b.store())
    for budget in (900, 4000):
        request = session.request(budget_tokens=budget)
        check_request(request)
        _check_all(request.text, b.records)


@pytest.mark.slow  # 4,400 records walked by a session: ~10 s on a loaded machine
def test_a_wait_answered_before_the_newest_4096_records_is_not_stated_open() -> None:
    """The issue's shape at the real size, no bound shrunk: a wait answered by a task result and
    then more than 4,096 records of work; the work item never says ``waiting on`` it."""
    b = LedgerBuilder()
    ask = b.operator("Run the migration job and continue when it reports back.", work_item="w1")
    b.work_item("w1", objective="Migration done")
    b.open_wait("task-1", "the migration task reports")
    b.task_result("task-1", "migration finished: 120 tables", wait="task-1", anchor=ask,
                  work_item="w1")
    result = f"task_result:{b.records[-1].id}"
    while len(b.records) < 4400:
        b.busy(50, anchor=ask, work_item="w1")
    b.operator("Next step?", work_item="w1", anchor=ask)
    store = b.store()
    text = Projector(store).project(budget_tokens=1500).text
    assert "waiting on task-1" not in text
    assert f"wait task-1 resolved by {result}" in text
    assert f"wait task-1 resolved by {result}" in SessionProjector(store).request(
        budget_tokens=1500).text


@pytest.mark.usefixtures("small_reads")
@pytest.mark.parametrize("seed", range(4))
def test_no_obligation_is_stated_pending_however_far_back_it_was_resolved(
        seed: int, tmp_path: Path) -> None:
    """:func:`obligations_session` with chatter after each resolving step (so each resolving
    record is more than :data:`_SMALL` records back by the next steps): every request, and
    the stateless prompt with the governed store's notices and the episodes, against the
    ledger."""
    db = tmp_path / "far.db"
    texts, budget = obligations_session(seed, db, chatter=10)
    store = SqliteStore(db)
    try:
        records = [s.record for s in store.records_between(0, store.end_pos())]
        truth = open_keys(records)
        assert not all(truth.values())
        for text, end in texts:
            _check_obligations(text, open_keys(records[:end]), records[:end])
        episodes = open_episode_source(store)
        with control_source(store) as control:
            assert control is not None
            projector = Projector(store, control=control, episodes=episodes)
            for text in texts_at(projector, (*BUDGETS, budget)):
                _check_obligations(text, truth, records)
        if episodes is not None:
            episodes.close()
    finally:
        store.close()


# -- an episode the session shows, its STILL OPEN item resolved (issue 25 item 2, episodes) -----
def still_open_session(seed: int, path: Path) -> list[tuple[str, int]]:
    """Waits opened, chatter, compaction (the waits' turns archived: episodes state them
    ``STILL OPEN``), a request, then each wait answered (task result, event or wait record) or
    left, one at a time, a request after each. Returns each request's text with the number of
    records as of it."""
    rng = random.Random(seed)
    budget = rng.choice((1500, 3000))
    out: list[tuple[str, int]] = []
    with holon_ctx.open_session(str(path)) as s:
        s.operator_message("Merge the release branch once CI and the security review report.")
        waits = [f"ci-{k}" for k in range(rng.randint(1, 3))]
        for w in waits:
            s.open_wait(w, f"job {w} reports on the release branch")
        for i in range(rng.randint(30, 50)):
            s.operator_message(f"Dashboard chart {i}: amber palette, stacked bars, a legend.")
            s.assistant_message(f"Chart {i} updated.")
        s.compact()
        for i in range(30):  # requests until a re-plan recalls the archive
            s.operator_message(f"Footer note {i}: the amber palette stays.")
            out.append((s.next_request(budget).text, s.store.end_pos()))
        for w in waits:
            how = rng.choice(["task", "event", "record", "leave"])
            if how == "task":
                s.task_result(w, "success", f"{w} green", wait=w)
            elif how == "event":
                s.external_event("ci", f"{w}: success", wait=w)
            elif how == "record":
                s.operator_message(f"{w} passed, I checked it by hand.")
                s.close_wait(w)
            out.append((s.next_request(budget).text, s.store.end_pos()))
            s.assistant_message("Noted.")
            out.append((s.next_request(budget).text, s.store.end_pos()))
    return out


#: Seeds whose session shows a waits' episode STILL OPEN (in most, the plan leaves it out or the
#: window still holds the waits' turn): the rule is exercised, not assumed.
_SHOWN = (1, 3, 14)


@pytest.mark.parametrize("seed", _SHOWN)
def test_a_shown_episode_never_states_open_what_a_newer_record_resolved(
        seed: int, tmp_path: Path) -> None:
    """Every request of the session: an episode it shows says STILL OPEN only of a wait the
    ledger leaves open as of the request (on main the episode section, frozen at the last
    re-plan, kept saying it after the answer was appended)."""
    db = tmp_path / "still.db"
    texts = still_open_session(seed, db)
    store = SqliteStore(db)
    try:
        records = [s.record for s in store.records_between(0, store.end_pos())]
    finally:
        store.close()
    assert any(_STILL_OPEN_WAIT.search(t) for t, _ in texts), "no episode stated a wait open"
    for text, end in texts:
        truth = latest_state(records[:end])
        for wait_id in _STILL_OPEN_WAIT.findall(text):
            assert truth[wait_id].open, f"episode says {wait_id} STILL OPEN, {truth[wait_id].by}"
