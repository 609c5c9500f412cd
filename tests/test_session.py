"""The library API (holon_ctx.Session): typed appends, turn structure, requests under budget."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import holon_ctx
from holon_ctx import InputError, ToolCall, open_session
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Message, MessageRole, Tool, ToolStatus, Turn
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.projection.provider_formats.providers import framing_tokens, measure
from holon_ctx.tokens import default_counter


def records(store: Any) -> list[Any]:
    return list(store.iter_records())


def turns(store: Any) -> list[Turn]:
    return [r for r in records(store) if isinstance(r, Turn)]


def test_public_surface_is_the_documented_one() -> None:
    """holon_ctx exports exactly its __all__, each name resolvable from the package itself."""
    for name in holon_ctx.__all__:
        assert getattr(holon_ctx, name) is not None
    assert set(dir(holon_ctx)) == set(holon_ctx.__all__)
    with pytest.raises(AttributeError):
        _ = holon_ctx.Projector  # type: ignore[attr-defined]


def test_helpers_allocate_ids_and_sequence_numbers() -> None:
    """Each turn-opening helper gets the next seq; every ref returned is in the ledger."""
    store = MemoryStore()
    s = open_session(store, compaction=None)
    refs = [s.operator_message("start"), s.task_result("job-1", "success", "done"),
            s.external_event("github", "PR commented"), s.wake("scheduler_tick", noop=True),
            s.wake("timer", label="hourly")]
    assert [t.seq for t in turns(store)] == [0, 1, 2, 3, 4]
    assert [t.trigger for t in turns(store)] == [
        "operator_input", "task_result", "external_event", "scheduler_tick", "timer"]
    for ref in refs:
        assert store.get(ref) is not None
    assert s.current_turn == f"turn:{turns(store)[-1].id}"
    assert turns(store)[3].outcome == "noop"
    assert turns(store)[4].outcome is None  # a plain wake is not a no-op (issue 23)
    assert turns(store)[4].label == "hourly"
    assert turns(store)[3].label is None


def test_replies_after_tool_results_open_agent_steps_anchored_to_the_exchange() -> None:
    """The first reply belongs to the operator turn; later replies are x-agent-step turns
    anchored to that operator turn (never to the previous step: chains stay one hop)."""
    store = MemoryStore()
    s = open_session(store, compaction=None)
    s.operator_message("fix the build")
    op = s.current_turn
    s.assistant_message("looking", tool_calls=[ToolCall("c1", "bash", "make")])
    assert s.current_turn == op
    s.tool_result("c1", "error: missing header", status="error", exit_code=2)
    for i in range(3):
        s.assistant_message(f"step {i}", tool_calls=[ToolCall(f"d{i}", "bash", "make")])
        s.tool_result(f"d{i}", "ok")
    ts = turns(store)
    assert [t.trigger for t in ts] == ["operator_input"] + ["x-agent-step"] * 3
    assert all(f"turn:{t.anchor_turn_id}" == op for t in ts[1:])


def test_a_call_and_its_result_are_one_tool_record_in_the_calls_turn() -> None:
    """tool_result writes one tool record with the call's name, arguments and call id."""
    store = MemoryStore()
    s = open_session(store, compaction=None)
    s.operator_message("list files")
    call_turn = s.current_turn
    s.assistant_message("", tool_calls=[ToolCall("c1", "bash", {"command": "ls"})])
    ref = s.tool_result("c1", "a.txt\n", exit_code=0, side_effect="none",
                        files_written=["a.txt"])
    tool = store.get(ref).record
    assert isinstance(tool, Tool)
    assert (tool.tool_name, tool.args_preview, tool.call_id, tool.status, tool.output) == (
        "bash", '{"command": "ls"}', "c1", ToolStatus.OK, "a.txt\n")
    assert f"turn:{tool.turn_id}" == call_turn
    assert tool.files_written == ["a.txt"]
    assert sum(isinstance(r, Tool) for r in records(store)) == 1


