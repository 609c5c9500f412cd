"""The projector's episode source: recall over an episode store, checked against the ledger.

``Projector(store, episodes=StoreEpisodeSource(episode_store, store))``. Per call it reads: the
eligible prefix (episodes ending before the recent window: no turn is rendered twice), the query
terms' bounded postings, a few candidates by work item, shared links and open items, the ledger's
open waits and the work items of those items, and (only when a pending tool call is open and not
yet settled by an archived record) the unarchived tail's tool runs, through the ledger's
``keyed_events`` index (each record read once per process).
"""

from __future__ import annotations

from typing import Final

import msgspec

from holon_ctx.ledger.answers import answered_waits, keyed_events
from holon_ctx.ledger.questions import asks_question
from holon_ctx.ledger.records import Brief, Message, MessageRole
from holon_ctx.ledger.state import WorkItemState
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.memory.episodes import Episode, Recap
from holon_ctx.memory.index import FormCounts
from holon_ctx.memory.interface import RecalledEpisode, RecallQuery
from holon_ctx.memory.recall import (
    Candidate,
    RecallWeights,
    bm25_scores,
    priority,
    query_links,
    query_terms,
    rank,
    top_text,
)
from holon_ctx.memory.store import EpisodeStore, OpenRow
from holon_ctx.memory.summarizer import with_recaps
from holon_ctx.memory.unresolved import LedgerFacts, is_open, key_work_item, tool_events

__all__ = ["StoreEpisodeSource"]

#: "Every episode stored" as a bound on episode numbers.
_EVERY: Final = 1 << 62


