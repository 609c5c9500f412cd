"""Calibration from usage (issue 28, items 3 and 4; RFC 0022): the provider's reported count beside
the estimate, a safety factor per model persisted in the store, and stand-in providers that prove
the budget holds by *their* count after 20 observations — without a network."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
from provider_counts import StandIn, agent_loop, stand_in_tokenizer
from tiers import sized

import holon_ctx
from holon_ctx.calibration import FACTOR_STEP, MIN_OBSERVATIONS, safety_factor
from holon_ctx.cli.main import main
from holon_ctx.errors import InputError
from holon_ctx.ledger.usage import WINDOW

BUDGET = 8192


# -- the factor ----------------------------------------------------------------------------------
def test_an_exact_estimate_costs_nothing() -> None:
    """Ratios of 1 (the provider counts what holon_ctx counts): factor 1, whatever n; ratios
    never above 1 from MIN_OBSERVATIONS on (the estimate bounded every count): factor 1."""
    for n in (0, 1, MIN_OBSERVATIONS, 20, WINDOW):
        assert safety_factor([1.0] * n) == 1.0
        if n >= MIN_OBSERVATIONS:
            assert safety_factor(([0.93, 0.97, 1.0, 0.99] * n)[:n]) == 1.0


def test_the_factor_bounds_every_ratio_seen_and_rounds_up() -> None:
    """The factor is at least the largest ratio, a multiple of FACTOR_STEP, and with few
    observations at least the model's prior."""
    assert safety_factor([1.1234] * 20) == pytest.approx(1.13)
    assert safety_factor([1.05], prior=1.35) == pytest.approx(1.35)
    assert safety_factor([1.5], prior=1.35) == pytest.approx(1.5)
    ratios = [1.08, 1.12, 1.1, 1.09, 1.11] * 4
    factor = safety_factor(ratios)
    assert factor >= max(ratios)
    assert round(factor / FACTOR_STEP, 6).is_integer()


def test_a_spread_of_ratios_widens_the_factor() -> None:
    """The same mean with more spread asks for a larger factor (the prediction bound)."""
    tight = safety_factor([1.1, 1.1001, 1.0999] * 7)
    wide = safety_factor([1.05, 1.1, 1.15] * 7)
    assert wide > tight >= 1.1


# -- observe_usage --------------------------------------------------------------------------------
def _session(where: Any = ":memory:", model: str | None = "claude-sonnet-4-5") -> holon_ctx.Session:
    return holon_ctx.open_session(where, compaction=None, model=model)


def test_observe_usage_records_the_estimate_beside_the_provider_count() -> None:
    """The observation names the model, the turn and both counts; Anthropic's cache figures are
    added to its input tokens (reported apart)."""
    s = _session()
    s.operator_message("list the files")
    request = s.next_request(1000)
    seen = s.observe_usage(100, cache_creation_input_tokens=20, cache_read_input_tokens=5)
    assert (seen.model, seen.turn, seen.estimated_tokens, seen.observed_tokens) == (
        "claude-sonnet-4-5", request.current_turn, request.request_tokens, 125)
    assert (seen.budget_tokens, seen.planned_tokens, seen.framing) == (
        1000, request.planned_tokens, "anthropic")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"input_tokens": -1}, "observe_usage: input_tokens: expected a count of tokens"),
    ({"input_tokens": True}, "observe_usage: input_tokens: expected an integer or None, got bool"),
    ({"input_tokens": 5, "cache_read_input_tokens": "3"},
     "observe_usage: cache_read_input_tokens: expected an integer or None, got str"),
    ({"input_tokens": 0}, "observe_usage: input_tokens: the provider counted no input tokens"),
    ({"input_tokens": 5, "request": "r"}, "observe_usage: request: expected a Request, got str"),
])
def test_bad_usage_is_one_line_naming_the_argument(kwargs: dict[str, Any], message: str) -> None:
    """Wrong figures fail at the call, naming the argument; nothing is recorded."""
    s = _session()
    s.operator_message("hi")
    s.next_request(1000)
    with pytest.raises(InputError) as info:
        s.observe_usage(**kwargs)
    assert str(info.value).startswith(message)
    assert s.calibration.observations() == []


