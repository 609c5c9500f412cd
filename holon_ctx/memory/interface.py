"""What the projection asks episode memory and what it gets back: the recall interface.

Declared here, on memory's side, because memory implements it and sits below the projection in
the layer order (RFC 0028); :mod:`holon_ctx.projection.base.model` re-exports the names.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from holon_ctx.ledger.facts import Priority
from holon_ctx.ledger.units import TurnUnit
from holon_ctx.memory.episodes import Episode
from holon_ctx.memory.index import FormCounts

__all__ = ["EpisodeSource", "RecallQuery", "RecalledEpisode"]


@attrs.frozen
class RecallQuery:
    """What episode recall may know about the turn being projected (a bounded view)."""

    current: TurnUnit
    #: Episodes must end before this turn sequence (the projector passes the current turn's: a
    #: recalled episode stands for the turns it covers, wherever they are).
    window_first_seq: int
    work_item_id: str | None
    limit_pos: int
    #: Trusted and runtime text of the current turn and its anchor, for relevance scoring.
    query_text: str
    #: Refs and file paths visible in the view (for shared-ref boosts).
    refs: frozenset[str]
    #: Refs the prompt shows on their own (pinned turns and their records): an episode holding
    #: one names it instead of quoting its text a second time.
    shown: frozenset[str] = frozenset()


@attrs.frozen
class RecalledEpisode:
    """An episode offered to the planner, as data: the projection renders its forms
    (:mod:`holon_ctx.projection.rendering.episode_forms`), memory writes no prompt text."""

    ref: str
    covers: tuple[str, str]
    score: float
    priority: Priority
    reasons: tuple[str, ...]
    #: The episode as shown: the stored one with its accepted recaps merged (summarizer).
    episode: Episode
    #: What recall found still open as of the projected turn (None: not checked; each
    #: unresolved item then reads "open at range end").
    open_keys: frozenset[str] | None
    #: Records of the episode the prompt shows on their own (a pinned turn's): named, not quoted.
    held: tuple[str, ...] = ()
    #: The recaps merged into ``episode``, encoded (b"" for none): with the episode's id and
    #: digest, everything its forms depend on besides ``open_keys`` and ``held``.
    recaps: bytes = b""
    #: The token counts of the episode's forms stored when it was archived (derived data, keyed
    #: by each chunk's text and the counter: :mod:`holon_ctx.memory.index`); None: none.
    #: They change no byte of any form, only how much of it is tokenized again.
    counts: FormCounts | None = None


class EpisodeSource(Protocol):
    """Where the projector gets episode memory from (see holon_ctx.memory)."""

    def recall(self, query: RecallQuery, limit: int) -> list[RecalledEpisode]: ...

    def archived_through(self, before_seq: int, limit_pos: int | None = None) -> int | None:
        """The last turn sequence number the archive covers among the episodes that end before
        ``before_seq`` (None when none does): turns up to it are represented by episodes. With
        ``limit_pos``, among the episodes archived at or before that ledger position only."""
        ...