def test_unanswered_calls_become_pending_and_a_late_result_still_lands() -> None:
    """A new turn writes waiting calls as pending; their result is accepted afterwards."""
    store = MemoryStore()
    s = open_session(store, compaction=None)
    s.operator_message("deploy")
    s.assistant_message("deploying", tool_calls=[ToolCall("c9", "deploy", "prod")])
    s.operator_message("status?")
    pending = [r for r in records(store) if isinstance(r, Tool)]
    assert [(t.call_id, t.status) for t in pending] == [("c9", ToolStatus.PENDING)]
    s.tool_result("c9", "deployed", side_effect="completed")
    tools = [r for r in records(store) if isinstance(r, Tool)]
    assert [(t.call_id, t.status) for t in tools] == [("c9", ToolStatus.PENDING),
                                                      ("c9", ToolStatus.OK)]
    assert tools[0].turn_id == tools[1].turn_id


def test_a_result_for_a_call_never_announced_says_how_to_record_it(tmp_path: Path) -> None:
    """Announced calls are in the ledger (RFC 0008 decision 5; tests/test_announced_calls.py
    has restarts and other Sessions): a restarted runtime's result for a call no reply
    announced is refused, the error says so and how to record such a run (tool_run)."""
    db = tmp_path / "agent.db"
    crashed = open_session(db)
    crashed.operator_message("Deploy the release.")
    crashed.assistant_message("Deploying.", tool_calls=[ToolCall("c1", "bash", {"cmd": "deploy"})])
    restarted = open_session(db)
    with pytest.raises(InputError) as refused:
        restarted.tool_result("c2", "deployed")
    message = str(refused.value)
    assert "no tool call 'c2' is waiting for a result: no reply announced it" in message
    assert "tool_run(name, arguments, output)" in message
    ref = restarted.tool_run("bash", {"cmd": "deploy"}, "deployed")
    stored = restarted.store.get(ref)
    assert stored is not None
    assert isinstance(stored.record, Tool)
    assert stored.record.output == "deployed"
    restarted.close()


def test_a_brief_after_switching_work_items_belongs_to_its_turn() -> None:
    """Switching the session's work item mid-turn does not make the turn's next brief clash with
    the turn's own work item."""
    s = open_session(MemoryStore(), compaction=None)
    s.operator_message("start on billing", work_item="billing")
    s.set_work_item("payments", objective="next up", status="open")
    ref = s.brief("billing migrated", kind="completion_report")
    assert s.store.get(ref) is not None
    s.wake("timer")
    assert turns(s.store)[-1].work_item_id == "payments"


def test_reopening_continues_where_the_ledger_left_off(tmp_path: Path) -> None:
    """A new session on the same file continues the sequence, the reply rule and pending calls."""
    db = tmp_path / "agent.db"
    with open_session(db, compaction=None) as s:
        s.operator_message("run the tests", work_item="wi1")
        s.assistant_message("running", tool_calls=[ToolCall("c1", "bash", "pytest")])
    with open_session(db, compaction=None) as s:
        assert s.work_item == "wi1"
        s.tool_result("c1", "3 passed")
        s.assistant_message("all green")  # a second reply: a new step turn
        ts = [t for t in SqliteStore(db).iter_records() if isinstance(t, Turn)]
        assert [t.seq for t in ts] == [0, 1]
        assert ts[1].trigger == "x-agent-step"
        assert ts[1].work_item_id == "wi1"
    tools = [r for r in SqliteStore(db).iter_records() if isinstance(r, Tool)]
    assert [(t.call_id, t.status) for t in tools] == [("c1", ToolStatus.PENDING),
                                                      ("c1", ToolStatus.OK)]


def test_two_sessions_on_one_file_take_turns(tmp_path: Path) -> None:
    """A session continues from what another writer appended meanwhile: sequence numbers keep
    rising, ids stay unique, and a reply lands in the newest turn."""
    db = tmp_path / "shared.db"
    a = open_session(db, compaction=None)
    b = open_session(db, compaction=None)
    a.operator_message("from a")
    b.operator_message("from b")
    a.assistant_message("a answers b's turn")
    b.external_event("ci", "build 12 passed")
    a.wake("timer")
    ts = turns(SqliteStore(db))
    assert [t.seq for t in ts] == [0, 1, 2, 3]
    msgs = [r for r in SqliteStore(db).iter_records() if isinstance(r, Message)]
    assert msgs[-1].text == "a answers b's turn"
    assert f"turn:{msgs[-1].turn_id}" == f"turn:{ts[1].id}"
    assert a.current_turn == f"turn:{ts[3].id}"
    assert "build 12 passed" in a.next_request(2000).text
    a.close()
    b.close()


