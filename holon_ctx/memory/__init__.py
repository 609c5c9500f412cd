"""Episode memory: archive aged-out turn ranges into provenance-carrying episodes, recall them.

The pure core of issue 4 (see ``docs/episodes.md`` and ``rfcs/0003-episodes.md``)::

    terms        tokeniser shared by BM25 and topic boundaries (words; CJK bigrams)
    episodes     the Episode and Recap records (msgspec, versioned) and their digest
    boundaries   where ranges end: rules as tables, applied online
    builder      the deterministic builder: a closed range in, an Episode out
    unresolved   open-item kinds, keys and what resolves them
    summarizer   the optional Summarizer Protocol and its probe check
    index        what a store keeps beside an episode for bounded recall
    store        the EpisodeStore Protocol (implementations: holon_ctx.ledger.episode_store)
    archiver     which ranges aged out; archive, rebuild, verify
    recall       BM25 + boosts, deterministic ranking
    interface    RecallQuery, RecalledEpisode (an episode crosses to the projection as data)
    source       the projector's EpisodeSource over a store

An episode's prompt forms (full, compact, ref) are written by the projection
(``holon_ctx.projection.rendering.episode_forms``): memory writes no prompt markup of its own.

Nothing here opens a file or a database: stores and the ledger come in as arguments.
"""

from __future__ import annotations

from holon_ctx.memory.archiver import ArchivePolicy, Archiver, ArchiveReport, RebuildReport
from holon_ctx.memory.boundaries import BoundaryPolicy, Segmenter
from holon_ctx.memory.builder import FieldBudget, build_episode
from holon_ctx.memory.episodes import Claim, Episode, Field, Recap, RecapStatus, Span
from holon_ctx.memory.recall import RecallWeights
from holon_ctx.memory.source import StoreEpisodeSource
from holon_ctx.memory.store import EpisodeStore
from holon_ctx.memory.summarizer import RecapClaim, RecapDraft, Summarizer

__all__ = [
    "ArchivePolicy",
    "ArchiveReport",
    "Archiver",
    "BoundaryPolicy",
    "Claim",
    "Episode",
    "EpisodeStore",
    "Field",
    "FieldBudget",
    "RebuildReport",
    "RecallWeights",
    "Recap",
    "RecapClaim",
    "RecapDraft",
    "RecapStatus",
    "Segmenter",
    "Span",
    "StoreEpisodeSource",
    "Summarizer",
    "build_episode",
]
