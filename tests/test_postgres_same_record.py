"""postgres/ledger.py ``_same_record``: whether a record an append was retried for is the one the
ledger holds (RFC 0026: an append whose commit was in flight when the connection died is retried;
a held record the writer filled in is the same record, anything else is a conflict). No server."""

from __future__ import annotations

import pytest

from holon_ctx.ledger.records import Message, MessageRole, Origin, Trust, Turn
from holon_ctx.postgres.ledger import _same_record

HELD = Message(id="m1", turn_id="t1", role=MessageRole.OPERATOR, text="deploy",
               origin=Origin.OPERATOR, trust=Trust.TRUSTED_OPERATOR)


@pytest.mark.parametrize("given", [
    HELD,
    Message(id="m1", role=MessageRole.OPERATOR, text="deploy"),  # the writer filled the rest
    Message(id="m1", turn_id="t1", role=MessageRole.OPERATOR, text="deploy"),
    Message(id="m1", role=MessageRole.OPERATOR, text="deploy", trust=Trust.TRUSTED_OPERATOR),
])
def test_a_record_the_writer_filled_in_is_the_record_held(given: Message) -> None:
    assert _same_record(given, HELD, renumber_turns=False)
    assert _same_record(given, HELD, renumber_turns=True)


@pytest.mark.parametrize("given", [
    Message(id="m1", turn_id="t2", role=MessageRole.OPERATOR, text="deploy"),
    Message(id="m1", role=MessageRole.OPERATOR, text="deploy now"),
    Message(id="m1", role=MessageRole.ASSISTANT, text="deploy"),
    Message(id="m1", role=MessageRole.OPERATOR, text="deploy", origin=Origin.RUNTIME),
    Message(id="m1", role=MessageRole.OPERATOR, text="deploy", trust=Trust.RUNTIME_FACT),
])
def test_a_field_given_otherwise_is_another_record(given: Message) -> None:
    """A field the caller stated is compared, never filled from the held record."""
    assert not _same_record(given, HELD, renumber_turns=False)


def test_a_record_of_another_kind_is_another_record() -> None:
    turn = Turn(id="m1", seq=1, trigger="operator_input")
    assert not _same_record(turn, HELD, renumber_turns=False)
    assert not _same_record(HELD, turn, renumber_turns=True)


def test_a_renumbered_turn_is_the_same_whatever_its_sequence_number() -> None:
    """Only an import that renumbers turns lets the held sequence number stand for the given
    one; the other fields still count."""
    held = Turn(id="t1", seq=7, trigger="operator_input", origin=Origin.OPERATOR)
    given = Turn(id="t1", seq=3, trigger="operator_input")
    assert _same_record(given, held, renumber_turns=True)
    assert not _same_record(given, held, renumber_turns=False)
    assert _same_record(Turn(id="t1", seq=7, trigger="operator_input"), held,
                        renumber_turns=False)
    other = Turn(id="t1", seq=3, trigger="timer")
    assert not _same_record(other, held, renumber_turns=True)
