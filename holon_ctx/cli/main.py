"""Entry point of ``holon-ctx``: builds the parser from command modules and maps errors to exit 2.

Each command lives in its own module exposing ``register(subparsers)``; the module sets
``func=handler`` on its parser, and the handler returns the process exit status. Keeping the
dispatcher this small lets commands land independently.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from holon_ctx import __version__
from holon_ctx.errors import HolonCtxError

__all__ = ["build_parser", "main"]

# Order is the order shown by --help.
COMMAND_MODULES: tuple[str, ...] = (
    "holon_ctx.cli.ledger_cmds",
    "holon_ctx.cli.project_cmd",
    "holon_ctx.cli.episodes_cmd",
    "holon_ctx.cli.compact_cmd",
    "holon_ctx.cli.preview_cmds",
    "holon_ctx.cli.continuity_cmd",
    "holon_ctx.cli.db_cmd",
)


class _Parser(argparse.ArgumentParser):
    """argparse prints usage and exits 2 on bad flags; keep that, but as one clear line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="holon-ctx",
        description="Project a durable agent ledger into a budgeted, explained prompt.",
    )
    parser.add_argument("--version", action="version", version=f"holon-ctx {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    from holon_ctx.cli.common import add_session_key_options  # noqa: PLC0415 - after registration

    add_session_key_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        code: int = func(args)
    except HolonCtxError as exc:
        sys.stderr.write(f"holon-ctx: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("holon-ctx: interrupted\n")
        return 130
    except BrokenPipeError:
        # A pager or `head` closed the pipe: not an error worth a traceback.
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
