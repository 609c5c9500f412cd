"""``holon-ctx demo``, ``preview``, ``explain`` and ``diff``, and the per-section part of ``stats``.

The commands are thin: open the SOURCE, project, and hand the result to :mod:`.preview`, which
draws everything a person reads. The analysis lives beside them, one module each:

    explain   :mod:`.explain` — where a ref stands and the smallest budget that shows it
    diff      :mod:`.diff` — two projections compared
    demo      :mod:`.demo` — the bundled ledger built into a SQLite file

Every failure a person can cause (a missing or unreadable file, a corrupt database, a bad budget,
an unknown ref or turn, a JSONL line that does not parse) surfaces as one HolonCtxError line and
exit status 2.
"""

from __future__ import annotations

import argparse
import io
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import msgspec

from holon_ctx import LedgerStore
from holon_ctx.cli._api import usage_store_for
from holon_ctx.cli.common import (
    add_source_args,
    check_session_key,
    console,
    control_source,
    open_source,
    positive_int,
)
from holon_ctx.cli.demo import DEMO_BUDGET, DEMO_DB, build_demo, build_demo_session
from holon_ctx.cli.diff import Difference, diff
from holon_ctx.cli.epochs_view import EpochView
from holon_ctx.cli.explain import Explanation, explain
from holon_ctx.cli.file_episodes import FileArchive
from holon_ctx.cli.session_view import MODES, as_projection, runtime_request
from holon_ctx.cli.terminal import SafeConsole, write_data_json
from holon_ctx.errors import InputError, StoreError, quote_value
from holon_ctx.lowlevel import Projection, Projector, StoreEpisodeSource
from holon_ctx.postgres import is_postgres_url