def test_ids_never_clash_with_an_imported_history(tmp_path: Path) -> None:
    """Records appended after an import get fresh ids even where the importer's names collide."""
    s = open_session(MemoryStore(), compaction=None)
    history = [{"role": "user", "content": f"message {i}"} for i in range(6)]
    s.import_history(history)
    for i in range(6):
        s.operator_message(f"more {i}")
    refs = [f"{type(r).__name__}:{r.id}" for r in records(s.store)]
    assert len(refs) == len(set(refs))
    assert turns(s.store)[-1].seq == 11


def test_import_history_then_continue_the_exchange() -> None:
    """An imported OpenAI history is the session's past: the next reply continues its turn."""
    s = open_session(MemoryStore(), compaction=None)
    s.import_history([{"role": "system", "content": "You are terse."},
                      {"role": "user", "content": "What is 2+2?"}])
    s.assistant_message("4")
    msgs = [r for r in records(s.store) if isinstance(r, Message)]
    assert [(m.role, m.text) for m in msgs] == [(MessageRole.OPERATOR, "What is 2+2?"),
                                                (MessageRole.ASSISTANT, "4")]
    assert msgs[0].turn_id == msgs[1].turn_id
    assert "You are terse." in s.next_request(2000).openai_messages[0]["content"]


def _session() -> holon_ctx.Session:
    s = open_session(MemoryStore(), compaction=None)
    s.operator_message("hello")
    return s


