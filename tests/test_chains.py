"""Current-chain membership (holon_ctx/projection/base/chains.py), decided newest first by rule.

Turns are hand-built and fed to a ChainTracker as the projection does (newest first); each test
names the rule that links a turn, or the rule that keeps it out.
"""

from __future__ import annotations

from holon_ctx.ledger.records import (
    ExternalEvent,
    Record,
    TaskResult,
    TaskStatus,
    Turn,
    Wait,
    WaitStatus,
)
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.projection.base.chains import ChainTracker, chain_links
from holon_ctx.projection.base.model import TurnUnit


def unit(tid: str, seq: int, *records: Record, anchor: str | None = None,
         work_item: str | None = None) -> TurnUnit:
    turn = Turn(id=tid, seq=seq, trigger="task_result", anchor_turn_id=anchor,
                work_item_id=work_item)
    return TurnUnit(stored=StoredRecord(pos=seq * 10, ref=f"turn:{tid}", record=turn, tokens=0,
                                        turn_seq=seq),
                    records=tuple(StoredRecord(pos=seq * 10 + i + 1,
                                               ref=f"{type(r).__struct_config__.tag}:{r.id}",
                                               record=r, tokens=0, turn_seq=seq)
                                  for i, r in enumerate(records)))


def feed(tracker: ChainTracker, *units: TurnUnit) -> dict[str, str | None]:
    """Feed newest first; the rule each turn got (None: not in the chain)."""
    return {u.turn.id: tracker.feed(u) for u in sorted(units, key=lambda u: -u.turn.seq)}


def test_links_by_anchor_task_spawn_and_wait() -> None:
    result = TaskResult(id="r1", task_id="k", status=TaskStatus.SUCCESS, spawned_by_turn_id="t1",
                        wait_id="w")
    event = ExternalEvent(id="e1", source="ci", text="green", wait_id="ci")
    assert chain_links(unit("t9", 9, result, event, anchor="t5")) == [
        ("anchor", "t5"), ("task_spawn", "t1"), ("wait_match", "w"), ("wait_match", "ci")]


def test_the_anchor_and_spawning_turn_join_and_their_links_are_followed() -> None:
    """The current turn's anchor joins by `anchor`; a turn that anchor was spawned by joins by
    `task_spawn` (links of chain members are followed); an unlinked turn stays out."""
    cur = unit("t5", 5, anchor="t4")
    t4 = unit("t4", 4, TaskResult(id="r", task_id="k", status=TaskStatus.SUCCESS,
                                  spawned_by_turn_id="t2"))
    got = feed(ChainTracker(cur, None), t4, unit("t3", 3), unit("t2", 2))
    assert got == {"t4": "anchor", "t3": None, "t2": "task_spawn"}


def test_a_wait_match_links_the_newest_earlier_turn_that_opened_the_wait() -> None:
    """An event resolving wait `ci` links the newest earlier turn that opened it — not an older
    one, and not a turn that only mentions it."""
    cur = unit("t9", 9, ExternalEvent(id="e", source="ci", text="green", wait_id="ci"))
    opened_new = unit("t6", 6, Wait(id="w2", wait_id="ci", status=WaitStatus.OPEN))
    opened_old = unit("t3", 3, Wait(id="w1", wait_id="ci", status=WaitStatus.OPEN))
    closed = unit("t7", 7, Wait(id="w3", wait_id="ci", status=WaitStatus.RESOLVED))
    got = feed(ChainTracker(cur, None), opened_new, opened_old, closed)
    assert got == {"t7": None, "t6": "wait_match", "t3": None}


def test_the_current_work_item_joins_by_its_rule() -> None:
    cur = unit("t9", 9, work_item="wi1")
    got = feed(ChainTracker(cur, "wi1"), unit("t8", 8, work_item="wi1"),
               unit("t7", 7, work_item="wi2"), unit("t6", 6))
    assert got == {"t8": "work_item", "t7": None, "t6": None}


def test_a_linked_turn_of_another_work_item_is_chain_evidence_but_its_links_are_not_followed(
        ) -> None:
    """Linked by the anchor and acting for another work item: the current work needs it, so it
    is in the chain (RFC 0018); what it links stays out, and an unlinked turn of that item too."""
    cur = unit("t9", 9, anchor="t8", work_item="wi1")
    other = unit("t8", 8, anchor="t5", work_item="wi2")
    got = feed(ChainTracker(cur, "wi1"), other, unit("t6", 6, work_item="wi2"), unit("t5", 5))
    assert got == {"t8": "anchor", "t6": None, "t5": None}


def test_membership_does_not_depend_on_how_deep_the_window_is_read() -> None:
    """Feeding more older turns never changes the rule of a turn already decided."""
    cur = unit("t9", 9, anchor="t7")
    t7 = unit("t7", 7, anchor="t4")
    shallow = feed(ChainTracker(cur, None), t7, unit("t8", 8))
    deep = feed(ChainTracker(cur, None), t7, unit("t8", 8), unit("t4", 4), unit("t1", 1))
    assert {k: deep[k] for k in shallow} == shallow
    assert deep["t4"] == "anchor"


def test_peek_decides_like_feed_without_changing_the_tracker() -> None:
    """peek gives the rule feed would, for a turn read out of order, and leaves no trace."""
    cur = unit("t9", 9, anchor="t4", work_item="wi1")
    tracker = ChainTracker(cur, "wi1")
    anchor, mate, stranger = (unit("t4", 4, work_item="wi1"), unit("t3", 3, work_item="wi1"),
                              unit("t2", 2, work_item="wi2"))
    assert (tracker.peek(anchor), tracker.peek(mate), tracker.peek(stranger)) == (
        "anchor", "work_item", None)
    assert tracker.chain == {"t9": "current"}
    assert tracker.peek(cur) == "current"
    waiting = ChainTracker(unit("t9", 9, ExternalEvent(id="e", source="ci", text="x",
                                                       wait_id="ci")), None)
    assert waiting.peek(unit("t5", 5, Wait(id="w", wait_id="ci", status=WaitStatus.OPEN))) == \
        "wait_match"
    assert waiting.peek(unit("t5", 5, Wait(id="w", wait_id="ci",
                                           status=WaitStatus.RESOLVED))) is None
    linked_other = ChainTracker(unit("t9", 9, anchor="t4", work_item="wi1"), "wi1")
    assert linked_other.peek(unit("t4", 4, work_item="wi2")) == "anchor"
    assert linked_other.peek(unit("t3", 3, work_item="wi2")) is None
