"""The session projection (RFC 0010): budgets, the prefix property, determinism, persistence."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from projection_builders import LedgerBuilder, LedgerSpec, ledger_specs, memory_store, random_ledger
from session_helpers import check_request, content_stream, turn_ids, walk

from holon_ctx.errors import InputError
from holon_ctx.ledger.epochs import MemoryEpochStore
from holon_ctx.ledger.epochs_sqlite import SqliteEpochStore
from holon_ctx.ledger.records import SideEffect, Turn
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.projection.base.model import ControlState
from holon_ctx.projection.planning.retention import FactsCache
from holon_ctx.projection.planning.tail import TAIL_TITLE
from holon_ctx.projection.session.replan import replan
from holon_ctx.projection.session.session import Layout, SessionPolicy, SessionProjector

LAYOUTS = [Layout.TEXT, Layout.MESSAGES]


@settings(max_examples=12)
@given(spec=ledger_specs(min_turns=2, max_turns=90), budget=st.integers(700, 6000),
       layout=st.sampled_from(LAYOUTS))
def test_every_request_holds_its_budget_and_extends_the_last(spec: LedgerSpec, budget: int,
                                                             layout: Layout) -> None:
    """Every request of every turn is within budget (re-measured, framing included), and between
    re-plans each starts with the one before it minus that one's tail, byte for byte."""
    store = memory_store(spec.records)
    previous = None
    replans = 0
    for request in walk(SessionProjector(store, layout=layout), budget):
        check_request(request)
        replans += request.replanned
        if previous is not None and not request.replanned:
            kept = content_stream(previous.parts[:-1])
            assert content_stream(request.parts)[:len(kept)] == kept
            assert request.text.startswith(previous.text[:len(previous.text)
                                                         - len(previous.parts[-1].text)])
            assert request.cached_tokens == previous.request_tokens - previous.tail_tokens
        previous = request
    assert replans >= 1


def test_several_turns_append_between_replans() -> None:
    """A re-plan fills the low-water share of the budget, so turns append for a while after it."""
    store = memory_store(random_ledger(7, 150).records)
    requests = list(walk(SessionProjector(store), 4000))
    assert sum(r.replanned for r in requests) <= len(requests) // 3
    first_after = [r for r in requests[1:] if r.replanned]
    assert first_after, "the budget binds: the walk re-plans"
    replans = [r for r in first_after if r.replan_reason == "over_budget"]
    assert replans
    for request in replans:
        session = request.manifest.session
        assert session is not None
        # The work state that ends the frozen part is stated, not planned, as the tail it
        # replaces (RFC 0025, decision 5).
        stated = sum(p.text_tokens for p in request.parts[:request.frozen_count]
                     if p.text.startswith(f"{TAIL_TITLE} as of "))
        assert session["frozen_tokens"] - stated <= 4000 * 0.5  # type: ignore[operator]


def test_a_replan_freezes_what_the_planner_chooses_at_low_water() -> None:
    """The frozen part of a re-planned request is the planner's projection at the low-water
    budget, byte for byte: the session lays out the planner's choice, it does not make its own."""
    store = memory_store(random_ledger(11, 120).records)
    projector = SessionProjector(store, session=SessionPolicy(low_water=0.4))
    checked = []
    for request in walk(projector, 5000):
        if not request.replanned:
            continue
        checked.append(request.replan_reason)
        session = request.manifest.session
        assert session is not None
        planned = session["plan_budget_tokens"]
        assert isinstance(planned, int)
        assert planned >= int(5000 * 0.4)  # the low-water mark, or more for whole pinned turns
        frozen = replan(store, projector.renderer, projector.policy, FactsCache(), None, None,
                        limit_pos=request.epoch, budget_tokens=planned,
                        headers=projector._headers)
        assert request.text.startswith(frozen.projection.text)
        assert frozen.projection.used_tokens <= planned
    # Re-plans happened and were compared: the first request's and later ones (this ledger
    # re-plans on work-item switches and anchors outside the history).
    assert len(checked) >= 2