BAD_CALLS: list[tuple[str, Callable[[holon_ctx.Session], object], str]] = [
    ("text not a string", lambda s: s.operator_message(42),  # type: ignore[arg-type]
     "operator_message: text: expected a string, got int"),
    ("work item with a space", lambda s: s.operator_message("x", work_item="w 1"),
     "operator_message: work_item: must not contain whitespace"),
    ("continues a missing turn", lambda s: s.operator_message("x", continues="t99"),
     "operator_message: continues: no earlier turn 't99'"),
    ("continues not a turn", lambda s: s.operator_message("x", continues="message:m1"),
     "operator_message: continues: expected a turn"),
    ("unknown task status", lambda s: s.task_result("j", "done"),  # type: ignore[arg-type]
     "task_result: status: expected one of success, failure, cancelled, timeout, partial, "
     "got 'done'"),
    ("wait never opened", lambda s: s.task_result("j", "success", wait="ci-1"),
     "task_result: wait: no wait 'ci-1' was opened"),
    ("unknown spawning turn", lambda s: s.task_result("j", "success", spawned_by="t42"),
     "task_result: spawned_by: no turn 't42' spawned this task"),
    ("empty event source", lambda s: s.external_event("", "x"),
     "external_event: source: must not be empty"),
    ("wake with a message trigger", lambda s: s.wake("operator_input"),
     "wake: trigger: 'operator_input' turns are opened by operator_message()"),
    ("unknown trigger", lambda s: s.wake("cron"),
     "wake: trigger: expected one of"),
    ("tool calls not a list", lambda s: s.assistant_message("x", tool_calls="ls"),  # type: ignore[arg-type]
     "assistant_message: tool_calls: expected a list of ToolCall, got str"),
    ("tool call not a ToolCall", lambda s: s.assistant_message("x", tool_calls=[{"id": 1}]),  # type: ignore[list-item]
     "assistant_message: tool_calls[0]: expected a ToolCall, got dict"),
    ("duplicate call ids", lambda s: s.assistant_message(
        "x", tool_calls=[ToolCall("c", "a"), ToolCall("c", "b")]),
     "assistant_message: tool_calls[1].call_id: duplicate call id 'c'"),
    ("bad call id", lambda _s: ToolCall("c 1", "bash"),
     "ToolCall: call_id: must not contain whitespace"),
    ("bad arguments", lambda _s: ToolCall("c1", "bash", 3),  # type: ignore[arg-type]
     "ToolCall: arguments: expected a JSON string or a mapping, got int"),
    ("result for no call", lambda s: s.tool_result("nope", "x"),
     "tool_result: call_id: no tool call 'nope' is waiting for a result"),
    ("bad tool status", lambda s: s.tool_run("bash", "ls", status="fine"),  # type: ignore[arg-type]
     "tool_run: status: expected one of ok, error, timeout, cancelled, pending, got 'fine'"),
    ("exit code a string", lambda s: s.tool_run("bash", "ls", exit_code="0"),  # type: ignore[arg-type]
     "tool_run: exit_code: expected an integer or None, got str"),
    ("files written a string", lambda s: s.tool_run("bash", "ls", files_written="a.txt"),  # type: ignore[arg-type]
     "tool_run: files_written: expected a list of strings, got str"),
    ("bad side effect", lambda s: s.tool_run("bash", "ls", side_effect="maybe"),  # type: ignore[arg-type]
     "tool_run: side_effect: expected one of none, completed, partial, unknown, got 'maybe'"),
    ("todo done not a bool", lambda s: s.set_work_item("w1", todos={"a": "yes"}),  # type: ignore[dict-item]
     "set_work_item: todos['a']: expected True or False, got str"),
    ("work item status", lambda s: s.set_work_item("w1", status="finished"),  # type: ignore[arg-type]
     "set_work_item: status: expected one of open, active, waiting, blocked, done, abandoned"),
    ("close a wait as open", lambda s: s.close_wait("w1", status="open"),  # type: ignore[arg-type]
     "close_wait: status: expected resolved, cancelled or expired"),
    ("close a wait never opened", lambda s: s.close_wait("w1"),
     "close_wait: wait_id: no wait 'w1' was opened (open it with open_wait)"),
    ("pin a missing ref", lambda s: s.pin("message:m404"),
     "pin: target: 'message:m404' is not in the ledger"),
    ("empty brief", lambda s: s.brief(""), "brief: text: must not be empty"),
    ("brief kind", lambda s: s.brief("x", kind="summary"),  # type: ignore[arg-type]
     "brief: kind: expected one of result, completion_report, progress, ack, got 'summary'"),
    ("budget zero", lambda s: s.next_request(0),
     "next_request: budget_tokens: expected a positive integer, got 0"),
    ("budget a float", lambda s: s.next_request(8192.0),  # type: ignore[arg-type]
     "next_request: budget_tokens: expected a positive integer, got float"),
    ("capabilities a string", lambda s: s.set_environment(capabilities="bash"),  # type: ignore[arg-type]
     "set_environment: capabilities: expected a list of strings, got str"),
    ("import something else", lambda s: s.import_history(42),  # type: ignore[arg-type]
     "import_history: history: cannot read a int as auto"),
]


