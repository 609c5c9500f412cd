"""projection/session/session_state.py on its own: the policy's bounds, where a request shows a ref, the
checkpoint blocks, the heading a turn joins the history with, and what parts cost (issue 23)."""

from __future__ import annotations

import pytest
from projection_builders import LedgerBuilder, memory_store, random_ledger
from session_helpers import walk

from holon_ctx.errors import InputError
from holon_ctx.ledger.records import Message, MessageRole, Outcome, Turn
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.ledger.units import TurnUnit
from holon_ctx.projection.base.framing import ANTHROPIC, Framing
from holon_ctx.projection.provider_formats.native import Part, Role, text_part
from holon_ctx.projection.rendering.render import Renderer
from holon_ctx.projection.session.session import SessionProjector
from holon_ctx.projection.session.session_state import (
    Layout,
    SessionPolicy,
    SessionRequest,
    checkpoint_turn,
    entry_heading,
    is_reply,
    opens_block,
    parts_cost,
)
from holon_ctx.tokens import default_counter


@pytest.mark.parametrize(("field", "value"), [
    ("checkpoint_turns", 1), ("low_water", 0.05), ("low_water", 0.95), ("entry_share", 0.01),
    ("entry_share", 1.0), ("cache_read", 0.001), ("cache_read", 1.24),
])
def test_a_policy_at_each_bound_is_accepted(field: str, value: float) -> None:
    """The bounds are closed (``cache_read`` strictly between 0 and ``cache_write``)."""
    assert getattr(SessionPolicy(**{field: value}), field) == value


@pytest.mark.parametrize(("field", "value"), [
    ("checkpoint_turns", 0), ("low_water", 0.049), ("low_water", 0.951), ("entry_share", 0.0099),
    ("entry_share", 1.01), ("cache_read", 0.0), ("cache_read", 1.25), ("cache_write", 0.1),
])
def test_a_policy_past_a_bound_is_refused_naming_its_field(field: str, value: float) -> None:
    with pytest.raises(InputError) as caught:
        SessionPolicy(**{field: value})
    assert caught.value.path == ("cache_read" if field == "cache_write" else field)


def _request(parts: list[Part], *, prefix: int, frozen: int, has_tail: bool) -> SessionRequest:
    return SessionRequest(
        layout=Layout.TEXT, budget_tokens=100, used_tokens=10, request_tokens=10,
        parts=tuple(parts), prefix_count=prefix, frozen_count=frozen, history_end=len(parts) - 1,
        cached_tokens=0, tail_tokens=1, epoch=0, replanned=False, replan_reason=None, text="",
        make_manifest=lambda: None, has_tail=has_tail)  # type: ignore[arg-type, return-value]


def test_where_names_the_part_of_the_request_that_shows_a_ref() -> None:
    """Stable prefix, frozen history, appended records, the tail; None for a ref not shown (the
    first part holding the ref answers)."""
    parts = [text_part("env", 1, ["environment:e1"]), text_part("t1", 1, ["turn:t1"]),
             text_part("t2", 1, ["turn:t2", "message:m2"]), text_part("t3", 1, ["turn:t3"]),
             text_part("state", 1, ["work_item:w1", "turn:t3"])]
    request = _request(parts, prefix=1, frozen=3, has_tail=True)
    assert request.where("environment:e1") == "stable_prefix"
    assert request.where("turn:t1") == "frozen_history"
    assert request.where("message:m2") == "frozen_history"
    assert request.where("turn:t3") == "appended"
    assert request.where("work_item:w1") == "current_state"
    assert request.where("turn:t9") is None


def test_where_without_a_tail_calls_the_last_part_appended() -> None:
    """A whole epoch's request (RFC 0025) may end without a tail: its last part is history."""
    parts = [text_part("env", 1, ["environment:e1"]), text_part("t1", 1, ["turn:t1"]),
             text_part("t2", 1, ["turn:t2"])]
    assert _request(parts, prefix=1, frozen=2, has_tail=False).where("turn:t2") == "appended"
    assert _request(parts, prefix=1, frozen=2, has_tail=True).where("turn:t2") == "current_state"
    assert _request(parts, prefix=0, frozen=0, has_tail=True).where("environment:e1") == "appended"


def _turns(n: int) -> LedgerBuilder:
    ledger = LedgerBuilder()
    for i in range(n):
        ledger.chat(f"step {i}", f"done {i}")
    return ledger


@pytest.mark.parametrize(("turns", "block", "first_seq"), [
    (1, 4, 1), (3, 4, 1), (4, 4, 4), (7, 4, 4), (8, 4, 8), (9, 4, 8), (12, 4, 12),
    (5, 1, 5), (10, 3, 9), (20, 8, 16), (20, 30, 1),
])
def test_the_checkpoint_is_the_first_turn_of_the_latest_turns_block(turns: int, block: int,
                                                                    first_seq: int) -> None:
    """Blocks are ``seq // block``; a block with no earlier turn in the ledger starts at its
    oldest turn (turn numbers start at 1 here). Walks several pages when the block is long."""
    store = _turns(turns).store()
    found = checkpoint_turn(store, store.end_pos(), block).record
    assert isinstance(found, Turn)
    assert found.seq == first_seq