def test_requests_do_not_depend_on_when_they_were_made() -> None:
    """Asking at every record, at every turn, or only at the end gives the same final request:
    what a request holds is a function of the ledger, the budget and the policy."""
    store = memory_store(random_ledger(3, 80).records)
    end = store.end_pos()
    every_record = SessionProjector(store)
    first_turn = next(s.pos for s in store.records_between(0, end) if isinstance(s.record, Turn))
    with pytest.raises(InputError, match="no turns"):
        every_record.request(budget_tokens=3000, limit_pos=first_turn)
    for pos in range(first_turn + 1, end + 1):
        every_record.request(budget_tokens=3000, limit_pos=pos)
    every_turn = SessionProjector(store)
    last = None
    for request in walk(every_turn, 3000):
        last = request
    once = SessionProjector(store).request(budget_tokens=3000)
    assert last is not None
    assert once.text == last.text == every_record.request(budget_tokens=3000).text


def test_restart_and_rebuild_reproduce_every_request(tmp_path: Path) -> None:
    """A new process continues from the persisted epoch with the same bytes, and deleting the
    state (it is derived) and walking again reproduces every request."""
    db = tmp_path / "ledger.db"
    store = SqliteStore(db)
    store.append(random_ledger(5, 140).records)
    ids = turn_ids(store)
    whole = [r.text for r in walk(SessionProjector(store, epochs=SqliteEpochStore(db)), 3500)]
    store.close()
    # A fresh process: a new store and projector over the same file, picking up half-way.
    again = SqliteStore(db)
    fresh = SessionProjector(again, epochs=SqliteEpochStore(db))
    half = len(ids) // 2
    resumed = [fresh.request(budget_tokens=3500, at=t).text for t in ids[half:]]
    assert resumed == whole[half:]
    fresh.rebuild(budget_tokens=3500)
    rebuilt = [r.text for r in walk(SessionProjector(again, epochs=SqliteEpochStore(db)), 3500)]
    assert rebuilt == whole
    again.close()


def test_a_walk_without_state_starts_at_the_last_checkpoint() -> None:
    """Checkpoints re-plan whatever the budget, so a process without saved state walks one block
    of turns, not the ledger, and still produces what a walk from the first turn does."""
    store = memory_store(random_ledger(9, 200).records)
    policy = SessionPolicy(checkpoint_turns=64)
    full = list(walk(SessionProjector(store, session=policy), 4000))
    epochs = MemoryEpochStore()
    cold = SessionProjector(store, session=policy, epochs=epochs)
    assert cold.request(budget_tokens=4000).text == full[-1].text
    starts = epochs.starts(cold.state_key(4000))
    assert starts[0].reason == "checkpoint"
    assert starts[0].turn_seq >= 128  # the walk began in the last block of 64 turn numbers
    assert sum(r.replan_reason == "checkpoint" for r in full) >= 3


_DIGEST_SCRIPT = """
import hashlib, sys
sys.path.insert(0, sys.argv[1])
from projection_builders import memory_store, random_ledger
from holon_ctx.projection.session.session import Layout, SessionProjector
from session_helpers import walk
h = hashlib.sha256()
for layout in (Layout.TEXT, Layout.MESSAGES):
    for r in walk(SessionProjector(memory_store(random_ledger(21, 90).records), layout=layout), 2500):
        h.update(r.manifest_json())
print(h.hexdigest())
"""


def test_request_sequence_is_the_same_in_any_process_and_hash_seed() -> None:
    """Two interpreters with different hash seeds produce byte-identical request sequences."""
    tests = str(Path(__file__).parent)
    digests = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", _DIGEST_SCRIPT, tests], env=env,
                             capture_output=True, text=True, check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1
    assert len(next(iter(digests))) == len(hashlib.sha256().hexdigest())


def test_the_current_input_and_its_anchor_are_never_lost() -> None:
    """The operator's request, and every turn's own records, are in every request while ticks,
    retries and tool output push the history through several re-plans."""
    b = LedgerBuilder()
    ask = b.operator("Migrate the billing service to Postgres 16; never drop the ledger table.")
    for i in range(60):
        b.turn("x-agent-step", anchor=ask)
        b.assistant(f"step {i}: checking the migration")
        b.tool("shell", f"psql -c 'step {i}'", "ok\n" * 80)
        if i % 7 == 0:
            b.retries(5)
    store = memory_store(b.records)
    for request in walk(SessionProjector(store), 2500):
        check_request(request)
        assert "never drop the ledger table" in request.text
        assert f"turn:{ask}" in (request.manifest.anchor_turn, request.manifest.current_turn)
        assert request.manifest.current_turn in request.text


