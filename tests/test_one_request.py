"""One projection per request (issue 24 item 1, RFC 0024): ``Session.next_request`` walks the
ledger once, for the messages a runtime sends; the text layout is made only when it is read, as
of the same ledger position; ``request_tokens``, the manifest and the cache figures describe the
messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from provider_counts import agent_loop

import holon_ctx
from holon_ctx.projection.provider_formats.providers import measure
from holon_ctx.projection.session.session import Layout, SessionProjector


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[Layout]:
    """The layout of every session walk made (each request's call into the walk)."""
    made: list[Layout] = []
    real = SessionProjector._walk_to

    def counted(self: SessionProjector, *args: object, **kwargs: object) -> object:
        made.append(self.layout)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SessionProjector, "_walk_to", counted)
    return made


def test_a_request_is_one_walk_and_the_text_only_when_read(tmp_path: Path,
                                                           walks: list[Layout]) -> None:
    with holon_ctx.open_session(tmp_path / "a.db") as session:
        for step in agent_loop(session, 30, seed=5):
            walks.clear()
            request = session.next_request(3000)
            request.openai_messages  # noqa: B018 - what a runtime reads
            request.anthropic_request  # noqa: B018
            assert request.manifest["session"]["request_tokens"] == request.request_tokens
            assert walks == [Layout.MESSAGES], step
        walks.clear()
        request.text  # noqa: B018 - read once: one more walk, of the text layout
        request.used_tokens  # noqa: B018
        request.text  # noqa: B018
        assert walks == [Layout.TEXT]


def test_the_text_is_as_of_the_messages_position(tmp_path: Path) -> None:
    """Read after the ledger grew, the text shows what it would have shown when the request was
    made: the same turn, the same records as a text projection asked at that position."""
    with holon_ctx.open_session(tmp_path / "a.db") as session:
        loop = agent_loop(session, 25, seed=7)
        for _ in range(20):
            next(loop)
        request = session.next_request(2500)
        position = session.store.end_pos()
        for _ in loop:  # more steps before the runtime reads the text
            pass
        text = request.text
        fresh = SessionProjector(session.store, layout=Layout.TEXT,
                                 episodes=session._upkeep.recall_source(),
                                 control=session._upkeep.control_source()).request(
            budget_tokens=2500, limit_pos=position)
        assert text == fresh.text
        assert request.used_tokens == fresh.used_tokens <= 2500
        assert fresh.manifest.current_turn == request.current_turn
        counter = session._projectors[Layout.MESSAGES].counter
        assert measure(request.openai_messages, counter) == request.request_tokens <= 2500
        # The newest turn's records appended since are in neither view.
        newest = session.current_turn
        assert newest is not None
        assert newest != request.current_turn
        assert newest not in text


def test_a_request_unread_at_close_keeps_its_text(tmp_path: Path, walks: list[Layout]) -> None:
    """A request whose text was not read gets it made when the session closes (its stores are
    needed), as of its own position; a request already read makes no second walk."""
    with holon_ctx.open_session(tmp_path / "a.db") as session:
        session.operator_message("hello")
        first = session.next_request(1000)
        first.text  # noqa: B018 - read: nothing to make at close
        session.operator_message("and again")
        request = session.next_request(1000)
        request.openai_messages  # noqa: B018
        walks.clear()
    assert walks == [Layout.TEXT]
    assert "and again" in request.text
    assert request.used_tokens <= 1000
    with holon_ctx.open_session(tmp_path / "a.db") as again:
        same = again.next_request(1000, at=request.current_turn).text
    assert same == request.text


def test_a_request_the_caller_dropped_is_not_made_at_close(tmp_path: Path,
                                                          walks: list[Layout]) -> None:
    """A runtime that sends the messages and drops each request (never reads ``.text``) closes
    without a walk: the session's own reference to its last request is not the caller's. It
    used to make the last request's text at close, walking the text layout over every turn
    since it was last made (5.3 s for 80 turns of the fleet benchmark's loop, issue 29)."""
    with holon_ctx.open_session(tmp_path / "a.db") as session:
        for _ in agent_loop(session, 12, seed=3):
            session.next_request(3000).openai_messages  # noqa: B018 - sent, then dropped
        session.observe_usage(500)  # the last request is still the default here
        walks.clear()
    assert walks == []


