"""The projector's episode source: recall over an episode store, checked against the ledger.

``Projector(store, episodes=StoreEpisodeSource(episode_store, store))``. Per call it reads: the
eligible prefix (episodes ending before the recent window: no turn is rendered twice), the query
terms' bounded postings, a few candidates by work item, shared links and open items, the ledger's
open waits and the work items of those items, and (only when a pending tool call is open and not
yet settled by an archived record) the unarchived tail of at most :data:`TAIL_TURNS` turns.
"""

from __future__ import annotations

from typing import Final

from holon_ctx.ledger.records import Tool
from holon_ctx.ledger.state import WorkItemState
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.memory.episodes import Episode
from holon_ctx.memory.recall import (
    Candidate,
    RecallWeights,
    bm25_scores,
    priority,
    query_links,
    query_terms,
    rank,
)
from holon_ctx.memory.render import compact_text, full_text, ref_text
from holon_ctx.memory.store import EpisodeStore, OpenRow
from holon_ctx.memory.summarizer import with_recaps
from holon_ctx.memory.unresolved import LedgerFacts, is_open, key_work_item, resolves
from holon_ctx.projection.model import RecalledEpisode, RecallQuery

__all__ = ["TAIL_TURNS", "StoreEpisodeSource"]

#: Most turns after the archival frontier scanned for tool resolutions at recall time.
TAIL_TURNS: Final = 512


class StoreEpisodeSource:
    """An :class:`~holon_ctx.projection.model.EpisodeSource` over an :class:`EpisodeStore`."""

    def __init__(self, episodes: EpisodeStore, ledger: LedgerStore,
                 weights: RecallWeights | None = None) -> None:
        self.episodes = episodes
        self.ledger = ledger
        self.weights = weights or RecallWeights()

    def close(self) -> None:
        """Close the episode store (the ledger belongs to the caller)."""
        self.episodes.close()

    def recall(self, query: RecallQuery, limit: int) -> list[RecalledEpisode]:
        store, w = self.episodes, self.weights
        max_num = store.max_num_before(query.window_first_seq)
        if max_num <= 0 or limit <= 0:
            return []
        state = (self.ledger.work_item_state(query.work_item_id, query.limit_pos)
                 if query.work_item_id else None)
        text = query.query_text + ("\n" + state.objective if state is not None else "")
        qterms = query_terms(text)
        docs, total = store.corpus()
        text_scores = bm25_scores(qterms, store.df(qterms), docs, total,
                                  lambda t, cap: store.postings(t, max_num, cap), w)
        owner = f"work_item:{query.work_item_id}" if query.work_item_id else None
        same = set(store.by_owner(owner, max_num, w.owner_candidates)) if owner else set()
        shared: dict[int, list[str]] = {}
        for num, key in store.by_links(query_links(query), max_num, w.link_candidates):
            shared.setdefault(num, []).append(key)
        open_by_num = self._open_items(query, max_num, state)
        cands = []
        for num in text_scores.keys() | same | shared.keys() | open_by_num.keys():
            keys = open_by_num.get(num, [])
            links = tuple(sorted(shared.get(num, ())))
            t = text_scores.get(num, 0.0)
            score = (t + (w.same_work_item if num in same else 0.0)
                     + min(w.shared_link * len(links), w.shared_link_cap)
                     + (w.open_unresolved if keys else 0.0))
            cands.append(Candidate(num=num, text_score=t, same_work_item=num in same, links=links,
                                   open_keys=tuple(k for k, _ in keys),
                                   pinned=any(p for _, p in keys), score=score))
        chosen = rank(cands, limit)
        by_text = sorted((c for c in cands if c.text_score > 0),
                         key=lambda c: (-c.text_score, -c.num))
        text_rank = {c.num: i for i, c in enumerate(by_text)}
        eps = store.episodes([c.num for c in chosen])
        out: list[RecalledEpisode] = []
        for cand in chosen:
            ep = eps.get(cand.num)
            if ep is None or ep.span.last_seq >= query.window_first_seq:
                continue
            out.append(self._recalled(ep, cand, text_rank.get(cand.num)))
        return out

    def _recalled(self, ep: Episode, cand: Candidate, text_rank: int | None) -> RecalledEpisode:
        shown = with_recaps(ep, self.episodes.recaps(ep.id))
        open_keys = set(cand.open_keys)
        prio = priority(cand, text_rank, bool(ep.operator_intents or ep.decisions), self.weights)
        return RecalledEpisode(
            ref=ep.ref, covers=ep.covers, score=cand.score, priority=prio,
            reasons=cand.reasons(), full_text=full_text(shown, open_keys),
            compact_text=compact_text(shown, open_keys), ref_text=ref_text(shown, open_keys))

    # -- open items ----------------------------------------------------------------------------
    def _open_items(self, query: RecallQuery, max_num: int,
                    state: WorkItemState | None) -> dict[int, list[tuple[str, bool]]]:
        """Episode num → ``(key, pinned)`` of its items still open as of the projected turn."""
        rows = self.episodes.open_rows(max_num, query.limit_pos, self.weights.open_candidates)
        if not rows:
            return {}
        facts = self._facts(query, rows, state)
        out: dict[int, list[tuple[str, bool]]] = {}
        for row in rows:
            # An exact resolution after the projected position leaves the item open then.
            if row.exact or is_open(row.key, facts):
                out.setdefault(row.num, []).append((row.key, row.pinned))
        return out

    def _facts(self, query: RecallQuery, rows: list[OpenRow],
               state: WorkItemState | None) -> LedgerFacts:
        limit = query.limit_pos
        waits = frozenset(w.wait_id for w in self.ledger.open_waits(limit))
        items: dict[str, WorkItemState | None] = {}
        if state is not None:
            items[state.work_item_id] = state
        for row in rows:
            wid = key_work_item(row.key)
            if wid is not None and wid not in items:
                items[wid] = self.ledger.work_item_state(wid, limit)
        calls = [r for r in rows if r.key.partition(":")[0] in ("call", "effect")
                 and r.resolved_pos is None]
        resolved: set[str] = set()
        if calls:
            resolved = self._tail_resolutions(query, {r.key for r in calls},
                                              min(r.last_seq for r in calls))
        return LedgerFacts(open_wait_ids=waits, work_items=items,
                           resolved_calls=frozenset(resolved))

    def _tail_resolutions(self, query: RecallQuery, keys: set[str], after_seq: int) -> set[str]:
        """Keys settled by tool runs in the unarchived tail (bounded to TAIL_TURNS turns)."""
        last = self.episodes.last()
        frontier = last.span.last_seq if last is not None else after_seq
        cur = query.current.turn.seq
        newest = self.ledger.turns_before(cur + 1, TAIL_TURNS, query.limit_pos)
        oldest = newest[-1].turn_seq if newest and newest[-1].turn_seq is not None else cur
        lo = max(frontier + 1, after_seq + 1, oldest)
        found: set[str] = set()
        for stored in self.ledger.records_of_turns(lo, cur, query.limit_pos):
            if isinstance(stored.record, Tool):
                found.update(k for k in resolves(stored.record, stored.ref) if k in keys)
        return found
