"""Episodes for a ledger read from a file: the compaction a library session would have made.

A library session (``holon_ctx.open_session``) archives every turn but its newest
``CompactionPolicy().recent_turns`` into episodes, every few turns and before each request while
the budget binds, so an early decision stays reachable in a long conversation (issue 12, item 8).
A ledger the CLI reads from a file (ledger JSONL, a transcript, a trajectory) lives in memory
and has no episode store, so without this the CLI would show less than the runtime sends.

When a plan made without episodes leaves something out (the budget binds), the ledger is archived
as of the projected turn into an in-memory episode store with the session's defaults and the
projection is planned again, recalling from it. Nothing is written: the CLI never changes what
it reads. A budget that does not bind is planned once, exactly as before (no archive is built,
so its output and cost are unchanged). A database ledger (``--db``, or a SQLite file as SOURCE)
keeps the episodes that ``episodes archive`` or ``compact`` stored in it: those are what its
runtime recalls, and the CLI shows that (RFC 0018, "Episodes for a ledger read from a file").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from holon_ctx import CompactionPolicy, LedgerStore
from holon_ctx.cli._api import ReplayCompaction
from holon_ctx.lowlevel import (
    ArchivePolicy,
    Archiver,
    Manifest,
    MemoryEpisodeStore,
    MemoryStore,
    StoreEpisodeSource,
)

# ReplayCompaction lives beside the schedule it replays (session_upkeep); replay imports it here.
__all__ = ["EPISODES_FROM", "FileArchive", "ReplayCompaction", "binds", "mark"]

#: The manifest's ``window.episodes_from`` when the recalled episodes are an in-memory archive.
EPISODES_FROM = "in-memory archive"

T = TypeVar("T")


def binds(manifest: Manifest) -> bool:
    """The plan left something out: the test a session uses to compact before its next request."""
    return any(section.omitted for section in manifest.sections)


def mark(manifest: Manifest) -> None:
    """Say in the manifest where its episodes came from (a key added only here, so manifests of
    other inputs keep their bytes)."""
    manifest.window["episodes_from"] = EPISODES_FROM


class FileArchive:
    """In-memory episodes for a ledger read from a file, one archive per projected turn, built
    on first need (a budget that never binds never builds one)."""

    def __init__(self, store: LedgerStore) -> None:
        self.store = store
        self._sources: dict[str | None, StoreEpisodeSource | None] = {}

    @staticmethod
    def applies(store: LedgerStore, episodes: object) -> bool:
        """A ledger read from a file into memory, with no episode store of its own."""
        return episodes is None and isinstance(store, MemoryStore)

    def source(self, at: str | None) -> StoreEpisodeSource | None:
        """The episodes a session with default compaction would hold as of ``at`` (None: the
        ledger is still within the recent window, so there is nothing to archive)."""
        if at not in self._sources:
            episodes = MemoryEpisodeStore()
            policy = ArchivePolicy(recent_turns=CompactionPolicy().recent_turns)
            report = Archiver(self.store, episodes, policy=policy).archive(at=at)
            self._sources[at] = StoreEpisodeSource(episodes, self.store) if report.archived \
                else None
        return self._sources[at]

    def plan(self, first: T, manifest_of: Callable[[T], Manifest], at: str | None,
             again: Callable[[StoreEpisodeSource], T]) -> T:
        """``first`` (planned without episodes) unless it binds and there is something to
        archive; then ``again`` with the archive, its manifest marked."""
        if not binds(manifest_of(first)):
            return first
        source = self.source(at)
        if source is None:
            return first
        result = again(source)
        mark(manifest_of(result))
        return result
