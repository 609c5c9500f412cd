"""``holon-ctx project SOURCE --budget N [--at TURN] [--json] [--format …]``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from holon_ctx.cli.common import add_source_args, open_source, positive_int
from holon_ctx.cli.episodes_cmd import open_episode_source
from holon_ctx.projection.projector import Projection, Projector

__all__ = ["project_from_args", "register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("project", help="print the projected prompt (or its manifest)")
    add_source_args(p)
    p.add_argument("--budget", type=positive_int, required=True, metavar="N",
                   help="token budget of the prompt")
    p.add_argument("--at", metavar="TURN_ID", help="project as of an earlier turn")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.set_defaults(func=cmd_project)


def project_from_args(args: argparse.Namespace, budget: int | None = None,
                      at: str | None = None) -> Projection:
    store = open_source(args)
    episodes = open_episode_source(store)
    try:
        return Projector(store, episodes=episodes).project(
            budget_tokens=budget or args.budget, at=at if at is not None else args.at, verify=True)
    finally:
        if episodes is not None:
            episodes.close()
        store.close()


def cmd_project(args: argparse.Namespace) -> int:
    projection = project_from_args(args)
    if args.json:
        sys.stdout.buffer.write(projection.manifest_json() + b"\n")
    else:
        sys.stdout.write(projection.text)
    sys.stdout.flush()
    return 0
