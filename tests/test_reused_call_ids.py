"""A runtime (or provider) that reuses tool-call ids across replies: ``call_0`` in every reply.

Anthropic refuses a request whose ``tool_use`` ids repeat, and OpenAI pairs a ``tool`` message
with a call by id, so two calls under one id make the pairing ambiguous. A request sends the
first call of an id natively and each later one as labelled text (its label line and fenced
result in the user role): RFC 0008, decision 9. Checked on every request a reusing runtime gets
(the library's, a session projector's walk, the preview's, ``project``'s, replay's baselines),
on generated ledgers that reuse ids, and on the import of such a transcript, which is accepted.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from provider_shapes import assert_anthropic_order, assert_openai_pairing
from session_helpers import check_request, walk
from test_preview_is_sent import runtime_requests
from tool_pairing import tool_pairing_problems

import holon_ctx
from holon_ctx import ToolCall
from holon_ctx.cli.main import main
from holon_ctx.cli.preview_cmds import opened, viewed
from holon_ctx.ledger.records import Tool
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.ledger.transcripts import import_any
from holon_ctx.lowlevel import MemoryStore
from holon_ctx.projection.measure.replay import _History
from holon_ctx.projection.provider_formats.providers import measure
from holon_ctx.projection.session.session import Layout, SessionProjector
from holon_ctx.tokens import store_counter

STEPS = 30
_FENCE = re.compile(r"<data (tool:\S+?)[ >]")
#: A call's label line: the tool's name and its arguments as written.
_LABEL = re.compile(r"^(?:ALERT )?(?:tool:\S+ )?\S+ `(?P<args>[^`\n]*)`")


def _tools(store: LedgerStore) -> dict[str, Tool]:
    return {s.ref: s.record for s in store.records_between(0, store.end_pos())
            if isinstance(s.record, Tool)}


def _results_pair_with_their_calls(messages: Sequence[Any], tools: dict[str, Tool]) -> int:
    """Each ``tool`` message holds the result of the call the assistant message before it made
    under its id: its label line shows that call's arguments, and its fenced output is the
    ledger's record of that id with those arguments (each as far as the budget kept it: a small
    one clips a label to its first words). Returns the native calls."""
    calls: dict[str, str] = {}
    native = 0
    for msg in messages:
        if msg["role"] == "assistant":
            calls = {c["id"]: c["function"]["arguments"] for c in msg.get("tool_calls") or []}
            native += len(calls)
        elif msg["role"] == "tool":
            arguments = json.loads(calls[msg["tool_call_id"]])
            for label in _LABEL.findall(msg["content"].split("\n", 1)[0]):
                assert json.loads(label) == arguments, msg
            for ref in _FENCE.findall(msg["content"])[:1]:
                assert tools[ref].call_id == msg["tool_call_id"], (ref, msg["tool_call_id"])
                assert json.loads(tools[ref].args_preview) == arguments, ref
    return native


def _check_sent(openai: Sequence[Any], anthropic: Any, store: LedgerStore) -> int:
    """The provider rules a reusing runtime broke; returns the request's native calls."""
    assert_openai_pairing(openai)
    assert_anthropic_order(anthropic)
    tools = _tools(store)
    text = "".join(m["content"] or "" for m in openai)
    outputs = {ref: bool(t.output) for ref, t in tools.items()}
    # A demoted call is its label line, then its fenced result, in the user role.
    assert tool_pairing_problems(text, outputs) == []
    return _results_pair_with_their_calls(openai, tools)


def reusing_runtime(session: holon_ctx.Session, budget: int, steps: int = STEPS,
                    seed: int = 0) -> list[holon_ctx.Request]:
    """A runtime whose provider names every reply's call ``call_0`` (and a second one
    ``call_1``, every third reply), asking for a request before each reply."""
    rng = random.Random(seed)
    session.set_environment(guidance="You fix failing tests.", capabilities=["bash", "read"])
    session.operator_message("Make the importer tests pass.")
    requests = []
    for i in range(steps):
        requests.append(session.next_request(budget_tokens=budget))
        calls = [ToolCall("call_0", "bash", {"cmd": f"pytest -k case{i}"})]
        if i % 3 == 2:
            calls.append(ToolCall("call_1", "read", {"path": f"src/m{i}.py"}))
        session.assistant_message(f"Step {i}: checking case {i}.", tool_calls=calls)
        for call in reversed(calls) if i % 2 else calls:
            session.tool_result(call.call_id, f"case {i} line\n" * rng.randint(2, 40),
                                exit_code=rng.choice([0, 1]))
    requests.append(session.next_request(budget_tokens=budget))
    return requests


