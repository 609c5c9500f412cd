"""What a session refuses and what it decides from its arguments (issue 23, "tests that pin the
session path"): each bound of ``CompactionPolicy``, the types ``Session``, ``compact`` and
``open_session`` check, which policy ``compact`` runs under, the id prefix and the bulk
archive of ``import_history``, the formats an in-memory history is read as, a budget below the
message framing, and a usage observed for a request made before ``use_model`` switched models.

Each refusal names the argument (``InputError.path``) and each decision is checked on both sides
of its condition, so a bound moved by one, a test inverted or a branch taken for the other
case fails here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import holon_ctx
from holon_ctx.errors import BudgetTooSmallError, InputError
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Tool, ToolStatus, Turn
from holon_ctx.projection.provider_formats.providers import MAX_MESSAGES
from holon_ctx.projection.session.session import Layout
from holon_ctx.session_upkeep import Upkeep


@pytest.mark.parametrize(("field", "value", "message"), [
    ("recent_turns", 0, "expected a positive integer, got 0"),
    ("recent_turns", 1, "the recent window must be at least 2 turns, got 1"),
    ("recent_turns", True, "expected a positive integer, got True"),
    ("every_turns", 0, "expected a positive integer, got 0"),
    ("every_turns", -3, "expected a positive integer, got -3"),
    ("every_turns", "4", "expected a positive integer, got '4'"),
    ("every_turns", 2.0, "expected a positive integer, got 2.0"),
    ("binding_turns", False, "expected a positive integer, got False"),
    ("seal_envelope", 1, "expected True or False, got 1"),
    ("seal_envelope", None, "expected True or False, got None"),
])
def test_compaction_policy_refuses_each_bad_field_naming_it(field: str, value: Any,
                                                            message: str) -> None:
    with pytest.raises(InputError) as caught:
        holon_ctx.CompactionPolicy(**{field: value})
    assert caught.value.path == field
    assert caught.value.source == "CompactionPolicy"
    assert message in str(caught.value)


def test_compaction_policy_takes_the_smallest_values_it_allows() -> None:
    policy = holon_ctx.CompactionPolicy(recent_turns=2, every_turns=1, binding_turns=1,
                                        seal_envelope=False)
    assert (policy.recent_turns, policy.every_turns, policy.binding_turns,
            policy.seal_envelope) == (2, 1, 1, False)


def test_session_checks_the_types_of_its_store_and_policies() -> None:
    with pytest.raises(InputError, match="expected a LedgerStore, got str") as caught:
        holon_ctx.Session("agent.db")  # type: ignore[arg-type]
    assert caught.value.path == "store"
    with pytest.raises(InputError, match="expected a CompactionPolicy or None, got dict") as c2:
        holon_ctx.Session(MemoryStore(), compaction={"every_turns": 2})  # type: ignore[arg-type]
    assert c2.value.path == "compaction"
    with holon_ctx.Session(MemoryStore(), compaction=None) as session:
        with pytest.raises(InputError, match="expected a CompactionPolicy or None, got int") as c3:
            session.compact(3)  # type: ignore[arg-type]
        assert c3.value.path == "policy"
    with pytest.raises(InputError, match="expected a path, a postgresql:// URL or a LedgerStore, "
                                         "got int") as c4:
        holon_ctx.open_session(3)  # type: ignore[arg-type]
    assert c4.value.path == "where"


def test_open_session_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory, not a ledger file") as caught:
        holon_ctx.open_session(tmp_path)
    assert caught.value.source == str(tmp_path)


def _conversation(session: holon_ctx.Session, turns: int) -> None:
    for i in range(turns):
        session.operator_message(f"question {i}")
        session.assistant_message(f"answer {i}")


def _kept_from(session: holon_ctx.Session, result: holon_ctx.CompactionResult) -> int:
    """The seq of the oldest turn the compaction kept out of episodes (its horizon)."""
    horizon = session.store.get(result.archive.horizon or "")
    assert horizon is not None
    assert horizon.turn_seq is not None
    return horizon.turn_seq


def test_compact_runs_under_the_policy_given_else_the_sessions_else_the_default() -> None:
    """``compact(policy)`` keeps ``policy.recent_turns``; without one, the session's policy's;
    on a session opened with ``compaction=None``, the default policy's (16 turns)."""
    turns = 24
    with holon_ctx.open_session(":memory:", compaction=holon_ctx.CompactionPolicy(
            recent_turns=5, every_turns=1000)) as session:
        _conversation(session, turns)
        assert _kept_from(session, session.compact()) == turns - 5
    with holon_ctx.open_session(":memory:", compaction=holon_ctx.CompactionPolicy(
            recent_turns=5, every_turns=1000)) as session:
        _conversation(session, turns)
        given = session.compact(holon_ctx.CompactionPolicy(recent_turns=9))
        assert _kept_from(session, given) == turns - 9
    with holon_ctx.open_session(":memory:", compaction=None) as session:
        _conversation(session, turns)
        assert _kept_from(session, session.compact()) == turns - 16


