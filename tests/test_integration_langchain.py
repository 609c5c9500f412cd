"""LangChain integration: messages into the ledger and requests out as messages, and a
pre_model_hook-style loop with LangChain's own fake chat model and tools, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool

import holon_ctx
from holon_ctx.integrations.langchain import LedgerHistory, append_messages, to_messages
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Environment, Message, MessageRole, Tool, ToolStatus, Trust
from holon_ctx.projection.provider_formats.providers import measure
from holon_ctx.tokens import default_counter


def session() -> holon_ctx.Session:
    return holon_ctx.open_session(MemoryStore(), compaction=None)


def test_messages_go_into_the_ledger_with_their_provenance() -> None:
    """System, human, AI (with tool calls) and tool messages map to environment, operator,
    assistant and one tool record per call, with the trust of who wrote them."""
    s = session()
    append_messages(s, [
        SystemMessage("You answer questions about invoices."),
        HumanMessage("What is the total of invoice 42?"),
        AIMessage("Looking it up.", tool_calls=[{"name": "invoice_total", "args": {"id": 42},
                                                 "id": "call-1"}]),
        ToolMessage("1999 cents", tool_call_id="call-1"),
        AIMessage([{"type": "text", "text": "It is 19.99."}]),
    ])
    records = list(s.store.iter_records())
    env = [r for r in records if isinstance(r, Environment)]
    assert [e.guidance for e in env] == ["You answer questions about invoices."]
    msgs = [(m.role, m.text, m.trust) for m in records if isinstance(m, Message)]
    assert msgs == [
        (MessageRole.OPERATOR, "What is the total of invoice 42?", Trust.TRUSTED_OPERATOR),
        (MessageRole.ASSISTANT, "Looking it up.", Trust.MODEL_OUTPUT),
        (MessageRole.ASSISTANT, "It is 19.99.", Trust.MODEL_OUTPUT)]
    tools = [r for r in records if isinstance(r, Tool)]
    assert [(t.tool_name, t.args_preview, t.output, t.trust) for t in tools] == [
        ("invoice_total", '{"id": 42}', "1999 cents", Trust.UNTRUSTED_EXTERNAL)]


def test_an_error_tool_message_is_a_failed_run_and_unknown_kinds_are_refused() -> None:
    """ToolMessage(status="error") records a failed run; a bare ChatMessage is refused by name."""
    s = session()
    append_messages(s, [HumanMessage("go"), AIMessage("", tool_calls=[
        {"name": "sh", "args": {}, "id": "c"}]), ToolMessage("boom", tool_call_id="c",
                                                             status="error")])
    (tool,) = [r for r in s.store.iter_records() if isinstance(r, Tool)]
    assert tool.status is ToolStatus.ERROR
    with pytest.raises(holon_ctx.InputError,
                       match=r"append_messages: messages\[0\]: expected a Human, AI, Tool or "
                             "System message, got ChatMessage"):
        append_messages(s, [ChatMessage("hi", role="critic")])


def test_a_request_becomes_system_and_human_messages_with_the_same_text() -> None:
    """to_messages keeps the request's roles and exact text (the stable part as the system)."""
    s = session()
    append_messages(s, [SystemMessage("Be brief."), HumanMessage("hello")])
    request = s.next_request(1000)
    messages = to_messages(request)
    assert [type(m) for m in messages] == [SystemMessage, HumanMessage]
    assert "".join(m.text for m in messages) == "".join(
        m["content"] or "" for m in request.openai_messages)
    assert messages[0].text == request.openai_messages[0]["content"]


@tool
def lookup(order: int) -> str:
    """Look an order up."""
    lines = [f"order {order} item {k}: widget-{k * order % 97} x{k % 5 + 1}" for k in range(80)]
    return "\n".join([*lines, f"order {order}: 80 items, status shipped"])


