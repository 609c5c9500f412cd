"""A FILE or SOURCE that is not a regular file: a FIFO, a pipe (``<(…)``, ``/dev/stdin``), a device.

Such an input can be read only once, says nothing true about its size, and may never end. The
commands need to read it more than once (detection reads the head, then the parser reads it all;
an import that loses the race for a new database reads it again), so it is first copied into a
private temporary file, with two guards that make an endless or binary input fail at once:

* the copy stops past :data:`MAX_STREAM_BYTES`;
* the first byte that is not whitespace must open JSON (``{``, ``[``), be a byte-order mark (so the
  parser can name it), or start an SQLite file: ``/dev/zero`` is refused after one read.

Errors about the copy are reported under the name the user gave, never the temporary one.
"""

from __future__ import annotations

import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from holon_ctx.errors import InputError

__all__ = ["MAX_STREAM_BYTES", "no_such_file", "regular_input"]

#: Most bytes read from a FIFO, pipe or device.
MAX_STREAM_BYTES: Final = 1 << 30
_CHUNK: Final = 1 << 20
_STARTS: Final = (b"{", b"[", b"\xef\xbb\xbf", b"SQLite format 3\x00")


def no_such_file(path: str) -> InputError:
    """A file argument that names nothing; ``-`` (standard input, to many tools) is told the
    name that reads it here."""
    hint = "; standard input is read as /dev/stdin" if path == "-" else ""
    return InputError(f"no such file{hint}", source=path)


@contextmanager
def regular_input(path: str) -> Iterator[Path]:
    """``path`` itself when it is a regular file, else a capped private copy of it."""
    given = Path(path)
    try:
        mode = given.stat().st_mode
    except FileNotFoundError:
        raise no_such_file(path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=path) from None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="holon-ctx-input-") as tmp:
        # Same file name, so detection by name (.jsonl, .traj.json) still works.
        copy = Path(tmp) / (given.name or "input")
        _copy_capped(given, copy, path)
        try:
            yield copy
        except InputError as exc:
            if exc.source != str(copy):
                raise
            raise type(exc)(exc.message, source=path, line=exc.line, path=exc.path) from None


def _copy_capped(src: Path, dest: Path, name: str) -> None:
    total = 0
    head = b""
    try:
        with src.open("rb") as f, dest.open("wb") as out:
            while chunk := f.read(_CHUNK):
                if len(head) < 64:
                    head = (head + chunk).lstrip()
                    if head:
                        _check_start(head, name)
                total += len(chunk)
                if total > MAX_STREAM_BYTES:
                    raise InputError(f"input larger than the {MAX_STREAM_BYTES} byte limit for a "
                                     "pipe, FIFO or device (stopped reading there)", source=name)
                out.write(chunk)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=name) from None


def _check_start(head: bytes, name: str) -> None:
    # A head shorter than a start may still become it with the next read.
    if any(head.startswith(start) or start.startswith(head) for start in _STARTS):
        return
    raise InputError(f"not ledger JSONL, a JSON transcript or a holon-ctx database: the input "
                     f"starts with byte 0x{head[0]:02x}", source=name)
