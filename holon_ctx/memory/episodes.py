"""The Episode record: an immutable, versioned digest of a closed range of turns, with provenance.

An episode covers the turns ``span.first_seq ..= span.last_seq`` (a *closed* range: both ends
are covered) and the records they own that were appended before the turn after the range began.
Its id is a function of that range (``e<first>-<last>``), its ``digest`` is the SHA-256 of the
canonical JSONL lines (:func:`holon_ctx.ledger.codec.encode_record`) of those records in append
order, so anyone holding the ledger can check an episode, and rebuilding gives the same bytes.

What the range said and did is kept in six separate fields of :class:`Claim` lists. Every claim
names the ref(s) it came from. ``text`` is written by the builder from runtime facts and holds no
untrusted text except sanitised one-line previews; ``quote`` is text copied verbatim (within a
field budget) from ``refs[0]``, with that record's ``origin`` and ``trust``: renderers fence every
quote that is not the operator's own words. Model-written text (assistant messages, a summariser's
recap) only ever lands in ``model_inferences``.

Schema evolution: ``v`` is the format version. Fields may be added with defaults; a change of
meaning bumps ``v``. Decoding is strict (unknown fields are refused): an episode store is derived
data that holon_ctx itself writes, so drift means a bug or tampering.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from enum import StrEnum
from typing import Final

import msgspec

from holon_ctx.ledger.codec import encode_record
from holon_ctx.ledger.records import Record

__all__ = [
    "EPISODE_FORMAT_VERSION",
    "EPISODE_REF_KIND",
    "RUNTIME_GENERATOR",
    "Claim",
    "Episode",
    "Field",
    "Recap",
    "RecapStatus",
    "Span",
    "decode_episode",
    "decode_episode_shared",
    "decode_recap",
    "encode_episode",
    "encode_recap",
    "episode_id",
    "episode_ref",
    "parse_episode_id",
    "source_digest",
]

EPISODE_FORMAT_VERSION: Final = 1
EPISODE_REF_KIND: Final = "episode"
#: ``generated_by`` of an episode made by the deterministic builder (no model involved).
RUNTIME_GENERATOR: Final = "runtime"


class Field(StrEnum):
    """The claim fields of an episode, in the order they are rendered."""

    OPERATOR_INTENTS = "operator_intents"
    DECISIONS = "decisions"
    RESULTS = "results"
    ARTIFACT_TRAIL = "artifact_trail"
    UNRESOLVED = "unresolved"
    MODEL_INFERENCES = "model_inferences"


class Claim(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """One statement in an episode field, naming the ref(s) it came from (never none)."""

    kind: str
    #: Builder-written, one line, from runtime facts (untrusted text only as sanitised previews).
    text: str
    refs: list[str]
    #: Verbatim text copied from ``refs[0]`` (bounded by the field budget).
    quote: str = ""
    #: Origin and trust of what the claim repeats (the quoted record's provenance).
    origin: str = ""
    trust: str = ""
    #: The quote was cut to the field budget; the full text is at ``refs[0]``.
    truncated: bool = False
    #: Unresolved items only: the key that a later record resolves (see memory.unresolved).
    key: str = ""


class Span(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The covered turns, a closed range: ``first_seq <= seq <= last_seq``."""

    first_turn: str
    last_turn: str
    first_seq: int
    last_seq: int