def test_the_checkpoint_is_found_as_of_an_earlier_position() -> None:
    ledger = _turns(10)
    store = ledger.store()
    end = next(s.pos for s in store.records_between(0, store.end_pos())
               if isinstance(s.record, Turn) and s.record.seq == 7)  # the turn of seq 7 excluded
    found = checkpoint_turn(store, end, 4).record
    assert isinstance(found, Turn)
    assert found.seq == 4


def test_no_checkpoint_in_a_ledger_without_turns() -> None:
    store = LedgerBuilder().store()
    with pytest.raises(InputError, match="no turns"):
        checkpoint_turn(store, store.end_pos(), 4)


@pytest.mark.parametrize(("seq", "opens"), [(1, True), (2, False), (3, False), (4, True), (5, False),
                                       (8, True)])
def test_a_turn_opens_a_block_when_the_turn_before_it_is_in_another(seq: int, opens: bool) -> None:
    """Read from the store (no previous turn known) or from the walk's previous turn: the same."""
    store = _turns(9).store()
    turns = {s.record.seq: s for s in store.records_between(0, store.end_pos())
             if isinstance(s.record, Turn)}
    turn = turns[seq].record
    assert isinstance(turn, Turn)
    assert opens_block(store, turn, store.end_pos(), None, 4) is opens
    if seq > 1:
        before = turns[seq - 1]
        assert isinstance(before.record, Turn)
        unit = TurnUnit(stored=before, records=())
        assert opens_block(store, turn, store.end_pos(), unit, 4) is opens


def test_a_turn_whose_predecessor_is_past_the_limit_opens_a_block() -> None:
    """The store is read only before ``limit``: with nothing there, the turn opens a block."""
    store = _turns(3).store()
    turn = next(s for s in store.records_between(0, store.end_pos())
                if isinstance(s.record, Turn) and s.record.seq == 2)
    assert isinstance(turn.record, Turn)
    assert opens_block(store, turn.record, 0, None, 4) is True
    assert opens_block(store, turn.record, store.end_pos(), None, 4) is False


def _heading(turn: Turn, previous: Turn | None = None) -> list[str]:
    counter = default_counter()
    r = Renderer(counter, counter.identity)
    return [b.text for b in entry_heading(r, turn, f"turn:{turn.id}", previous)]


def test_a_heading_states_trigger_anchor_work_item_outcome_and_label() -> None:
    turn = Turn(id="t2", seq=2, trigger="external_event", anchor_turn_id="t1",
                work_item_id="w1", outcome=Outcome.RESULT, label="CI finished")
    lines = _heading(turn)
    assert lines[0].rstrip("\n").endswith(
        "turn:t2 · external_event · continues turn:t1 · work item w1 · outcome result")
    assert "CI finished" in lines[1]
    assert len(lines) == 2


def test_a_heading_after_a_turn_of_the_same_trigger_anchor_and_work_item_is_the_ref_alone() -> None:
    """An agent loop's steps say those once (RFC 0019); the outcome still shows."""
    above = Turn(id="t1", seq=1, trigger="agent_step", anchor_turn_id="t0", work_item_id="w1")
    same = Turn(id="t2", seq=2, trigger="agent_step", anchor_turn_id="t0", work_item_id="w1",
                outcome=Outcome.ERROR)
    assert _heading(same, above)[0].rstrip("\n").endswith("turn:t2 · outcome error")
    assert "agent_step" not in _heading(same, above)[0]
    for changed in ({"trigger": "tick"}, {"anchor_turn_id": "t9"}, {"work_item_id": "w2"}):
        fields = {"trigger": "agent_step", "anchor_turn_id": "t0", "work_item_id": "w1", **changed}
        other = Turn(id="t1", seq=1, **fields)  # type: ignore[arg-type]
        assert "agent_step" in _heading(same, other)[0], changed


def test_parts_cost_counts_text_tokens_or_messages_with_their_framing() -> None:
    """Text: the parts' text tokens. Messages: content, calls and the framing between roles,
    an empty part adding nothing and not changing the role before the next one."""
    framing = Framing(ANTHROPIC, default_counter())  # a user part after a user one: a block
    user = Part(role=Role.USER, text="abc", text_tokens=7, content="abc", content_tokens=2)
    empty = Part(role=Role.ASSISTANT, text="", text_tokens=0, content="", content_tokens=0)
    reply = Part(role=Role.ASSISTANT, text="ok", text_tokens=5, content="ok", content_tokens=1)
    parts = [user, empty, user, reply]
    assert parts_cost(parts, None, Layout.TEXT, framing) == 7 + 0 + 7 + 5
    expected = (framing.between(None, Role.USER) + 2 + framing.between(Role.USER, Role.USER) + 2
                + framing.between(Role.USER, Role.ASSISTANT) + 1)
    assert parts_cost(parts, None, Layout.MESSAGES, framing) == expected
    after_user = (framing.between(Role.USER, Role.USER) + 2
                  + framing.between(Role.USER, Role.USER) + 2
                  + framing.between(Role.USER, Role.ASSISTANT) + 1)
    assert parts_cost(parts, Role.USER, Layout.MESSAGES, framing) == after_user
    assert expected > after_user  # a new message costs more than a block of the current one


