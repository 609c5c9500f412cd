"""Where one episode ends and the next begins: boundary rules as a table, applied online.

Theory of operation. Turns arrive in sequence order. A *segment* is the range being grown. For
each new turn the rules of :data:`CUT_BEFORE` are asked, in order, whether the turn starts a new
segment; then the turn joins the (possibly new) segment; then the rules of :data:`CUT_AFTER` are
asked whether the segment ends with this turn. The first rule that fires names the boundary
(``Episode.closed_by``).

Every rule looks only at the turn and the segment it would join, never at earlier segments, so
segmenting from any segment start gives the same ranges as segmenting from the start of the
ledger: archiving a little every turn and rebuilding everything at once agree. A segment closed by
a cut-before rule is known to be closed only once the next turn has been seen: the archiver keeps
that turn as look-ahead and never archives the segment still open at the end of its input.

Plain conversations (no work items) are cut too: by topic (``new_intent``, a new operator request
that shares too few terms with the segment, unless it acts for the segment's own work item, whose
chain it continues) and by length (``max_range``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

import attrs

from holon_ctx.ledger.records import (
    Brief,
    BriefKind,
    ExternalEvent,
    Message,
    MessageRole,
    Outcome,
    TaskResult,
    Wait,
    WaitStatus,
    WorkItem,
    WorkItemStatus,
)
from holon_ctx.ledger.units import TurnUnit
from holon_ctx.memory.terms import content_terms

__all__ = ["CUT_AFTER", "CUT_BEFORE", "RECENT_EDGE", "BoundaryPolicy", "ClosedRange", "Segmenter",
           "TurnFacts"]


@attrs.frozen
class BoundaryPolicy:
    """Tunable limits of the boundary rules (part of an episode's identity: store them)."""

    #: The longest range, in turns (closed range: first and last both count).
    max_range_turns: int = 16
    #: A new request with fewer distinct terms than this continues the segment (short replies).
    topic_min_terms: int = 3
    #: A new request starts a new chain when below this share of its terms occur in the segment.
    topic_overlap: float = 0.25

    def __attrs_post_init__(self) -> None:
        if self.max_range_turns < 1:
            raise ValueError(f"max_range_turns must be >= 1, got {self.max_range_turns}")


@attrs.frozen
class TurnFacts:
    """What the boundary rules know about one turn (derived from its records, nothing else)."""

    turn_id: str
    seq: int
    trigger: str
    work_item_id: str | None
    anchored: bool
    #: Terms of the operator's words in this turn.
    request_terms: frozenset[str]
    #: Terms this turn adds to its segment's vocabulary (operator and assistant words, objectives).
    vocabulary: frozenset[str]
    spawned_by: tuple[str, ...]
    opens_wait: bool
    ends_wait: bool
    completes: bool

    @classmethod
    def of(cls, unit: TurnUnit) -> TurnFacts:
        turn = unit.turn
        request: list[str] = []
        vocabulary: list[str] = []
        spawned: list[str] = []
        opens = turn.outcome == Outcome.WAIT
        ends = False
        completes = turn.outcome == Outcome.COMPLETE
        for stored in unit.records:
            rec = stored.record
            match rec:
                case Message(role=MessageRole.OPERATOR):
                    request.append(rec.text)
                    vocabulary.append(rec.text)
                case Message(role=MessageRole.ASSISTANT):
                    vocabulary.append(rec.text)
                case TaskResult():
                    if rec.spawned_by_turn_id:
                        spawned.append(rec.spawned_by_turn_id)
                    ends = ends or rec.wait_id is not None
                case ExternalEvent():
                    ends = ends or rec.wait_id is not None
                case Wait():
                    opens = opens or rec.status is WaitStatus.OPEN
                    ends = ends or rec.status is not WaitStatus.OPEN
                case WorkItem():
                    if rec.objective:
                        vocabulary.append(rec.objective)
                    completes = completes or rec.status in (
                        WorkItemStatus.DONE, WorkItemStatus.ABANDONED) or bool(
                        rec.completion_report)
                case Brief(kind=BriefKind.COMPLETION_REPORT):
                    completes = True
                case _:
                    pass
        return cls(turn_id=turn.id, seq=turn.seq, trigger=turn.trigger,
                   work_item_id=turn.work_item_id, anchored=turn.anchor_turn_id is not None,
                   request_terms=content_terms("\n".join(request)),
                   vocabulary=content_terms("\n".join(vocabulary)),
                   spawned_by=tuple(spawned), opens_wait=opens, ends_wait=ends,
                   completes=completes)


@attrs.define
class _Segment:
    units: list[TurnUnit] = attrs.Factory(list)
    turn_ids: set[str] = attrs.Factory(set)
    work_item_id: str | None = None
    vocabulary: set[str] = attrs.Factory(set)

    def add(self, unit: TurnUnit, facts: TurnFacts) -> None:
        self.units.append(unit)
        self.turn_ids.add(facts.turn_id)
        if self.work_item_id is None:
            self.work_item_id = facts.work_item_id
        self.vocabulary |= facts.vocabulary


Rule = Callable[[TurnFacts, _Segment, BoundaryPolicy], bool]


def _work_item_switch(f: TurnFacts, seg: _Segment, _: BoundaryPolicy) -> bool:
    return (f.work_item_id is not None and seg.work_item_id is not None
            and f.work_item_id != seg.work_item_id)


def _task_rejoin(f: TurnFacts, seg: _Segment, _: BoundaryPolicy) -> bool:
    return any(t not in seg.turn_ids for t in f.spawned_by)


def _wait_end(f: TurnFacts, _seg: _Segment, _: BoundaryPolicy) -> bool:
    return f.ends_wait


def _new_intent(f: TurnFacts, seg: _Segment, policy: BoundaryPolicy) -> bool:
    if f.trigger != "operator_input" or f.anchored or len(f.request_terms) < policy.topic_min_terms:
        return False
    if f.work_item_id is not None and f.work_item_id == seg.work_item_id:
        return False  # a request for the segment's own work item continues its chain
    shared = len(f.request_terms & seg.vocabulary)
    return shared < policy.topic_overlap * len(f.request_terms)


def _wait_start(f: TurnFacts, _seg: _Segment, _: BoundaryPolicy) -> bool:
    return f.opens_wait


def _completion(f: TurnFacts, _seg: _Segment, _: BoundaryPolicy) -> bool:
    return f.completes


def _max_range(_f: TurnFacts, seg: _Segment, policy: BoundaryPolicy) -> bool:
    return len(seg.units) >= policy.max_range_turns


#: Rules that start a new segment *at* a turn (asked only when the segment is not empty).
CUT_BEFORE: Final[tuple[tuple[str, Rule], ...]] = (
    ("work_item_switch", _work_item_switch),
    ("task_rejoin", _task_rejoin),
    ("wait_end", _wait_end),
    ("new_intent", _new_intent),
)
#: Rules that end the segment *after* a turn.
CUT_AFTER: Final[tuple[tuple[str, Rule], ...]] = (
    ("wait_start", _wait_start),
    ("completion", _completion),
    ("max_range", _max_range),
)


@attrs.frozen
class ClosedRange:
    """A closed segment: its turns (oldest first) and the rule that closed it."""

    units: tuple[TurnUnit, ...]
    closed_by: str

    @property
    def first_seq(self) -> int:
        return self.units[0].turn.seq

    @property
    def last_seq(self) -> int:
        return self.units[-1].turn.seq


#: The name of a range closed at a recent-window edge an explicit archive run asked for
#: (``holon-ctx episodes archive --recent N``; RFC 0029), after every other rule.
RECENT_EDGE: Final = "recent_edge"


class Segmenter:
    """Feed turns in sequence order with :meth:`push`; closed ranges come out as they close.

    ``edges``: sequence numbers of turns after which a range ends when no rule ended it (the
    recent-window edges explicit archive runs chose, RFC 0029): a fact of the archive, kept in
    its episodes' ``closed_by``, that a rebuild reads back so it cuts where the runs cut.
    """

    def __init__(self, policy: BoundaryPolicy | None = None, *,
                 edges: frozenset[int] = frozenset()) -> None:
        self.policy = policy or BoundaryPolicy()
        self.edges = edges
        self._seg = _Segment()

    def push(self, unit: TurnUnit) -> list[ClosedRange]:
        closed: list[ClosedRange] = []
        facts = TurnFacts.of(unit)
        if self._seg.units:
            for code, rule in CUT_BEFORE:
                if rule(facts, self._seg, self.policy):
                    closed.append(ClosedRange(tuple(self._seg.units), code))
                    self._seg = _Segment()
                    break
        self._seg.add(unit, facts)
        for code, rule in CUT_AFTER:
            if rule(facts, self._seg, self.policy):
                closed.append(ClosedRange(tuple(self._seg.units), code))
                self._seg = _Segment()
                break
        else:
            if facts.seq in self.edges:
                closed.append(ClosedRange(tuple(self._seg.units), RECENT_EDGE))
                self._seg = _Segment()
        return closed

    def extend(self, units: Iterable[TurnUnit]) -> list[ClosedRange]:
        out: list[ClosedRange] = []
        for unit in units:
            out.extend(self.push(unit))
        return out

    @property
    def pending(self) -> tuple[TurnUnit, ...]:
        """The turns of the segment not closed yet (oldest first)."""
        return tuple(self._seg.units)