@pytest.mark.parametrize("budget", [1500, 4000, 32768])
def test_a_runtime_reusing_call_ids_sends_each_id_once(budget: int) -> None:
    """Thirty replies all calling ``call_0``: every request the runtime gets has unique
    ``tool_use`` ids (Anthropic) and unique ``tool_calls`` ids (OpenAI), every result right
    after its own call (the call with that id and those arguments), the demoted ones labelled
    and fenced, re-measured within the budget; the first call of an id the request holds is
    native (after a re-plan left the ledger's first one out too)."""
    with holon_ctx.open_session(":memory:", compaction=None) as session:
        requests = reusing_runtime(session, budget)
        counter = store_counter(session.store)
        native: list[int] = []
        demoted = 0
        for request in requests:
            openai = request.openai_messages
            native.append(_check_sent(openai, request.anthropic_request, session.store))
            demoted += sum(len(_FENCE.findall(m["content"])) for m in openai if m["role"] == "user")
            assert measure(openai, counter) == request.request_tokens <= budget
            assert measure(request.anthropic_request, counter) <= budget
    assert native[-1] > 0
    assert demoted > 0


@pytest.mark.parametrize("budget", [1500, 4000])
def test_a_session_walk_over_reused_ids_pairs_every_call(budget: int) -> None:
    """A session projector's request as of every turn, across re-plans: exact sizes within the
    budget, unique ids, each result after its own call."""
    with holon_ctx.open_session(":memory:", compaction=None) as session:
        reusing_runtime(session, 32768)
        store = session.store
        replans = 0
        for request in walk(SessionProjector(store, layout=Layout.MESSAGES), budget):
            check_request(request)
            replans += request.replanned
            _check_sent(request.openai_messages(), request.anthropic_request(), store)
    assert replans >= 2


def test_replay_baselines_send_each_id_once() -> None:
    """Replay's whole-history baselines (full, newest, masking) lay the history out as the
    session does: one native call per id."""
    with holon_ctx.open_session(":memory:", compaction=None) as session:
        reusing_runtime(session, 32768, steps=12)
        store = session.store
        history = _History(store, store_counter(store))
        history.grow(store.end_pos())
        for messages in (history.messages(), history.masked_messages(2)):
            assert_openai_pairing(messages)
            assert _results_pair_with_their_calls(messages, _tools(store)) > 0


@pytest.fixture(scope="module")
def reused_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("reused") / "ledger.db"
    with holon_ctx.open_session(db, compaction=None) as session:
        reusing_runtime(session, 4096)
    return db


@pytest.mark.parametrize("budget", [1500, 4096])
def test_preview_of_reused_ids_is_the_request_sent(reused_db: Path, budget: int) -> None:
    """The preview's request is the runtime's, message for message, in both formats."""
    args = argparse.Namespace(db=str(reused_db), source=None, session_key=None)
    with opened(args) as (store, projector):
        view = viewed(store, projector, budget, None, "session")[2]
        shown = (view.request.openai_messages(), dict(view.request.anthropic_request()))
    [(_, sent)] = runtime_requests(reused_db, (budget,))
    assert shown == (sent.openai_messages, sent.anthropic_request)
    with holon_ctx.open_session(reused_db, compaction=None) as session:
        _check_sent(*shown, session.store)


