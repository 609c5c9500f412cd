"""A helper whose append another writer keeps beating: made again from the ledger each time, up
to a bound, then refused with an error that says so (issue 23: the session path's retry bound).
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from holon_ctx import InputError, open_session
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Record, Turn


class _Beaten(MemoryStore):
    """A store where another writer appends a record just before each of this session's appends
    (``beaten`` of them; then the session's own append goes through)."""

    def __init__(self, beaten: int) -> None:
        super().__init__()
        self.beaten = beaten
        self.tries = 0

    def append(self, records: Iterable[Record], *, source: str = "<append>",
               renumber_turns: bool = False, expect_end: int | None = None) -> int:
        if expect_end is not None:  # the session's append (the other writer's has none)
            self.tries += 1
            if self.tries <= self.beaten:
                # A turn of its own (a record outside any turn needs one open).
                super().append([Turn(id=f"o{self.tries}", seq=self.tries - 1,
                                     trigger="scheduler_tick")], source="other")
        return super().append(records, source=source, renumber_turns=renumber_turns,
                              expect_end=expect_end)


def test_a_helper_beaten_by_other_writers_64_times_is_refused_saying_so() -> None:
    store = _Beaten(beaten=10**6)
    session = open_session(store, compaction=None)
    with pytest.raises(InputError, match="other writers appended before each of 64 tries") \
            as caught:
        session.operator_message("hello")
    assert caught.value.source == "operator_message"
    assert store.tries == 64
    assert store.end_pos() == 64  # the other writer's records only: nothing of the helper's


def test_a_helper_beaten_63_times_appends_on_its_last_try() -> None:
    """Each try starts from the ledger as it is then: the 64th sees the 63 other records and
    its turn lands after them, once."""
    store = _Beaten(beaten=63)
    session = open_session(store, compaction=None)
    ref = session.operator_message("hello")
    assert store.tries == 64
    assert store.end_pos() == 63 + 2  # the other writer's, then the turn and its message
    assert session.current_turn == "turn:t63"
    turn = store.turn("t63")
    assert turn is not None
    assert turn.turn_seq == 63  # after the other writer's turns 0..62
    assert store.get(ref) is not None
    assert ref == "message:m64"  # its id names the position it was minted for