def test_a_turn_reads_the_ledgers_end_once_per_request_and_the_usage_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No re-read of what the session just read or wrote (issue 29; a round trip each on a
    server): a helper appends where its session's own last append left the ledger, without
    reading its end (changed 2026-12-04: it read it once per helper; the append refuses a
    moved end, tests/test_session_writers.py), a reply that opens an agent-step turn included;
    a request reads the end once and the model's usage observations once (the factor and the
    planned budget from one read)."""
    session = holon_ctx.open_session(tmp_path / "agent.db")
    session.operator_message("Fix the failing test.")
    session.assistant_message("Looking.", tool_calls=[holon_ctx.ToolCall("c1", "bash", "ls")])
    session.tool_result("c1", "a.py")
    ends: list[int] = []
    real_end = type(session.store).end_pos

    def end_pos(store: object) -> int:
        ends.append(1)
        return real_end(store)  # type: ignore[arg-type]
    monkeypatch.setattr(type(session.store), "end_pos", end_pos)
    session.assistant_message("Again.", tool_calls=[holon_ctx.ToolCall("c2", "bash", "ls")])
    assert len(ends) == 0
    session.tool_result("c2", "a.py b.py")
    assert len(ends) == 0
    reads: list[str] = []
    real_recent = type(session.calibration.store).recent

    def recent(store: object, model: str, n: int) -> object:
        reads.append(model)
        return real_recent(store, model, n)  # type: ignore[arg-type]
    monkeypatch.setattr(type(session.calibration.store), "recent", recent)
    session.next_request(8192).openai_messages  # noqa: B018 - what a runtime reads
    assert len(reads) == 1
    session.assistant_message("Done.")
    ends.clear()
    request = session.next_request(8192)
    request.openai_messages  # noqa: B018
    assert not request._messages.replanned  # a re-plan reads the end where it plans
    assert len(ends) == 1
    session.close()


def test_a_helper_after_another_writers_append_is_made_again_from_the_ledger(
        tmp_path: Path) -> None:
    """A helper appends where its own session's last append left the ledger, unread. After
    another session appended, that append is refused and the helper made again from the ledger
    as it is; and a call only the ledger knows of (announced by the other session, written
    pending when it closed) is found there instead of refused."""
    first = holon_ctx.open_session(tmp_path / "agent.db")
    first.operator_message("Fix the failing test.")
    other = holon_ctx.open_session(tmp_path / "agent.db")
    other.assistant_message("Looking.", tool_calls=[holon_ctx.ToolCall("c1", "bash", "ls")])
    other.close()  # c1 written as pending
    ref = first.tool_result("c1", "a.py")
    stored = first.store.get(ref)
    assert stored is not None
    assert stored.record.output == "a.py"  # type: ignore[union-attr]
    again = holon_ctx.open_session(tmp_path / "agent.db")
    again.operator_message("Now the docs.")
    # first's state still has the turn of its own message: the reply must join again's turn.
    reply = first.assistant_message("On it.")
    stored = first.store.get(reply)
    assert stored is not None
    assert stored.record.turn_id == again.current_turn[5:]  # type: ignore[union-attr,index]
    with pytest.raises(holon_ctx.InputError, match="c9"):
        first.tool_result("c9", "never announced")  # refused when the ledger has none either
    refs = [s.ref for s in first.store.records_between(0, first.store.end_pos())]
    assert len(refs) == len(set(refs))
    again.close()
    first.close()


def test_a_minted_id_already_taken_is_minted_again_checked(tmp_path: Path) -> None:
    """Ids are minted unchecked (no read per id): a record already holding the id a helper
    mints (an importer names records after its source) makes the append refuse the batch, and
    the helper is made again with each id looked up, as before: nothing lost, no error."""
    from holon_ctx.ledger.records import Message, MessageRole, Turn
    from holon_ctx.ledger.sqlite import SqliteStore

    ledger = SqliteStore(tmp_path / "agent.db")
    # At position 2 a session mints turn t2 and message m3: m3 is taken.
    ledger.append([Turn(id="t0", seq=0, trigger="operator_input"),
                   Message(id="m3", turn_id="t0", role=MessageRole.OPERATOR, text="hello")])
    ledger.close()
    session = holon_ctx.open_session(tmp_path / "agent.db")
    ref = session.operator_message("Go on.")
    assert ref == "message:m3.2"
    assert [s.ref for s in session.store.records_between(0, session.store.end_pos())] == [
        "turn:t0", "message:m3", "turn:t2", "message:m3.2"]
    assert session.operator_message("Next.") == "message:m5"
    session.close()