class StoreEpisodeSource:
    """An :class:`~holon_ctx.projection.base.model.EpisodeSource` over an :class:`EpisodeStore`."""

    def __init__(self, episodes: EpisodeStore, ledger: LedgerStore,
                 weights: RecallWeights | None = None, *, as_of_position: bool = False,
                 visible_cap: int | None = None) -> None:
        self.episodes = episodes
        self.ledger = ledger
        #: Recall as of the position projected sees only the episodes archived by then (RFC
        #: 0020): what a session projection needs so a rebuild recalls what the continuing
        #: walk recalled. Off, every episode stored counts (the CLI's previews of an archive
        #: built at once, such as an imported history's).
        self.as_of_position = as_of_position
        #: At most this episode number counts (a request's moment, :meth:`as_of_moment`): a
        #: compaction that ran after the request at its very position is not seen.
        self.visible_cap = visible_cap
        self.weights = weights or RecallWeights()
        #: The last recall's text stage, under every input it read (:meth:`_text_stage`).
        self._last_text: tuple[tuple[object, ...], dict[int, float]] | None = None

    def moment(self, pos: int) -> int | None:
        """What a request at ``pos`` sees of the archive now, as a bound for
        :meth:`as_of_moment` (one read; None when recall is not as of the position)."""
        return self.episodes.archived_by(pos) if self.as_of_position else None

    def as_of_moment(self, cap: int | None) -> StoreEpisodeSource:
        """The same recall over the same stores, seeing no episode past ``cap`` (from
        :meth:`moment`): a request's text view, made later, recalls what its messages did
        (RFC 0024 decision 1, RFC 0020)."""
        if cap is None:
            return self
        return StoreEpisodeSource(self.episodes, self.ledger, self.weights,
                                  as_of_position=self.as_of_position, visible_cap=cap)

    def _visible(self, pos: int) -> int:
        num = self.episodes.archived_by(pos)
        return num if self.visible_cap is None else min(num, self.visible_cap)

    def close(self) -> None:
        """Close the episode store (the ledger belongs to the caller)."""
        self.episodes.close()

    def archived_through(self, before_seq: int, limit_pos: int | None = None) -> int | None:
        num = self.episodes.max_num_before(before_seq)
        if limit_pos is not None and self.as_of_position:
            num = min(num, self._visible(limit_pos))
        if num <= 0:
            return None
        ep = self.episodes.episodes([num]).get(num)
        return None if ep is None else ep.span.last_seq

    def recall(self, query: RecallQuery, limit: int) -> list[RecalledEpisode]:
        store, w = self.episodes, self.weights
        # The archive as of the position projected (RFC 0020): episodes archived later are not
        # recalled, nor counted in the corpus statistics, so a rebuild recalls what the
        # continuing walk recalled.
        visible = self._visible(query.limit_pos) if self.as_of_position else _EVERY
        max_num = min(store.max_num_before(query.window_first_seq), visible)
        if max_num <= 0 or limit <= 0:
            return []
        state = (self.ledger.work_item_state(query.work_item_id, query.limit_pos)
                 if query.work_item_id else None)
        text = query.query_text + ("\n" + state.objective if state is not None else "")
        text_scores = self._text_stage(query_terms(text), visible, max_num, query.limit_pos)
        owner = f"work_item:{query.work_item_id}" if query.work_item_id else None
        same = set(store.by_owner(owner, max_num, w.owner_candidates)) if owner else set()
        shared: dict[int, list[str]] = {}
        for num, key in store.by_links(query_links(query), max_num, w.link_candidates):
            shared.setdefault(num, []).append(key)
        rows: dict[int, list[OpenRow]] = {}
        for row in store.open_rows(max_num, query.limit_pos, w.open_candidates):
            rows.setdefault(row.num, []).append(row)
        base = dict(text_scores)
        for num in same:
            base[num] = base.get(num, 0.0) + w.same_work_item
        for num, links in shared.items():
            base[num] = base.get(num, 0.0) + min(w.shared_link * len(links), w.shared_link_cap)
        chosen, scores, open_by_num = self._rank(query, state, base, rows, limit, max_num)
        text_rank = top_text(text_scores, w.high_relevance_ranks)
        eps = store.episodes(chosen)
        recaps = store.recaps_for([ep.id for ep in eps.values()])
        counts = store.form_counts(chosen)
        out: list[RecalledEpisode] = []
        for num in chosen:
            ep = eps.get(num)
            if ep is None or ep.span.last_seq >= query.window_first_seq:
                continue
            items = open_by_num.get(num, [])
            cand = Candidate(num=num, text_score=text_scores.get(num, 0.0),
                             same_work_item=num in same, links=tuple(sorted(shared.get(num, ()))),
                             open_keys=tuple(k for k, _ in items),
                             pinned=any(p for _, p in items), score=scores[num])
            out.append(self._recalled(ep, cand, text_rank.get(num), recaps.get(ep.id, []),
                                      query.shown, counts.get(num)))
        return out

    def _text_stage(self, qterms: list[str], visible: int, max_num: int,
                    limit_pos: int) -> dict[int, float]:
        """The text scores (:meth:`_text_scores`) with the answers to the best matches raised
        (:meth:`_answers`): read-only to the caller, shared with the next recall of the same
        terms at the same bounds.

        A session's walk recalls the operator's words to decide whether to re-plan
        (``_recall_gap``), and the re-plan it triggers recalls them again for the plan: the same
        terms, the same bounds, the same corpus. The postings read and BM25 are most of a
        recall's CPU (~3 ms of an operator's re-plan at 100k messages), so the second asks
        this memo. Its key is every input of the result: the terms, the bounds (``visible``,
        ``max_num``), the position the answers are read as of (the ledger before it never
        changes), and the corpus totals the scores were read at (an archive that grew or was
        rebuilt since reads other totals now, and is scored afresh). One entry: only a recall
        that follows its twin hits."""
        last = self._last_text
        if last is not None and last[0] == (tuple(qterms), visible, max_num, limit_pos,
                                            self.episodes.corpus()):
            return last[1]
        scores, corpus = self._scores_at(qterms, visible, max_num)
        self._answers(scores, max_num, limit_pos)
        self._last_text = ((tuple(qterms), visible, max_num, limit_pos, corpus), scores)
        return scores

    def _text_scores(self, qterms: list[str], visible: int, max_num: int) -> dict[int, float]:
        """BM25 scores of the episodes before ``max_num`` for the query's terms, with the corpus
        statistics of the episodes visible as of the position projected."""
        return self._scores_at(qterms, visible, max_num)[0]

    def _scores_at(self, qterms: list[str], visible: int,
                   max_num: int) -> tuple[dict[int, float], tuple[int, int]]:
        """:meth:`_text_scores`, and the corpus totals (``corpus()``) they were read at."""
        store = self.episodes
        # The totals and the terms' counts at one moment (``corpus_df``), and what lies past
        # ``visible`` bounded by the episodes that moment counted: each read apart, another
        # runtime's archive committed between them was in one and not the other, and the
        # request scored otherwise than a rebuild at its position (RFC 0020).
        every, total, df = store.corpus_df(qterms)
        moment = (every, total)
        if visible < every:
            docs, total = store.corpus_through(visible)
            df = _df_through(store, df, visible, every)
        else:
            docs = every
        return bm25_scores(qterms, df, docs, total,
                           lambda t, cap: store.postings(t, max_num, cap), self.weights), moment

    def _answers(self, text_scores: dict[int, float], max_num: int, limit_pos: int) -> None:
        """The episode right after a top text match, when it answers it, matches as well as
        ``_ANSWER_SHARE`` of it: it records decisions, or the match ended on the assistant
        asking and it opens with the operator's words. An answer is often worded without the
        words of the question it settles ("OK: RabbitMQ, keep replicas at 3"), and its own
        episode — closed at the new request's words — does not hold them (issue 12, item 8).
        Reads: the followers of at most ``high_relevance_ranks`` matches, and the two turns
        where each match meets its follower."""
        best = top_text(text_scores, self.weights.high_relevance_ranks)
        nums = [num + 1 for num in sorted(best) if num + 1 <= max_num]
        if not nums:
            return
        found = self.episodes.episodes([*nums, *(n - 1 for n in nums)])
        for num in nums:
            ep, asked = found.get(num), found.get(num - 1)
            if ep is None or asked is None:
                continue
            if ep.decisions or self._answered(asked.span.last_seq, ep.span.first_seq, limit_pos):
                share = text_scores[num - 1] * _ANSWER_SHARE
                if share > text_scores.get(num, 0.0):
                    text_scores[num] = share

    def _answered(self, asked_seq: int, first_seq: int, limit_pos: int) -> bool:
        """Turn ``asked_seq`` ends with the assistant asking (a message or brief), and the
        operator speaks first in turn ``first_seq``."""
        question = reply = False
        for stored in self.ledger.records_of_turns(asked_seq, first_seq, limit_pos):
            rec = stored.record
            if stored.turn_seq == asked_seq and (isinstance(rec, Brief) or (
                    isinstance(rec, Message) and rec.role is MessageRole.ASSISTANT)):
                question = asks_question(rec.text)  # the last one the assistant side wrote
            elif stored.turn_seq == first_seq and isinstance(rec, Message) and rec.by_operator:
                reply = True
        return question and reply

    def _rank(self, query: RecallQuery, state: WorkItemState | None, base: dict[int, float],
              rows: dict[int, list[OpenRow]], limit: int, max_num: int,
              ) -> tuple[list[int], dict[int, float], dict[int, list[tuple[str, bool]]]]:
        """Rank with open-item boosts, checking items against the ledger only for episodes that
        make the cut (re-ranking when a check finds an item resolved): O(limit) checks, not
        O(open items)."""
        check = _Checker(self, query, state, rows, max_num)
        verified: dict[int, list[tuple[str, bool]]] = {}
        for round_ in range(_RANK_ROUNDS + 1):
            scores = dict(base)
            pinned: set[int] = set()
            for num, group in rows.items():
                items = verified.get(num)
                live = items if items is not None else [(r.key, r.pinned) for r in group]
                if live:
                    scores[num] = scores.get(num, 0.0) + self.weights.open_unresolved
                    if any(p for _, p in live):
                        pinned.add(num)
            chosen = rank(scores, pinned, limit)
            todo = [n for n in chosen if n in rows and n not in verified]
            if round_ == _RANK_ROUNDS:
                todo = [n for n in rows if n not in verified]  # last resort: check them all
            if not todo:
                break
            for num in todo:
                verified[num] = check.open_items(rows[num])
        return chosen, scores, verified

    def _recalled(self, ep: Episode, cand: Candidate, text_rank: int | None,
                  recaps: list[Recap], shown: frozenset[str],
                  counts: FormCounts | None) -> RecalledEpisode:
        open_keys = frozenset(cand.open_keys)
        prio = priority(cand, text_rank, bool(ep.operator_intents or ep.decisions), self.weights)
        # Records of this episode that the prompt shows on their own (a pinned turn's).
        held = tuple(ref for ref in ep.source_refs if ref in shown) if shown else ()
        # The episode crosses as data; the projection renders (and remembers) its forms.
        return RecalledEpisode(
            ref=ep.ref, covers=ep.covers, score=cand.score, priority=prio,
            reasons=cand.reasons(), episode=with_recaps(ep, recaps), open_keys=open_keys,
            held=held, recaps=msgspec.json.encode(recaps) if recaps else b"", counts=counts)


