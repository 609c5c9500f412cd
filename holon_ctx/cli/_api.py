"""The command line's way into the library's internals: one short documented list (RFC 0028).

The CLI is the top layer (tests/test_layering.py). Issue 24 item 4 asks that it go through the
public API or a small documented internal one: every ``holon_ctx/cli`` module imports library
names from the public modules (``holon_ctx``, ``holon_ctx.lowlevel``, ``holon_ctx.errors``,
``holon_ctx.continuity``, ``holon_ctx.postgres``) or from here, never from an internal module
(``tests/test_layering.py`` fails otherwise). A name a library user would also call or receive
(the stores, the stateless projection and its manifest's types, episodes, transcripts) is public
in ``holon_ctx.lowlevel``; what is left here is what only a tool that shows the machinery needs,
32 names in 6 groups, each under its reason in ``_HOMES``. Where the CLI
stitched several internals into one step, the step is a function of the library's and is named
here instead (``read_through_request``, ``save_epoch``, ``stored_turn_class``,
``recapped_text``, ``price_table``, ``StoresBeside``, ``ReplayCompaction``,
``ContinuityHarness``). ``tests/test_layering.py`` holds the list to at most
32 names, each with its reason; a new one needs a reason and a higher bound there.

The names load on first use (PEP 562, as ``holon_ctx.lowlevel``'s): a command imports only
what it uses, so ``holon-ctx --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from holon_ctx import _lazy_names

if TYPE_CHECKING:
    from holon_ctx.continuity.harness import ContinuityHarness
    from holon_ctx.ledger.compaction_lock import LOCK_SUFFIX
    from holon_ctx.ledger.dbpath import database_path_problem, sqlite_file
    from holon_ctx.ledger.locking import translate_lock_errors
    from holon_ctx.ledger.records import Turn
    from holon_ctx.ledger.transcripts import not_a_database, sniff_ledger
    from holon_ctx.ledger.usage_sqlite import usage_store_for
    from holon_ctx.memory.episodes import parse_episode_id
    from holon_ctx.models import ModelProfile, model_profile
    from holon_ctx.projection.base.formats import forgeries
    from holon_ctx.projection.base.items import Block, BlockKind, Mark
    from holon_ctx.projection.base.relation import RELATION_TEXT
    from holon_ctx.projection.measure.cost import PriceTable, price_table
    from holon_ctx.projection.measure.replay import BASELINES, ApproachReport, replay
    from holon_ctx.projection.planning.projector import SECTION_TITLES
    from holon_ctx.projection.planning.retention import stored_turn_class
    from holon_ctx.projection.provider_formats.native import Part
    from holon_ctx.projection.rendering.episode_forms import form_counts_maker, recapped_text
    from holon_ctx.projection.rendering.folding import BY_TRIGGER
    from holon_ctx.projection.session.read_through import read_through_request, save_epoch
    from holon_ctx.projection.session.session import SessionRequest
    from holon_ctx.session_upkeep import ReplayCompaction, StoresBeside

__all__ = [
    "BASELINES",
    "BY_TRIGGER",
    "LOCK_SUFFIX",
    "RELATION_TEXT",
    "SECTION_TITLES",
    "ApproachReport",
    "Block",
    "BlockKind",
    "ContinuityHarness",
    "Mark",
    "ModelProfile",
    "Part",
    "PriceTable",
    "ReplayCompaction",
    "SessionRequest",
    "StoresBeside",
    "Turn",
    "database_path_problem",
    "forgeries",
    "form_counts_maker",
    "model_profile",
    "not_a_database",
    "parse_episode_id",
    "price_table",
    "read_through_request",
    "recapped_text",
    "replay",
    "save_epoch",
    "sniff_ledger",
    "sqlite_file",
    "stored_turn_class",
    "translate_lock_errors",
    "usage_store_for",
]

#: Where each name lives now (the one place to change when an internal module moves), each
#: under the reason the CLI needs it, by group.
_HOMES = {
    # -- opening a SOURCE or --db: files, stores and the model to count with
    #: a SOURCE file is ledger JSONL, not a transcript (one line read)
    "sniff_ledger": "holon_ctx.ledger.transcripts",
    #: what a file given as --db holds instead, for the error
    "not_a_database": "holon_ctx.ledger.transcripts",
    #: the missing parent of a database path, or a new one's JSONL name, for the error
    "database_path_problem": "holon_ctx.ledger.dbpath",
    #: whether a SOURCE is a database, asked of SQLite (reading its bytes would release the
    #: locks of connections this process has open on it)
    "sqlite_file": "holon_ctx.ledger.dbpath",
    #: the compaction lock file a database leaves beside it
    "LOCK_SUFFIX": "holon_ctx.ledger.compaction_lock",
    #: a locked database as one line of error, every command
    "translate_lock_errors": "holon_ctx.ledger.locking",
    #: the episode and governed stores beside a --db, opened only where a file has them
    "StoresBeside": "holon_ctx.session_upkeep",
    #: the usage a runtime observed (preview's usage row, replay)
    "usage_store_for": "holon_ctx.ledger.usage_sqlite",
    #: --model NAME as a tokenizer and framing
    "model_profile": "holon_ctx.models",
    #: what --model gives: its counter and framing (one per command)
    "ModelProfile": "holon_ctx.models",
    # -- the request a runtime sends, as a reader sees it (preview, explain, project)
    #: the session request at a turn, writing nothing
    "read_through_request": "holon_ctx.projection.session.read_through",
    #: the demo's build saves the epoch readers start from
    "save_epoch": "holon_ctx.projection.session.read_through",
    #: the request with its parts, epoch and cache figures
    "SessionRequest": "holon_ctx.projection.session.session",
    #: one part of it, with the blocks it sends
    "Part": "holon_ctx.projection.provider_formats.native",
    #: a block: the preview tags its lines by kind and trust
    "Block": "holon_ctx.projection.base.items",
    #: fenced, operator, trusted or text: how a block is tagged
    "BlockKind": "holon_ctx.projection.base.items",
    #: each section's heading, as the prompt writes it
    "SECTION_TITLES": "holon_ctx.projection.planning.projector",
    #: the relation of the current input in words
    "RELATION_TEXT": "holon_ctx.projection.base.relation",
    #: what a block's first line stands out as: the preview emphasises it (heading, alert, …)
    "Mark": "holon_ctx.projection.base.items",
    # -- explain
    #: a turn's priority on its own, and the facts behind it
    "stored_turn_class": "holon_ctx.projection.planning.retention",
    #: the fold kinds named by trigger, not by fact
    "BY_TRIGGER": "holon_ctx.projection.rendering.folding",
    #: the fence and claim forgeries the neutraliser caught in a body
    "forgeries": "holon_ctx.projection.base.formats",
    #: a turn record, told from the others a ref may name
    "Turn": "holon_ctx.ledger.records",
    # -- episodes and a file's ledger compacted as a session would
    #: an episode ref as given, checked
    "parse_episode_id": "holon_ctx.memory.episodes",
    #: an episode as shown, its recaps applied
    "recapped_text": "holon_ctx.projection.rendering.episode_forms",
    #: a file's episodes grown along a replay as a session's compactions grow them
    "ReplayCompaction": "holon_ctx.session_upkeep",
    #: archive, rebuild and the demo build store each episode's form counts, as a session does
    "form_counts_maker": "holon_ctx.projection.rendering.episode_forms",
    # -- replay
    #: every model call of a ledger, with each approach
    "replay": "holon_ctx.projection.measure.replay",
    #: one approach's calls, tokens and bill
    "ApproachReport": "holon_ctx.projection.measure.replay",
    #: the baselines --baseline names, with their legend
    "BASELINES": "holon_ctx.projection.measure.replay",
    #: --price NAME|FILE as a price table
    "price_table": "holon_ctx.projection.measure.cost",
    #: a provider's cache prices, for the report
    "PriceTable": "holon_ctx.projection.measure.cost",
    # -- the continuity harness (inspect-continuity, eval-continuity)
    #: its two runs, their results and the seed's policy version, as one entry point
    "ContinuityHarness": "holon_ctx.continuity.harness",
}


__getattr__, __dir__ = _lazy_names(__name__, _HOMES, __all__)
