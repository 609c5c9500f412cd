"""The chaos hunt's state machine (tests/chaos_scenarios.py) over the session path: two runtimes
on one ledger, every helper, changing budgets, compaction, close/reopen and imports, each step
checked against the library's promises."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest
from chaos_scenarios import POLICY, PostgresChaos, SqliteChaos, manifest_gaps, refusal_of
from hypothesis import HealthCheck, settings
from tiers import sized

import holon_ctx
from holon_ctx.cli.preview_cmds import opened, viewed
from holon_ctx.ledger.records import Tool, ToolStatus

EXAMPLES = int(os.environ.get("HOLON_CTX_CHAOS_EXAMPLES", sized(4, 40)))
STEPS = int(os.environ.get("HOLON_CTX_CHAOS_STEPS", sized(20, 40)))
SETTINGS = settings(max_examples=EXAMPLES, stateful_step_count=STEPS,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
#: PostgreSQL's examples cost three times SQLite's (round trips, a new session key each).
PG_SETTINGS = settings(SETTINGS, max_examples=int(os.environ.get("HOLON_CTX_CHAOS_EXAMPLES",
                                                                sized(2, 20))))


@pytest.mark.scaled
def test_sqlite_runtimes_keep_every_promise() -> None:
    """Two runtimes on one SQLite file: every step keeps the session path's promises."""
    SqliteChaos.TestCase.settings = SETTINGS
    SqliteChaos.TestCase().runTest()


@pytest.mark.scaled
def test_postgres_runtimes_keep_every_promise(pg_url: str) -> None:
    """Two runtimes on one PostgreSQL session, connections killed mid-run: the same promises."""
    PostgresChaos.URL = pg_url
    PostgresChaos.TestCase.settings = PG_SETTINGS
    PostgresChaos.TestCase().runTest()


# -- defects the hunt found: each the smallest scenario that shows it ------------------------------


