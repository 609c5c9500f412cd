"""Building the bundled demo ledger for ``holon-ctx demo``.

The bundled JSONL is imported into a SQLite file, compacted (old turns archived into episodes, a
continuity envelope sealed) with a fixed clock, so the demo database is the same on every machine.
A stamp file beside the database records what built it; a current database is reused.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import itertools
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from holon_ctx import LedgerStore, __version__
from holon_ctx.cli._api import LOCK_SUFFIX, database_path_problem
from holon_ctx.cli.common import db_name, open_continuity, open_db, open_episodes
from holon_ctx.cli.terminal import say
from holon_ctx.cli.wording import plural
from holon_ctx.errors import InputError
from holon_ctx.lowlevel import import_jsonl

__all__ = ["DEMO_BUDGET", "DEMO_DB", "build_demo", "build_demo_session"]

#: The demo's budget: large enough to show every section, small enough that folding, compaction
#: and omission all happen on the bundled ledger.
DEMO_BUDGET = 8192
DEMO_DB = Path(".holon") / "demo.db"


def _demo_stamp(data: bytes) -> str:
    """What a built demo database must match: the bundled ledger and the code that imported it."""
    h = hashlib.sha256(data)
    # The recipe changes when the build does more (episodes, then a continuity envelope), so an
    # older demo database is rebuilt rather than shown without what the build now adds. epoch/7:
    # the saved epoch's parts keep their blocks and their marks (EPOCH_FORMAT 3), so an older
    # one is not read.
    h.update(f"\0holon-ctx {__version__}\0recipe: import+compact+epoch/7".encode())
    return h.hexdigest()


def build_demo(db: Path) -> bool:
    """Make ``db`` hold the bundled demo ledger; returns True when it had to be (re)built.

    The database is built beside its final name and moved into place, and the stamp file is
    written last, so an interrupted build is simply rebuilt on the next run.
    """
    resource = importlib.resources.files("holon_ctx").joinpath("data/demo.jsonl")
    if not resource.is_file():
        raise InputError("the bundled demo ledger is missing; reinstall holon-ctx",
                         source="holon_ctx/data/demo.jsonl")
    stamp_file = db.with_name(db.name + ".sha256")
    stamp = _demo_stamp(resource.read_bytes())
    if db.exists() and stamp_file.exists() and stamp_file.read_text().strip() == stamp:
        return False
    problem = database_path_problem(db, new=True, directory=False)
    if problem is not None:
        raise InputError(problem, source=str(db))
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the demo directory: {exc.strerror}",
                         source=str(db.parent)) from None
    tmp = db.with_name(f"{db.name}.tmp{os.getpid()}")
    started = time.perf_counter()
    try:
        store = open_db(str(tmp), must_exist=False)
        try:
            with importlib.resources.as_file(resource) as path:
                n = import_jsonl(path, store)
            archived = _archive(store)
            _save_epoch(store)
        finally:
            store.close()
        # A stale -wal beside the old file would be replayed into the new one: remove all three.
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        os.replace(tmp, db)
        stamp_file.write_text(stamp + "\n")
    except OSError as exc:
        raise InputError(f"cannot build the demo database: {exc.strerror}", source=str(db)) from None
    finally:
        # The compaction lock file too (holon_ctx.ledger.compaction_lock): the build compacted
        # the file under its temporary name.
        for suffix in ("", "-wal", "-shm", LOCK_SUFFIX):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    say(f"holon-ctx: built the demo ledger ({plural(n, 'record')}, "
        f"{plural(archived, 'episode')} archived) into {db} in "
        f"{time.perf_counter() - started:.2f} s; later runs reuse it", file=sys.stderr)
    return True


def build_demo_session(url: str, session: str) -> bool:
    """Make session ``session`` of a PostgreSQL database hold the demo ledger (as
    :func:`build_demo`; the stamp is kept in the session's episode settings, written last)."""
    from holon_ctx.postgres import delete_session  # noqa: PLC0415

    resource = importlib.resources.files("holon_ctx").joinpath("data/demo.jsonl")
    stamp = _demo_stamp(resource.read_bytes())
    store = open_db(url, must_exist=False, session=session)
    try:
        episodes = open_episodes(store, create=True)
        assert episodes is not None  # a database ledger
        current = episodes.meta().get("demo_stamp") == stamp
        episodes.close()
        stale = not current and store.end_pos() > 0
    finally:
        store.close()
    if current:
        return False
    started = time.perf_counter()
    if stale:
        delete_session(url, session)
    store = open_db(url, must_exist=False, session=session)
    try:
        with importlib.resources.as_file(resource) as path:
            n = import_jsonl(path, store)
        archived = _archive(store, stamp)
    finally:
        store.close()
    sys.stderr.write(f"holon-ctx: built the demo ledger ({plural(n, 'record')}, "
                     f"{plural(archived, 'episode')} archived) into {db_name(url, session)} in "
                     f"{time.perf_counter() - started:.2f} s; later runs reuse it\n")
    return True


def _archive(ledger: LedgerStore, stamp: str | None = None) -> int:
    """Compact the demo: archive old turn ranges into episodes and seal a continuity envelope,
    so the preview recalls episodes and pins the governed control state.

    The archive is built at once but stands for the one a runtime grew during the day, so its
    episodes count as archived from the start (as a rebuild's do, RFC 0020): a runtime's recall
    as of an earlier turn sees those the window has passed, not none of them."""
    from holon_ctx import SessionConfig  # noqa: PLC0415
    from holon_ctx.cli._api import form_counts_maker  # noqa: PLC0415
    from holon_ctx.lowlevel import Archiver, compact  # noqa: PLC0415

    episodes = open_episodes(ledger, create=True)
    continuity = open_continuity(ledger)
    assert episodes is not None  # the demo is built into a database ledger
    assert continuity is not None
    try:
        archiver = Archiver(ledger, episodes, positioned=False, forms=form_counts_maker(ledger))
        archived = len(compact(ledger, episodes, continuity, session=SessionConfig(),
                               clock=_demo_clock(), archiver=archiver).archive.archived)
        if stamp is not None:
            episodes.set_meta({"demo_stamp": stamp})  # last: a build cut short is redone
        return archived
    finally:
        continuity.close()
        episodes.close()


def _save_epoch(ledger: LedgerStore) -> None:
    """Make the request a runtime would send at the demo's budget, saving its epoch beside the
    ledger as a session does: the preview then reads the epoch instead of walking the demo's
    48 re-plans again on every run (RFC 0024; issue 27's second run)."""
    from holon_ctx.cli._api import save_epoch  # noqa: PLC0415
    from holon_ctx.cli.common import control_source  # noqa: PLC0415
    from holon_ctx.cli.episodes_cmd import open_episode_source  # noqa: PLC0415
    from holon_ctx.cli.epochs_view import runtime_recall  # noqa: PLC0415

    episodes = open_episode_source(ledger)
    try:
        with control_source(ledger) as control:
            save_epoch(ledger, budget_tokens=DEMO_BUDGET,
                       episodes=runtime_recall(ledger, episodes), control=control)
    finally:
        if episodes is not None:
            episodes.close()


def _demo_clock() -> Callable[[], datetime]:
    """A clock that starts at the demo day's end and ticks a second per call: the demo database
    is the same on every machine (the governed store only needs time not to go backwards)."""
    ticks = itertools.count()
    start = datetime(2026, 11, 30, 18, 45, tzinfo=UTC)
    return lambda: start + timedelta(seconds=next(ticks))