class _Blocking:
    def __init__(self) -> None:
        self.state: ControlState | None = None

    def control_state(self) -> ControlState | None:
        return self.state


def test_an_unresolved_side_effect_is_always_in_the_tail() -> None:
    """While the governed store holds an unreconciled side effect, every request's tail says so
    (never a frozen part that could be left behind)."""
    b = LedgerBuilder()
    ask = b.operator("Deploy the canary.")
    b.tool("deploy", "canary", "timeout", side_effect=SideEffect.UNKNOWN, exit_code=None)
    for i in range(40):
        b.turn("x-agent-step", anchor=ask)
        b.assistant(f"waiting {i}")
    control = _Blocking()
    projector = SessionProjector(memory_store(b.records), control=control)
    ids = turn_ids(projector.store)
    for i, turn_id in enumerate(ids):
        control.state = ControlState(envelope_id="ce-1", obligations=(), constraints=(),
                                     blocking=(("deploy-canary-1", "unknown"),)) if i >= 5 else None
        request = projector.request(budget_tokens=1500, at=turn_id)
        check_request(request)
        tail = request.parts[-1].text
        assert ("BLOCKED ON RECONCILIATION" in tail) == (i >= 5)
        assert "BLOCKED ON RECONCILIATION" not in request.text[:len(request.text) - len(tail)]


def test_policy_refuses_nonsense() -> None:
    """Out-of-range settings are one clear error naming the setting."""
    with pytest.raises(ValueError, match="low_water"):
        SessionPolicy(low_water=1.5)
    with pytest.raises(ValueError, match="checkpoint_turns"):
        SessionPolicy(checkpoint_turns=0)


def test_low_value_runs_fold_between_replans_too() -> None:
    """Ticks and retries never crowd the history between re-plans: while a run goes on the tail
    counts it, and when it ends it joins the history as one fold line (Holon's acceptance
    scenario 4, in the session projection)."""
    b = LedgerBuilder()
    ask = b.operator("Watch the canary and report when it is healthy.")
    b.turn("x-agent-step", anchor=ask)
    b.assistant("Watching.")
    ticks = b.ticks(30)
    retries = b.retries(10)
    b.turn("x-agent-step", anchor=ask)
    b.assistant("The canary is healthy.")
    store = memory_store(b.records)
    projector = SessionProjector(store)
    requests = {t: projector.request(budget_tokens=30_000, at=t) for t in turn_ids(store)}
    assert sum(r.replanned for r in requests.values()) == 1  # the first request only
    during = requests[retries[-1]]
    assert f"turn:{ticks[0]}" not in during.text.replace(during.parts[-1].text, "")
    assert "the run goes on" in during.parts[-1].text
    after = requests[turn_ids(store)[-1]]
    history = after.text[:len(after.text) - len(after.parts[-1].text)]
    assert history.count(f"turn:{ticks[0]}–turn:{retries[-1]}") == 1
    assert "the run goes on" not in after.parts[-1].text
    assert [f.first for f in after.manifest.folded] == [f"turn:{ticks[0]}"]
    assert after.manifest.folded[0].count == 40
    # Each request still extends the one before it: the fold line is appended, never rewritten.
    assert after.text.startswith(during.text[:len(during.text) - len(during.parts[-1].text)])