def _df_through(store: EpisodeStore, df: dict[str, int], visible: int,
                every: int) -> dict[str, int]:
    """The document frequencies ``df`` (of the episodes numbered ``every`` or less, read with
    it: ``corpus_df``) as of the episodes numbered ``visible`` or less: each term's count less
    its postings in between — all among its newest ``every - visible`` postings up to ``every``,
    as an episode holds a term's posting once (bounded by ``every``, not by every episode
    stored: one archived since the counts were read is not in them). Reading every posting of
    each term instead took 10.6 ms a recall at 100k messages (a walk from an older epoch recalls
    at every re-plan: a restart's first request, the text view of a request left unread at
    close, the CLI's previews)."""
    out: dict[str, int] = {}
    for term, n in df.items():
        past = sum(1 for num, _, _ in store.postings(term, every, every - visible)
                   if num > visible)
        if n - past > 0:
            out[term] = n - past
    return out


#: What a decision episode right after a top text match scores, as a share of that match's
#: score (below it: the question's own episode ranks first, its answer next).
_ANSWER_SHARE: Final = 0.9
#: Re-ranking rounds before every open item is checked at once (each round checks <= limit).
_RANK_ROUNDS: Final = 4


class _Checker:
    """Checks open items against the ledger as of the projected turn, reading each fact once."""

    def __init__(self, source: StoreEpisodeSource, query: RecallQuery,
                 state: WorkItemState | None, rows: dict[int, list[OpenRow]],
                 visible: int) -> None:
        self.ledger = source.ledger
        self.episodes = source.episodes
        self.query = query
        self.items: dict[str, WorkItemState | None] = {}
        if state is not None:
            self.items[state.work_item_id] = state
        #: The newest episode the recall may see (the archive as of the query's position).
        self.visible = visible
        self.waits: frozenset[str] | None = None
        self.calls: frozenset[str] | None = None
        self.call_rows = [r for group in rows.values() for r in group
                          if r.key.partition(":")[0] in ("call", "effect") and not r.exact]

    def open_items(self, group: list[OpenRow]) -> list[tuple[str, bool]]:
        return [(row.key, row.pinned) for row in group if self.is_open(row)]

    def is_open(self, row: OpenRow) -> bool:
        # An exact resolution after the projected position leaves the item open then.
        if row.exact:
            return True
        kind = row.key.partition(":")[0]
        if kind == "wait_id":
            if self.waits is None:
                # A wait a task result or an event answered is not open, whether or not a
                # wait record closed it (issue 25, item 2): never "STILL OPEN".
                limit = self.query.limit_pos
                waits = self.ledger.open_waits(limit)
                answered = answered_waits(self.ledger, waits, limit)
                self.waits = frozenset(w.wait_id for w in waits if w.wait_id not in answered)
            facts = LedgerFacts(open_wait_ids=self.waits, work_items={})
        elif kind in ("call", "effect"):
            if self.calls is None:
                self.calls = frozenset(self._tail_resolutions())
            facts = LedgerFacts(open_wait_ids=frozenset(), work_items={},
                                resolved_calls=self.calls)
        else:
            wid = key_work_item(row.key)
            if wid is not None and wid not in self.items:
                self.items[wid] = self.ledger.work_item_state(wid, self.query.limit_pos)
            facts = LedgerFacts(open_wait_ids=frozenset(), work_items=self.items)
        return is_open(row.key, facts)

    def _tail_resolutions(self) -> set[str]:
        """Call keys settled by tool runs after the archival frontier, however far back (the
        ledger's :func:`~holon_ctx.ledger.answers.keyed_events` index: each record read once
        per process; a scan of the newest 512 turns left a call answered before them
        ``STILL OPEN`` while the archiver lagged, issue 25 item 2)."""
        rows = self.call_rows
        if not rows:
            return set()
        last = (self.episodes.episodes([self.visible]).get(self.visible)
                if self.visible < _EVERY else self.episodes.last())
        after = min(r.last_seq for r in rows)
        lo = max(after, last.span.last_seq if last is not None else after) + 1
        # Records of the turns from ``lo`` on sit at or after that turn's record (a record
        # appended later for an older turn is a newer record still, and may answer too).
        start = self.ledger.next_turn_pos(lo - 1)
        if start is None or start >= self.query.limit_pos:
            return set()
        wanted = {r.key: start for r in rows}
        found = keyed_events(self.ledger, "calls", tool_events, wanted, self.query.limit_pos)
        return {key for key, events in found.items() if any(t == "resolve" for _, _, t in events)}
