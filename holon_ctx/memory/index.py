"""What a store keeps beside each episode so recall reads a bounded amount: terms, links, open items.

:func:`index_episode` is pure: the store persists its output as it is. ``terms`` are the term
frequencies of :func:`episode_text` (BM25's ``tf``), ``length`` its number of terms (BM25's
``dl``), ``links`` the keys later turns may share (the episode's turns and its ``links`` field),
and ``open_items`` one row per unresolved item, to be checked against the ledger at recall time.

``forms`` (:class:`FormCounts`): token counts of the episode's rendered forms. A re-plan that
recalls an episode no process has rendered yet spent most of that episode's cost tokenizing its
full form chunk by chunk (~1,900 tokens: RFC 0024 decision 6). The counts are a
pure function of two things only: a chunk's text and the counter. So they are stored
*content-addressed*: per episode, one row of ``(key of a chunk's text, tokens)`` pairs under the
counter's identity, written when the episode is archived (the session's compaction renders the
forms once, :func:`holon_ctx.projection.rendering.episode_forms.derive_form_counts`) and read back
by recall in any process. A reader renders the forms as before and takes a chunk's count from
the row only when its text's key is there and the row's counter is the renderer's; any other
chunk (a claim now ``STILL OPEN``, a record another turn holds, a merged recap, text written by
a newer renderer) is counted afresh. Nothing stored can make a request differ from one rendered
without it: a stale entry is never looked up, because its key is that of a text no longer
written, and a row of another tokenizer is ignored whole.

Packing: ``_PAIR`` records, each an 8-byte BLAKE2b digest of the chunk's UTF-8 text and its
count as an unsigned 32-bit integer (~70 pairs, under 1 KB, per episode). A wrong count would
need a new chunk's digest to equal one of the row's ~70: a 64-bit digest makes that ~2⁻⁵⁸.
"""

from __future__ import annotations

import hashlib
import struct
from collections import Counter
from collections.abc import Mapping
from typing import Final

import attrs

from holon_ctx.memory.episodes import Episode, Field
from holon_ctx.memory.terms import terms
from holon_ctx.memory.unresolved import KINDS, OpenKind

__all__ = ["FormCounts", "IndexedEpisode", "OpenItem", "chunk_key", "episode_text", "index_episode",
           "pack_counts", "unpack_counts"]


@attrs.frozen
class OpenItem:
    """One unresolved item of an episode, as the store indexes it."""

    key: str
    kind: str
    pinned: bool
    ref: str


_PAIR: Final = struct.Struct("<8sI")


def chunk_key(text: str) -> bytes:
    """The key a chunk's count is stored under: 8 bytes of BLAKE2b over its UTF-8 text."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def pack_counts(counts: Mapping[bytes, int]) -> bytes:
    """``counts`` (chunk key → tokens) as stored, in key order (the same counts, the same bytes)."""
    return b"".join(_PAIR.pack(key, n) for key, n in sorted(counts.items()))


def unpack_counts(data: bytes) -> dict[bytes, int]:
    return dict(_PAIR.iter_unpack(data))


@attrs.frozen
class FormCounts:
    """An episode's stored form counts: ``counter`` the identity of the counter that made them
    (``tiktoken:cl100k_base``), ``data`` the packed pairs (:func:`pack_counts`)."""

    counter: str
    data: bytes

    def table(self, counter: str) -> dict[bytes, int] | None:
        """The counts, when they were made by ``counter``; None for another tokenizer's."""
        return unpack_counts(self.data) if counter == self.counter else None


@attrs.frozen
class IndexedEpisode:
    episode: Episode
    #: term → frequency, in first-occurrence order.
    terms: dict[str, int]
    length: int
    links: tuple[str, ...]
    open_items: tuple[OpenItem, ...]
    #: Token counts of the episode's rendered forms, when the archiver was given a way to make
    #: them (derived data: :mod:`holon_ctx.memory.index`); None stores none.
    forms: FormCounts | None = None


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
