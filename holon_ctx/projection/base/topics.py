"""Topics: which older turns the current input is about, and which of them hold a decision.

Theory of operation (RFC 0030). The *topic* of a projection is the operator's words in the
current turn, cut into terms by the one tokeniser recall uses (:mod:`holon_ctx.memory.terms`:
words for English, character bigrams for Chinese and Japanese). A turn is *relevant to the current
input* when its own words — the operator's, the assistant's, its briefs' — share at least
:data:`MIN_SHARED` distinct terms with it (all of them when the input has fewer). A turn with no
operator words as its current input (an agent step, a task result) has no topic: nothing is
relevant and nothing is reordered, so agent loops plan exactly as before.

Three uses, each a pure function of the turn and the topic, so the order they give is the same
at every budget (monotonicity):

* a relevant turn ranks above an unrelated one of the same class (:func:`topic_rank`), so an
  operator returning to an older topic finds it before a newer topic's detail;
* an unrelated turn holding a decision (a result brief) ranks below unrelated plain turns: an
  abandoned topic's action item is the text most likely to be carried over by mistake;
* a relevant turn holding a decision is *required* (:func:`is_required`): its steps lead its
  tier's first round, before any other older evidence (planner.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Final

from holon_ctx.ledger.records import Brief, Message, MessageRole
from holon_ctx.memory.terms import content_terms
from holon_ctx.projection.base.model import TurnUnit

__all__ = ["MIN_SHARED", "RELEVANT", "abandoned", "holds_decision", "input_topic", "is_relevant",
           "is_required", "topic_rank"]

#: Distinct shared terms that make a turn relevant: one shared word is too often a common one
#: ("tests", "deploy"); two name a subject (a Chinese word of three characters is two bigrams).
MIN_SHARED: Final = 2
#: The manifest reason of a turn ranked up for sharing terms with the current input.
RELEVANT: Final = "relevant_to_current_input"


def input_topic(current: TurnUnit, others: Sequence[TurnUnit] = ()) -> frozenset[str]:
    """The terms of the operator's words in the current turn (empty: no topic), less those
    said in more than half of ``others`` (the turns in view): a word every turn repeats ("turn",
    a project's name) says nothing about which of them the input is about."""
    topic = content_terms("\n".join(
        r.record.text for r in current.records
        if isinstance(r.record, Message) and r.record.by_operator))
    if not topic or len(others) < 4:
        return topic
    seen = Counter(t for u in others for t in _turn_terms(u) & topic)
    return frozenset(t for t in topic if seen[t] * 2 <= len(others))


def _turn_terms(unit: TurnUnit) -> frozenset[str]:
    """The terms of what was said in ``unit``: messages of the operator and the assistant,
    briefs. Tool output and external events are left out: they are not what a topic is about,
    and a log shares words with everything."""
    texts = [r.record.text for r in unit.records
             if (isinstance(r.record, Message)
                 and (r.record.by_operator or r.record.role is MessageRole.ASSISTANT))
             or isinstance(r.record, Brief)]
    return content_terms("\n".join(texts)) if texts else frozenset()


def is_relevant(unit: TurnUnit, topic: frozenset[str]) -> bool:
    """``unit`` shares at least ``min(MIN_SHARED, len(topic))`` distinct terms with ``topic``."""
    if not topic:
        return False
    return len(_turn_terms(unit) & topic) >= min(MIN_SHARED, len(topic))


def holds_decision(unit: TurnUnit) -> bool:
    """``unit`` holds a result brief or a completion report: what was decided or done."""
    return any(isinstance(r.record, Brief) and r.record.reports_result for r in unit.records)


def topic_rank(unit: TurnUnit, topic: frozenset[str]) -> int:
    """0 relevant, 1 unrelated, 2 unrelated and holding a decision; 1 for all without a topic."""
    if not topic:
        return 1
    if is_relevant(unit, topic):
        return 0
    return 2 if holds_decision(unit) else 1


def is_required(unit: TurnUnit, topic: frozenset[str]) -> bool:
    """A decision the current input is about: shown before any other older evidence."""
    return holds_decision(unit) and is_relevant(unit, topic)


def abandoned(unit: TurnUnit, topic: frozenset[str], planned_for: frozenset[str],
              epoch_seq: int) -> bool:
    """``unit`` holds a decision of a topic the operator left: unrelated to the current input's
    ``topic``, while the session's plan ranked it as the input it was made for did
    (``planned_for``: relevant, so first) or never ranked it (appended since the epoch began at
    ``epoch_seq``). A session re-plans (``topic_changed``), so that, as in a stateless plan, its
    full form is the first evidence to go; once the plan was made for the new topic, the turn no
    longer qualifies, so one switch re-plans once."""
    if not topic or not holds_decision(unit) or is_relevant(unit, topic):
        return False
    return unit.turn.seq >= epoch_seq or is_relevant(unit, planned_for)