def _printed(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_project_prints_each_id_once(reused_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``project --format openai|anthropic``: the session request with unique ids; the stateless
    plan sends no native call at all (one user message after the system one)."""
    base = ["project", "--db", str(reused_db), "--budget", "3000", "--format"]
    openai = _printed(capsys, [*base, "openai"])["messages"]
    anthropic = _printed(capsys, [*base, "anthropic"])
    with holon_ctx.open_session(reused_db, compaction=None) as session:
        assert _check_sent(openai, anthropic, session.store) > 0
    stateless = _printed(capsys, [*base, "openai", "--mode", "stateless"])["messages"]
    assert [m["role"] for m in stateless] in (["user"], ["system", "user"])
    stateless_a = _printed(capsys, [*base, "anthropic", "--mode", "stateless"])
    assert all(b["type"] == "text" for m in stateless_a["messages"] for b in m["content"])


# -- generated ledgers -------------------------------------------------------------------------
_IDS = ("call_0", "call_1", "c")
_reply = st.tuples(st.just("reply"), st.lists(st.sampled_from(_IDS), unique=True, max_size=3),
                   st.lists(st.booleans(), min_size=3, max_size=3), st.booleans(),
                   st.integers(1, 30))
_step = st.one_of(_reply, _reply, _reply, st.tuples(st.sampled_from(["operator", "tick", "late"])))


def _build(steps: Iterable[tuple[Any, ...]]) -> LedgerStore:
    """The ledger a runtime writes for ``steps``: replies whose calls draw ids from three (so
    ids repeat across replies), some results out of order, some never (left pending), some late
    (after the next turn opened), and operator messages and ticks between."""
    session = holon_ctx.open_session(MemoryStore(), compaction=None)
    session.operator_message("Start.")
    waiting: list[str] = []  # calls of the newest reply without a result
    late: list[str] = []  # calls left out when a turn opened right after their reply
    for n, step in enumerate(steps):
        kind = step[0]
        if kind == "reply":
            _, ids, answer, backwards, lines = step
            ids = [i for i in ids if i not in waiting and i not in late]
            session.assistant_message(f"reply {n}", tool_calls=[
                ToolCall(i, "bash", {"n": n, "id": i}) for i in ids])
            answered = [i for i, yes in zip(ids, answer, strict=False) if yes]
            for call_id in reversed(answered) if backwards else answered:
                session.tool_result(call_id, f"out {n} {call_id}\n" * lines)
            waiting, late = [i for i in ids if i not in answered], []
        elif kind == "late":
            for call_id in late:
                session.tool_result(call_id, f"late {n} {call_id}\n")
            late = []
        else:
            if kind == "operator":
                session.operator_message(f"operator {n}")
            else:
                session.wake("scheduler_tick")
            waiting, late = [], waiting
    return session.store


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_step, min_size=1, max_size=14), budget=st.sampled_from([700, 1500, 6000]))
def test_generated_ledgers_with_reused_ids_send_each_id_once(
        steps: list[tuple[Any, ...]], budget: int) -> None:
    """Any ledger whose replies reuse ids: every request of a session walk (and replay's whole
    history) has unique ids, each result after its own call, within the budget."""
    store = _build(steps)
    for request in walk(SessionProjector(store, layout=Layout.MESSAGES), budget):
        check_request(request)
        _check_sent(request.openai_messages(), request.anthropic_request(), store)
    history = _History(store, store_counter(store))
    history.grow(store.end_pos())
    assert_openai_pairing(history.messages())
    _results_pair_with_their_calls(history.messages(), _tools(store))


# -- import ------------------------------------------------------------------------------------
def _openai_transcript(steps: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You fix tests."},
                                      {"role": "user", "content": "Fix the importer."}]
    for i in range(steps):
        messages.append({"role": "assistant", "content": f"Step {i}.", "tool_calls": [
            {"id": "call_0", "type": "function",
             "function": {"name": "bash", "arguments": json.dumps({"cmd": f"run {i}"})}}]})
        messages.append({"role": "tool", "tool_call_id": "call_0", "content": f"output {i}\n"})
    messages.append({"role": "assistant", "content": "Done."})
    return messages


def _anthropic_transcript(steps: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the importer."}]
    for i in range(steps):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Step {i}."},
            {"type": "tool_use", "id": "toolu_0", "name": "bash", "input": {"cmd": f"run {i}"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_0", "content": f"output {i}\n"}]})
    return {"system": "You fix tests.", "messages": messages}


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_import_of_a_transcript_reusing_ids(fmt: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A transcript whose calls all share one id imports (it was refused as a duplicate id):
    one tool record per call, each with its own call's arguments and its own result; the
    requests made from it send the id once."""
    content = _openai_transcript(STEPS) if fmt == "openai" else _anthropic_transcript(STEPS)
    src = tmp_path / "t.json"
    src.write_text(json.dumps(content, indent=1), encoding="utf-8")
    db = tmp_path / "ledger.db"
    assert main(["import", str(src), "--db", str(db), "--from", fmt]) == 0
    capsys.readouterr()
    store = MemoryStore()
    import_any(src, store, fmt)
    tools = sorted(_tools(store).values(), key=lambda t: int(json.loads(t.args_preview)["cmd"][4:]))
    assert [(t.call_id, json.loads(t.args_preview), t.output) for t in tools] == [
        ("toolu_0" if fmt == "anthropic" else "call_0", {"cmd": f"run {i}"}, f"output {i}\n")
        for i in range(STEPS)]
    for source in (["--db", str(db)], [str(src), "--from", fmt]):
        base = ["project", *source, "--budget", "2500", "--format"]
        openai = _printed(capsys, [*base, "openai"])["messages"]
        anthropic = _printed(capsys, [*base, "anthropic"])
        assert _check_sent(openai, anthropic, store) > 0
