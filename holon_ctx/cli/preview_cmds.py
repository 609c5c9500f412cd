"""``holon-ctx demo``, ``preview``, ``explain`` and ``diff``, and the per-section part of ``stats``.

The commands are thin: open the SOURCE, project, and hand the Projection to :mod:`.preview`, which
draws everything a person reads. What is not thin is the analysis behind ``explain`` and ``diff``:

    explain   _status (where a ref stands: the manifest's selected and omitted lists, the items'
              decisions, the folds, the window, the episodes) → Explanation, with _entry_budget
              projecting again at larger budgets to find the smallest one that shows the ref
    diff      two projections → Difference (refs in and out, forms, tokens per section, the
              stable prefix and the token prefix the two prompts share)

Length: about 800 lines, past the house's ~400, because the analysis has no user but these
commands and is kept beside them; it is the part to move into its own module (``cli/explain.py``)
when anything else needs it. Every failure a person can cause (a missing or unreadable file, a
corrupt database, a bad budget, an unknown ref or turn, a JSONL line that does not parse) surfaces
as one HolonCtxError line and exit status 2.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.resources
import io
import itertools
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console

from holon_ctx import __version__
from holon_ctx.cli.common import (
    add_source_args,
    console,
    db_name,
    open_continuity,
    open_control_source,
    open_db,
    open_episodes,
    open_source,
    positive_int,
)
from holon_ctx.errors import InputError, StoreError, UnknownRefError
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.postgres.connection import is_postgres_url
from holon_ctx.projection.model import SECTION_ORDER, Form, Section, TurnUnit
from holon_ctx.projection.projector import ItemDecision, Projection, Projector
from holon_ctx.projection.retention import classify, turn_facts
from holon_ctx.tokens import TokenCounter

__all__ = ["DEMO_BUDGET", "Difference", "Explanation", "diff", "explain", "register"]

#: The demo's budget: large enough to show every section, small enough that folding, compaction
#: and omission all happen on the bundled ledger.
DEMO_BUDGET = 8192
DEMO_DB = Path(".holon") / "demo.db"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("demo", help="build the bundled demo ledger into SQLite and preview it")
    p.add_argument("--budget", type=positive_int, default=DEMO_BUDGET, metavar="N",
                   help=f"token budget of the prompt (default {DEMO_BUDGET})")
    p.add_argument("--db", metavar="PATH", default=str(DEMO_DB),
                   help=f"where to build the demo ledger (default {DEMO_DB}; reused when current); "
                        "a postgresql:// URL builds it into session 'demo' (or --session-key)")
    _view_args(p, pager=True)
    p.set_defaults(func=cmd_demo)

    p = subparsers.add_parser("preview", help="the prompt as the model will read it, explained")
    _projection_args(p)
    _view_args(p, pager=True)
    p.set_defaults(func=cmd_preview)

    p = subparsers.add_parser("explain", help="why one ref is in, compacted, folded, archived or out",
                              usage="holon-ctx explain (SOURCE | --db PATH) --budget N REF "
                                    "[--at TURN_ID] [--json] [--plain]")
    # SOURCE is optional (--db replaces it) and REF is not, and options may sit between them
    # (`explain FILE --budget N REF`). argparse consumes each positional once, so both arrive as
    # operands: whatever it leaves over that is not an option joins them (see _intermixed).
    p.add_argument("operands", nargs="*", metavar="SOURCE REF",
                   help="a ledger JSONL file (unless --db) and a ref kind:id, e.g. turn:t41")
    _intermixed(p)
    p.add_argument("--db", metavar="PATH", help="a holon-ctx SQLite ledger")
    p.add_argument("--budget", type=positive_int, required=True, metavar="N",
                   help="token budget of the prompt")
    p.add_argument("--at", metavar="TURN_ID", help="project as of an earlier turn")
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    _view_args(p)
    p.set_defaults(func=cmd_explain)

    p = subparsers.add_parser("diff", help="what changes between two projections (budgets or turns)")
    add_source_args(p)
    p.add_argument("--budget", type=positive_int, action="append", required=True, metavar="N",
                   help="token budget; give it twice to compare two budgets")
    p.add_argument("--at", action="append", metavar="TURN_ID",
                   help="project as of this turn; give it twice to compare two turns")
    p.add_argument("--json", action="store_true", help="print the difference as JSON")
    _view_args(p)
    p.set_defaults(func=cmd_diff)

    # `stats` (holon_ctx.cli.ledger_cmds) calls args._extra_stats(store, console) when it is set;
    # --budget sets it, so stats gains a per-section table without this module owning stats.
    stats = getattr(subparsers, "choices", {}).get("stats")
    if stats is not None:
        stats.add_argument("--budget", type=positive_int, metavar="N", action=_StatsBudget,
                           help="also show tokens per section of a projection at this budget")


def _intermixed(parser: argparse.ArgumentParser) -> None:
    """Let ``parser`` take operands after its options: leftover non-option words join operands."""
    plain = parser.parse_known_args

    def parse_known_args(args: Any = None, namespace: Any = None) -> tuple[Any, list[str]]:
        ns, extras = plain(args, namespace)
        ns.operands = [*ns.operands, *(e for e in extras if not e.startswith("-"))]
        return ns, [e for e in extras if e.startswith("-")]

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def _projection_args(p: argparse.ArgumentParser) -> None:
    add_source_args(p)
    p.add_argument("--budget", type=positive_int, required=True, metavar="N",
                   help="token budget of the prompt")
    p.add_argument("--at", metavar="TURN_ID", help="project as of an earlier turn")


def _columns(text: str) -> int:
    """argparse type for --width: below 40 columns the header and bars cannot be laid out."""
    value = positive_int(text)
    if value < 40:
        raise argparse.ArgumentTypeError(f"expected a width of at least 40 columns, got {text!r}")
    return value


def _view_args(p: argparse.ArgumentParser, *, pager: bool = False) -> None:
    p.add_argument("--plain", action="store_true", help="no colour (also when not a terminal)")
    p.add_argument("--width", type=_columns, metavar="W",
                   help="render at this many columns, at least 40 (default: the terminal's)")
    if pager:
        p.add_argument("--no-pager", action="store_true",
                       help="on a terminal, print instead of paging long output (PAGER, less)")


@contextmanager
def opened(args: argparse.Namespace) -> Iterator[tuple[LedgerStore, Projector]]:
    """The SOURCE's store and a projector over it (recalling episodes when the database holds
    them), closed afterwards; SQLite failures mid-read become one-line errors."""
    from holon_ctx.cli.episodes_cmd import open_episode_source  # noqa: PLC0415

    where = getattr(args, "db", None) or getattr(args, "source", None) or "database"
    store = open_source(args)
    episodes = None
    try:
        episodes = open_episode_source(store)
        yield store, Projector(store, episodes=episodes, control=open_control_source(store))
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{where}: not a usable holon-ctx database ({exc})") from None
    finally:
        with suppress(sqlite3.Error):
            if episodes is not None:
                episodes.close()
            store.close()


def episode_lookup(projector: Projector) -> Callable[[int], dict[str, Any] | None]:
    """The archived episode covering a turn sequence number, whether recalled or not."""
    source = projector.episodes
    store = getattr(source, "episodes", None)

    def covering(seq: int) -> dict[str, Any] | None:
        if store is None:
            return None
        num = store.max_num_before(seq) + 1
        ep = store.episodes([num]).get(num)
        if ep is None or not ep.span.first_seq <= seq <= ep.span.last_seq:
            return None
        return {"ref": ep.ref, "covers": list(ep.covers), "score": None,
                "representation": "not recalled for this turn"}
    return covering


def trust_lookup(store: LedgerStore) -> Callable[[str], str | None]:
    def trust_of(ref: str) -> str | None:
        stored = store.get(ref)
        trust = stored.record.trust if stored is not None else None
        return trust.value if trust is not None else None
    return trust_of


def _preview(args: argparse.Namespace, budget: int, at: str | None) -> int:
    from holon_ctx.cli.preview import print_preview  # noqa: PLC0415 - only the view needs it

    with opened(args) as (store, projector):
        projection = projector.project(budget_tokens=budget, at=at)
        out = console(plain=args.plain, width=args.width)
        pager = None if getattr(args, "no_pager", False) or not out.is_terminal else pager_command()
        if pager is None:
            print_preview(out, projection, trust_lookup(store))
            return 0
        # Render once into a buffer with the terminal's width and colours, then decide.
        buf = io.StringIO()
        screen = Console(file=buf, width=out.width, force_terminal=True,
                         color_system=out.color_system,  # type: ignore[arg-type]
                         no_color=out.no_color, highlight=False, soft_wrap=False)
        print_preview(screen, projection, trust_lookup(store))
    text = buf.getvalue()
    if text.count("\n") < out.height:
        sys.stdout.write(text)
    else:
        page(pager, text)
    return 0


def pager_command() -> list[str] | None:
    """The pager, like git's: HOLON_CTX_PAGER, else PAGER, else less; "" or "cat" turn it off."""
    raw = os.environ.get("HOLON_CTX_PAGER", os.environ.get("PAGER", "less"))
    command = shlex.split(raw)
    return None if not command or command == ["cat"] else command