def test_a_pre_model_hook_loop_sends_budgeted_requests() -> None:
    """A ReAct-style loop keeps the full message list in its state; the hook hands the model a
    request under budget each time, and the state's list grows far past it."""
    budget = 1_500
    orders = range(1, 9)
    replies: list[BaseMessage] = []
    for n in orders:
        replies.append(AIMessage("", tool_calls=[{"name": "lookup", "args": {"order": n},
                                                  "id": f"call-{n}"}]))
        replies.append(AIMessage(f"Order {n} has shipped."))
    model = FakeMessagesListChatModel(responses=replies)
    history = LedgerHistory(session(), budget_tokens=budget)
    state: dict[str, list[BaseMessage]] = {"messages": [SystemMessage("You track orders.")]}
    counter = default_counter()
    sent: list[list[BaseMessage]] = []
    for n in orders:
        state["messages"].append(HumanMessage(f"Where is order {n}?"))
        while True:
            llm_input = history.pre_model_hook(state)["llm_input_messages"]
            sent.append(llm_input)
            answer = model.invoke(llm_input)
            state["messages"].append(answer)
            if not isinstance(answer, AIMessage) or not answer.tool_calls:
                break
            for call in answer.tool_calls:
                state["messages"].append(ToolMessage(lookup.invoke(call["args"]),
                                                     tool_call_id=call["id"]))
    whole = sum(counter.count(m.text) for m in state["messages"])
    assert whole > 3 * budget
    for llm_input in sent:
        request = [{"role": "system" if isinstance(m, SystemMessage) else "user",
                    "content": m.text} for m in llm_input]
        assert measure(request, counter) <= budget
    last = "".join(m.text for m in sent[-1])
    assert "Where is order 8?" in last
    assert "order 8: 80 items, status shipped" in last
    assert history.last_request is not None
    tools = [r for r in history.session.store.iter_records() if isinstance(r, Tool)]
    assert [t.call_id for t in tools] == [f"call-{n}" for n in orders]  # each appended once


def _conversation(n: int) -> list[Any]:
    """A persisted message list as a checkpointer keeps it: a system prompt, then ``n`` rounds
    of a question, a reply with three tool calls, their results and an answer."""
    messages: list[Any] = [SystemMessage("You answer questions about invoices.")]
    for i in range(n):
        ids = [f"call-{i}-{k}" for k in range(3)]
        messages += [
            HumanMessage(f"What is the total of invoice {i}?", id=f"h{i}"),
            AIMessage("Looking it up.", id=f"a{i}",
                      tool_calls=[{"name": "invoice_total", "args": {"id": i}, "id": c}
                                  for c in ids]),
            *(ToolMessage(f"{i}99 cents", tool_call_id=c, id=f"t{c}") for c in ids),
            AIMessage(f"It is {i}.99.", id=f"b{i}")]
    return messages


def _tool_ids(s: holon_ctx.Session) -> list[str]:
    return [r.call_id or "" for r in s.store.iter_records() if isinstance(r, Tool)]


@pytest.mark.parametrize("with_ids", [True, False])
def test_a_reload_appends_only_what_the_ledger_does_not_hold(tmp_path: Path,
                                                             with_ids: bool) -> None:
    """Issue 23: a process restarted with its persisted message list (a new LedgerHistory on the
    same ledger) appends nothing twice — by id or, without ids, by position — and the re-sent
    SystemMessage is not a runtime note; the messages after the reload are appended once."""
    db = tmp_path / "agent.db"
    history = _conversation(3)
    if not with_ids:
        for m in history:
            m.id = None
    with holon_ctx.open_session(db, compaction=None) as s:
        LedgerHistory(s, budget_tokens=4096).messages(history)
        before = list(s.store.iter_records())
    more = [*history, HumanMessage("And invoice 9?", id="h9"),
            AIMessage("Looking.", id="a9", tool_calls=[{"name": "invoice_total",
                                                        "args": {"id": 9}, "id": "call-9"}]),
            ToolMessage("999 cents", tool_call_id="call-9", id="tcall-9")]
    with holon_ctx.open_session(db, compaction=None) as s:
        reloaded = LedgerHistory(s, budget_tokens=4096)
        assert reloaded.sync(history) == 0
        assert list(s.store.iter_records()) == before
        assert reloaded.sync(more) == 3
        assert reloaded.sync(more) == 0
        ids = _tool_ids(s)
        notes = [r for r in s.store.iter_records()
                 if isinstance(r, Message) and r.role is MessageRole.SYSTEM]
    assert len(ids) == len(set(ids)) == 10
    assert notes == []
    # A list trimmed at its start (the system prompt kept) still aligns with the ledger's end.
    with holon_ctx.open_session(db, compaction=None) as s:
        trimmed = [more[0], *more[-8:]]
        assert LedgerHistory(s, budget_tokens=4096).sync(trimmed) == 0
        assert _tool_ids(s) == ids


def test_a_resent_system_message_is_not_a_new_runtime_note() -> None:
    """Within one process too: the same system prompt sent again under a new id appends nothing;
    a new system text is a runtime note."""
    s = session()
    history = LedgerHistory(s, budget_tokens=4096)
    history.sync([SystemMessage("Be brief.", id="s1"), HumanMessage("Hi", id="h1")])
    assert history.sync([SystemMessage("Be brief.", id="s2"), HumanMessage("Hi", id="h1")]) == 0
    history.sync([SystemMessage("Now be verbose.", id="s3")])
    notes = [r.text for r in s.store.iter_records()
             if isinstance(r, Message) and r.role is MessageRole.SYSTEM]
    assert notes == ["Now be verbose."]