def test_usage_before_any_request_is_refused() -> None:
    s = _session()
    s.operator_message("hi")
    with pytest.raises(InputError, match=r"^observe_usage: no request made yet"):
        s.observe_usage(10)


def test_observations_persist_in_sqlite_and_teach_the_next_session(tmp_path: Path) -> None:
    """The factor learnt in one process is the factor of the next one on the same ledger, and a
    request then plans under budget / factor."""
    db = tmp_path / "agent.db"
    with _session(db) as first:
        for _ in agent_loop(first, 8, seed=1, ids="anthropic"):
            request = first.next_request(BUDGET)
            first.observe_usage(int(request.request_tokens * 1.2))
        learnt = first.calibration.factor()
    assert learnt >= 1.2
    with _session(db) as second:
        assert len(second.calibration.observations()) == 8
        second.operator_message("go on")
        request = second.next_request(BUDGET)
        assert request.safety_factor == learnt
        assert request.planned_tokens == int(BUDGET / learnt)
        assert request.request_tokens <= request.planned_tokens


def test_observations_persist_in_postgres(pg_url: str, pg_session_key: str) -> None:
    """The same through a PostgreSQL session's rows (schema version 5), isolated per session."""
    from holon_ctx.postgres import PostgresStore

    store = PostgresStore(pg_url, session=pg_session_key)
    with holon_ctx.open_session(store, compaction=None, model="claude-sonnet-4-5") as first:
        for _ in agent_loop(first, 6, seed=2, ids="anthropic"):
            request = first.next_request(BUDGET)
            first.observe_usage(int(request.request_tokens * 1.25))
        learnt = first.calibration.factor()
    store.close()
    again = PostgresStore(pg_url, session=pg_session_key)
    other = PostgresStore(pg_url, session=pg_session_key + "-other", create=True)
    try:
        with holon_ctx.open_session(again, compaction=None, model="claude-sonnet-4-5") as s:
            assert len(s.calibration.observations()) == 6
            assert s.calibration.factor() == learnt
        with holon_ctx.open_session(other, compaction=None, model="claude-sonnet-4-5") as s:
            assert s.calibration.observations() == []
    finally:
        again.close()
        other.close()


def test_a_factor_comes_down_only_by_two_steps() -> None:
    """Observations that allow one step less keep the planned budget (no re-plan for a hair);
    two steps less lower it."""
    s = _session(model="gpt-4o")
    s.operator_message("hi")
    request = s.next_request(BUDGET)
    for _ in range(MIN_OBSERVATIONS):
        s.observe_usage(int(request.request_tokens * 1.1) + 1)
    high = s.calibration.factor()
    for _ in range(WINDOW):
        s.observe_usage(math.ceil(request.request_tokens * (high - FACTOR_STEP)))
    assert s.calibration.factor() == high
    for _ in range(WINDOW):
        s.observe_usage(request.request_tokens)
    assert s.calibration.factor() == 1.0


# -- stand-in providers ----------------------------------------------------------------------------
def stand_ins() -> dict[str, tuple[str | None, StandIn, str]]:
    """name → (the model the session is told, the stand-in provider, the format it counts)."""
    return {
        # An Anthropic-like provider: a vocabulary less efficient than cl100k (tokens over 6 bytes
        # count twice), 5 tokens per message, 2 per further block, its block types as text.
        "claude-like": ("claude-sonnet-4-5", StandIn(
            "claude-like", stand_in_tokenizer("cl100k_base", split_long=6), per_message=5,
            per_block=2, reply=4), "anthropic"),
        # A model holon_ctx does not know, whose provider counts with o200k split finer and
        # frames each message with 6 tokens.
        "unknown-o200k": ("acme-large-2", StandIn(
            "unknown-o200k", stand_in_tokenizer("o200k_base", split_long=4), per_message=6),
            "openai"),
    }