def test_the_tail_follows_waits_and_work_item_changes_within_an_epoch() -> None:
    """The tail reads the work item and its open waits again only after a work-item or wait
    record: a long-lived walk (reads kept) and a fresh projector at each position (nothing
    kept) make the same request at every record, and the tail says each change as it lands."""
    b = LedgerBuilder()
    ask = b.operator("Ship the billing fix", work_item="wi1")
    b.work_item("wi1", objective="Ship the billing fix", todos=[("patch", False), ("deploy", False)])
    b.busy(3, anchor=ask, work_item="wi1", topic="billing")
    b.task_result("ci", "CI started", anchor=ask, work_item="wi1")
    b.open_wait("ci-green", "CI must pass on main")
    b.busy(2, anchor=ask, work_item="wi1", topic="billing")
    b.task_result("patch", "patched", anchor=ask, work_item="wi1")
    b.work_item("wi1", todos=[("patch", True), ("deploy", False)])
    b.external("ci", "CI is green", anchor=ask, work_item="wi1")
    b.close_wait("ci-green")
    b.busy(2, anchor=ask, work_item="wi1", topic="billing")
    store = memory_store(b.records)
    end = store.end_pos()
    first_turn = next(s.pos for s in store.records_between(0, end) if isinstance(s.record, Turn))
    # The planned layout: a whole epoch would state the work item by its records alone.
    planned = SessionPolicy(whole_history=False)
    kept = SessionProjector(store, session=planned)
    tails, items = [], []
    for pos in range(first_turn + 1, end + 1):
        warm = kept.request(budget_tokens=20000, limit_pos=pos)
        cold = SessionProjector(store, session=planned).request(budget_tokens=20000,
                                                                limit_pos=pos)
        assert warm.text == cold.text, pos
        tails.append(warm.parts[-1].text if warm.has_tail else "")
        # The work item's own line is said in the history (RFC 0025, decision 5): the newest
        # one in the request is its state.
        items.extend(re.findall(r"^work item wi1 \(.*$", warm.text, re.MULTILINE)[-1:])
    assert kept.epoch_starts(budget_tokens=20000)[-1].limit_pos <= first_turn + 1  # one epoch
    waiting = [("waiting on ci-green" in t) for t in tails]
    # The wait opens, shows in every tail while open, and leaves the tail when it closes.
    assert waiting.index(True) > 0
    assert not waiting[-1]
    assert "todos 0/2 done" in items[0]
    assert "todos 1/2 done" in items[-1]


def test_a_cold_renderer_memo_makes_the_same_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a request holds never depends on what the renderers remember: a walk whose memo is
    dropped after every entry (as cold as a new process at each step) makes the same requests,
    re-plans included, as one whose memo stays warm."""
    store = memory_store(random_ledger(13, 120).records)
    warm = [(r.text, r.replanned) for r in walk(SessionProjector(store, layout=Layout.MESSAGES),
                                                3500)]
    monkeypatch.setattr("holon_ctx.projection.rendering.render_base._MEMO_ENTRIES", 1)
    cold = [(r.text, r.replanned) for r in walk(SessionProjector(store, layout=Layout.MESSAGES),
                                                3500)]
    assert cold == warm
    assert sum(replanned for _, replanned in warm) >= 2


def test_late_records_of_an_earlier_turn_keep_their_heading_as_they_grow() -> None:
    """Two results of an earlier turn arriving after a later turn began: the first opens a
    "(continued)" heading naming their turn, and the second joins it under that heading, so each
    request still extends the one before it (the heading was once dropped when the run grew,
    which put both results under the later turn's heading and broke the cached prefix)."""
    b = LedgerBuilder()
    ask = b.operator("Run the migration and report", work_item="wi1")
    b.assistant("Starting the migration now.")
    b.task_result("other", "an unrelated task finished", anchor=ask, work_item="wi1")
    b.task_record("mig-1", "migration step one done")
    b.task_record("mig-2", "migration step two done")
    late = b.records[-2:]
    late = [msgspec.structs.replace(r, turn_id=ask) for r in late]
    b.records[-2:] = late
    store = memory_store(b.records)
    end = store.end_pos()
    projector = SessionProjector(store)
    previous = None
    for pos in range(end - 3, end + 1):
        request = projector.request(budget_tokens=8000, limit_pos=pos)
        check_request(request)
        tail = len(request.parts[-1].text) if request.has_tail else 0
        body = request.text[:len(request.text) - tail]
        if previous is not None:
            assert not request.replanned
            assert body.startswith(previous)
        previous = body
    assert previous is not None
    heading = previous.index(f"turn:{ask} (continued)")
    assert heading < previous.index("migration step one") < previous.index("migration step two")


def test_a_manifest_read_later_describes_its_own_request() -> None:
    """A request's manifest is made on first use, from what the walk held when the request was
    made: read after later requests appended more records, it is byte for byte the manifest
    read at once (the appended refs are a prefix of a list the walk keeps growing)."""
    store = memory_store(random_ledger(17, 90).records)
    at_once = [r.manifest_json() for r in walk(SessionProjector(store), 4000)]
    later = list(walk(SessionProjector(store), 4000))
    assert [r.manifest_json() for r in later] == at_once
    appended = [r.manifest.session["appended_records"] for r in later if r.manifest.session]
    assert len(set(appended)) > 3  # requests appended different numbers of records