def test_a_fold_left_out_names_its_turns_as_left_out() -> None:
    """Two retries folded into one line that the budget leaves out: the manifest lists both
    turns as left out (they were in no list: not shown, not folded, not omitted), and the
    request counts as binding, as any request that left something out does."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.wake("provider_retry")
    session.wake("provider_retry")
    session.operator_message("deploy the payments service " * 10)
    request = session.next_request(80)
    manifest = request.manifest
    assert [i["key"] for s in manifest["sections"] for i in s["items"]
            if i["form"] == "omitted"] == ["fold:turn:t0"]
    omitted = [o for s in manifest["sections"] for o in s["omitted"]]
    assert {"ref": "turn:t0", "reason": "budget_exhausted"} in omitted
    assert {"ref": "turn:t1", "reason": "budget_exhausted"} in omitted
    assert manifest_gaps(session.store, manifest) == []
    assert request._messages.binds
    # With room, the fold is shown and its turns are listed as folded, not left out.
    roomy = session.next_request(400).manifest
    assert [f["refs"] for f in roomy["folded"]] == [["turn:t1"]]
    assert not [o for s in roomy["sections"] for o in s["omitted"]]


def test_a_compaction_whose_connection_dies_at_any_exchange_says_so_and_goes_on(
        pg_url: str) -> None:
    """The server drops the connection before each of a compaction's exchanges in turn (the
    hunt found it dropped between the compaction's check of the connection and its BEGIN): each
    compaction goes through or raises ConnectionLost (documented: the next call reconnects),
    never a plain StoreError, and the next one goes through with nothing lost."""
    import psycopg

    from holon_ctx.postgres.session import ConnectionLost, SessionHandle

    session = holon_ctx.open_session(pg_url, session_key="sweep", compaction=POLICY)
    real = SessionHandle.call
    outcomes: list[str] = []
    acknowledged = 0
    for nth in range(1, 40):
        for i in range(4):  # a new topic each round closes a range the compaction archives
            topic = " ".join(f"{word}{nth}x{i}" for word in ("deploy", "payments", "canary"))
            session.operator_message(f"{topic} " * 20)
            session.assistant_message(f"done {topic}")
            acknowledged += 2
        count = [0]

        def dying(handle: SessionHandle, fn: Any, *, reads: bool = False,
                  nth: int = nth, count: list[int] = count) -> Any:
            count[0] += 1
            if count[0] == nth:
                pid = session.store.connection.info.backend_pid  # type: ignore[attr-defined]
                with psycopg.connect(pg_url, autocommit=True) as admin:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            return real(handle, fn, reads=reads)
        SessionHandle.call = dying  # type: ignore[method-assign]
        try:
            session.compact()
            outcomes.append("done" if count[0] >= nth else "untouched")
        except ConnectionLost:
            outcomes.append("lost")
        finally:
            SessionHandle.call = real  # type: ignore[method-assign]
        session.compact()
        if outcomes[-1] == "untouched":
            break
    assert "lost" in outcomes
    assert outcomes[-1] == "untouched"  # every exchange was reached
    messages = [r for r in session.store.iter_records() if type(r).__name__ == "Message"]
    assert len(messages) == acknowledged
    session.next_request(16000)
    session.close()


def test_a_call_waiting_across_an_import_is_kept() -> None:
    """A call announced before ``import_history`` is written as pending when the history opens
    its turns (as when any turn opens), and its result still lands afterwards: the import
    dropped it (the call was in no record, and its result was refused as never announced)."""
    session = holon_ctx.open_session(":memory:")
    session.operator_message("run the tests")
    session.assistant_message("running", tool_calls=[holon_ctx.ToolCall("c0", "bash", {})])
    session.import_history([{"role": "user", "content": "and the release?"},
                            {"role": "assistant", "content": "2.4.1"}])
    session.tool_result("c0", "42 passed")
    tools = [(r.call_id, r.status.value, r.turn_id) for r in session.store.iter_records()
             if isinstance(r, Tool)]
    assert tools == [("c0", "pending", "t0"), ("c0", "ok", "t0")]


@pytest.mark.parametrize("form", ["messages", "transcript", "ledger"])
def test_a_refused_import_writes_nothing_and_the_call_keeps_waiting(tmp_path: Path,
                                                                     form: str) -> None:
    """``import_history`` is all or nothing, calls waiting included: a history refused (a bad
    message, transcript or ledger line) leaves the ledger as it was, and the call announced
    before it is still the current turn's, its result recorded alone. The calls were written
    as pending before the history was read, so a refused import still added a record."""
    session = holon_ctx.open_session(":memory:")
    session.operator_message("run the tests")
    session.assistant_message("running", tool_calls=[holon_ctx.ToolCall("c0", "bash", {})])
    end = session.store.end_pos()
    history: object = [{"role": "bogus", "content": "x"}]
    if form != "messages":
        path = tmp_path / ("bad.jsonl" if form == "ledger" else "bad.json")
        path.write_text('{"type": "turn", "id": "u0"}\n' if form == "ledger"
                        else '[{"role": "bogus", "content": "x"}]')
        history = path
    with pytest.raises(holon_ctx.errors.LedgerFormatError):
        session.import_history(history)  # type: ignore[arg-type]
    assert session.store.end_pos() == end
    session.tool_result("c0", "42 passed")
    tools = [(r.call_id, r.status.value, r.turn_id) for r in session.store.iter_records()
             if isinstance(r, Tool)]
    assert tools == [("c0", "ok", "t0")]


def test_an_import_whose_waiting_call_id_another_runtime_took_is_made_again() -> None:
    """The id of a call written as pending with the history is named by the ledger's end; another
    runtime that appends a record of that id first (its own call left pending at that position)
    does not refuse the import: the ids are named again at the new end, as any helper does when
    the ledger moved under it."""
    session = holon_ctx.open_session(":memory:")
    session.operator_message("run the tests")
    session.assistant_message("running", tool_calls=[holon_ctx.ToolCall("c0", "bash", {})])
    store = session.store
    inner = store.append
    end = store.end_pos()
    raced: list[int] = []

    def append(records: Any, **kwargs: Any) -> int:
        if not raced:  # the other runtime's append lands first, with the id this one minted
            raced.append(inner([Tool(id=f"x{end}", turn_id="t0", tool_name="ls",
                                     args_digest="d", status=ToolStatus.PENDING,
                                     call_id="c9")]))
        return int(inner(records, **kwargs))
    store.append = append  # type: ignore[method-assign]
    stored = session.import_history([{"role": "user", "content": "and the release?"}])
    store.append = inner  # type: ignore[method-assign]
    assert raced
    assert stored == 2
    session.tool_result("c0", "42 passed")
    tools = [(r.call_id, r.status.value) for r in store.iter_records() if isinstance(r, Tool)]
    assert tools == [("c9", "pending"), ("c0", "pending"), ("c0", "ok")]


def test_an_import_counts_its_own_records_not_the_calls_written_with_it() -> None:
    """The calls written as pending go in with the history, in one append; the count returned
    is the history's records, as with no call waiting."""
    history = [{"role": "user", "content": "and the release?"},
               {"role": "assistant", "content": "2.4.1"}]
    counts = []
    for waiting in (False, True):
        session = holon_ctx.open_session(":memory:")
        session.operator_message("run the tests")
        session.assistant_message("running", tool_calls=[
            holon_ctx.ToolCall("c0", "bash", {})] if waiting else ())
        end = session.store.end_pos()
        counts.append(session.import_history(history))
        assert session.store.end_pos() == end + counts[-1] + waiting
    assert counts[0] == counts[1] > 0