def page(command: list[str], text: str) -> None:
    """Show ``text`` through ``command``; without a usable pager, print it."""
    env = dict(os.environ)
    # As git does: quit when it fits one screen, pass colours through, leave the screen as is.
    env.setdefault("LESS", "FRX")
    try:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, env=env)
    except OSError:
        sys.stdout.write(text)
        return
    # Ctrl-C belongs to the pager while it runs (less uses it to stop a search).
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc.communicate(text.encode())
    except BrokenPipeError:
        pass  # the reader quit before the end: not an error
    finally:
        proc.wait()
        signal.signal(signal.SIGINT, previous)


def cmd_preview(args: argparse.Namespace) -> int:
    return _preview(args, args.budget, args.at)


# -- demo ---------------------------------------------------------------------------------------
def _demo_stamp(data: bytes) -> str:
    """What a built demo database must match: the bundled ledger and the code that imported it."""
    h = hashlib.sha256(data)
    # The recipe changes when the build does more (episodes, then a continuity envelope), so an
    # older demo database is rebuilt rather than shown without what the build now adds.
    h.update(f"\0holon-ctx {__version__}\0recipe: import+compact/2".encode())
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
        for suffix in ("", "-wal", "-shm"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    sys.stderr.write(f"holon-ctx: built the demo ledger ({n} records, {archived} episodes "
                     f"archived) into {db} in {time.perf_counter() - started:.2f} s; later runs "
                     "reuse it\n")
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
    sys.stderr.write(f"holon-ctx: built the demo ledger ({n} records, {archived} episodes "
                     f"archived) into {db_name(url, session)} in "
                     f"{time.perf_counter() - started:.2f} s; later runs reuse it\n")
    return True


def _archive(ledger: LedgerStore, stamp: str | None = None) -> int:
    """Compact the demo: archive old turn ranges into episodes and seal a continuity envelope,
    so the preview recalls episodes and pins the governed control state."""
    from holon_ctx.compaction import SessionConfig, compact  # noqa: PLC0415

    episodes = open_episodes(ledger, create=True)
    continuity = open_continuity(ledger)
    assert episodes is not None  # the demo is built into a database ledger
    assert continuity is not None
    try:
        archived = len(compact(ledger, episodes, continuity, session=SessionConfig(),
                               clock=_demo_clock()).archive.archived)
        if stamp is not None:
            episodes.set_meta({"demo_stamp": stamp})  # last: a build cut short is redone
        return archived
    finally:
        continuity.close()
        episodes.close()


def _demo_clock() -> Callable[[], datetime]:
    """A clock that starts at the demo day's end and ticks a second per call: the demo database
    is the same on every machine (the governed store only needs time not to go backwards)."""
    ticks = itertools.count()
    start = datetime(2026, 11, 30, 18, 45, tzinfo=UTC)
    return lambda: start + timedelta(seconds=next(ticks))


def cmd_demo(args: argparse.Namespace) -> int:
    if is_postgres_url(args.db):
        args.session_key = args.session_key or "demo"
        build_demo_session(args.db, args.session_key)
    else:
        build_demo(Path(args.db))
    args.source = None
    return _preview(args, args.budget, None)


def cmd_explain(args: argparse.Namespace) -> int:
    from holon_ctx.cli.preview import print_explanation  # noqa: PLC0415

    operands: list[str] = args.operands
    if len(operands) != (1 if args.db else 2):
        raise InputError("expected SOURCE (or --db PATH) and one REF, got "
                         + (" ".join(repr(o) for o in operands) or "neither"))
    args.source = None if args.db else operands[0]
    args.ref = operands[-1]
    with opened(args) as (store, projector):
        projection = projector.project(budget_tokens=args.budget, at=args.at)
        result = explain(store, projector, projection, args.ref)
    if args.json:
        sys.stdout.buffer.write(to_json(result) + b"\n")
    else:
        print_explanation(console(plain=args.plain, width=args.width), result)
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from holon_ctx.cli.preview import print_diff  # noqa: PLC0415

    budgets: list[int] = args.budget
    ats: list[str] = args.at or []
    if len(budgets) > 2 or len(ats) > 2 or (len(budgets) < 2 and len(ats) < 2):
        raise InputError("diff compares two projections: give --budget twice (two budgets), "
                         "--at twice (two turns), or both")
    with opened(args) as (_, projector):
        a = projector.project(budget_tokens=budgets[0], at=ats[0] if ats else None)
        b = projector.project(budget_tokens=budgets[-1], at=ats[-1] if ats else None)
    result = diff(a, b, projector.counter)
    if args.json:
        sys.stdout.buffer.write(to_json(result) + b"\n")
    else:
        print_diff(console(plain=args.plain, width=args.width), result)
    return 0


# -- explain ------------------------------------------------------------------------------------
class Explanation(msgspec.Struct, kw_only=True):
    """Why one ref is where it is in a projection (``explain --json`` prints this)."""

    ref: str
    #: in_full, excerpted, clipped, compacted, ref_only, omitted, folded, archived,
    #: outside_window, not_a_candidate or not_yet_appended.
    status: str
    summary: str
    budget_tokens: int
    current_turn: str
    record: dict[str, Any] | None = None
    item: dict[str, Any] | None = None
    fold: dict[str, Any] | None = None
    episode: dict[str, Any] | None = None
    #: The reason code the manifest gives the ref, when it lists it as omitted.
    reason: str | None = None
    window_first: str | None = None
    to_get_in: str = ""
    #: The smallest budget (checked by projecting) at which the ref is shown, when one exists.
    enters_at_budget: int | None = None
    #: How the prompt shows the record's own text: its fence or label, and what was neutralised.
    shown_as: str | None = None


_SHOWN = ("in_full", "excerpted", "clipped")
_SHRUNK = ("compacted", "ref_only", "clipped", "clipped_out")
_OUT = ("omitted", "outside_window", "archived")
_EXCERPT_MARK = "tokens omitted; full text:"


def _status(p: Projection, ref: str, owner: str | None, owner_seq: Callable[[str], int | None],
            archived_in: Callable[[int], dict[str, Any] | None] | None = None,
            ) -> tuple[str, ItemDecision | None, Any]:
    """Where ``ref`` stands in ``p``: ``(status, the item holding it, fold or episode)``."""
    holders = [d for d in p.decisions if ref in d.refs]
    selected_in = next((s.name for s in p.manifest.sections if ref in s.selected), None)
    if selected_in is not None:
        d = next((h for h in holders if h.section.value == selected_in and h.form is not None),
                 holders[0] if holders else None)
        if d is None:
            return "in_full", None, None
        if d.clipped:
            return "clipped", d, None
        if ref == d.refs[0] and d.form is not None and d.tokens < d.full_tokens:
            return ("compacted" if d.form is Form.COMPACT else "ref_only"), d, None
        blocks = [b for _, r in p.section_items.get(d.section, ()) for b in r.blocks
                  if ref in b.refs]
        if any(_EXCERPT_MARK in b.body for b in blocks):
            return "excerpted", d, None
        return "in_full", d, None
    shown = [h for h in holders if h.form is not None]
    if shown:
        d = shown[0]
        # Not selected itself: its item shows less than the record (a digest, a ref, or a clip
        # that ends before it).
        return ("clipped_out" if d.clipped else "ref_only" if d.form is Form.REF
                else "compacted"), d, None
    if holders:
        return "omitted", holders[0], None
    keys = {ref, owner}
    for f in p.folds:
        if keys & set(f.refs):
            return "folded", None, f
    seq = owner_seq(owner) if owner else None
    first = p.manifest.window.get("first")
    first_seq = owner_seq(str(first)) if first else None
    if seq is None or first_seq is None:
        return "not_a_candidate", None, None
    if seq >= first_seq:
        # In the window, yet neither an item nor in a shown fold: its fold line was left out.
        folds = [(owner_seq(d.key.removeprefix("fold:")) or -1, d) for d in p.decisions
                 if d.kind == "fold"]
        before = [(s, d) for s, d in folds if s <= seq]
        return "folded", max(before, key=lambda sd: sd[0])[1] if before else None, None
    for e in p.manifest.episodes:
        lo, hi = (owner_seq(c) for c in e.covers)
        if lo is not None and hi is not None and lo <= seq <= hi:
            return "archived", next((d for d in p.decisions if d.key == e.ref), None), {
                "ref": e.ref, "covers": list(e.covers), "score": e.score,
                "representation": e.representation}
    found = archived_in(seq) if archived_in is not None else None
    if found is not None:
        return "archived", None, found
    return "outside_window", None, None


def explain(store: LedgerStore, projector: Projector, p: Projection, ref_arg: str) -> Explanation:
    ref = ref_arg if ":" in ref_arg else f"turn:{ref_arg}"
    base: dict[str, Any] = {"ref": ref, "budget_tokens": p.budget_tokens, "current_turn": p.current_turn,
            "window_first": p.manifest.window.get("first")}
    if ref.startswith("episode:"):
        return _explain_episode(projector, p, ref, base)
    stored = store.get(ref)
    if stored is None:
        raise UnknownRefError(ref, hint="no such record in the ledger")
    rec = stored.record
    owner = ref if isinstance(rec, Turn) else (
        f"turn:{rec.turn_id}" if getattr(rec, "turn_id", None) else None)
    record: dict[str, Any] = {
        "kind": ref.partition(":")[0], "origin": rec.origin.value if rec.origin else None,
        "trust": rec.trust.value if rec.trust else None, "tokens": stored.tokens, "turn": owner}
    if isinstance(rec, Turn):
        record["trigger"] = rec.trigger
    limit_pos = p.manifest.window.get("limit_pos")
    if isinstance(limit_pos, int) and stored.pos >= limit_pos:
        return Explanation(**base, status="not_yet_appended", record=record,
                           summary=f"appended after {p.current_turn}, the turn projected",
                           to_get_in=f"project a later turn (--at) than {p.current_turn}")

    seqs: dict[str, int | None] = {}

    def owner_seq(turn_ref: str) -> int | None:
        if turn_ref not in seqs:
            found = store.get(turn_ref)
            seqs[turn_ref] = found.turn_seq if found is not None else None
        return seqs[turn_ref]

    archived_in = episode_lookup(projector)
    status, d, extra = _status(p, ref, owner, owner_seq, archived_in)
    reason = next((o["reason"] for s in p.manifest.sections for o in s.omitted
                   if o["ref"] == ref), None)
    item = None if d is None else _item_dict(d)
    result = Explanation(**base, status=status, record=record, item=item, reason=reason,
                         summary=_summary(status, ref, record, item))
    if status == "folded":
        if owner is not None and stored.turn_seq is not None:
            record["priority"], record["facts"] = _turn_class(store, stored.turn_seq, limit_pos)
        fold = extra
        if fold is not None:
            result.fold = {"first": fold.first, "last": fold.last, "count": fold.count,
                           "kinds": fold.kinds}
        elif d is not None:
            result.fold = {**_fold_run(store, p, d.key.removeprefix("fold:"), limit_pos),
                           "shown": False}
        result.to_get_in = (
            "nothing about the budget: runs of low-value turns (ticks, retries, polls) always fold "
            "to one counted line; it would show on its own if it carried operator input or a state "
            "change, became the current turn or continuation anchor, or were pinned by the "
            "operator (a pin record targeting it)")
        if fold is None and d is not None and d.next_budget:
            result.to_get_in += f"; the fold line itself enters at a budget of ≥ {d.next_budget}"
        return result
    if status == "archived":
        result.episode = extra
    if status in _SHOWN and owner != ref:
        result.shown_as = _shown_as(p, ref)
    if status in ("in_full", "excerpted"):
        result.to_get_in = ("nothing: it is in the prompt" + (
            "; long text shows head and tail, the whole of it stays in the ledger"
            if status == "excerpted" else ""))
        return result
    if status == "not_a_candidate":
        result.to_get_in = ("records of this kind enter through the state they fold into (the "
                            "current work item, open waits, the latest environment, the newest "
                            "pins); this one is superseded or no longer current")
        return result
    window_note = (f"older than the recent window (first turn in window: {base['window_first']}); "
                   "an operator pin on it or a continuation anchor to it brings it in at any budget"
                   if status in ("outside_window", "archived") else "")
    if status == "archived":
        result.shown_as = _in_episode_text(p, ref)
    found = _entry_budget(projector, p, ref, owner, status, owner_seq)
    result.enters_at_budget = found
    goal = ("shown in full" if status in _SHRUNK or owner not in (None, ref)
            else "in the prompt")
    if found is not None:
        hint = f"would be {goal} at a budget of ≥ {found} tokens (checked by projecting)"
    elif d is not None and d.next_budget and d.kind != "episode":
        hint = f"would be {goal} at a budget of ≥ {d.next_budget} tokens by the plan's order"
    elif status == "archived":
        hint = (f"a larger budget does not bring it back (checked up to "
                f"{p.budget_tokens << _DOUBLINGS} tokens): archived turns are represented by "
                "their episode")
    else:
        hint = f"not {goal} at any budget up to {p.budget_tokens << _DOUBLINGS} tokens"
    if status == "archived" and d is not None and d.kind == "episode":
        hint += (f"; meanwhile its episode {d.key} is recalled as {item['form']}"
                 if d.form is not None and item is not None else
                 f"; its episode {d.key} was recalled but left out for budget")
        if d.next_budget:
            hint += f" (its next form enters at a budget of ≥ {d.next_budget} tokens)"
    result.to_get_in = f"{window_note}; {hint}" if window_note else hint
    return result


_DOUBLINGS = 5


def _item_dict(d: ItemDecision) -> dict[str, Any]:
    return {"key": d.key, "section": d.section.value, "priority": d.priority.label,
            "reasons": list(d.reasons), "chain": d.chain, "kind": d.kind,
            "form": "omitted" if d.form is None else "clipped" if d.clipped else d.form.label,
            "tokens": d.tokens, "full_tokens": d.full_tokens, "next_budget": d.next_budget}


def _in_episode_text(p: Projection, ref: str) -> str | None:
    """Where a recalled episode quotes the record: its fence, or the line that names the ref."""
    for key, rendered in p.section_items.get(Section.EPISODES, ()):
        text = rendered.text
        fence = next((line for line in text.split("\n")
                      if line.startswith(f'<data ref="{ref}" ')), None)
        if fence is not None:
            return (f"quoted by {key} inside {fence} … </data>: its text cannot close the fence "
                    "or pose as operator input")
        if f"({ref}" in text or f" {ref})" in text or f", {ref}" in text:
            return f"named by {key} (its text is not quoted there)"
    return None


def _shown_as(p: Projection, ref: str) -> str | None:
    """The label or fence the record's text sits under, and how much forgery was defused."""
    for _, rendered in (pair for items in p.section_items.values() for pair in items):
        for block in rendered.blocks:
            if ref not in block.refs or not block.body:
                continue
            head = block.head.rstrip("\n").split("\n")[-1]
            fences = block.body.count("\u2039data") + block.body.count("\u2039/data")
            claims = block.body.count("operator (claimed)")
            notes = [f"{fences} fence-like tag(s) in the text neutralised (‹data)"] if fences else []
            if claims:
                notes.append(f"{claims} fake 'operator (trusted)' label(s) shown as "
                             "'operator (claimed)'")
            where = ("inside " + head + " … </data>: its text cannot close the fence or pose as "
                     "operator input") if head.startswith("<data ") else f"under '{head}'"
            return "; ".join([where, *notes])
    return None


#: Facts a fold line counts by trigger instead (as the projector's fold line does).
_BY_TRIGGER = ("noop_tick", "provider_retry", "provider_fallback", "transport_recovery")


def _fold_run(store: LedgerStore, p: Projection, first: str, limit_pos: Any) -> dict[str, Any]:
    """The run of a fold whose line was left out (the projection reports shown folds only): the
    window turns from ``first`` up to the next turn that is an item of its own."""
    limit = limit_pos if isinstance(limit_pos, int) else store.end_pos()
    start = store.get(first)
    if start is None or start.turn_seq is None:
        return {"first": first}
    starts = [d.key.removeprefix("fold:") if d.kind == "fold" else d.key for d in p.decisions
              if d.kind in ("turn", "fold")]
    later = [seq for ref in starts if (found := store.get(ref)) is not None
             and (seq := found.turn_seq) is not None and seq > start.turn_seq]
    end = min(later, default=start.turn_seq + 1)
    run = [t for t in store.turns_before(end, end - start.turn_seq, limit)
           if (t.turn_seq or 0) >= start.turn_seq][::-1]
    kinds: dict[str, int] = {}
    for t in run:
        facts = _turn_class(store, t.turn_seq or 0, limit)[1]
        trigger = t.record.trigger if isinstance(t.record, Turn) else "turn"
        kind = trigger if not facts or facts[0] in _BY_TRIGGER else facts[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    return {"first": first, "last": run[-1].ref if run else first, "count": len(run),
            "kinds": kinds}


def _turn_class(store: LedgerStore, seq: int, limit_pos: Any) -> tuple[str, list[str]]:
    """The retention class and facts of one turn, judged beside the turn before it (as the
    projector does: repeated polls and duplicate wakes are only visible against their neighbour)."""
    limit = limit_pos if isinstance(limit_pos, int) else store.end_pos()
    turns = store.turns_before(seq + 1, 2, limit)[::-1]
    records = store.records_of_turns(turns[0].turn_seq or 0, seq, limit)
    units = [TurnUnit(stored=t, records=tuple(r for r in records if r.turn_seq == t.turn_seq))
             for t in turns]
    facts = turn_facts(units[-1], units[-2] if len(units) > 1 else None)
    return classify(facts).label, facts


def _entry_budget(projector: Projector, p: Projection, ref: str, owner: str | None, status: str,
                  owner_seq: Callable[[str], int | None]) -> int | None:
    """The smallest budget at which the ref gets (fully) in, found by projecting: doubling from
    the plan's own estimate, then bisecting. Budget monotonicity (a property the engine tests)
    is what makes the bisection valid."""
    # Shrunk, or a record inside a turn: only its whole text counts (a clipped turn may cut the
    # record off). An item of its own: any form in the prompt.
    want = (("in_full", "excerpted") if status in _SHRUNK or owner not in (None, ref) else
            (*_SHOWN, "compacted", "ref_only"))

    def reached(budget: int) -> bool:
        q = projector.project(budget_tokens=budget, at=p.current_turn)
        return _status(q, ref, owner, owner_seq)[0] in want

    decision = next((d for d in p.decisions if ref in d.refs), None)
    lo = p.budget_tokens
    hi = decision.next_budget if decision and decision.next_budget and \
        decision.next_budget > lo else lo * 2
    for _ in range(_DOUBLINGS):
        if reached(hi):
            break
        lo, hi = hi, hi * 2
    else:
        return None
    # The plan's estimate is exact whenever the larger window brings nothing ahead of the item:
    # one projection just below it settles that, instead of a whole bisection.
    if hi - lo > 1 and not reached(hi - 1):
        return hi
    hi -= 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reached(mid) else (mid, hi)
    return hi


def _explain_episode(projector: Projector, p: Projection, ref: str,
                     base: dict[str, Any]) -> Explanation:
    ep = next((e for e in p.manifest.episodes if e.ref == ref), None)
    if ep is None:
        # Archived but not recalled for this turn (recall ranks; the window excludes overlap).
        store = getattr(projector.episodes, "episodes", None)
        stored = store.get(ref.removeprefix("episode:")) if store is not None else None
        if stored is None:
            raise UnknownRefError(ref, hint="no such episode in this ledger")
        return Explanation(
            **base, status="omitted",
            summary=f"archived episode covering {stored.covers[0]}–{stored.covers[1]}, not "
                    "recalled for this turn",
            episode={"ref": ref, "covers": list(stored.covers), "score": None,
                     "representation": "not recalled"},
            to_get_in="recall ranks episodes by relevance to the current turn (BM25 over its "
                      "operator and task text, boosts for its work item, shared refs and open "
                      "items) among those ending before the recent window; a turn that shares "
                      "more of its terms or refs would recall it")
    shown = ep.representation != "omitted"
    d = next((x for x in p.decisions if x.key == ref), None)
    return Explanation(
        **base, status="in_full" if ep.representation == "full" else (
            "omitted" if not shown else "compacted" if ep.representation == "compact"
            else "ref_only"),
        summary=f"recalled episode covering {ep.covers[0]}–{ep.covers[-1]}, score {ep.score}, "
                f"{ep.representation}",
        item=None if d is None else _item_dict(d),
        episode={"ref": ep.ref, "covers": list(ep.covers), "score": ep.score,
                 "representation": ep.representation},
        to_get_in=("nothing: it is in the prompt" if ep.representation == "full" else
                   f"its next form enters at a budget of ≥ {d.next_budget} tokens"
                   if d is not None and d.next_budget else "a higher recall score or budget"))


_STATUS_TEXT = {
    "in_full": "in the prompt",
    "excerpted": "in the prompt, long text excerpted (head and tail)",
    "clipped": "in the prompt, clipped to fit the budget",
    "clipped_out": "not shown: its item is clipped to fit the budget before it",
    "compacted": "compacted: its turn shows as a one-line digest",
    "ref_only": "reference only: the prompt names it without its content",
    "omitted": "left out for budget",
    "folded": "folded into a counted line with other low-value turns",
    "archived": "outside the recent window, archived in an episode",
    "outside_window": "outside the recent window: not a candidate",
    "not_a_candidate": "not a candidate for this projection",
}


def _summary(status: str, ref: str, record: dict[str, Any],
             item: dict[str, Any] | None) -> str:
    text = _STATUS_TEXT[status]
    if item is not None and status in ("compacted", "ref_only", "clipped_out") and \
            item["key"] != ref:
        text = f"not shown itself: its item {item['key']} is {item['form']}"
    if status in _SHOWN and record.get("trust") in ("untrusted_external", "model_output"):
        text += f", fenced as {record['trust'].replace('_', ' ')} text"
    elif status in _SHOWN and record.get("trust") == "trusted_operator":
        text += ", as the operator's own words"
    return text


# -- diff ---------------------------------------------------------------------------------------
class SectionDelta(msgspec.Struct, kw_only=True):
    name: str
    a_tokens: int
    b_tokens: int
    change: int
    a_representation: str
    b_representation: str


class Difference(msgspec.Struct, kw_only=True):
    """Two projections compared (``diff --json`` prints this)."""

    a: dict[str, Any]
    b: dict[str, Any]
    entered: list[str]
    left: list[str]
    form_changes: list[dict[str, str]]
    sections: list[SectionDelta]
    stable_prefix_changed: bool
    stable_prefix_tokens: list[int]
    #: Sections, from the top, whose text is byte-identical in both prompts.
    identical_sections: list[str]
    first_difference: str | None
    #: Tokens the two prompts share from the start: what a provider's prompt cache can reuse.
    shared_prefix_tokens: int


def _side(p: Projection) -> dict[str, Any]:
    return {"budget_tokens": p.budget_tokens, "current_turn": p.current_turn,
            "used_tokens": p.used_tokens, "relation": p.relation.value}


def _selected(p: Projection) -> list[str]:
    return [r for s in p.manifest.sections for r in s.selected]


def _form(d: ItemDecision) -> str:
    return "omitted" if d.form is None else "clipped" if d.clipped else d.form.label


def diff(a: Projection, b: Projection, counter: TokenCounter) -> Difference:
    sel_a, sel_b = _selected(a), _selected(b)
    set_a, set_b = set(sel_a), set(sel_b)
    forms_a = {d.key: _form(d) for d in a.decisions}
    changes = [{"key": d.key, "a": forms_a[d.key], "b": _form(d)} for d in b.decisions
               if d.key in forms_a and forms_a[d.key] != _form(d)]
    sections = [SectionDelta(name=sa.name, a_tokens=sa.used_tokens, b_tokens=sb.used_tokens,
                             change=sb.used_tokens - sa.used_tokens,
                             a_representation=sa.representation,
                             b_representation=sb.representation)
                for sa, sb in zip(a.manifest.sections, b.manifest.sections, strict=True)]
    identical: list[str] = []
    first_difference = None
    for section in SECTION_ORDER:
        if a.section_text.get(section, "") != b.section_text.get(section, ""):
            first_difference = section.value
            break
        identical.append(section.value)
    ta, tb = counter.encode(a.text), counter.encode(b.text)
    shared = next((i for i, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y),
                  min(len(ta), len(tb)))
    return Difference(
        a=_side(a), b=_side(b),
        entered=[r for r in sel_b if r not in set_a], left=[r for r in sel_a if r not in set_b],
        form_changes=changes, sections=sections,
        stable_prefix_changed=a.stable_prefix != b.stable_prefix,
        stable_prefix_tokens=[counter.count(a.stable_prefix), counter.count(b.stable_prefix)],
        identical_sections=identical, first_difference=first_difference,
        shared_prefix_tokens=shared)


def to_json(value: msgspec.Struct) -> bytes:
    return msgspec.json.encode(value)


# -- stats --------------------------------------------------------------------------------------
class _StatsBudget(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,  # noqa: ARG002
                 values: Any, option_string: str | None = None) -> None:  # noqa: ARG002
        setattr(namespace, self.dest, values)
        namespace._extra_stats = lambda store, out: _section_stats(store, out, int(values))


def _section_stats(store: LedgerStore, out: Any, budget: int) -> None:
    from rich.table import Table  # noqa: PLC0415

    from holon_ctx.cli.episodes_cmd import open_episode_source  # noqa: PLC0415

    episodes = None
    try:
        episodes = open_episode_source(store)
        projection: Projection = Projector(store, episodes=episodes).project(
            budget_tokens=budget)
    except sqlite3.DatabaseError as exc:
        where = getattr(store, "path", "database")
        raise StoreError(f"{where}: not a usable holon-ctx database ({exc})") from None
    finally:
        if episodes is not None:
            episodes.close()
    table = Table(title=f"tokens per section at a budget of {budget} "
                        f"(latest turn {projection.current_turn}, used {projection.used_tokens})")
    for name, justify in (("section", "left"), ("representation", "left"),
                          ("allocated", "right"), ("used", "right"), ("refs in", "right"),
                          ("refs left out", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in projection.manifest.sections:
        table.add_row(s.name, s.representation, str(s.allocated_tokens), str(s.used_tokens),
                      str(len(s.selected)), str(len(s.omitted)))
    table.add_row("total", "", str(projection.budget_tokens), str(projection.used_tokens), "", "")
    out.print(table)