__all__ = ["DEMO_BUDGET", "Difference", "Explanation", "diff", "explain", "register", "trust_lookup"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("demo", help="build the bundled demo ledger into SQLite and preview it")
    p.add_argument("--budget", type=positive_int, default=DEMO_BUDGET, metavar="N",
                   help=f"token budget of the prompt (default {DEMO_BUDGET})")
    p.add_argument("--db", metavar="PATH", default=str(DEMO_DB),
                   help=f"where to build the demo ledger (default {DEMO_DB}; reused when current); "
                        "a postgresql:// URL builds it into session 'demo' (or --session-key)")
    mode_arg(p)
    _view_args(p, pager=True)
    p.set_defaults(func=cmd_demo)

    p = subparsers.add_parser("preview", help="the prompt as the model will read it, explained")
    _projection_args(p)
    _view_args(p, pager=True)
    p.set_defaults(func=cmd_preview)

    p = subparsers.add_parser("explain", help="why one ref is in, compacted, folded, archived or out",
                              usage="holon-ctx explain (SOURCE | --db PATH [--session-key KEY]) --budget N "
                                    "REF [--at TURN_ID] [--mode {session,stateless}] [--json] [--plain] "
                                    "[--width W]")
    # SOURCE is optional (--db replaces it) and REF is not, and options may sit between them
    # (`explain FILE --budget N REF`). argparse consumes each positional once, so both arrive as
    # operands: whatever it leaves over that is not an option joins them (see _intermixed).
    p.add_argument("operands", nargs="*", metavar="SOURCE REF",
                   help="a ledger JSONL file (unless --db) and a ref kind:id, e.g. turn:t41")
    _intermixed(p)
    p.add_argument("--db", metavar="PATH",
                   help="a holon-ctx SQLite ledger, or a postgresql:// URL (with --session-key)")
    p.add_argument("--budget", type=positive_int, required=True, metavar="N",
                   help="token budget of the prompt")
    p.add_argument("--at", metavar="TURN_ID", help="explain the request as of an earlier turn")
    mode_arg(p)
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    _view_args(p)
    p.set_defaults(func=cmd_explain)

    # argparse's own usage would show --budget and --at once; they are given twice.
    p = subparsers.add_parser("diff", help="what changes between two projections (budgets or turns)",
                              usage="holon-ctx diff (SOURCE [--from {auto,ledger,openai,anthropic,"
                                    "swe-traj}] | --db PATH "
                                    "[--session-key KEY]) --budget N [--budget M] "
                                    "[--at A --at B] [--mode {session,stateless}] [--json] [--plain] "
                                    "[--width W]")
    add_source_args(p)
    p.add_argument("--budget", type=positive_int, action="append", required=True, metavar="N",
                   help="token budget; give it twice to compare two budgets")
    p.add_argument("--at", action="append", metavar="TURN_ID",
                   help="project as of this turn; give it twice to compare two turns")
    mode_arg(p)
    p.add_argument("--json", action="store_true", help="print the difference as JSON")
    _view_args(p)
    p.set_defaults(func=cmd_diff)

    # `stats` (holon_ctx.cli.ledger_cmds) calls args._extra_stats(store, console) when it is set;
    # --budget sets it, so stats gains a per-section table without this module owning stats.
    stats = getattr(subparsers, "choices", {}).get("stats")
    if stats is not None:
        stats.add_argument("--budget", type=positive_int, metavar="N", action=_StatsBudget,
                           help="also show tokens per section of the request at this budget")
        mode_arg(stats)


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
    p.add_argument("--at", metavar="TURN_ID", help="show the request as of an earlier turn")
    mode_arg(p)


def mode_arg(p: argparse.ArgumentParser) -> None:
    """``--mode``: what preview, explain and diff show (RFC 0024, decision 5)."""
    p.add_argument("--mode", choices=MODES, default="session",
                   help="session (default): the request a runtime's session sends at that turn, "
                        "read from the ledger's saved epochs (nothing is written); stateless: "
                        "the turn planned afresh, alone (docs/session.md)")


def _columns(text: str) -> int:
    """argparse type for --width: below 40 columns the header and bars cannot be laid out."""
    value = positive_int(text)
    if value < 40:
        raise argparse.ArgumentTypeError(f"expected a width of at least 40 columns, got {quote_value(text)}")
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
        with control_source(store) as control:
            yield store, Projector(store, episodes=episodes, control=control)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{where}: not a usable holon-ctx database ({exc})") from None
    finally:
        with suppress(sqlite3.Error):
            if episodes is not None:
                episodes.close()
            store.close()


def planned(store: LedgerStore, projector: Projector, budget: int, at: str | None,
            archive: FileArchive | None = None) -> tuple[Projector, Projection]:
    """The projection of ``budget`` as of ``at`` and the projector that made it: for a ledger
    read from a file whose plan binds, one recalling the in-memory archive a library session
    would hold by then (cli/file_episodes.py); otherwise ``projector``'s own."""
    projection = projector.project(budget_tokens=budget, at=at)
    if not FileArchive.applies(store, projector.episodes):
        return projector, projection
    archive = archive or FileArchive(store)
    chosen = [projector]

    def again(source: StoreEpisodeSource) -> Projection:
        chosen.append(Projector(store, projector.counter, policy=projector.policy,
                                episodes=source, control=projector.control))
        return chosen[-1].project(budget_tokens=budget, at=at)

    projection = archive.plan(projection, lambda p: p.manifest, at, again)
    return chosen[-1], projection


def trust_lookup(store: LedgerStore) -> Callable[[str], str | None]:
    def trust_of(ref: str) -> str | None:
        stored = store.get(ref)
        trust = stored.record.trust if stored is not None else None
        return trust.value if trust is not None else None
    return trust_of


def viewed(store: LedgerStore, projector: Projector, budget: int, at: str | None, mode: str,
           archive: FileArchive | None = None) -> tuple[Projector, Projection, EpochView]:
    """What ``preview``, ``explain`` and ``diff`` show of ``budget`` as of ``at``: in session
    mode (the default) the session request a runtime gets there, as a projection
    (cli/session_view.py); in stateless mode the stateless plan. Both with the runtime's epoch."""
    if mode == "stateless" or FileArchive.applies(store, projector.episodes):
        # A file's ledger: the stateless plan says whether the in-memory archive a library
        # session would hold applies (cli/file_episodes.py); the session walks with it too.
        projector, projection = planned(store, projector, budget, at, archive)
        view = runtime_request(store, projector, budget, at)
        return projector, (projection if mode == "stateless" else as_projection(view.request)), view
    view = runtime_request(store, projector, budget, at)
    return projector, as_projection(view.request), view


def _preview(args: argparse.Namespace, budget: int, at: str | None) -> int:
    from holon_ctx.cli.preview import print_preview  # noqa: PLC0415 - only the view needs it

    with opened(args) as (store, projector):
        projector, projection, view = viewed(store, projector, budget, at, args.mode)
        session = args.mode == "session"
        shown: dict[str, Any] = {"epoch": view.line()}
        if session:
            shown["request"] = view.request
            shown["control"] = projector.control.control_state() if projector.control else None
        out = console(plain=args.plain, width=args.width)
        pager = None if getattr(args, "no_pager", False) or not out.is_terminal else pager_command()
        if pager is None:
            print_preview(out, projection, trust_lookup(store), **shown)
            return 0
        # Render once into a buffer with the terminal's width and colours, then decide.
        buf = io.StringIO()
        screen = SafeConsole(file=buf, width=out.width, force_terminal=True,
                         color_system=out.color_system,  # type: ignore[arg-type]
                         no_color=out.no_color, highlight=False, soft_wrap=False)
        print_preview(screen, projection, trust_lookup(store), **shown)
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


def cmd_demo(args: argparse.Namespace) -> int:
    if is_postgres_url(args.db):
        args.session_key = args.session_key or "demo"
        build_demo_session(args.db, args.session_key)
    else:
        check_session_key(args.db, args.session_key)  # before the build, not after it
        build_demo(Path(args.db))
    args.source = None
    return _preview(args, args.budget, None)


def cmd_explain(args: argparse.Namespace) -> int:
    from holon_ctx.cli.explain_view import print_explanation  # noqa: PLC0415

    operands: list[str] = args.operands
    if len(operands) != (1 if args.db else 2):
        raise InputError("expected SOURCE (or --db PATH) and one REF, got "
                         + (" ".join(repr(o) for o in operands) or "neither"))
    args.source = None if args.db else operands[0]
    args.ref = operands[-1]
    with opened(args) as (store, projector):
        projector, projection, view = viewed(store, projector, args.budget, args.at, args.mode)
        result = explain(store, projector, projection, args.ref)
        result.mode = args.mode
        result.session = {"epoch_started_at": view.started_at, "epoch_reason": view.reason,
                          "in_request": view.request.where(result.ref)}
        if result.status == "not_yet_appended" and result.session["in_request"] is not None:
            # The plan explained is the epoch's, as of its re-plan; a record appended since is
            # in the request all the same (its appended part), not "after the turn projected".
            result.status, result.to_get_in = "in_full", "nothing: it is in the request"
            result.summary = (f"in the request, in the part appended since the session's "
                              f"re-plan at {view.started_at}")
        result.usage = usage_of(store, result.current_turn)
    if args.json:
        write_data_json(to_json(result) + b"\n")
    else:
        print_explanation(console(plain=args.plain, width=args.width), result)
    return 0


def usage_of(store: LedgerStore, turn: str) -> dict[str, Any] | None:
    """The last usage a session recorded for the call made at ``turn`` (None: none recorded)."""
    usage = usage_store_for(store)
    try:
        found = usage.of_turns([turn])
    finally:
        usage.close()
    if not found:
        return None
    o = found[-1]
    return {"model": o.model if not o.model.startswith("default:") else "",
            "estimated_tokens": o.estimated_tokens, "observed_tokens": o.observed_tokens,
            "ratio": round(o.ratio, 4), "budget_tokens": o.budget_tokens,
            "planned_tokens": o.planned_tokens, "counter": o.counter, "framing": o.framing}


def cmd_diff(args: argparse.Namespace) -> int:
    from holon_ctx.cli.explain_view import print_diff  # noqa: PLC0415

    budgets: list[int] = args.budget
    ats: list[str] = args.at or []
    if len(budgets) > 2 or len(ats) > 2 or (len(budgets) < 2 and len(ats) < 2):
        raise InputError("diff compares two projections: give --budget twice (two budgets), "
                         "--at twice (two turns), or both")
    with opened(args) as (store, projector):
        archive = FileArchive(store)  # shared: two budgets as of one turn archive once
        _, a, _ = viewed(store, projector, budgets[0], ats[0] if ats else None, args.mode,
                         archive)
        _, b, _ = viewed(store, projector, budgets[-1], ats[-1] if ats else None, args.mode,
                         archive)
    result = diff(a, b, projector.counter)
    result.mode = args.mode
    if args.json:
        write_data_json(to_json(result) + b"\n")
    else:
        print_diff(console(plain=args.plain, width=args.width), result)
    return 0


def to_json(value: msgspec.Struct) -> bytes:
    return msgspec.json.encode(value)


# -- stats --------------------------------------------------------------------------------------
class _StatsBudget(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,  # noqa: ARG002
                 values: Any, option_string: str | None = None) -> None:  # noqa: ARG002
        setattr(namespace, self.dest, values)
        # --mode is read when the table is made: it may come after --budget on the line.
        namespace._extra_stats = lambda store, out: _section_stats(
            store, out, int(values), getattr(namespace, "mode", "session"))


def _section_stats(store: LedgerStore, out: Any, budget: int, mode: str = "session") -> None:
    """The tokens per section of what ``preview`` shows at ``budget`` (the same default: the
    session request a runtime sends at the latest turn; ``--mode stateless`` the turn planned
    afresh, as before)."""
    from rich.table import Table  # noqa: PLC0415

    from holon_ctx.cli.episodes_cmd import open_episode_source  # noqa: PLC0415

    episodes = None
    try:
        episodes = open_episode_source(store)
        # With the governed state in both modes, as `project` and `preview` plan them: without
        # it, the stateless table was of another plan than `project --mode stateless` shows.
        with control_source(store) as control:
            projector = Projector(store, episodes=episodes, control=control)
            if mode == "stateless":
                _, projection = planned(store, projector, budget, None)
            else:
                _, projection, _ = viewed(store, projector, budget, None, mode)
    except sqlite3.DatabaseError as exc:
        where = getattr(store, "path", "database")
        raise StoreError(f"{where}: not a usable holon-ctx database ({exc})") from None
    finally:
        if episodes is not None:
            episodes.close()
    session = mode == "session"
    table = Table(title=f"tokens per section {'of the request a runtime sends ' if session else ''}"
                        f"at a budget of {budget} (latest turn {projection.current_turn}, used "
                        f"{projection.used_tokens}{', message framing included' if session else ''})")
    for name, justify in (("section", "left"), ("representation", "left"),
                          ("allocated", "right"), ("used", "right"), ("refs in", "right"),
                          ("refs left out", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in projection.manifest.sections:
        table.add_row(s.name, s.representation, str(s.allocated_tokens), str(s.used_tokens),
                      str(len(s.selected)), str(len(s.omitted)))
    table.add_row("total", "", str(projection.budget_tokens), str(projection.used_tokens), "", "")
    out.print(table)
