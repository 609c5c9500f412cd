"""The pieces a session composes, for code that composes them itself (docs/api.md, RFC 0028).

``holon_ctx.open_session`` is the way in; it is made of the parts below, and a power user who
needs one on its own (a stateless projection, a store without a session, archiving on a schedule
of their own) imports it from here, never from the internal module it lives in::

    from holon_ctx.lowlevel import Projector, SqliteStore

    projection = Projector(SqliteStore("agent.db")).project(budget_tokens=8192)

The names load on first use (PEP 562), as the top-level package's do: importing this module costs
nothing until a name is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from holon_ctx import _lazy_names

if TYPE_CHECKING:
    from holon_ctx.compaction import GovernedControl, compact
    from holon_ctx.ledger.episode_store import MemoryEpisodeStore, SqliteEpisodeStore
    from holon_ctx.ledger.importer import export_jsonl, import_jsonl
    from holon_ctx.ledger.memory import MemoryStore
    from holon_ctx.ledger.sqlite import SqliteStore
    from holon_ctx.ledger.store import CallRecord, CallState, LedgerStats, StoredRecord
    from holon_ctx.ledger.transcripts import (
        Detection,
        TranscriptFormat,
        detect_format,
        import_any,
        read_transcript,
    )
    from holon_ctx.memory import ArchivePolicy, Archiver, StoreEpisodeSource
    from holon_ctx.memory.boundaries import BoundaryPolicy
    from holon_ctx.memory.episodes import Episode
    from holon_ctx.memory.store import EpisodeStore
    from holon_ctx.projection.base.model import (
        ControlState,
        EpisodeSource,
        Form,
        Manifest,
        Omission,
        Priority,
        Relation,
        Section,
    )
    from holon_ctx.projection.planning.projector import ItemDecision, Projection, Projector
    from holon_ctx.projection.provider_formats.providers import (
        framing_tokens,
        measure,
        shares_stable_prefix,
        to_anthropic_messages,
        to_openai_messages,
    )
    from holon_ctx.tokens import TokenCounter

__all__ = [
    "ArchivePolicy",
    "Archiver",
    "BoundaryPolicy",
    "CallRecord",
    "CallState",
    "ControlState",
    "Detection",
    "Episode",
    "EpisodeSource",
    "EpisodeStore",
    "Form",
    "GovernedControl",
    "ItemDecision",
    "LedgerStats",
    "Manifest",
    "MemoryEpisodeStore",
    "MemoryStore",
    "Omission",
    "Priority",
    "Projection",
    "Projector",
    "Relation",
    "Section",
    "SqliteEpisodeStore",
    "SqliteStore",
    "StoreEpisodeSource",
    "StoredRecord",
    "TokenCounter",
    "TranscriptFormat",
    "compact",
    "detect_format",
    "export_jsonl",
    "framing_tokens",
    "import_any",
    "import_jsonl",
    "measure",
    "read_transcript",
    "shares_stable_prefix",
    "to_anthropic_messages",
    "to_openai_messages",
]

#: Where each name lives now: the one place to change when an internal module moves.
_HOMES = {
    "ArchivePolicy": "holon_ctx.memory",
    "Archiver": "holon_ctx.memory",
    "BoundaryPolicy": "holon_ctx.memory.boundaries",
    "CallRecord": "holon_ctx.ledger.store",
    "CallState": "holon_ctx.ledger.store",
    "ControlState": "holon_ctx.projection.base.model",
    "Detection": "holon_ctx.ledger.transcripts",
    "Episode": "holon_ctx.memory.episodes",
    "EpisodeSource": "holon_ctx.projection.base.model",
    "EpisodeStore": "holon_ctx.memory.store",
    "Form": "holon_ctx.projection.base.model",
    "GovernedControl": "holon_ctx.compaction",
    "ItemDecision": "holon_ctx.projection.planning.projector",
    "LedgerStats": "holon_ctx.ledger.store",
    "Manifest": "holon_ctx.projection.base.model",
    "MemoryEpisodeStore": "holon_ctx.ledger.episode_store",
    "MemoryStore": "holon_ctx.ledger.memory",
    "Omission": "holon_ctx.projection.base.model",
    "Priority": "holon_ctx.projection.base.model",
    "Projection": "holon_ctx.projection.planning.projector",
    "Projector": "holon_ctx.projection.planning.projector",
    "Relation": "holon_ctx.projection.base.model",
    "Section": "holon_ctx.projection.base.model",
    "SqliteEpisodeStore": "holon_ctx.ledger.episode_store",
    "SqliteStore": "holon_ctx.ledger.sqlite",
    "StoreEpisodeSource": "holon_ctx.memory",
    "StoredRecord": "holon_ctx.ledger.store",
    "TokenCounter": "holon_ctx.tokens",
    "TranscriptFormat": "holon_ctx.ledger.transcripts",
    "compact": "holon_ctx.compaction",
    "detect_format": "holon_ctx.ledger.transcripts",
    "export_jsonl": "holon_ctx.ledger.importer",
    "framing_tokens": "holon_ctx.projection.provider_formats.providers",
    "import_any": "holon_ctx.ledger.transcripts",
    "import_jsonl": "holon_ctx.ledger.importer",
    "measure": "holon_ctx.projection.provider_formats.providers",
    "read_transcript": "holon_ctx.ledger.transcripts",
    "shares_stable_prefix": "holon_ctx.projection.provider_formats.providers",
    "to_anthropic_messages": "holon_ctx.projection.provider_formats.providers",
    "to_openai_messages": "holon_ctx.projection.provider_formats.providers",
}


__getattr__, __dir__ = _lazy_names(__name__, _HOMES, __all__)
