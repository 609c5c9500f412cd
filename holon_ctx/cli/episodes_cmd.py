"""``holon-ctx episodes list|show|archive|rebuild|verify --db PATH``: episode memory on the CLI.

Also :func:`open_episode_source`, which ``project`` uses to recall episodes from a SQLite ledger
that has them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec
from rich.table import Table

from holon_ctx import LedgerStore
from holon_ctx.cli._api import form_counts_maker, parse_episode_id, recapped_text
from holon_ctx.cli.common import console, db_name, open_db, open_episodes, positive_int
from holon_ctx.cli.terminal import terminal_safe, write_data_json
from holon_ctx.cli.wording import plural
from holon_ctx.errors import InputError, StoreError, UnknownRefError, quote_value
from holon_ctx.lowlevel import (
    ArchivePolicy,
    Archiver,
    BoundaryPolicy,
    Episode,
    EpisodeStore,
    StoreEpisodeSource,
)

__all__ = ["open_episode_source", "register"]


def open_episode_source(store: LedgerStore) -> StoreEpisodeSource | None:
    """An episode source for ``store`` when it is a database ledger holding episodes, else None."""
    episodes = open_episodes(store, create=False)
    return None if episodes is None else StoreEpisodeSource(episodes, store)


_DB_HELP = "a holon-ctx SQLite ledger"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("episodes", help="archived episodes: list, show, archive, rebuild, verify")
    sub = p.add_subparsers(dest="episodes_command", metavar="ACTION", required=True,
                           parser_class=type(p))

    q = sub.add_parser("list", help="a table of the episodes in a SQLite ledger")
    q.add_argument("--db", metavar="PATH", required=True, help=_DB_HELP)
    q.add_argument("--limit", type=positive_int, default=200, metavar="N",
                   help="show at most N episodes (default %(default)s)")
    q.add_argument("--offset", type=int, default=0, metavar="N",
                   help="skip the first N episodes (default %(default)s)")
    q.add_argument("--plain", action="store_true", help="no colour")
    q.set_defaults(func=cmd_list)

    q = sub.add_parser("show", help="one episode: its fields, claims and refs")
    q.add_argument("episode", metavar="EPISODE", help="an episode id (e3-9) or ref (episode:e3-9)")
    q.add_argument("--db", metavar="PATH", required=True, help=_DB_HELP)
    q.add_argument("--json", action="store_true", help="print the stored record as JSON")
    q.set_defaults(func=cmd_show)

    q = sub.add_parser("archive", help="archive every turn older than the recent window")
    q.add_argument("--db", metavar="PATH", required=True, help=_DB_HELP)
    q.add_argument("--recent", type=positive_int, default=ArchivePolicy().recent_turns, metavar="N",
                   help="turns kept out of episodes (default %(default)s)")
    q.add_argument("--max-range", type=positive_int, metavar="N",
                   help="longest episode in turns (fixed by the first archive; rebuild to change)")
    q.add_argument("--at", metavar="TURN_ID", help="archive as of an earlier turn")
    q.set_defaults(func=cmd_archive)

    q = sub.add_parser("rebuild", help="drop and rebuild every episode from the ledger")
    q.add_argument("--db", metavar="PATH", required=True, help=_DB_HELP)
    q.add_argument("--max-range", type=positive_int, metavar="N",
                   help="rebuild with another longest range (changes ids)")
    q.set_defaults(func=cmd_rebuild)

    q = sub.add_parser("verify", help="check every episode's digest and content against the ledger")
    q.add_argument("--db", metavar="PATH", required=True, help=_DB_HELP)
    q.set_defaults(func=cmd_verify)


def _policy(stored: dict[str, str], *, recent: int | None = None,
            max_range: int | None = None) -> ArchivePolicy:
    """The archive policy: the stored one unless a flag overrides it."""
    policy = ArchivePolicy() if recent is None else ArchivePolicy(recent_turns=recent)
    if "policy" in stored:
        try:
            raw = msgspec.json.decode(stored["policy"])
            policy = ArchivePolicy(recent_turns=policy.recent_turns,
                                   boundaries=BoundaryPolicy(**raw["boundaries"]),
                                   budget=type(policy.budget)(**raw["budget"]))
        except (msgspec.DecodeError, KeyError, TypeError) as exc:
            raise InputError(f"unreadable episode settings ({exc})") from None
    if max_range is not None:
        policy = ArchivePolicy(recent_turns=policy.recent_turns, budget=policy.budget,
                               boundaries=BoundaryPolicy(
                                   max_range_turns=max_range,
                                   topic_min_terms=policy.boundaries.topic_min_terms,
                                   topic_overlap=policy.boundaries.topic_overlap))
    return policy


def _open(args: argparse.Namespace, *, create: bool) -> tuple[LedgerStore, EpisodeStore | None]:
    """The ledger and its episode store (None: nothing archived yet and ``create`` is False)."""
    ledger = open_db(args.db, must_exist=True, session=args.session_key)
    try:
        return ledger, open_episodes(ledger, create=create)
    except BaseException:
        ledger.close()
        raise


def _close(ledger: LedgerStore, store: EpisodeStore | None) -> None:
    if store is not None:
        store.close()
    ledger.close()


def cmd_list(args: argparse.Namespace) -> int:
    ledger, store = _open(args, create=False)
    where = db_name(args.db, args.session_key)
    if store is None:
        ledger.close()
        print(f"no episodes in {where} yet (run `holon-ctx episodes archive` on it)")
        return 0
    try:
        total = store.count()
        rows = store.page(limit=args.limit, offset=args.offset)
    finally:
        _close(ledger, store)
    table = Table(title=f"{plural(total, 'episode')} in {where}")
    for name, justify in (("episode", "left"), ("turns", "left"), ("n", "right"),
                          ("owner", "left"), ("intents", "right"), ("decisions", "right"),
                          ("results", "right"), ("artifacts", "right"), ("unresolved", "right"),
                          ("closed by", "left"), ("digest", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for _, ep in rows:
        first, last = ep.covers
        table.add_row(ep.ref, f"{first}–{last}", str(ep.turns), ep.owner,
                      str(len(ep.operator_intents)), str(len(ep.decisions)), str(len(ep.results)),
                      str(len(ep.artifact_trail)), str(len(ep.unresolved)), ep.closed_by,
                      ep.digest.removeprefix("sha256:")[:12])
    out = console(plain=args.plain)
    if not out.is_terminal:
        out = console(plain=args.plain, width=200)  # a pipe or file: never truncate columns
    out.print(table)
    return 0


def _find(store: EpisodeStore, text: str) -> Episode:
    ident = parse_episode_id(text)
    if not ident:
        raise InputError(f"expected an episode id like e3-9 or episode:e3-9, got {quote_value(text)}")
    ep = store.get(ident)
    if ep is None:
        raise UnknownRefError(f"episode:{ident}", hint="no such episode (see `holon-ctx episodes "
                                                      "list`)")
    return ep


def cmd_show(args: argparse.Namespace) -> int:
    ledger, store = _open(args, create=False)
    try:
        ident = parse_episode_id(args.episode)
        if not ident:
            raise InputError("expected an episode id like e3-9 or episode:e3-9, got "
                             f"{quote_value(args.episode)}")
        if store is None:
            raise UnknownRefError(f"episode:{ident}", hint="no episodes archived in this database")
        ep = _find(store, args.episode)
        recaps = store.recaps(ep.id)
    finally:
        _close(ledger, store)
    if args.json:
        write_data_json(msgspec.json.encode({"episode": ep, "recaps": recaps}) + b"\n")
        return 0
    first, last = ep.covers
    out = [f"{ep.ref}",
           f"covers: {first} – {last} (closed range, {plural(ep.turns, 'turn')}: {', '.join(ep.turn_ids)})",
           f"owner: {ep.owner}",
           f"closed by: {ep.closed_by}",
           f"generated by: {ep.generated_by}",
           f"digest: {ep.digest} (over {plural(len(ep.source_refs), 'source record')})",
           f"source refs: {', '.join(ep.source_refs)}",
           f"links: {', '.join(ep.links) or '-'}"]
    for recap in recaps:
        why = f" ({', '.join(recap.reasons)})" if recap.reasons else ""
        out.append(f"recap by model {recap.model}: {recap.status.value}{why}")
    sys.stdout.write(terminal_safe("\n".join(out) + "\n\n" + recapped_text(ep, recaps)))
    return 0


def cmd_archive(args: argparse.Namespace) -> int:
    ledger, store = _open(args, create=True)
    try:
        assert store is not None  # create=True on a database ledger
        policy = _policy(store.meta(), recent=args.recent, max_range=args.max_range)
        report = Archiver(ledger, store, policy=policy, forms=form_counts_maker(ledger)).archive(
            at=args.at, to_edge=True)
        total = store.count()
    finally:
        _close(ledger, store)
    where = db_name(args.db, args.session_key)
    if report.archived:
        shown = ", ".join(report.archived[:8]) + (" …" if len(report.archived) > 8 else "")
        print(f"archived {plural(len(report.archived), 'episode')} ({shown}) covering "
              f"{plural(report.turns, 'turn')} older than the recent {policy.recent_turns}; "
              f"{plural(total, 'episode')} in {where}")
    else:
        print(f"nothing new to archive (recent window {plural(policy.recent_turns, 'turn')}"
              + (f", horizon {report.horizon}" if report.horizon else "")
              + f"); {plural(total, 'episode')} in {where}")
    if report.resolved:
        print(f"{plural(report.resolved, 'unresolved item')} found resolved")
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    ledger, store = _open(args, create=True)
    try:
        assert store is not None  # create=True on a database ledger
        policy = _policy(store.meta(), max_range=args.max_range)
        store.set_meta(policy.identity())
        report = Archiver(ledger, store, policy=policy,
                          forms=form_counts_maker(ledger)).rebuild()
    finally:
        _close(ledger, store)
    if report.identical:
        print(f"rebuilt {plural(report.episodes, 'episode')} from the ledger: identical ids and digests "
              "(byte-identical records)")
        return 0
    print(f"rebuilt {plural(report.episodes, 'episode')} from the ledger: {len(report.changed)} differ from "
          f"before: {', '.join(report.changed[:20])}")
    return 1


def cmd_verify(args: argparse.Namespace) -> int:
    ledger, store = _open(args, create=False)
    try:
        if store is None:
            raise StoreError(f"{db_name(args.db, args.session_key)}: no episodes archived yet "
                             "(run `holon-ctx episodes archive`)")
        report = Archiver(ledger, store, policy=_policy(store.meta())).verify()
    finally:
        _close(ledger, store)
    for ident, problem in report.problems:
        print(f"episode:{ident}: {problem}")
    print(f"verified {plural(report.checked, 'episode')} against the ledger: "
          + ("all match" if not report.problems else f"{len(report.problems)} do not match"))
    return 0 if not report.problems else 1