def test_a_refusal_below_the_framing_states_the_need_after_the_due_compaction() -> None:
    """A budget the message framing fills is refused with a need that the retry meets: the
    refusal was stated before the compaction the policy had due, and the retry, compacting
    first, stated the sealed governed state in its tail and needed more (told 126, the retry
    refused at 426)."""
    session = holon_ctx.open_session(":memory:", compaction=holon_ctx.CompactionPolicy(
        recent_turns=2, every_turns=3))
    session.operator_message("deploy")
    session.open_wait("ci", "the CI run for the payments deploy " * 3)
    session.tool_run("deploy", "prod", "timeout", side_effect="unknown", status="timeout")
    for _ in range(4):
        session.wake("timer", noop=True)
    with pytest.raises(holon_ctx.BudgetTooSmallError) as refused:
        session.next_request(1)
    need = refused.value.required_tokens
    assert session.next_request(need).request_tokens <= need


def test_the_preview_refuses_a_budget_with_the_shown_turns_need(tmp_path: Path) -> None:
    """``preview``/``project`` refuse a budget with the need the runtime states for the shown
    turn: they stated the need of the turn before it (asked first, for the cached share), 92
    where the runtime said 165, and a person retrying with 92 was refused again."""
    db = tmp_path / "ledger.db"
    with holon_ctx.open_session(db, compaction=POLICY) as session:
        session.operator_message("")
        session.set_work_item("wi1", objective="do it", status="active",
                              todos={"write": False, "test": True})
        chat: list[dict[str, str]] = [{"role": "system", "content": "You ship releases."}]
        for i in range(5):
            chat += [{"role": "user", "content": f"zz question {i}"},
                     {"role": "assistant", "content": f"answer {i}"}]
        session.import_history(chat)
    with holon_ctx.open_session(db, compaction=None) as runtime, \
            pytest.raises(holon_ctx.BudgetTooSmallError) as sent:
        runtime.next_request(1)
    args = argparse.Namespace(db=str(db), source=None, session_key=None)
    with pytest.raises(holon_ctx.BudgetTooSmallError) as shown, opened(args) as (store, projector):
        viewed(store, projector, 1, None, "session")
    assert shown.value.required_tokens == sent.value.required_tokens
    with opened(args) as (store, projector):
        view = viewed(store, projector, shown.value.required_tokens, None, "session")[1]
    assert view.used_tokens <= shown.value.required_tokens


def test_a_calibrated_requests_text_refusal_is_in_the_callers_tokens() -> None:
    """Under a safety factor (the provider counted more than holon_ctx), a request whose text
    view the budget cannot hold refuses in the caller's tokens, as the messages' refusal does:
    it said "need 112, only 111 available" (planned tokens) to a runtime that gave 118."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.external_event("webhook", "")
    session.brief("กา")
    session.observe_usage(round(session.next_request(4000).request_tokens * 1.05))
    assert session.calibration.factor() > 1
    chat: list[dict[str, str]] = [{"role": "system", "content": "You ship releases."}]
    for i in range(4):
        chat += [{"role": "user", "content": f" question {i}"},
                 {"role": "assistant", "content": f"answer {i}"}]
    session.import_history(chat)
    session.operator_message("")
    refused = 0
    for budget in range(100, 120):  # where this ledger's text needs more than its messages
        try:
            request = session.next_request(budget)
        except holon_ctx.BudgetTooSmallError:
            continue
        text_refusal = refusal_of(lambda made=request: made.text)
        if text_refusal is None:
            continue
        refused += 1
        assert text_refusal.available_tokens == budget
        assert text_refusal.required_tokens > budget
    assert refused, "no budget in the range refused the text: the test no longer binds"


@pytest.mark.scaled
def test_the_slow_tier_runs_the_scaled_tests_at_full_size() -> None:
    """``--slow`` sets the tier before any test module reads its sizes: conftest.py imports
    tiers (for LONG_FILES) before its configure hook sets the tier, so ``tiers.SLOW`` was read
    as the default run's and the whole slow tier ran every scaled test at its default size
    (found by the chaos machine: 4 examples where the slow tier asks for 40)."""
    import tiers

    slow = os.environ.get("HOLON_CTX_TEST_TIER") == "slow"
    assert slow is tiers.SLOW
    assert "HOLON_CTX_CHAOS_EXAMPLES" in os.environ or (40 if slow else 4) == EXAMPLES