def test_recent_turns_after_appends_add_the_appended_records_and_their_tokens() -> None:
    """Between re-plans the manifest's recent turns are the frozen ones, then each record
    appended since, in ledger order; their tokens are the frozen count plus what the appended
    parts cost. The sections the tail states (work item, refs, current input) are not listed;
    the tail is, last, with its tokens."""
    store = memory_store(random_ledger(11, 60).records)
    order = {s.ref: s.pos for s in store.records_between(0, store.end_pos())}
    projector = SessionProjector(store, layout=Layout.TEXT)
    base: tuple[list[str], int] | None = None
    others: dict[str, tuple[list[str], int]] = {}
    grew = 0
    for request in walk(projector, 6000):
        manifest = request.manifest
        session = manifest.session
        assert session is not None
        names = [s.name for s in manifest.sections]
        assert not {"work_item", "work_refs", "current_input"} & set(names)
        assert names[-1] == "current_state"
        assert manifest.sections[-1].used_tokens == request.tail_tokens
        recent = next(s for s in manifest.sections if s.name == "recent_turns")
        appended = session["appended_records"]
        assert isinstance(appended, int)
        tail = 1 if request.has_tail else 0
        appended_cost = sum(p.text_tokens
                            for p in request.parts[request.frozen_count:len(request.parts) - tail])
        frozen = (recent.selected[:len(recent.selected) - appended],
                  recent.used_tokens - appended_cost)
        unchanged = {s.name: (s.selected, s.used_tokens) for s in manifest.sections
                     if s.name not in ("recent_turns", "current_state")}
        if request.replanned or base is None:
            base, others = frozen, unchanged
            continue
        assert frozen == base, "the frozen part's figures do not move between re-plans"
        assert unchanged == others, "appends join the recent turns only"
        new = recent.selected[len(recent.selected) - appended:]
        assert [order[ref] for ref in new] == sorted(order[ref] for ref in new)
        assert all(order[ref] < request.limit_pos for ref in new)
        grew = max(grew, appended)
    assert grew >= 10


def test_appended_turns_say_their_trigger_unless_the_turn_above_said_the_same() -> None:
    """Each turn joining the history is compared with the turn whose heading is right above it
    (RFC 0019): a new trigger, anchor or work item is said; a repeat is the ref alone. The
    first turn of the epoch has none above it and says all."""
    b = LedgerBuilder()
    b.chat("deploy the service", "starting")
    b.turn("timer")
    b.note("checked CI")
    b.turn("timer")
    b.note("checked CI again")
    b.chat("status?", "still running")
    b.turn("x-agent-step", anchor="t1")
    b.assistant("step one")
    b.turn("x-agent-step", anchor="t1")
    b.assistant("step two")
    store = b.store()
    requests = list(walk(SessionProjector(store, layout=Layout.TEXT), 8000))
    assert [r.replanned for r in requests] == [True] + [False] * 5  # every later turn appended
    headings = [line for line in requests[-1].text.split("\n") if line.startswith("### turn:")]
    assert headings == ["### turn:t1 · operator_input", "### turn:t4 · timer", "### turn:t6",
                        "### turn:t8 · operator_input",
                        "### turn:t11 · x-agent-step · continues turn:t1", "### turn:t13"]


@pytest.mark.parametrize(("role", "reply"), [(MessageRole.ASSISTANT, True),
                                             (MessageRole.OPERATOR, False),
                                             (MessageRole.SYSTEM, False)])
def test_only_the_models_message_is_a_reply(role: MessageRole, reply: bool) -> None:
    """Whatever way the roles sort (``assistant`` sorts first), and never a record of another kind."""
    stored = StoredRecord(pos=3, ref="message:m1", turn_seq=1, tokens=2,
                          record=Message(id="m1", turn_id="t1", role=role, text="ok"))
    assert is_reply(stored) is reply
    turn = StoredRecord(pos=2, ref="turn:t1", turn_seq=1, tokens=1,
                        record=Turn(id="t1", seq=1, trigger="operator_input"))
    assert is_reply(turn) is False


def test_blocks_are_compared_by_value_past_the_small_integers() -> None:
    """Block numbers above 256 are not shared int objects: turn 601 is in turn 600's block of
    two (both 300), read from the store and from the walk alike."""
    ledger = LedgerBuilder()
    for i in range(602):
        ledger.turn("timer")
        ledger.note(f"tick {i}")
    store = ledger.store()
    turns = {s.record.seq: s for s in store.records_between(0, store.end_pos())
             if isinstance(s.record, Turn)}
    turn, before = turns[601].record, turns[600]
    assert isinstance(turn, Turn)
    assert opens_block(store, turn, store.end_pos(), None, 2) is False
    assert opens_block(store, turn, store.end_pos(), TurnUnit(stored=before, records=()), 2) is False
