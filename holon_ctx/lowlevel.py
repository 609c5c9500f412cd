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
    from holon_ctx.ledger.episode_store import SqliteEpisodeStore
    from holon_ctx.ledger.memory import MemoryStore
    from holon_ctx.ledger.sqlite import SqliteStore
    from holon_ctx.ledger.transcripts import detect_format, import_any, read_transcript
    from holon_ctx.memory import ArchivePolicy, Archiver, StoreEpisodeSource
    from holon_ctx.projection.planning.projector import Projection, Projector
    from holon_ctx.projection.provider_formats.providers import (
        framing_tokens,
        measure,
        shares_stable_prefix,
        to_anthropic_messages,
        to_openai_messages,
    )

__all__ = [
    "ArchivePolicy",
    "Archiver",
    "GovernedControl",
    "MemoryStore",
    "Projection",
    "Projector",
    "SqliteEpisodeStore",
    "SqliteStore",
    "StoreEpisodeSource",
    "compact",
    "detect_format",
    "framing_tokens",
    "import_any",
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
    "GovernedControl": "holon_ctx.compaction",
    "MemoryStore": "holon_ctx.ledger.memory",
    "Projection": "holon_ctx.projection.planning.projector",
    "Projector": "holon_ctx.projection.planning.projector",
    "SqliteEpisodeStore": "holon_ctx.ledger.episode_store",
    "SqliteStore": "holon_ctx.ledger.sqlite",
    "StoreEpisodeSource": "holon_ctx.memory",
    "compact": "holon_ctx.compaction",
    "detect_format": "holon_ctx.ledger.transcripts",
    "framing_tokens": "holon_ctx.projection.provider_formats.providers",
    "import_any": "holon_ctx.ledger.transcripts",
    "measure": "holon_ctx.projection.provider_formats.providers",
    "read_transcript": "holon_ctx.ledger.transcripts",
    "shares_stable_prefix": "holon_ctx.projection.provider_formats.providers",
    "to_anthropic_messages": "holon_ctx.projection.provider_formats.providers",
    "to_openai_messages": "holon_ctx.projection.provider_formats.providers",
}


__getattr__, __dir__ = _lazy_names(__name__, _HOMES, __all__)