def test_a_compaction_that_seals_makes_later_prompts_state_the_governed_store() -> None:
    """A session opened without sealing, told to compact with a sealing policy, opens its
    governed store then; the next requests (both layouts) state what the envelope holds."""
    with holon_ctx.open_session(":memory:", compaction=holon_ctx.CompactionPolicy(
            recent_turns=2, every_turns=1000, seal_envelope=False)) as session:
        session.operator_message("Watch the deploy.")
        session.open_wait("deploy", "the production deploy finishes")
        _conversation(session, 4)
        assert session._upkeep.continuity is None
        result = session.compact(holon_ctx.CompactionPolicy(recent_turns=2))
        assert result.envelope_id is not None
        request = session.next_request(6000)
        assert result.envelope_id in request.text
        assert all(p.control is not None for p in session._projectors.values())
        assert session._projectors[Layout.TEXT].control is not None


def test_import_history_prefixes_ids_only_on_a_ledger_that_holds_records() -> None:
    history = [{"role": "user", "content": "list the files"},
               {"role": "assistant", "content": "done"}]
    with holon_ctx.open_session(":memory:", compaction=None) as session:
        first = session.import_history(history)
        ids = [r.id for r in session.store.iter_records()]
        assert first == len(ids)
        assert not any(i.startswith("i") for i in ids)
        end = session.store.end_pos()
        session.import_history(history)
        later = [r.id for r in session.store.iter_records()][end:]
        assert later
        assert all(i.startswith(f"i{end}.") for i in later)
        session.import_history(history, id_prefix="x-")
        assert any(r.id.startswith("x-") for r in session.store.iter_records())