@pytest.mark.parametrize(("case", "call", "message"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_arguments_fail_at_the_call_naming_the_argument(
        case: str, call: Callable[[holon_ctx.Session], object], message: str) -> None:
    """Each helper refuses a wrong argument with one line naming helper and argument, and
    appends nothing."""
    _refused(call, message)


def _refused(call: Callable[[holon_ctx.Session], object], message: str) -> holon_ctx.Session:
    """A session in which ``call`` raised one line starting with ``message``, appending nothing."""
    s = _session()
    before = s.store.end_pos()
    with pytest.raises(InputError) as info:
        call(s)
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)
    assert s.store.end_pos() == before
    return s


#: A lone UTF-16 surrogate where a helper takes text no UTF-8 ledger holds. Tool arguments and
#: names used to pass the call that gave them and fail later as a raw ``UnicodeEncodeError`` (an
#: announced call's in ``tool_result`` and in every ``close()``, a tool run's in its digest).
LONE_SURROGATES: list[tuple[str, Callable[[holon_ctx.Session], object], str]] = [
    ("call arguments, a mapping value", lambda _s: ToolCall("c1", "cat", {"path": "a\ud800"}),
     "ToolCall: arguments: a lone UTF-16 surrogate '\\ud800'"),
    ("call arguments, a mapping key", lambda _s: ToolCall("c1", "cat", {"\udc00": 1}),
     "ToolCall: arguments: a lone UTF-16 surrogate '\\udc00'"),
    ("call arguments, a string", lambda _s: ToolCall("c1", "cat", '{"p": "\ud800"}'),
     "ToolCall: arguments: a lone UTF-16 surrogate '\\ud800'"),
    ("call name", lambda _s: ToolCall("c1", "c\ud800t"),
     "ToolCall: name: a lone UTF-16 surrogate '\\ud800'"),
    ("tool run arguments", lambda s: s.tool_run("cat", {"p": "\ud800"}, "ok"),
     "tool_run: arguments: a lone UTF-16 surrogate '\\ud800'"),
    ("operator text", lambda s: s.operator_message("hi \udfff"),
     "operator_message: text: a lone UTF-16 surrogate '\\udfff' at character 3"),
    ("an OpenAI history's call arguments", lambda s: s.import_history([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "t1", "type": "function",
            "function": {"name": "cat", "arguments": '{"p": "\ud800"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "ok"}]),
     "import_history: $.args_preview: a lone UTF-16 surrogate '\\ud800'"),
    ("an Anthropic history's tool input", lambda s: s.import_history({"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "cat", "input": {"p": "\ud800"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]}), "import_history: $.args_preview: a lone UTF-16 surrogate '\\ud800'"),
]


@pytest.mark.parametrize(("case", "call", "message"), LONE_SURROGATES,
                         ids=[c[0] for c in LONE_SURROGATES])
def test_a_lone_surrogate_is_refused_where_it_is_given(
        case: str, call: Callable[[holon_ctx.Session], object], message: str) -> None:
    """Text that is not valid Unicode is one-line ``InputError`` at the call that gave it;
    nothing is appended, and the session still records a call and closes."""
    s = _refused(call, message)
    s.assistant_message("reading", tool_calls=[ToolCall("c2", "cat", {"p": "a"})])
    s.close()
    assert [r.status for r in records(s.store) if isinstance(r, Tool)] == [ToolStatus.PENDING]


def test_string_subclasses_are_stored_as_plain_strings() -> None:
    """A str subclass (LangChain's text accessor, numpy's str_) passes as text and is stored;
    it used to fail deep inside the append path."""

    class Text(str):
        pass

    s = open_session(MemoryStore(), compaction=None)
    s.set_environment(guidance=Text("be brief"), capabilities=[Text("bash")])
    s.operator_message(Text("hello"), work_item=Text("wi1"))
    s.set_work_item(Text("wi1"), todos={Text("a"): False}, plan=[Text("b")])
    s.assistant_message(Text("hi"), tool_calls=[ToolCall(Text("c1"), Text("bash"), Text("ls"))])
    s.tool_result(Text("c1"), Text("out"), files_written=[Text("f")])
    assert "hello" in s.next_request(1000).text


def test_requests_need_a_turn_and_a_budget_above_the_framing() -> None:
    """An empty ledger and a budget smaller than the message framing are one-line errors; the
    framing's refusal states a budget above the framing that makes the request."""
    s = open_session(MemoryStore(), compaction=None)
    with pytest.raises(InputError, match="next_request: the ledger holds no turn yet"):
        s.next_request(1000)
    s.operator_message("hi")
    framing = framing_tokens()
    with pytest.raises(holon_ctx.BudgetTooSmallError,
                       match=f"need [0-9]+ tokens, only {framing} available") as refused:
        s.next_request(framing)
    assert refused.value.required_tokens > framing + 1
    assert s.next_request(refused.value.required_tokens).budget_tokens \
        == refused.value.required_tokens


def test_a_closed_session_refuses_appends(tmp_path: Path) -> None:
    """After close(), helpers fail with one line instead of touching a closed store."""
    s = open_session(tmp_path / "a.db", compaction=None)
    s.operator_message("hi")
    s.close()
    with pytest.raises(InputError, match="operator_message: the session is closed"):
        s.operator_message("again")


def _busy_session(store: Any, turns_n: int) -> holon_ctx.Session:
    s = open_session(store, compaction=None)
    s.set_environment(guidance="You are a careful coding agent. " * 20, workspace="/srv/app")
    for i in range(turns_n):
        s.operator_message(f"request {i}: please look at module_{i}.py and fix the bug")
        s.assistant_message(f"checking module_{i}",
                            tool_calls=[ToolCall(f"c{i}", "bash", f"pytest tests/test_{i}.py")])
        s.tool_result(f"c{i}", "\n".join(f"line {k} of output {i}" for k in range(30)),
                      status="error" if i % 3 else "ok", exit_code=1 if i % 3 else 0)
    return s


@pytest.mark.parametrize("budget", [300, 1_000, 4_096, 32_768])
def test_every_request_format_holds_the_budget(budget: int) -> None:
    """text, OpenAI messages and the Anthropic request all measure within the budget, and the
    reported counts are the counter's."""
    s = _busy_session(MemoryStore(), 40)
    request = s.next_request(budget)
    counter = default_counter()
    assert counter.count(request.text) == request.used_tokens <= budget
    assert measure(request.openai_messages, counter) == request.request_tokens <= budget
    assert measure(request.anthropic_request, counter) <= budget
    assert request.manifest["budget_tokens"] == budget
    assert request.manifest["session"]["request_tokens"] == request.request_tokens
    assert request.manifest["current_turn"] == request.current_turn == s.current_turn
    # The manifest's text is what the messages hold; the one-text prompt fences the replies.
    assert "".join(m["content"] or "" for m in request.openai_messages) == \
        request.manifest["text"]


def test_a_request_hides_how_it_was_made() -> None:
    """Request's public attributes are the documented ones: no projection, sections or plan."""
    s = _busy_session(MemoryStore(), 2)
    request = s.next_request(4096)
    public = {n for n in dir(request) if not n.startswith("_")}
    assert public == {"budget_tokens", "text", "used_tokens", "request_tokens", "current_turn",
                      "manifest", "manifest_json", "openai_messages", "anthropic_request",
                      # How it was counted (RFC 0022): for the runtime's logs and observe_usage.
                      "planned_tokens", "safety_factor", "model", "framing", "counter"}
    before = len(request.openai_messages)
    request.openai_messages.append({"role": "user", "content": "x"})
    assert len(request.openai_messages) == before  # each access is a fresh list


def test_compaction_runs_by_itself_and_can_be_told_not_to(tmp_path: Path) -> None:
    """Under the default policy old turns become episodes before a request; with
    compaction=None nothing is archived until compact() is called."""
    from holon_ctx.compaction import has_continuity_state
    from holon_ctx.ledger.episode_store import SqliteEpisodeStore

    policy = holon_ctx.CompactionPolicy(recent_turns=8, every_turns=4)
    auto = open_session(tmp_path / "auto.db", compaction=policy)
    manual = open_session(tmp_path / "manual.db", compaction=None)
    for s in (auto, manual):
        for i in range(30):
            s.operator_message(f"topic {i}: " + " ".join(f"word{i}x{k}" for k in range(6)))
            s.assistant_message(f"answer {i}")
            s.next_request(2000)
    assert SqliteEpisodeStore(tmp_path / "auto.db").count() > 0
    assert has_continuity_state(tmp_path / "auto.db")
    assert SqliteEpisodeStore(tmp_path / "manual.db").count() == 0
    result = manual.compact(policy)
    assert result.archive.archived
    assert SqliteEpisodeStore(tmp_path / "manual.db").count() == len(result.archive.archived)
    auto.close()
    manual.close()


def _forty_turn_chat(session: holon_ctx.Session, budget: int) -> None:
    """A plain conversation of 40 turns: a billing decision early, then website revisions,
    a request before every reply (as a runtime makes them)."""
    def exchange(operator: str, reply: str) -> None:
        session.operator_message(operator)
        session.next_request(budget)
        session.assistant_message(reply)

    exchange("We need a database for the billing service: PostgreSQL or DynamoDB?",
             "PostgreSQL fits: transactions, and logical replication can feed the reporting "
             "replica. Shall I go with PostgreSQL?")
    exchange("Yes. Decision: billing uses PostgreSQL 16 with logical replication to the "
             "reporting replica; DynamoDB is ruled out.",
             "Recorded: billing on PostgreSQL 16 with logical replication.")
    for i in range(37):
        exchange(f"Website navigation bar, revision {i}: try a {['teal', 'coral', 'slate'][i % 3]}"
                 " gradient header with rounded buttons and a sticky layout.",
                 f"Revision {i} is ready: gradient header, 8px rounded buttons, sticky "
                 "navigation, hero banner spacing 48px, Inter 15px typography. " * 3)
    session.operator_message("Back to billing: set up the replication slot as we decided.")


@pytest.mark.parametrize("budget", [2048, 4096])
def test_an_early_decision_stays_reachable_in_a_forty_turn_conversation(budget: int) -> None:
    """With the default compaction a conversation of 40 turns (fewer than a window page) has
    episodes once its budget binds, and the operator's return to the early topic brings the
    decision back into the request through its episode."""
    session = open_session(MemoryStore())
    _forty_turn_chat(session, budget)
    request = session.next_request(budget)
    assert session._upkeep.episodes.count() > 0
    assert "billing uses PostgreSQL 16 with logical replication" in request.text
    shown = [e["ref"] for e in request.manifest["episodes"] if e["representation"] != "omitted"]
    assert shown, "the decision comes back through its episode"
    session.close()


def test_an_unknown_side_effect_blocks_every_later_prompt() -> None:
    """A tool run whose side effect is unknown, once compacted away, still pins a blocking
    notice (governed control state) in the next prompts, on an in-memory ledger too."""
    s = open_session(MemoryStore(),
                     compaction=holon_ctx.CompactionPolicy(recent_turns=4, every_turns=2))
    s.operator_message("deploy to production")
    s.assistant_message("deploying", tool_calls=[ToolCall("d1", "deploy", "prod --canary")])
    s.tool_result("d1", "connection reset", status="timeout", side_effect="unknown")
    for i in range(40):
        s.wake("scheduler_tick", noop=True, label=f"tick {i}")
    text = s.next_request(4000).text
    assert s.compact().archive.archived == ()  # already done before the request
    assert "BLOCKED ON RECONCILIATION" in text
    assert "deploy" in text


def test_a_session_on_the_postgresql_store(pg_url: str, pg_session_key: str) -> None:
    """Any LedgerStore works: on PostgreSQL the session appends, compacts into episodes and
    governed state beside the ledger (same session key), and a reopened session continues."""
    from holon_ctx.postgres import PostgresStore
    from holon_ctx.postgres.episodes import PostgresEpisodeStore

    policy = holon_ctx.CompactionPolicy(recent_turns=4, every_turns=4)
    with open_session(PostgresStore(pg_url, session=pg_session_key), compaction=policy) as s:
        s.operator_message("deploy the canary")
        s.assistant_message("deploying", tool_calls=[ToolCall("d1", "deploy", "canary")])
        s.tool_result("d1", "timed out", status="timeout", side_effect="unknown")
        for i in range(30):
            s.wake("scheduler_tick", noop=True, label=f"tick {i}")
        assert "BLOCKED ON RECONCILIATION" in s.next_request(3000).text
        s.store.close()
    store = PostgresStore(pg_url, session=pg_session_key, create=False)
    with open_session(store, compaction=None) as s:
        s.operator_message("status?")
        assert [t.seq for t in turns(store)][-2:] == [30, 31]
        assert "BLOCKED ON RECONCILIATION" in s.next_request(3000).text
    assert PostgresEpisodeStore(pg_url, session=pg_session_key, create=False).count() > 0


def test_a_session_closes_the_store_it_opened_and_leaves_one_it_was_given(tmp_path: Path) -> None:
    """``open_session(path)`` opened the store and closes it; a store passed in stays the
    caller's: usable after the session closed (issue 23)."""
    given = SqliteStore(tmp_path / "given.db")
    with open_session(given, compaction=None) as s:
        s.operator_message("start")
    assert given.end_pos() > 0  # still open: a closed connection would raise here
    given.close()
    with open_session(str(tmp_path / "opened.db"), compaction=None) as s:
        s.operator_message("start")
        opened = s.store
    assert isinstance(opened, SqliteStore)
    with pytest.raises(sqlite3.ProgrammingError):
        opened.end_pos()
