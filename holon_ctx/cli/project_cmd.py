"""``holon-ctx project SOURCE --budget N [--at TURN] [--json] [--format …]``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from holon_ctx.cli.common import (
    add_model_arg,
    add_source_args,
    model_of,
    open_control_source,
    open_source,
    positive_int,
)
from holon_ctx.cli.episodes_cmd import open_episode_source
from holon_ctx.cli.file_episodes import FileArchive
from holon_ctx.cli.terminal import write_data_json, write_data_text
from holon_ctx.errors import InputError
from holon_ctx.projection.framing import Framing
from holon_ctx.projection.projector import Projection, Projector
from holon_ctx.projection.providers import framing_tokens, to_anthropic_messages, to_openai_messages
from holon_ctx.projection.session import Layout, SessionProjector, SessionRequest
from holon_ctx.tokens import counter_for_encoding

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
    p.add_argument("--mode", choices=("session", "stateless"), default=None,
                   help="session: the cache-stable request a runtime sends (stable prefix, "
                        "append-only history, current state last; docs/session.md); stateless: "
                        "planned afresh for this turn alone (docs/projection.md). Default: "
                        "session for openai/anthropic, stateless for text/json")
    p.set_defaults(func=cmd_project)


def project_from_args(args: argparse.Namespace, budget: int | None = None,
                      at: str | None = None) -> Projection:
    store = open_source(args)
    episodes = open_episode_source(store)
    budget = budget or args.budget
    at = at if at is not None else args.at
    try:
        control = open_control_source(store)
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


def session_request_from_args(args: argparse.Namespace, layout: Layout) -> SessionRequest:
    """The session projection's request as of ``--at`` (walked from the last checkpoint: the
    CLI keeps no state, so it never writes to the database it reads)."""
    store = open_source(args)
    episodes = open_episode_source(store)
    try:
        control = open_control_source(store)
        framing = model_of(args).framing
        projector = SessionProjector(store, layout=layout, episodes=episodes, control=control,
                                     framing=framing)
        request = projector.request(budget_tokens=args.budget, at=args.at)
        if not FileArchive.applies(store, episodes):
            return request
        # A file's ledger gets the episodes a library session would hold by now (item 8).
        return FileArchive(store).plan(
            request, lambda r: r.manifest, args.at,
            lambda source: SessionProjector(store, layout=layout, episodes=source,
                                            control=control, framing=framing).request(
                                                budget_tokens=args.budget, at=args.at))
    finally:
        if episodes is not None:
            episodes.close()
        store.close()


def cmd_project(args: argparse.Namespace) -> int:
    fmt = args.format or ("json" if args.json else "text")
    if args.json and fmt != "json":
        raise InputError(f"--json and --format {fmt} disagree; give one of them")
    mode = args.mode or ("session" if fmt in ("openai", "anthropic") else "stateless")
    if mode == "session":
        request = session_request_from_args(
            args, Layout.MESSAGES if fmt in ("openai", "anthropic") else Layout.TEXT)
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
        framing = framing_tokens(framing=Framing(profile.framing, counter_for_encoding(
            profile.encoding)))
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
