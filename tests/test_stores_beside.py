"""What lies beside a ledger, as the CLI opens it (RFC 0028, fifth amendment): the episode and
governed stores of a database ledger, opened one at a time, and never created by a read-only
command in a file that lacks them (a read must not change the file it reads); the continuity
harness as one entry point."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from holon_ctx.continuity.harness import ContinuityHarness
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.sqlite import SqliteStore
from holon_ctx.session_upkeep import StoresBeside


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_a_read_opens_no_store_a_database_file_lacks_and_a_write_creates_them(
        tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ledger = SqliteStore(path)
    beside = StoresBeside(ledger)
    ledger_only = _tables(path)

    assert beside.episodes(create=False) is None
    assert beside.continuity(create=False) is None
    assert _tables(path) == ledger_only

    episodes, continuity = beside.episodes(create=True), beside.continuity()
    assert episodes is not None
    assert continuity is not None
    episodes.close()
    continuity.close()
    assert _tables(path) > ledger_only

    # Empty tables are not enough for a read: it opens a store once something was archived or
    # sealed in it (there is nothing to show before).
    assert beside.episodes(create=False) is None
    assert beside.continuity(create=False) is None
    ledger.close()


def test_a_ledger_in_memory_has_nothing_beside_it() -> None:
    beside = StoresBeside(MemoryStore())
    assert beside.episodes(create=True) is None
    assert beside.continuity(create=True) is None


def test_the_harness_default_policy_version_is_the_seeds() -> None:
    """``--current-policy-version``'s default: resuming under the seed's own version decides as
    resuming with none given (no policy change)."""
    under_seed = ContinuityHarness.experiment(
        current_policy_version=ContinuityHarness.SEED_POLICY_VERSION)
    unchanged = ContinuityHarness.experiment()
    assert under_seed.decision.kind == unchanged.decision.kind
    assert under_seed.decision.reason == unchanged.decision.reason
    changed = ContinuityHarness.experiment(current_policy_version="policy-v999")
    assert changed.decision.reason != unchanged.decision.reason
