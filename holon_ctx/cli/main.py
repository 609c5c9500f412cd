"""Entry point of ``holon-ctx``: builds the parser from command modules and maps errors to exit 2.

Each command lives in its own module exposing ``register(subparsers)``; the module sets
``func=handler`` on its parser, and the handler returns the process exit status. Keeping the
dispatcher this small lets commands land independently.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

from holon_ctx import __version__
from holon_ctx.cli._api import translate_lock_errors
from holon_ctx.cli.terminal import terminal_safe
from holon_ctx.errors import EngineError, HolonCtxError, InputError

__all__ = ["build_parser", "main"]

# Order is the order shown by --help.
COMMAND_MODULES: tuple[str, ...] = (
    "holon_ctx.cli.ledger_cmds",
    "holon_ctx.cli.project_cmd",
    "holon_ctx.cli.replay_cmd",
    "holon_ctx.cli.episodes_cmd",
    "holon_ctx.cli.compact_cmd",
    "holon_ctx.cli.preview_cmds",
    "holon_ctx.cli.continuity_cmd",
    "holon_ctx.cli.db_cmd",
)


class _Parser(argparse.ArgumentParser):
    """argparse prints usage and exits 2 on bad flags; keep that, but as one clear line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(terminal_safe(f"{self.prog}: error: {message}") + "\n")
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


class _Terminated(BaseException):
    """SIGTERM or SIGHUP, raised where the process is so that cleanup runs as for Ctrl-C.

    A BaseException, like KeyboardInterrupt, so no ``except Exception`` swallows it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, _frame: FrameType | None) -> None:
    raise _Terminated(signum)


@contextmanager
def _terminate_like_interrupt() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into an exception for the duration of a command (then restore)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted = [s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None))
              if s is not None]
    previous = {s: signal.signal(s, _raise_terminated) for s in wanted}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


_WRITE_ERRNOS = frozenset(getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG", "EIO",
                                                            "EROFS") if hasattr(errno, name))


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of what is still buffered
    cannot fail again (and print a second, unformatted error)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # stdout is not a real file (tests capture it): nothing will flush it to a disk


#: Arguments that name a file: the attribute, how --help names it, and what it takes.
_PATHS = (("source", "SOURCE", "a file"), ("file", "FILE", "a file"),
          ("db", "--db", "a database file or a postgresql:// URL"), ("output", "-o", "a file"),
          ("price", "--price", "a price table or its file"))


def _refuse_empty_paths(args: argparse.Namespace) -> None:
    """An empty path (``--db ""``, an unset shell variable) reads as the current directory:
    ``.: cannot read: Is a directory``. Said as what it is, before anything is opened."""
    for dest, name, what in _PATHS:
        if getattr(args, dest, None) == "":
            raise InputError(f"{name} is empty: name {what}")
    if any(o == "" for o in getattr(args, "operands", None) or ()):
        raise InputError("SOURCE or REF is empty: name a file and a ref")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        _refuse_empty_paths(args)
        db = getattr(args, "db", None)
        # The stores translate lock timeouts themselves; this catches any raw one left, so it is
        # still one line naming the database and, when it can be seen, who holds the lock.
        with _terminate_like_interrupt(), translate_lock_errors(db or "database"):
            code: int = func(args)
            # Flushed here, not at exit: a full disk behind stdout is then an error we report.
            sys.stdout.flush()
    except HolonCtxError as exc:
        # Messages quote file names and values: never let them drive the terminal.
        sys.stderr.write(terminal_safe(f"holon-ctx: error: {exc}") + "\n")
        return 2
    except EngineError as exc:
        # An engine bug, not the user's input: say so, and use EX_SOFTWARE rather than 2.
        sys.stderr.write(f"holon-ctx: internal error: {exc}; please report it with the ledger\n")
        return 70
    except KeyboardInterrupt:
        sys.stderr.write("holon-ctx: interrupted\n")
        return 130
    except _Terminated as exc:
        # Every command cleans up on the way out (private database builds, partial outputs),
        # exactly as for Ctrl-C; the status is the conventional 128 + signal number.
        sys.stderr.write(f"holon-ctx: terminated ({signal.Signals(exc.signum).name})\n")
        return 128 + exc.signum
    except BrokenPipeError:
        # A pager or `head` closed the pipe: not an error worth a traceback.
        _discard_stdout()
        return 0
    except OSError as exc:
        # Input errors are InputErrors by now; what is left is writing the output (stdout on a
        # full disk, a quota, a file-size limit, an I/O error).
        _discard_stdout()
        what = "cannot write the output" if exc.errno in _WRITE_ERRNOS else "error"
        sys.stderr.write(f"holon-ctx: error: {what}: {exc.strerror or exc}\n")
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
