"""Recall scoring: BM25 over episode text, plus boosts, with deterministic ties. Pure functions.

Theory of operation. The query is the current turn's trusted text (operator words, task results)
and the current work item's objective, cut into :func:`~holon_ctx.memory.terms.terms` (words for
English, character bigrams for Chinese and Japanese). Each episode ``d`` scores

    bm25(d) = Σ_t idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·len(d)/avglen))
    idf(t)  = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

over the distinct query terms ``t``, plus the boosts of :class:`RecallWeights`: the same work
item, each shared link (a file, wait, task, call or turn the current turn refers to, capped), and
open unresolved items. Ties break on the newer episode, then its id.

Bounded reads. Query terms are taken rarest first (at most ``max_terms``); each reads at most
``postings_per_term`` postings (its newest), and all of them together at most ``postings_total``.
Rare terms decide BM25 rankings; a very common term contributes little and is read only for the
newest episodes. Candidates from work item, links and open items are capped likewise.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Final

import attrs

from holon_ctx.ledger.facts import Priority
from holon_ctx.ledger.records import ExternalEvent, TaskResult, Tool
from holon_ctx.memory.interface import RecallQuery
from holon_ctx.memory.terms import terms

__all__ = [
    "RECORD_KINDS",
    "Candidate",
    "RecallWeights",
    "bm25_scores",
    "priority",
    "query_links",
    "query_terms",
    "rank",
    "top_text",
]

#: Ref kinds of ledger records: a query ref of one of these kinds is a record, not a file path.
RECORD_KINDS: Final = frozenset({"turn", "message", "brief", "task_result", "tool",
                                 "external_event", "work_item", "wait", "environment", "pin",
                                 "episode"})


@attrs.frozen
class RecallWeights:
    """BM25 parameters, boosts and read caps (the table recall runs on)."""

    k1: float = 1.2
    b: float = 0.75
    same_work_item: float = 1.5
    shared_link: float = 1.0
    shared_link_cap: float = 3.0
    open_unresolved: float = 2.0
    #: Episodes with a text match in the top N are HIGH (a relevant earlier decision is kept
    #: like an operator turn would be); the rest are NORMAL unless they hold open items.
    high_relevance_ranks: int = 3
    max_terms: int = 48
    postings_per_term: int = 256
    postings_total: int = 2048
    owner_candidates: int = 16
    link_candidates: int = 64
    open_candidates: int = 64


@attrs.frozen
class Candidate:
    num: int
    text_score: float
    same_work_item: bool
    links: tuple[str, ...]
    open_keys: tuple[str, ...]
    pinned: bool
    score: float

    def reasons(self) -> tuple[str, ...]:
        out = []
        if self.pinned:
            out.append("pinned_unresolved")
        elif self.open_keys:
            out.append("open_unresolved")
        if self.text_score > 0:
            out.append("text_match")
        if self.same_work_item:
            out.append("same_work_item")
        if self.links:
            out.append("shared_refs")
        return tuple(out)


def query_terms(text: str) -> list[str]:
    """Distinct terms of ``text`` in first-occurrence order."""
    return list(dict.fromkeys(terms(text)))


def query_links(query: RecallQuery) -> set[str]:
    """Keys the current turn shares with older ranges (see ``Episode.links``)."""
    keys: set[str] = set()
    for ref in query.refs:
        kind, sep, _ = ref.partition(":")
        if not sep or kind not in RECORD_KINDS:
            keys.add(f"file:{ref}")
    turn = query.current.turn
    if turn.anchor_turn_id:
        keys.add(f"turn:{turn.anchor_turn_id}")
    for stored in query.current.records:
        rec = stored.record
        match rec:
            case TaskResult():
                keys.add(f"task:{rec.task_id}")
                if rec.spawned_by_turn_id:
                    keys.add(f"turn:{rec.spawned_by_turn_id}")
                if rec.wait_id:
                    keys.add(f"wait_id:{rec.wait_id}")
            case ExternalEvent() if rec.wait_id:
                keys.add(f"wait_id:{rec.wait_id}")
            case Tool():
                keys.update(f"file:{p}" for p in rec.files_written)
                if rec.call_id:
                    keys.add(f"call:{rec.call_id}")
            case _:
                pass
    return keys


Postings = Callable[[str, int], Sequence[tuple[int, int, int]]]


def bm25_scores(qterms: Iterable[str], df: Mapping[str, int], docs: int, total_terms: int,
                postings: Postings, w: RecallWeights) -> dict[int, float]:
    """BM25 of every episode the bounded postings reach (``postings(term, cap)``)."""
    if docs <= 0:
        return {}
    avg = max(total_terms / docs, 1.0)
    chosen = sorted((t for t in qterms if df.get(t)), key=lambda t: (df[t], t))[: w.max_terms]
    scores: dict[int, float] = {}
    get = scores.get
    budget = w.postings_total
    k1, b = w.k1, w.b
    norm = k1 * (1.0 - b)
    slope = k1 * b / avg
    for term in chosen:
        if budget <= 0:
            break
        n = df[term]
        weight = math.log(1.0 + (docs - n + 0.5) / (n + 0.5)) * (k1 + 1.0)
        plist = postings(term, min(w.postings_per_term, budget))
        budget -= len(plist)
        for num, tf, length in plist:
            scores[num] = get(num, 0.0) + weight * tf / (tf + norm + slope * length)
    return scores


def rank(scores: Mapping[int, float], pinned: Collection[int], limit: int) -> list[int]:
    """Pinned episodes first (all of them, up to ``limit``), then the best scores above zero.

    Ties break on the newer episode (higher ``num``), so the order never depends on dict order.
    """
    first = sorted(pinned, key=lambda n: (-scores.get(n, 0.0), -n))[:limit]
    room = limit - len(first)
    if room <= 0:
        return first
    taken = set(first)
    rest = heapq.nlargest(room, ((s, n) for n, s in scores.items() if s > 0 and n not in taken))
    return first + [n for _, n in rest]


def top_text(scores: Mapping[int, float], n: int) -> dict[int, int]:
    """The ``n`` best text matches: episode num → rank (0 best), ties to the newer episode."""
    best = heapq.nlargest(n, ((s, num) for num, s in scores.items() if s > 0))
    return {num: i for i, (_, num) in enumerate(best)}


def priority(candidate: Candidate, text_rank: int | None, has_substance: bool,
             w: RecallWeights) -> Priority:
    """PINNED for open pinned items, HIGH for other open items or a top text match holding
    operator intents or decisions, else NORMAL."""
    if candidate.pinned:
        return Priority.PINNED
    if candidate.open_keys:
        return Priority.HIGH
    if text_rank is not None and text_rank < w.high_relevance_ranks and has_substance:
        return Priority.HIGH
    return Priority.NORMAL
