"""One projection per request (issue 24 item 1, RFC 0024): ``Session.next_request`` walks the
ledger once, for the messages a runtime sends; the text layout is made only when it is read, as
of the same ledger position; ``request_tokens``, the manifest and the cache figures describe the
messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from provider_counts import agent_loop

import holon_ctx
from holon_ctx.projection.providers import measure
from holon_ctx.projection.session import Layout, SessionProjector


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


def test_a_turn_reads_the_ledgers_end_once_per_helper_and_the_usage_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No re-read of what the session just read (issue 29; a round trip each on a server): a
    reply that opens an agent-step turn reads the ledger's end once, as every helper does, and
    a request reads the model's usage observations once (the factor and the planned budget
    from one read)."""
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
    assert len(ends) == 1
    ends.clear()
    session.tool_result("c2", "a.py b.py")
    assert len(ends) == 1
    reads: list[str] = []
    real_recent = type(session.calibration.store).recent

    def recent(store: object, model: str, n: int) -> object:
        reads.append(model)
        return real_recent(store, model, n)  # type: ignore[arg-type]
    monkeypatch.setattr(type(session.calibration.store), "recent", recent)
    session.next_request(8192).openai_messages  # noqa: B018 - what a runtime reads
    assert len(reads) == 1
    session.close()
