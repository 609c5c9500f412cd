"""The episode store Protocol: what archival and recall may ask of the storage beside the ledger.

Episodes are numbered ``num`` = 1, 2, … in append order. Archival only ever moves forward through
the ledger, so ``num`` order is also the order of the covered turn ranges: "episodes that end
before turn sequence S" is always a prefix ``num <= max_num_before(S)``. Every read is bounded by
its arguments (a number of postings, candidates or rows), never by the number of episodes.

Implementations: :class:`holon_ctx.ledger.episode_store.SqliteEpisodeStore` (tables prefixed
``episodes`` in the ledger's own database file) and ``MemoryEpisodeStore``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

import attrs

from holon_ctx.memory.episodes import Episode, Recap
from holon_ctx.memory.index import FormCounts, IndexedEpisode

__all__ = ["EpisodeStore", "OpenRow", "Resolution"]


@attrs.frozen
class OpenRow:
    """An unresolved item as stored, with what is known about its resolution."""

    num: int
    episode_id: str
    last_seq: int
    key: str
    kind: str
    pinned: bool
    #: None while no resolution is known. Otherwise a ledger position at or before which the
    #: item was resolved: exactly the resolving record's position + 1 when ``exact``, else an
    #: upper bound (the item was seen resolved by then).
    resolved_pos: int | None
    exact: bool


@attrs.frozen
class Resolution:
    num: int
    key: str
    resolved_pos: int
    exact: bool


@runtime_checkable
class EpisodeStore(Protocol):
    # -- settings ---------------------------------------------------------------------------
    def meta(self) -> dict[str, str]: ...

    def set_meta(self, items: Mapping[str, str]) -> None: ...

    # -- writes (each call is one transaction) ----------------------------------------------
    def append(self, batch: Sequence[IndexedEpisode], *, archived_pos: int | None = None) -> int:
        """Append in order; an episode already stored with the same bytes is skipped (idempotent
        archiving). A different episode for a stored id, or a turn covered twice, raises
        StoreError and nothing of the batch is kept. ``archived_pos`` is the ledger position
        the archive run read up to (RFC 0020; None: not known, as for episodes archived before
        positions were kept, which count as archived before any position). Returns how many
        were appended."""
        ...

    def mark_resolved(self, resolutions: Sequence[Resolution]) -> None: ...

    def add_recap(self, recap: Recap) -> None: ...

    def clear(self) -> None:
        """Drop every episode and what is derived from them (recaps and settings stay)."""
        ...

    # -- reads -------------------------------------------------------------------------------
    def count(self) -> int: ...

    def last(self) -> Episode | None:
        """The newest episode (the archival frontier)."""
        ...

    def get(self, episode_id: str) -> Episode | None: ...

    def page(self, *, limit: int, offset: int = 0) -> list[tuple[int, Episode]]:
        """Episodes oldest first, ``limit`` of them from ``offset``."""
        ...

    def iter_episodes(self) -> Iterator[Episode]: ...

    def max_num_before(self, seq: int) -> int:
        """The largest ``num`` whose episode ends before turn sequence ``seq`` (0 when none)."""
        ...

    def corpus(self) -> tuple[int, int]:
        """``(episodes, total terms)``: BM25's document count and length sum."""
        ...

    def archived_by(self, pos: int) -> int:
        """How many episodes (the prefix ``num <= N``) were archived with the ledger at or
        before position ``pos``: the archive as a projection at ``pos`` sees it (RFC 0020)."""
        ...

    def corpus_through(self, max_num: int) -> tuple[int, int]:
        """``corpus()`` of the episodes ``num <= max_num`` only, read at one moment (what it
        answers depends on ``max_num`` alone, whatever another writer archives meanwhile)."""
        ...

    def df(self, terms: Collection[str]) -> dict[str, int]:
        """Document frequency of each known term."""
        ...

    def corpus_df(self, terms: Collection[str]) -> tuple[int, int, dict[str, int]]:
        """``corpus()`` and ``df(terms)`` read at one moment: the same episodes counted in
        both, whatever another writer archives meanwhile (RFC 0020, "Recall statistics read at
        one moment")."""
        ...

    def postings(self, term: str, max_num: int, cap: int) -> list[tuple[int, int, int]]:
        """``(num, tf, length)`` of the newest ``cap`` episodes with ``num <= max_num`` holding
        ``term``, newest first."""
        ...

    def by_owner(self, owner: str, max_num: int, limit: int) -> list[int]:
        """Newest ``limit`` episode numbers (``<= max_num``) of ``owner``, newest first."""
        ...

    def by_links(self, keys: Collection[str], max_num: int, limit: int) -> list[tuple[int, str]]:
        """``(num, key)`` pairs sharing any of ``keys``, newest first, at most ``limit``."""
        ...

    def open_rows(self, max_num: int, limit_pos: int, limit: int) -> list[OpenRow]:
        """Items not known to be resolved before ``limit_pos`` (resolved_pos None or above it),
        pinned kinds first, then newest first, at most ``limit``."""
        ...

    def episodes(self, nums: Collection[int]) -> dict[int, Episode]: ...

    def form_counts(self, nums: Collection[int]) -> dict[int, FormCounts]:
        """The stored token counts of these episodes' rendered forms (derived data, RFC 0024
        decision 6; episodes archived without them are left out: their forms are counted when
        rendered)."""
        ...

    def recaps(self, episode_id: str) -> list[Recap]: ...

    def recaps_for(self, episode_ids: Collection[str]) -> dict[str, list[Recap]]:
        """Recaps of several episodes in one read (episodes without any are left out)."""
        ...

    def close(self) -> None: ...