def test_import_history_archives_in_bulk_only_under_a_policy() -> None:
    history = [m for i in range(60) for m in (
        {"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"a {i}"})]
    with holon_ctx.open_session(":memory:", compaction=holon_ctx.CompactionPolicy(
            recent_turns=4, every_turns=1000)) as session:
        session.import_history(history)
        assert session._upkeep.episodes.count() > 0
    with holon_ctx.open_session(":memory:", compaction=None) as session:
        session.import_history(history)
        assert session._upkeep.episodes.count() == 0


@pytest.mark.parametrize(("history", "fmt", "kind"), [
    ([{"role": "user", "content": "hi"}], "anthropic", "list"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "openai", "dict"),
    ([{"role": "user", "content": "hi"}], "swe-traj", "list"),
])
def test_an_in_memory_history_of_another_shape_is_refused(history: Any, fmt: str,
                                                          kind: str) -> None:
    with holon_ctx.open_session(":memory:", compaction=None) as session:
        with pytest.raises(InputError, match=f"cannot read a {kind} as {fmt}") as caught:
            session.import_history(history, format=fmt)  # type: ignore[arg-type]
        assert caught.value.path == "history"
        assert session.store.end_pos() == 0


def test_each_in_memory_format_is_read_by_its_reader() -> None:
    """An OpenAI list, an Anthropic request and a mini-swe-agent trajectory, each given with its
    format and (the first two) by shape alone."""
    openai = [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": "fixed"}]
    anthropic = {"system": "be brief", "messages": [
        {"role": "user", "content": "fix it"}, {"role": "assistant", "content": "fixed"}]}
    traj = {"messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls\n```"}]}
    for history, fmt in [(openai, "auto"), (openai, "openai"), (anthropic, "auto"),
                         (anthropic, "anthropic"), (traj, "swe-traj")]:
        with holon_ctx.open_session(":memory:", compaction=None) as session:
            assert session.import_history(history, format=fmt) > 0  # type: ignore[arg-type]
            assert any(isinstance(r, Turn) for r in session.store.iter_records())


def test_a_budget_within_the_message_framing_is_too_small_saying_what_it_needs() -> None:
    """A budget the framing fills is refused with the budget a request is made at: the one
    token past the framing is tried first, and refused there, the projector's need is said."""
    with holon_ctx.open_session(":memory:", compaction=None) as session:
        session.operator_message("hi")
        framing = session._projectors[Layout.MESSAGES].framing.stateless(MAX_MESSAGES)
        with pytest.raises(BudgetTooSmallError) as caught:
            session.next_request(framing)
        need = caught.value.required_tokens
        assert need > framing + 1
        assert caught.value.available_tokens == framing
        # Below the framing too (not only at it): the same need, whatever the budget under it.
        for budget in (1, framing - 1):
            with pytest.raises(BudgetTooSmallError) as below:
                session.next_request(budget)
            assert below.value.required_tokens == need
        # One token more is planned past the framing: the refusal is then the projection's.
        with pytest.raises(BudgetTooSmallError, match="the pinned references"):
            session.next_request(framing + 1)
        assert session.next_request(need).budget_tokens == need


def test_usage_of_a_request_made_before_a_model_switch_is_kept_for_its_own_model() -> None:
    """The observation is recorded under the model the request was counted for: the new model's
    calibration does not learn from it, the usage store keeps it."""
    with holon_ctx.open_session(":memory:", compaction=None) as session:
        session.operator_message("hi, list /testbed please")
        before = session.next_request(2000)
        session.use_model("gpt-4.1")
        kept = session.calibration.observations()
        observed = session.observe_usage(before.request_tokens + 7, request=before)
        assert observed.model == before._calibration_key != session.calibration.model
        assert observed.observed_tokens == before.request_tokens + 7
        assert session.calibration.observations() == kept
        stored = session._usage.recent(before._calibration_key, 10)
        assert [o.observed_tokens for o in stored] == [before.request_tokens + 7]
        # The current model's own request is calibrated under it.
        now = session.next_request(2000)
        session.observe_usage(now.request_tokens, cache_read_input_tokens=3)
        assert [o.observed_tokens for o in session.calibration.observations()] == [
            now.request_tokens + 3]


def test_close_writes_calls_still_waiting_as_pending_once() -> None:
    store = MemoryStore()
    session = holon_ctx.open_session(store, compaction=None)
    session.operator_message("run the tests")
    session.assistant_message("running", tool_calls=[
        holon_ctx.ToolCall("c1", "bash", '{"cmd": "pytest"}')])
    session.close()
    session.close()  # idempotent: nothing written twice
    pending = [r for r in store.iter_records() if isinstance(r, Tool)]
    assert [(t.call_id, t.status, t.tool_name) for t in pending] == [
        ("c1", ToolStatus.PENDING, "bash")]


def test_compacting_a_session_with_no_turn_counts_the_schedule_from_the_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``compact()`` before the first turn (refused: there is nothing to archive or seal) leaves
    the schedule where a new session's is: the first automatic compaction comes before the
    request after the ``every_turns``-th turn."""
    runs: list[int] = []
    policy = holon_ctx.CompactionPolicy(recent_turns=2, every_turns=3, binding_turns=1)
    with holon_ctx.open_session(":memory:", compaction=policy) as session:
        with pytest.raises(InputError, match="no turn"):
            session.compact()
        real = Upkeep.compact

        def counted(self: Upkeep, p: holon_ctx.CompactionPolicy) -> holon_ctx.CompactionResult:
            runs.append(session._turn.seq if session._turn is not None else -1)
            return real(self, p)

        monkeypatch.setattr(Upkeep, "compact", counted)
        for i in range(4):
            session.operator_message(f"note {i}")
            session.next_request(100_000)
    assert runs == [2]  # the third turn (seq 2): three turns since the start


def test_close_wait_of_a_wait_never_opened_names_the_wait_id() -> None:
    """close_wait on an unknown wait blames ``wait_id`` (not ``status``), appends nothing, and
    the same wait closes once it was opened."""
    session = holon_ctx.open_session(":memory:")
    session.operator_message("Wait for CI.")
    end = session.store.end_pos()
    with pytest.raises(InputError) as caught:
        session.close_wait("ci-88")
    assert str(caught.value) == ("close_wait: wait_id: no wait 'ci-88' was opened "
                                 "(open it with open_wait)")
    assert caught.value.path == "wait_id"
    assert session.store.end_pos() == end
    session.open_wait("ci-88", "CI run 88 finishes")
    assert session.close_wait("ci-88").startswith("wait:")
