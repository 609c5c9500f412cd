"""Writing an output file so that a failure never leaves a partial file that looks complete.

``export -o FILE`` writes beside FILE under a private name (``.FILE.partial-PID-RANDOM``), flushes
it to disk, and renames it over FILE only when everything was written: a full disk, a quota, a
file-size limit or Ctrl-C leaves FILE as it was (absent, or its previous content) and removes the
partial file. A target that is not a regular file (``/dev/stdout``, a FIFO, ``/dev/full``) is
written in place, since it cannot be renamed over. Every failure is one line naming FILE.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from holon_ctx.errors import InputError

__all__ = ["output_file"]


def _cannot(path: str, exc: OSError) -> InputError:
    return InputError(f"cannot write: {exc.strerror or exc}", source=path)


@contextmanager
def output_file(path: str) -> Iterator[BinaryIO]:
    """A binary stream that becomes ``path`` only if the block completes (see module docstring)."""
    given = Path(path)
    if given.exists() and not given.is_file():
        try:
            with open(given, "wb") as out:
                yield out
        except OSError as exc:
            raise _cannot(path, exc) from None
        return
    # Through a symlink to the file it names; keep an existing file's permissions.
    target = Path(os.path.realpath(given))
    mode = None
    if target.exists():
        if not os.access(target, os.W_OK):
            raise InputError("cannot write: Permission denied", source=path)
        mode = target.stat().st_mode & 0o7777
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        out = open(partial, "xb")  # noqa: SIM115 - closed below, before the rename
    except OSError as exc:
        raise _cannot(path, exc) from None
    try:
        with out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(partial, mode)
        os.replace(partial, target)
    except OSError as exc:
        raise _cannot(path, exc) from None
    finally:
        partial.unlink(missing_ok=True)
