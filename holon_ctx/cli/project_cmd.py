"""``holon-ctx project SOURCE --budget N [--at TURN] [--json] [--format …]``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from holon_ctx.cli._api import (
    SessionRequest,
    read_through_request,
)
from holon_ctx.cli.common import (
    add_model_arg,
    add_source_args,
    control_source,
    model_of,
    open_source,
    positive_int,
)
from holon_ctx.cli.episodes_cmd import open_episode_source
from holon_ctx.cli.file_episodes import FileArchive
from holon_ctx.cli.terminal import write_data_json, write_data_text
from holon_ctx.errors import InputError
from holon_ctx.lowlevel import (
    EpisodeSource,
    Projection,
    Projector,
    framing_tokens,
    to_anthropic_messages,
    to_openai_messages,
)

#: Output formats of ``project --format``.
FORMATS = ("text", "json", "openai", "anthropic")

__all__ = ["project_from_args", "register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("project", help="print the projected prompt (or its manifest)")
    add_source_args(p)
    add_model_arg(p)
    p.add_argument("--budget", type=positive_int, required=True, metavar="N",
                   help="token budget of the prompt")
    p.add_argument("--at", metavar="TURN_ID", help="project as of an earlier turn")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="text (the prompt), json (the manifest), or a provider request fragment: "
                        "openai (messages) or anthropic (system + messages); for the providers "
                        "--budget includes their per-message framing (docs/providers.md)")
    p.add_argument("--json", action="store_true", help="print the manifest (same as --format json)")
    p.add_argument("--mode", choices=("session", "stateless"), default="session",
                   help="session (default): the request a runtime's session sends at that turn "
                        "(stable prefix, append-only history, current state last), read from "
                        "the ledger's saved epochs without writing; text is its text view, json "
                        "its manifest (docs/session.md); stateless: planned afresh for this turn "
                        "alone (docs/projection.md)")
    p.set_defaults(func=cmd_project)


def project_from_args(args: argparse.Namespace, budget: int | None = None,
                      at: str | None = None) -> Projection:
    store = open_source(args)
    episodes = open_episode_source(store)
    budget = budget or args.budget
    at = at if at is not None else args.at
    try:
        with control_source(store) as control:
            projection = Projector(store, episodes=episodes, control=control).project(
                budget_tokens=budget, at=at, verify=True)
            if not FileArchive.applies(store, episodes):
                return projection
            # A file's ledger gets the episodes a library session would hold by now (item 8).
            return FileArchive(store).plan(
                projection, lambda p: p.manifest, at,
                lambda source: Projector(store, episodes=source, control=control).project(
                    budget_tokens=budget, at=at, verify=True))
    finally:
        if episodes is not None:
            episodes.close()
        store.close()


def session_request_from_args(args: argparse.Namespace, *, text: bool) -> SessionRequest:
    """The session request a runtime gets as of ``--at``: the messages (``Session.next_request``),
    or with ``text`` the text view of the same ledger position (``Request.text``). Walked
    from the ledger's saved epochs, read through so that nothing is written (RFC 0024)."""
    store = open_source(args)
    episodes = open_episode_source(store)
    try:
        with control_source(store) as control:
            framing = model_of(args).framing

            def request(source: EpisodeSource | None) -> SessionRequest:
                # Fresh epochs for each walk (read_through_request): one made without the
                # file's archive must not be continued with it (the key omits episodes).
                return read_through_request(store, budget_tokens=args.budget, at=args.at,
                                            episodes=source, control=control,
                                            text=text, framing=framing)

            made = request(episodes)
            if not FileArchive.applies(store, episodes):
                return made
            # A file's ledger gets the episodes a library session would hold by now (item 8).
            return FileArchive(store).plan(made, lambda r: r.manifest, args.at, request)
    finally:
        if episodes is not None:
            episodes.close()
        store.close()


def cmd_project(args: argparse.Namespace) -> int:
    fmt = args.format or ("json" if args.json else "text")
    if args.json and fmt != "json":
        raise InputError(f"--json and --format {fmt} disagree; give one of them")
    if args.mode == "session":
        request = session_request_from_args(args, text=fmt == "text")
        if fmt == "openai":
            write_data_json(json.dumps({"messages": request.openai_messages()},
                                       ensure_ascii=False, indent=2) + "\n")
        elif fmt == "anthropic":
            write_data_json(json.dumps(request.anthropic_request(), ensure_ascii=False,
                                       indent=2) + "\n")
        elif fmt == "json":
            write_data_json(request.manifest_json() + b"\n")
        else:
            write_data_text(request.text)
        sys.stdout.flush()
        return 0
    if fmt in ("openai", "anthropic"):
        # The provider's framing comes out of the same budget, so the request holds it.
        profile = model_of(args)
        framing = framing_tokens(framing=profile.counted_framing())
        budget = args.budget - framing
        if budget <= 0:
            raise InputError(f"--budget {args.budget} leaves no room after the "
                             f"{framing} tokens of {fmt} message framing")
        projection = project_from_args(args, budget=budget)
        payload: object = ({"messages": to_openai_messages(projection)} if fmt == "openai"
                           else to_anthropic_messages(projection))
        write_data_json(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")
        sys.stdout.flush()
        return 0
    projection = project_from_args(args)
    if fmt == "json":
        write_data_json(projection.manifest_json() + b"\n")
    else:
        # The prompt exactly as the model gets it, unless a terminal would act on it (RFC 0007).
        write_data_text(projection.text)
    sys.stdout.flush()
    return 0
