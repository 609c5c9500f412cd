"""Announced tool calls are durable (RFC 0008 decision 5): an assistant message carries the calls
it announced, so a runtime killed between the reply and the results, restarted, records them as
an uninterrupted one would have, and two Sessions on one ledger share them.

Each scenario is run twice, interrupted and not, and the two ledgers must be the same records,
byte for byte (ids are ledger positions, so any record more, less or elsewhere shows).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from holon_ctx import Session, ToolCall, open_session
from holon_ctx.errors import InputError, LedgerFormatError
from holon_ctx.ledger.codec import MAX_LINE_BYTES, encode_record
from holon_ctx.ledger.importer import export_jsonl, import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import (
    AnnouncedCall,
    Message,
    MessageRole,
    Record,
    SideEffect,
    Tool,
    ToolStatus,
    Turn,
)

ROOT = Path(__file__).resolve().parent.parent

#: Where a ledger lives, per backend: a function of the test's tmp_path and a name.
Opener = Callable[[str], Session]


@contextlib.contextmanager
def sessions(kind: str, tmp_path: Path, request: pytest.FixtureRequest,
             **options: Any) -> Iterator[Opener]:
    """``opener(name)`` opens a Session (with ``options``) on the ledger ``name`` of store
    ``kind`` (each call a new Session object on the same ledger: a SQLite file, a PostgreSQL
    session key, one MemoryStore); they are closed at the end."""
    opened: list[Session] = []
    memories: dict[str, MemoryStore] = {}
    if kind == "postgres":
        url = request.getfixturevalue("pg_url")
        key = request.getfixturevalue("pg_session_key")

    def open_one(name: str) -> Session:
        if kind == "sqlite":
            session = open_session(tmp_path / f"{name}.db", **options)
        elif kind == "postgres":
            session = open_session(url, session_key=f"{key}-{name}", **options)
        else:
            session = open_session(memories.setdefault(name, MemoryStore()), **options)
        opened.append(session)
        return session

    try:
        yield open_one
    finally:
        for session in opened:
            session.close()


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """:func:`sessions` of each store kind, with the default policy."""
    with sessions(request.param, tmp_path, request) as open_one:
        yield open_one


def _lines(session: Session) -> list[str]:
    """The ledger as canonical JSONL lines (what an export writes)."""
    return [encode_record(r).decode() for r in session.store.iter_records()]


def announce(session: Session) -> None:
    """The reply with two calls, as the model made them."""
    session.operator_message("Deploy release 4.2 to production, then check its health.")
    session.assistant_message("Deploying 4.2, and checking the health endpoint.", tool_calls=[
        ToolCall("call_deploy", "bash", {"cmd": "deploy --release 4.2 --env prod"}),
        ToolCall("call_health", "http_get", '{"url": "https://payments.internal/health"}')])


def announce_and_finish(session: Session) -> None:
    announce(session)
    finish(session)


def finish(session: Session) -> None:
    """One result comes back; the other call is still out when the operator speaks again."""
    session.tool_result("call_deploy", "release 4.2 rolled out to 12/12 hosts",
                        side_effect="completed")
    session.operator_message("Any news on the health check?")


# -- a real crash ---------------------------------------------------------------------------------
CRASHING_RUNTIME = """
import sys, time
sys.path.insert(0, sys.argv[1])
import holon_ctx
from test_announced_calls import announce
where, key = sys.argv[2], sys.argv[3]
session = holon_ctx.open_session(where, session_key=key) if key else holon_ctx.open_session(where)
announce(session)
print("announced", flush=True)
time.sleep(600)
"""


def kill_when(script: str, line: str, *args: str) -> None:
    """Run ``script`` (``sys.argv[1]`` is the tests directory, then ``args``) in a new process
    and SIGKILL it as soon as it prints ``line``."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.Popen([sys.executable, "-c", script, str(ROOT / "tests"), *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == f"{line}\n", child.communicate()
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_runtime_killed_between_the_reply_and_its_results_records_them_after_a_restart(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """SIGKILL right after ``assistant_message`` acknowledged the reply: the restarted runtime's
    ``tool_result`` lands in the call's turn, and the call still out when the next turn opens
    is written ``pending``, exactly as an uninterrupted runtime writes them (on main the
    restarted ``tool_result`` was refused, and the unanswered call never reached the ledger)."""
    if backend == "sqlite":
        where, key = str(tmp_path / "crashed.db"), ""

        def reopen(name: str) -> Session:
            return open_session(tmp_path / f"{name}.db")
    else:
        where, key = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_session_key")

        def reopen(name: str) -> Session:
            return open_session(where, session_key=key if name == "crashed" else f"{key}-{name}")
    kill_when(CRASHING_RUNTIME, "announced", where, key)
    restarted = reopen("crashed")
    uninterrupted = reopen("clean")
    try:
        finish(restarted)
        announce(uninterrupted)
        finish(uninterrupted)
        assert _lines(restarted) == _lines(uninterrupted)
        pending = [r for r in restarted.store.iter_records()
                   if isinstance(r, Tool) and r.status is ToolStatus.PENDING]
        assert [(t.call_id, t.tool_name, t.turn_id) for t in pending] == [
            ("call_health", "http_get", "t0")]
    finally:
        restarted.close()
        uninterrupted.close()


# -- restarts and other Sessions, in process -------------------------------------------------------
def _same_run(opener: Opener, interrupted: Callable[[Opener], Session],
              steps: Callable[[Session], None]) -> None:
    """The ledger ``interrupted`` leaves equals the one ``steps`` leaves in one Session."""
    left = interrupted(opener)
    clean = opener("clean")
    steps(clean)
    assert _lines(left) == _lines(clean)


def test_a_session_reopened_without_a_close_takes_the_results(opener: Opener) -> None:
    """The process died with the calls out (no ``close``, which would have written them
    ``pending``): the reopened Session records one result and writes the other ``pending``."""
    def interrupted(open_: Opener) -> Session:
        announce(open_("run"))  # never closed: what a crash leaves
        restarted = open_("run")
        finish(restarted)
        return restarted

    _same_run(opener, interrupted, announce_and_finish)


def test_a_late_result_after_a_restart_lands_in_the_calls_turn(opener: Opener) -> None:
    """The turn closed with a call out (its ``pending`` record written), then the runtime
    restarted: the late result is the call's second record, in the call's turn, as in an
    uninterrupted Session (on main the reopened Session did not know the call)."""
    def late(session: Session) -> None:
        session.tool_result("call_health", "HTTP 200 {\"status\": \"ok\"}")

    def steps(session: Session) -> None:
        announce_and_finish(session)
        late(session)

    def interrupted(open_: Opener) -> Session:
        first = open_("run")
        announce(first)
        finish(first)
        restarted = open_("run")
        late(restarted)
        return restarted

    _same_run(opener, interrupted, steps)
    records = list(opener("run").store.iter_records())
    health = [r for r in records if isinstance(r, Tool) and r.call_id == "call_health"]
    assert [(t.status, t.turn_id) for t in health] == [(ToolStatus.PENDING, "t0"),
                                                       (ToolStatus.OK, "t0")]


def test_one_session_announces_and_another_records_the_result(opener: Opener) -> None:
    """A worker pool: the announcing Session's call is recorded by another Session on the same
    ledger, and the announcing one, catching up, neither writes it ``pending`` nor takes its
    result again."""
    def interrupted(open_: Opener) -> Session:
        announcer, worker = open_("run"), open_("run")
        announce(announcer)
        worker.tool_result("call_deploy", "release 4.2 rolled out to 12/12 hosts",
                           side_effect="completed")
        announcer.operator_message("Any news on the health check?")
        with pytest.raises(InputError, match="call 'call_deploy' has its result already"):
            announcer.tool_result("call_deploy", "again")
        return announcer

    _same_run(opener, interrupted, announce_and_finish)


def test_another_session_closing_the_turn_writes_the_calls_pending(opener: Opener) -> None:
    """The other Session opens the next turn while the announcer's calls are out: it writes them
    ``pending`` (it read them from the ledger), and the announcer's late result still lands."""
    def steps(session: Session) -> None:
        announce(session)
        session.operator_message("Stop the rollout.")
        session.tool_result("call_deploy", "rollout stopped at 5/12 hosts", status="cancelled",
                            side_effect="partial")

    def interrupted(open_: Opener) -> Session:
        announcer, other = open_("run"), open_("run")
        announce(announcer)
        other.operator_message("Stop the rollout.")
        announcer.tool_result("call_deploy", "rollout stopped at 5/12 hosts",
                              status="cancelled", side_effect="partial")
        return announcer

    _same_run(opener, interrupted, steps)
    tools = [r for r in opener("run").store.iter_records() if isinstance(r, Tool)]
    assert [(t.call_id, t.status, t.side_effect) for t in tools] == [
        ("call_deploy", ToolStatus.PENDING, None), ("call_health", ToolStatus.PENDING, None),
        ("call_deploy", ToolStatus.CANCELLED, SideEffect.PARTIAL)]


def test_a_call_id_announced_before_a_restart_is_not_announced_again(tmp_path: Path) -> None:
    """The reopened Session knows the waiting call, so a reply reusing its id is refused, as in
    the Session that announced it."""
    db = tmp_path / "agent.db"
    announce(open_session(db))
    restarted = open_session(db)
    with pytest.raises(InputError, match=r"tool_calls\[0\]\.call_id: duplicate call id "
                                         "'call_health'"):
        restarted.assistant_message("Checking again.",
                                    tool_calls=[ToolCall("call_health", "http_get", "{}")])
    restarted.close()


def test_a_reply_stores_its_calls_and_a_reply_without_calls_is_the_line_it_was() -> None:
    """The message record carries the calls as announced (mapping arguments as canonical JSON);
    without calls the field is left out of the line."""
    session = open_session(MemoryStore())
    session.operator_message("Look around.")
    plain = session.assistant_message("Nothing to run.")
    called = session.assistant_message("Listing.", tool_calls=[
        ToolCall("c1", "bash", {"cmd": "ls", "all": True}), ToolCall("c2", "read_file", "{}")])
    lines = {ref: json.loads(encode_record(session.store.get(ref).record))  # type: ignore[union-attr]
             for ref in (plain, called)}
    assert "tool_calls" not in lines[plain]
    assert lines[called]["tool_calls"] == [
        {"call_id": "c1", "name": "bash", "arguments": '{"all": true, "cmd": "ls"}'},
        {"call_id": "c2", "name": "read_file", "arguments": "{}"}]
    session.close()


def test_a_reply_whose_calls_overflow_its_line_is_refused_naming_the_arguments() -> None:
    """The calls are in the reply's line, so their arguments count towards its 4 MiB: an
    oversize one is refused naming the call's arguments, and nothing is appended."""
    session = open_session(MemoryStore())
    session.operator_message("Write the fixture file.")
    end = session.store.end_pos()
    huge = "x" * (MAX_LINE_BYTES + 1)
    with pytest.raises(InputError, match=r"^assistant_message: tool_calls\[1\]\.arguments: the "
                                         "record's ledger line would be"):
        session.assistant_message("Writing it.", tool_calls=[
            ToolCall("c1", "mkdir", "fixtures"), ToolCall("c2", "write_file", huge)])
    assert session.store.end_pos() == end
    with pytest.raises(InputError, match="no tool call 'c2' is waiting"):
        session.tool_result("c2", "written")
    session.close()


# -- what a request shows ---------------------------------------------------------------------------
def test_requests_are_those_of_the_same_ledger_without_the_announcements() -> None:
    """Announced calls are not rendered with their reply: a call is shown once, by its ``tool``
    record (its result, or ``pending`` when its turn closed), so every prompt and count is what
    it was before the messages carried their calls (docs/prompt-format.md)."""
    session = open_session(MemoryStore())
    announce(session)
    asked_while_out = session.next_request(8192)
    finish(session)
    records = list(session.store.iter_records())
    stripped: list[Record] = [
        Message(id=r.id, origin=r.origin, trust=r.trust, turn_id=r.turn_id, role=r.role,
                text=r.text) if isinstance(r, Message) else r for r in records]
    assert stripped != records
    requests = []
    for ledger in (records, stripped):
        store = MemoryStore()
        store.append(ledger)
        other = open_session(store)
        requests.append(other.next_request(8192))
    assert requests[0].text == requests[1].text
    assert requests[0].openai_messages == requests[1].openai_messages
    assert requests[0].anthropic_request == requests[1].anthropic_request
    assert requests[0].used_tokens == requests[1].used_tokens
    assert "call_deploy" not in asked_while_out.text
    session.close()


# -- records built in Python -------------------------------------------------------------------------
@pytest.mark.parametrize(("message", "problem"), [
    (Message(id="m1", turn_id="t1", role=MessageRole.OPERATOR, text="run it",
             tool_calls=[AnnouncedCall(call_id="c1", name="deploy")]),
     "$.tool_calls: only an assistant message announces tool calls, got role 'operator'"),
    (Message(id="m1", turn_id="t1", role=MessageRole.ASSISTANT, text="on it",
             tool_calls=[{"call_id": "c1", "name": "bash"}]),  # type: ignore[list-item]
     "$.tool_calls[0]: expected a AnnouncedCall, got dict"),
    (Message(id="m1", turn_id="t1", role=MessageRole.ASSISTANT, text="on it",
             tool_calls=[AnnouncedCall(call_id="c1", name="a"), AnnouncedCall(call_id="c1",
                                                                              name="b")]),
     "$.tool_calls[1].call_id: duplicate call id 'c1' in this message"),
])
def test_a_bad_announcement_built_in_python_is_refused_and_nothing_appended(
        message: Message, problem: str) -> None:
    store = MemoryStore()
    turn = Turn(id="t1", seq=0, trigger="operator_input")
    with pytest.raises(LedgerFormatError) as refused:
        store.append([turn, message])
    assert problem in str(refused.value)
    assert store.end_pos() == 0


def test_an_announcement_round_trips_through_jsonl_and_reads_past_its_own_x_fields(
        tmp_path: Path) -> None:
    """Export, import, export: the same bytes; a runtime's ``x-…`` field in a call is read past,
    as on a record."""
    src = tmp_path / "in.jsonl"
    call = {"call_id": "c1", "name": "bash", "arguments": "ls -la", "x-span": 7}
    src.write_text("\n".join(json.dumps(r, separators=(",", ":")) for r in [
        {"v": 1, "type": "turn", "id": "t1", "seq": 0, "trigger": "operator_input"},
        {"v": 1, "type": "message", "id": "m1", "turn_id": "t1", "role": "operator",
         "text": "list it"},
        {"v": 1, "type": "message", "id": "m2", "turn_id": "t1", "role": "assistant",
         "text": "listing", "tool_calls": [call]}]) + "\n", encoding="utf-8")
    first, second = MemoryStore(), MemoryStore()
    import_jsonl(src, first)
    out = tmp_path / "out.jsonl"
    with out.open("wb") as f:
        export_jsonl(first, f)
    import_jsonl(out, second)
    assert [encode_record(r) for r in second.iter_records()] == out.read_bytes().splitlines(
        keepends=True)
    stored = second.get("message:m2")
    assert stored is not None
    assert isinstance(stored.record, Message)
    assert stored.record.tool_calls == [AnnouncedCall(call_id="c1", name="bash",
                                                      arguments="ls -la")]


def test_the_announcer_keeps_its_calls_however_many_turns_others_append(opener: Opener) -> None:
    """A worker pool whose other workers open turns while this one runs its tool: the ledger is
    reloaded from its latest two turns, and the announcing Session's own calls stay waiting
    (found by the four-process writer test: 'no tool call ... is waiting' after others' turns).
    The result lands in the call's turn, after the ``pending`` record the turn's closing wrote."""
    announcer, others = opener("pool"), opener("pool")
    announce(announcer)
    for k in range(4):
        others.wake("timer")
        others.operator_message(f"Status of job {k}?")
    announcer.tool_result("call_deploy", "release 4.2 rolled out to 12/12 hosts",
                          side_effect="completed")
    announcer.tool_result("call_health", '{"status": "ok"}')
    tools = [r for r in opener("pool").store.iter_records() if isinstance(r, Tool)]
    assert [(t.call_id, t.status, t.turn_id) for t in tools] == [
        ("call_deploy", ToolStatus.PENDING, "t0"), ("call_health", ToolStatus.PENDING, "t0"),
        ("call_deploy", ToolStatus.OK, "t0"), ("call_health", ToolStatus.OK, "t0")]