def calibrated_run(model: str | None, provider: StandIn, fmt: str, steps: int,
                   *, observe: bool = True) -> dict[str, Any]:
    """A loop at 8,192 tokens: each request counted by the stand-in, its count observed; figures
    of the requests after the first 20."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", holon_ctx.UnknownModelWarning)
        session = holon_ctx.open_session(":memory:", model=model)
    over, planned = 0, []
    for step in agent_loop(session, steps + 20, seed=17,
                           ids="anthropic" if fmt == "anthropic" else "openai"):
        request = session.next_request(BUDGET)
        counted = (provider.anthropic(request.anthropic_request) if fmt == "anthropic"
                   else provider.chat(request.openai_messages))
        if step >= 20:
            over += counted > BUDGET
            planned.append(request.planned_tokens)
        if observe:
            session.observe_usage(counted)
    return {"requests": steps, "over": over, "over_share": over / steps,
            "planned_mean": sum(planned) / len(planned)}


@pytest.mark.scaled
@pytest.mark.parametrize("name", sorted(stand_ins()))
def test_after_20_observations_the_stand_in_s_count_stays_within_budget(name: str) -> None:
    """Item 4: a provider counting with another encoding and its own framing. After 20
    observed requests, at least 99.9% of the next ones are within the budget by its count
    (1,000 in the slow tier; none over in the default tier's smaller run)."""
    model, provider, fmt = stand_ins()[name]
    steps = sized(150, 1000)
    figures = calibrated_run(model, provider, fmt, steps)
    assert figures["over"] <= int(steps * 0.001)


def test_the_factor_costs_at_most_3_percent_where_the_estimate_is_exact() -> None:
    """A provider that counts exactly as holon_ctx does (gpt-4o: o200k and OpenAI's framing):
    after 20 observations the plan keeps at least 97% of the budget (here: all of it)."""
    session = holon_ctx.open_session(":memory:", model="gpt-4o")
    planned = []
    for step in agent_loop(session, sized(60, 300), seed=23):
        request = session.next_request(BUDGET)
        session.observe_usage(request.request_tokens)
        if step >= 20:
            planned.append(request.planned_tokens)
    assert min(planned) >= 0.97 * BUDGET


def test_without_calibration_the_stand_in_would_be_over_budget() -> None:
    """The stand-ins are not a formality: with no usage observed, the unknown model's provider
    counts some requests over the budget."""
    model, provider, fmt = stand_ins()["unknown-o200k"]
    figures = calibrated_run(model, provider, fmt, 60, observe=False)
    assert figures["over"] > 0


# -- replay and explain ---------------------------------------------------------------------------
def test_replay_and_explain_show_estimate_against_observed(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Where a session recorded usage, replay's JSON has both figures per call and its table
    both columns; explain says them for the projected turn."""
    db = tmp_path / "agent.db"
    observed: dict[str, tuple[int, int]] = {}
    with _session(db) as s:
        for step in agent_loop(s, 4, seed=9, ids="anthropic"):
            request = s.next_request(3000)
            if step % 2 == 0:
                o = s.observe_usage(request.request_tokens + 40)
                observed[o.turn] = (o.estimated_tokens, o.observed_tokens)
        last = s.current_turn
    assert main(["replay", "--db", str(db), "--budget", "3000", "--json"]) == 0
    calls = json.loads(capsys.readouterr().out)["approaches"]["session"]["calls"]
    shown = {c["turn"]: (c["estimated_tokens"], c["observed_tokens"]) for c in calls
             if c["observed_tokens"] is not None}
    assert shown == {t: v for t, v in observed.items() if t in shown}
    assert shown
    assert all(c["estimated_tokens"] is None for c in calls if c["turn"] not in observed)
    assert main(["replay", "--db", str(db), "--budget", "3000"]) == 0
    table = capsys.readouterr().out
    assert "estimated" in table
    assert "observed" in table
    turn, (estimated, seen) = next(iter(shown.items()))
    assert main(["explain", "--db", str(db), "--budget", "3000", "--at", turn, "--json",
                 turn]) == 0
    usage = json.loads(capsys.readouterr().out)["usage"]
    assert (usage["estimated_tokens"], usage["observed_tokens"]) == (estimated, seen)
    assert main(["explain", "--db", str(db), "--budget", "3000", "--at", turn, turn]) == 0
    assert f"the provider counted {seen:,}" in " ".join(capsys.readouterr().out.split())
    assert last is not None


def test_cli_model_counts_with_the_model_s_encoding(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``--model`` picks the counter of the manifest and the framing of the request; an unknown
    model is one warning line on stderr."""
    db = tmp_path / "agent.db"
    with _session(db, model=None) as s:
        for _ in agent_loop(s, 3, seed=4):
            pass
    assert main(["project", "--db", str(db), "--budget", "3000", "--json",
                 "--model", "gpt-4o"]) == 0
    assert json.loads(capsys.readouterr().out)["counter"] == "tiktoken:o200k_base"
    assert main(["project", "--db", str(db), "--budget", "3000", "--format", "openai",
                 "--model", "mystery-9"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("holon-ctx: warning: unknown model 'mystery-9'")


# -- the integrations pass the framework's model and usage --------------------------------------
def test_langchain_history_names_the_model_and_observes_reported_usage() -> None:
    """LedgerHistory with a chat model's name counts for it, and a reply's ``usage_metadata``
    is recorded against the request it answered."""
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage

    from holon_ctx.integrations.langchain import LedgerHistory

    class ChatStub:
        model_name = "gpt-4o"

    session = holon_ctx.open_session(":memory:", compaction=None)
    history = LedgerHistory(session, budget_tokens=2000, model=ChatStub())
    messages: list[Any] = [HumanMessage("list the files", id="h1")]
    history.messages(messages)
    request = history.last_request
    assert request is not None
    assert request.counter == "tiktoken:o200k_base"
    messages.append(AIMessage("done", id="a1", usage_metadata={
        "input_tokens": request.request_tokens + 7, "output_tokens": 2, "total_tokens": 9}))
    history.sync(messages)
    seen = session.calibration.observations()
    assert [(o.estimated_tokens, o.observed_tokens) for o in seen] == [
        (request.request_tokens, request.request_tokens + 7)]


def test_mini_swe_agent_model_names_the_model_and_observes_reported_usage() -> None:
    """LedgerModel counts for the inner model's ``config.model_name`` and records the prompt
    tokens its response reports."""
    pytest.importorskip("minisweagent")
    from types import SimpleNamespace

    from holon_ctx.integrations.mini_swe_agent import LedgerModel

    class Inner:
        config = SimpleNamespace(model_name="anthropic/claude-sonnet-4-5")

        def format_message(self, **kwargs: Any) -> dict[str, Any]:
            return dict(kwargs)

        def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
            return {"role": "assistant", "content": "ok",
                    "extra": {"response": {"usage": {"prompt_tokens": 321}}}}

    session = holon_ctx.open_session(":memory:", compaction=None)
    model = LedgerModel(Inner(), session, budget_tokens=3000)
    model.query([{"role": "system", "content": "You are an agent."},
                 {"role": "user", "content": "Fix the failing test."}])
    (seen,) = session.calibration.observations()
    assert (session.model, seen.model, seen.observed_tokens, seen.estimated_tokens) == (
        "anthropic/claude-sonnet-4-5", "anthropic/claude-sonnet-4-5", 321,
        model.requests[-1].request_tokens)


def test_openai_agents_hooks_observe_reported_usage() -> None:
    """The Agents SDK session names the agent's model in its input filter, and its hooks record
    each call's ``usage.input_tokens`` against the request sent."""
    pytest.importorskip("agents")
    import asyncio
    from types import SimpleNamespace

    from holon_ctx.integrations.openai_agents import LedgerSession

    session = holon_ctx.open_session(":memory:", compaction=None)
    session.operator_message("hello")
    ledger = LedgerSession(session, budget_tokens=2000)
    data = SimpleNamespace(agent=SimpleNamespace(model="gpt-4.1"),
                           model_data=SimpleNamespace(instructions="be brief", input=[]))
    ledger.model_input_filter(data)  # type: ignore[arg-type]
    request = ledger.last_request
    assert request is not None
    assert request.model == "gpt-4.1"
    response = SimpleNamespace(usage=SimpleNamespace(input_tokens=request.request_tokens + 50))
    asyncio.run(ledger.hooks().on_llm_end(None, None, response))  # type: ignore[arg-type]
    (seen,) = session.calibration.observations()
    assert seen.observed_tokens == request.request_tokens + 50
