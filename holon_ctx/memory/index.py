"""What a store keeps beside each episode so recall reads a bounded amount: terms, links, open items.

:func:`index_episode` is pure: the store persists its output as it is. ``terms`` are the term
frequencies of :func:`episode_text` (BM25's ``tf``), ``length`` its number of terms (BM25's
``dl``), ``links`` the keys later turns may share (the episode's turns and its ``links`` field),
and ``open_items`` one row per unresolved item, to be checked against the ledger at recall time.
"""

from __future__ import annotations

from collections import Counter

import attrs

from holon_ctx.memory.episodes import Episode, Field
from holon_ctx.memory.terms import terms
from holon_ctx.memory.unresolved import KINDS, OpenKind

__all__ = ["IndexedEpisode", "OpenItem", "episode_text", "index_episode"]


@attrs.frozen
class OpenItem:
    """One unresolved item of an episode, as the store indexes it."""

    key: str
    kind: str
    pinned: bool
    ref: str


@attrs.frozen
class IndexedEpisode:
    episode: Episode
    #: term → frequency, in first-occurrence order.
    terms: dict[str, int]
    length: int
    links: tuple[str, ...]
    open_items: tuple[OpenItem, ...]


def episode_text(episode: Episode) -> str:
    """The text recall scores: every claim's words and quotes, field by field."""
    parts: list[str] = []
    for field in Field:
        for claim in episode.field(field):
            parts.append(claim.text)
            if claim.quote:
                parts.append(claim.quote)
    return "\n".join(parts)


def index_episode(episode: Episode) -> IndexedEpisode:
    tokens = terms(episode_text(episode))
    counts = Counter(tokens)
    links = tuple(dict.fromkeys([*(f"turn:{t}" for t in episode.turn_ids), *episode.links]))
    items = tuple(
        OpenItem(key=c.key, kind=c.kind,
                 pinned=KINDS[OpenKind(c.kind)].pinned if c.kind in OpenKind._value2member_map_
                 else False,
                 ref=c.refs[0])
        for c in episode.unresolved if c.key)
    return IndexedEpisode(episode=episode, terms=dict(counts), length=len(tokens), links=links,
                          open_items=items)
