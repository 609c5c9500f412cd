"""The command line's way into the library's internals: one documented list (RFC 0028).

The CLI is the top layer (tests/test_layering.py): it may import anything below it, and it shows
what a user never imports (a stateless plan's items, a session request's parts and spans, the
epochs a runtime saved, episode stores, price tables). Issue 24 item 4 asks that it do so
through the public API or a small documented internal one: this module is that one. Every
``holon_ctx/cli`` module imports library names from the public modules (``holon_ctx``,
``holon_ctx.lowlevel``, ``holon_ctx.errors``, ``holon_ctx.continuity``, ``holon_ctx.postgres``)
or from here, never from an internal module; ``tests/test_layering.py`` fails otherwise. So an
internal module that moves or renames a name changes one line here (``_HOMES``), not the
commands, and this list is the CLI's whole dependence on the internals, by group:

* stores and their files: the ledger's (SQLite, in memory, PostgreSQL), the episodes', the
  epochs a session saved (read through, never written), the usage observations, the import and
  export of JSONL and transcripts, the compaction lock;
* the stateless plan and the session request as the preview draws them: ``Projector``,
  ``Projection``, ``ItemDecision``, the manifest's model types, blocks and a part's spans, the
  markup's structure prefixes (for the preview's emphasis), the relation's wording;
* compaction, archiving and recall: ``compact``, ``Archiver``, ``StoreEpisodeSource``, the
  summariser's recaps, the compaction schedule;
* models, token counters, provider layouts and prices (``project --format``, ``replay``);
* the continuity harness's runner (``continuity run``, ``experiment``).

The names load on first use (PEP 562, as ``holon_ctx.lowlevel``'s): a command imports only
what it uses, so ``holon-ctx --help`` stays as fast as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from holon_ctx import _lazy_names

if TYPE_CHECKING:
    from holon_ctx.compaction import GovernedControl, SessionConfig, compact, has_continuity_state
    from holon_ctx.continuity.codes import DecisionKind
    from holon_ctx.continuity.envelope import SideEffectStatus, id_problem
    from holon_ctx.continuity.evaluation import ScenarioResult, run_evaluation
    from holon_ctx.continuity.experiment import ExperimentResult, run_experiment
    from holon_ctx.continuity.scenario import SEED
    from holon_ctx.ledger.compaction_lock import LOCK_SUFFIX
    from holon_ctx.ledger.episode_store import MemoryEpisodeStore, SqliteEpisodeStore, has_episode_tables
    from holon_ctx.ledger.epochs import ReadThroughEpochs
    from holon_ctx.ledger.epochs_sqlite import epoch_store_for
    from holon_ctx.ledger.importer import export_jsonl, import_jsonl
    from holon_ctx.ledger.locking import translate_lock_errors
    from holon_ctx.ledger.memory import MemoryStore
    from holon_ctx.ledger.records import Turn
    from holon_ctx.ledger.sqlite import SqliteStore, missing_directory
    from holon_ctx.ledger.store import LedgerStats, LedgerStore, StoredRecord
    from holon_ctx.ledger.transcript_build import AGENT_STEP
    from holon_ctx.ledger.transcripts import (
        CLI_OPTION,
        Detection,
        TranscriptFormat,
        import_any,
        not_a_database,
        sniff_ledger,
    )
    from holon_ctx.ledger.usage import Observation
    from holon_ctx.ledger.usage_sqlite import usage_store_for
    from holon_ctx.memory.archiver import ArchivePolicy, Archiver
    from holon_ctx.memory.boundaries import BoundaryPolicy
    from holon_ctx.memory.episodes import Episode, parse_episode_id
    from holon_ctx.memory.source import StoreEpisodeSource
    from holon_ctx.memory.store import EpisodeStore
    from holon_ctx.memory.summarizer import with_recaps
    from holon_ctx.models import ModelProfile, UnknownModelWarning, model_profile
    from holon_ctx.postgres.connection import describe, is_postgres_url
    from holon_ctx.postgres.continuity import PostgresContinuityBackend
    from holon_ctx.postgres.episodes import PostgresEpisodeStore
    from holon_ctx.postgres.ledger import PostgresStore
    from holon_ctx.projection.base.formats import forgeries
    from holon_ctx.projection.base.framing import Framing
    from holon_ctx.projection.base.items import Block, BlockKind, Mark
    from holon_ctx.projection.base.model import (
        SECTION_ORDER,
        ControlState,
        EpisodeSource,
        Form,
        Manifest,
        Omission,
        Priority,
        Relation,
        Section,
        TurnUnit,
    )
    from holon_ctx.projection.base.relation import RELATION_TEXT
    from holon_ctx.projection.base.spans import blocks_of
    from holon_ctx.projection.measure.cost import PRICES, PriceTable, load_price_table
    from holon_ctx.projection.measure.replay import BASELINES, ApproachReport, replay
    from holon_ctx.projection.planning.projector import SECTION_TITLES, ItemDecision, Projection, Projector
    from holon_ctx.projection.planning.retention import classify, turn_facts
    from holon_ctx.projection.provider_formats.native import Part, Role
    from holon_ctx.projection.provider_formats.providers import (
        framing_tokens,
        to_anthropic_messages,
        to_openai_messages,
    )
    from holon_ctx.projection.rendering.episode_forms import full_text
    from holon_ctx.projection.rendering.folding import BY_TRIGGER
    from holon_ctx.projection.session.session import Layout, SessionProjector, SessionRequest
    from holon_ctx.session_upkeep import CompactionPolicy, CompactionSchedule
    from holon_ctx.tokens import TokenCounter, counter_for_encoding, store_counter

__all__ = [
    "AGENT_STEP",
    "BASELINES",
    "BY_TRIGGER",
    "CLI_OPTION",
    "LOCK_SUFFIX",
    "PRICES",
    "RELATION_TEXT",
    "SECTION_ORDER",
    "SECTION_TITLES",
    "SEED",
    "ApproachReport",
    "ArchivePolicy",
    "Archiver",
    "Block",
    "BlockKind",
    "BoundaryPolicy",
    "CompactionPolicy",
    "CompactionSchedule",
    "ControlState",
    "DecisionKind",
    "Detection",
    "Episode",
    "EpisodeSource",
    "EpisodeStore",
    "ExperimentResult",
    "Form",
    "Framing",
    "GovernedControl",
    "ItemDecision",
    "Layout",
    "LedgerStats",
    "LedgerStore",
    "Manifest",
    "Mark",
    "MemoryEpisodeStore",
    "MemoryStore",
    "ModelProfile",
    "Observation",
    "Omission",
    "Part",
    "PostgresContinuityBackend",
    "PostgresEpisodeStore",
    "PostgresStore",
    "PriceTable",
    "Priority",
    "Projection",
    "Projector",
    "ReadThroughEpochs",
    "Relation",
    "Role",
    "ScenarioResult",
    "Section",
    "SessionConfig",
    "SessionProjector",
    "SessionRequest",
    "SideEffectStatus",
    "SqliteEpisodeStore",
    "SqliteStore",
    "StoreEpisodeSource",
    "StoredRecord",
    "TokenCounter",
    "TranscriptFormat",
    "Turn",
    "TurnUnit",
    "UnknownModelWarning",
    "blocks_of",
    "classify",
    "compact",
    "counter_for_encoding",
    "describe",
    "epoch_store_for",
    "export_jsonl",
    "forgeries",
    "framing_tokens",
    "full_text",
    "has_continuity_state",
    "has_episode_tables",
    "id_problem",
    "import_any",
    "import_jsonl",
    "is_postgres_url",
    "load_price_table",
    "missing_directory",
    "model_profile",
    "not_a_database",
    "parse_episode_id",
    "replay",
    "run_evaluation",
    "run_experiment",
    "sniff_ledger",
    "store_counter",
    "to_anthropic_messages",
    "to_openai_messages",
    "translate_lock_errors",
    "turn_facts",
    "usage_store_for",
    "with_recaps",
]

#: Where each name lives now: the one place to change when an internal module moves.
_HOMES = {
    "AGENT_STEP": "holon_ctx.ledger.transcript_build",
    "ApproachReport": "holon_ctx.projection.measure.replay",
    "ArchivePolicy": "holon_ctx.memory.archiver",
    "Archiver": "holon_ctx.memory.archiver",
    "BASELINES": "holon_ctx.projection.measure.replay",
    "BY_TRIGGER": "holon_ctx.projection.rendering.folding",
    "Block": "holon_ctx.projection.base.items",
    "BlockKind": "holon_ctx.projection.base.items",
    "BoundaryPolicy": "holon_ctx.memory.boundaries",
    "CLI_OPTION": "holon_ctx.ledger.transcripts",
    "CompactionPolicy": "holon_ctx.session_upkeep",
    "CompactionSchedule": "holon_ctx.session_upkeep",
    "ControlState": "holon_ctx.projection.base.model",
    "DecisionKind": "holon_ctx.continuity.codes",
    "Detection": "holon_ctx.ledger.transcripts",
    "Episode": "holon_ctx.memory.episodes",
    "EpisodeSource": "holon_ctx.projection.base.model",
    "EpisodeStore": "holon_ctx.memory.store",
    "ExperimentResult": "holon_ctx.continuity.experiment",
    "Form": "holon_ctx.projection.base.model",
    "Framing": "holon_ctx.projection.base.framing",
    "GovernedControl": "holon_ctx.compaction",
    "ItemDecision": "holon_ctx.projection.planning.projector",
    "LOCK_SUFFIX": "holon_ctx.ledger.compaction_lock",
    "Layout": "holon_ctx.projection.session.session",
    "LedgerStats": "holon_ctx.ledger.store",
    "LedgerStore": "holon_ctx.ledger.store",
    "Manifest": "holon_ctx.projection.base.model",
    "Mark": "holon_ctx.projection.base.items",
    "MemoryEpisodeStore": "holon_ctx.ledger.episode_store",
    "MemoryStore": "holon_ctx.ledger.memory",
    "ModelProfile": "holon_ctx.models",
    "Observation": "holon_ctx.ledger.usage",
    "Omission": "holon_ctx.projection.base.model",
    "PRICES": "holon_ctx.projection.measure.cost",
    "Part": "holon_ctx.projection.provider_formats.native",
    "PostgresContinuityBackend": "holon_ctx.postgres.continuity",
    "PostgresEpisodeStore": "holon_ctx.postgres.episodes",
    "PostgresStore": "holon_ctx.postgres.ledger",
    "PriceTable": "holon_ctx.projection.measure.cost",
    "Priority": "holon_ctx.projection.base.model",
    "Projection": "holon_ctx.projection.planning.projector",
    "Projector": "holon_ctx.projection.planning.projector",
    "RELATION_TEXT": "holon_ctx.projection.base.relation",
    "ReadThroughEpochs": "holon_ctx.ledger.epochs",
    "Relation": "holon_ctx.projection.base.model",
    "Role": "holon_ctx.projection.provider_formats.native",
    "SECTION_ORDER": "holon_ctx.projection.base.model",
    "SECTION_TITLES": "holon_ctx.projection.planning.projector",
    "SEED": "holon_ctx.continuity.scenario",
    "ScenarioResult": "holon_ctx.continuity.evaluation",
    "Section": "holon_ctx.projection.base.model",
    "SessionConfig": "holon_ctx.compaction",
    "SessionProjector": "holon_ctx.projection.session.session",
    "SessionRequest": "holon_ctx.projection.session.session",
    "SideEffectStatus": "holon_ctx.continuity.envelope",
    "SqliteEpisodeStore": "holon_ctx.ledger.episode_store",
    "SqliteStore": "holon_ctx.ledger.sqlite",
    "StoreEpisodeSource": "holon_ctx.memory.source",
    "StoredRecord": "holon_ctx.ledger.store",
    "TokenCounter": "holon_ctx.tokens",
    "TranscriptFormat": "holon_ctx.ledger.transcripts",
    "Turn": "holon_ctx.ledger.records",
    "TurnUnit": "holon_ctx.projection.base.model",
    "UnknownModelWarning": "holon_ctx.models",
    "blocks_of": "holon_ctx.projection.base.spans",
    "classify": "holon_ctx.projection.planning.retention",
    "compact": "holon_ctx.compaction",
    "counter_for_encoding": "holon_ctx.tokens",
    "describe": "holon_ctx.postgres.connection",
    "epoch_store_for": "holon_ctx.ledger.epochs_sqlite",
    "export_jsonl": "holon_ctx.ledger.importer",
    "forgeries": "holon_ctx.projection.base.formats",
    "framing_tokens": "holon_ctx.projection.provider_formats.providers",
    "full_text": "holon_ctx.projection.rendering.episode_forms",
    "has_continuity_state": "holon_ctx.compaction",
    "has_episode_tables": "holon_ctx.ledger.episode_store",
    "id_problem": "holon_ctx.continuity.envelope",
    "import_any": "holon_ctx.ledger.transcripts",
    "import_jsonl": "holon_ctx.ledger.importer",
    "is_postgres_url": "holon_ctx.postgres.connection",
    "load_price_table": "holon_ctx.projection.measure.cost",
    "missing_directory": "holon_ctx.ledger.sqlite",
    "model_profile": "holon_ctx.models",
    "not_a_database": "holon_ctx.ledger.transcripts",
    "parse_episode_id": "holon_ctx.memory.episodes",
    "replay": "holon_ctx.projection.measure.replay",
    "run_evaluation": "holon_ctx.continuity.evaluation",
    "run_experiment": "holon_ctx.continuity.experiment",
    "sniff_ledger": "holon_ctx.ledger.transcripts",
    "store_counter": "holon_ctx.tokens",
    "to_anthropic_messages": "holon_ctx.projection.provider_formats.providers",
    "to_openai_messages": "holon_ctx.projection.provider_formats.providers",
    "translate_lock_errors": "holon_ctx.ledger.locking",
    "turn_facts": "holon_ctx.projection.planning.retention",
    "usage_store_for": "holon_ctx.ledger.usage_sqlite",
    "with_recaps": "holon_ctx.memory.summarizer",
}


__getattr__, __dir__ = _lazy_names(__name__, _HOMES, __all__)