class Episode(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A closed range of turns, compressed with provenance (see the module docstring)."""

    v: int = EPISODE_FORMAT_VERSION
    id: str
    span: Span
    #: Ids of the covered turns, in sequence order.
    turn_ids: list[str]
    #: Refs of every source record (turns included), in append order: what ``digest`` covers.
    source_refs: list[str]
    digest: str
    #: ``work_item:<id>`` or ``conversation``.
    owner: str
    #: ``runtime`` for the deterministic builder; ``runtime+model:<name>`` once a recap is merged.
    generated_by: str = RUNTIME_GENERATOR
    #: The boundary rule that closed the range (memory.boundaries).
    closed_by: str
    operator_intents: list[Claim] = []
    decisions: list[Claim] = []
    results: list[Claim] = []
    artifact_trail: list[Claim] = []
    unresolved: list[Claim] = []
    model_inferences: list[Claim] = []
    #: Keys that later turns can share with this range (sorted): ``file:<path>``,
    #: ``wait_id:<id>``, ``task:<id>``, ``call:<id>``. Recall boosts episodes that share them.
    links: list[str] = []

    @property
    def ref(self) -> str:
        return episode_ref(self.id)

    @property
    def covers(self) -> tuple[str, str]:
        return (self.span.first_turn, self.span.last_turn)

    @property
    def turns(self) -> int:
        return len(self.turn_ids)

    def field(self, name: Field) -> list[Claim]:
        claims: list[Claim] = getattr(self, name.value)
        return claims


class RecapStatus(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class Recap(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A summariser's recap of one episode, accepted (model inference only) or rejected.

    Bound to the episode by id *and* digest: a recap made for other source records never attaches.
    Rejected recaps are kept for audit with their reasons and are never rendered.
    """

    v: int = EPISODE_FORMAT_VERSION
    episode_id: str
    digest: str
    model: str
    status: RecapStatus
    reasons: list[str] = []
    claims: list[Claim] = []


def episode_id(first_seq: int, last_seq: int) -> str:
    """The id of the episode covering turn sequences ``first_seq ..= last_seq``."""
    return f"e{first_seq}-{last_seq}"


def episode_ref(ident: str) -> str:
    return f"{EPISODE_REF_KIND}:{ident}"


def parse_episode_id(text: str) -> str:
    """Accept ``e3-9`` or ``episode:e3-9``; return the bare id, or "" when it is not one."""
    ident = text.removeprefix(f"{EPISODE_REF_KIND}:")
    first, sep, last = ident.removeprefix("e").partition("-")
    if not ident.startswith("e") or not sep or not first.isdigit() or not last.isdigit():
        return ""
    return ident


def source_digest(records: Iterable[Record]) -> str:
    """``sha256:<hex>`` over the canonical JSONL lines of ``records``, in the order given."""
    h = hashlib.sha256()
    for record in records:
        h.update(encode_record(record))
    return f"sha256:{h.hexdigest()}"


_episode_encoder = msgspec.json.Encoder()
_episode_decoder = msgspec.json.Decoder(Episode)
_recap_decoder = msgspec.json.Decoder(Recap)


def encode_episode(episode: Episode) -> bytes:
    """The canonical bytes of an episode (what rebuilds compare)."""
    return _episode_encoder.encode(episode)


def decode_episode(data: bytes) -> Episode:
    return _episode_decoder.decode(data)


#: Bytes of stored episodes kept decoded by :func:`decode_episode_shared` (dropped whole past it).
_SHARED_BYTES: Final = 8 << 20
_shared: dict[bytes | str, Episode] = {}
_shared_size = [0]


def decode_episode_shared(data: bytes | str) -> Episode:
    """:func:`decode_episode`, answered from a process-wide memo keyed by the stored bytes.

    Recall reads the same dozen or two episodes at every request and re-plan, and decoding one
    (strict, validated) costs ~0.1-0.3 ms, most of a recall's CPU; hashing and comparing the
    bytes costs a few microseconds. Keyed by content, never by number, so an episode store
    cleared and rebuilt by another process can never be answered with an old episode. Episodes
    are frozen and nothing in holon_ctx changes their lists, so one decoded value is shared."""
    hit = _shared.get(data)
    if hit is not None:
        return hit
    episode = _episode_decoder.decode(data)
    if _shared_size[0] + len(data) > _SHARED_BYTES:
        _shared.clear()
        _shared_size[0] = 0
    _shared[data] = episode
    _shared_size[0] += len(data)
    return episode


def encode_recap(recap: Recap) -> bytes:
    return _episode_encoder.encode(recap)


def decode_recap(data: bytes) -> Recap:
    return _recap_decoder.decode(data)
