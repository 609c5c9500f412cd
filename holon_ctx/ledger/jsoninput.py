"""Limits and plain words for JSON that comes from outside: nesting, surrogates, endless files.

Every reader of ledger JSONL and of transcripts goes through these, so hostile input gets the same
one-line answer everywhere instead of a ``RecursionError`` or a misleading message:

* **Nesting** deeper than :data:`MAX_JSON_DEPTH` arrays/objects is refused before decoding. No
  ledger record or chat transcript comes near it (records nest three levels, transcripts about
  six); the decoder itself would fail with a ``RecursionError`` a few hundred levels further on,
  at a depth that depends on the call stack, so the limit is ours and fixed.
* A **lone UTF-16 surrogate escape** (``"\\ud800"`` without its low half) is named as such; the
  decoder reports it as "Input data was truncated".
* **Reading is capped by what is read, not by what ``stat`` says**: a device or a FIFO reports
  size 0 and never ends. :func:`read_capped` stops one byte past the limit.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

import msgspec

from holon_ctx.errors import InputError, quote_value
from holon_ctx.ledger.jsonlocate import open_path

__all__ = ["CUT_SHORT", "MAX_JSON_DEPTH", "checked_path", "decode_problem", "nesting_offset", "read_capped"]

#: Deepest nesting of arrays and objects accepted in any JSON input.
MAX_JSON_DEPTH: Final = 128

# Outside strings only brackets matter; inside, an escape is skipped whole so "\"" does not end it.
_TOKENS = re.compile(rb'\\.|["\[\]{}]', re.DOTALL)
_HIGH = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
_LOW = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_READ_CHUNK: Final = 1 << 20
_CUT: Final = "Input data was truncated"  # msgspec's words for a document that ends too soon
#: What :func:`decode_problem` says of JSON text that ends inside a value.
CUT_SHORT: Final = "invalid JSON: the text ends before this value is complete (cut short?)"


def nesting_offset(raw: bytes) -> int | None:
    """Byte offset where nesting first goes deeper than :data:`MAX_JSON_DEPTH`, or None."""
    # Fast path: fewer opening brackets in all than the limit cannot nest that deep.
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return None
    depth = 0
    in_string = False
    for match in _TOKENS.finditer(raw):
        token = match.group()
        if token == b'"':
            in_string = not in_string
        elif in_string or len(token) == 2:
            continue
        elif token in (b"[", b"{"):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return match.start()
        else:
            depth -= 1
    return None


def decode_problem(raw: bytes, message: str) -> tuple[str, int | None, str | None]:
    """The decoder's ``message`` in plain words, the byte offset it is about (if known) and the
    JSON path it is about (for text cut short, the value left open where it ends)."""
    for high in _HIGH.finditer(raw):
        if _inside_string(raw, high.start()) and not _LOW.match(raw, high.end()):
            escape = high.group().decode("ascii")
            return (f"invalid JSON: the escape {escape} is half of a UTF-16 surrogate pair "
                    f"(it must be followed by a low surrogate \\udc00-\\udfff); text must be "
                    f"valid Unicode", high.start(), None)
    for low in _LOW.finditer(raw):
        before = raw[max(0, low.start() - 6):low.start()]
        if _inside_string(raw, low.start()) and not _HIGH.fullmatch(before):
            escape = low.group().decode("ascii")
            return (f"invalid JSON: the escape {escape} is the low half of a UTF-16 surrogate "
                    f"pair without its high half; text must be valid Unicode", low.start(), None)
    if message != _CUT and (body := raw.rstrip()) != raw:
        # Cut inside a string and then ended by a newline (a file an editor saved, a copy that
        # added one), the text has the decoder name that newline an invalid character.
        try:
            msgspec.json.decode(body)
        except msgspec.DecodeError as cut:
            if str(cut) == _CUT:
                message = _CUT
    if message == _CUT:
        # The decoder names no offset for this: the place is where the text ends, and the field
        # the value it was in the middle of (a file cut short by a crash or a partial copy).
        end = len(raw.rstrip())
        where = open_path(raw)
        return CUT_SHORT, max(end - 1, 0), None if where == "$" else where
    offset = None
    if "(byte " in message:
        try:
            offset = int(message.rsplit("(byte ", 1)[1].rstrip(")"))
        except ValueError:
            offset = None
    return f"invalid JSON: {message}", offset, None


def _inside_string(raw: bytes, offset: int) -> bool:
    """True when ``offset`` lies inside a JSON string (the escape is not itself escaped)."""
    in_string = False
    for match in _TOKENS.finditer(raw, 0, offset + 2):
        if match.start() == offset:
            return in_string and match.group()[:1] == b"\\"
        if match.start() > offset:
            return False  # the backslash here was the second half of an escaped backslash
        if match.group() == b'"':
            in_string = not in_string
    return False


def checked_path(path: str | os.PathLike[str], where: str = "path") -> Path:
    """``path`` as a Path, or one line saying why no file can have that name: a NUL character,
    or a character the file system's encoding cannot hold (a lone surrogate such as ``\\ud800``);
    the name quoted, clipped (:func:`~holon_ctx.errors.quote_value`)."""
    text = os.fspath(path)
    if "\x00" in text:
        raise InputError(f"{quote_value(text)} is not a usable file name: it holds a NUL "
                         "character", source=where)
    try:
        os.fsencode(text)
    except UnicodeError:
        bad = next(c for c in text if not _encodable(c))
        raise InputError(f"{quote_value(text)} is not a usable file name: it holds "
                         f"U+{ord(bad):04X}, which no file name can", source=where) from None
    return Path(text)


def _encodable(char: str) -> bool:
    try:
        os.fsencode(char)
    except UnicodeError:
        return False
    return True


def read_capped(path: Path, limit: int, what: str) -> bytes:
    """The whole of ``path``, refusing more than ``limit`` bytes (however large ``stat`` says)."""
    path = checked_path(path, what)
    source = str(path)
    try:
        size = path.stat().st_size
        if size > limit:
            raise InputError(f"{what} larger than the {limit} byte limit ({size} bytes)",
                             source=source)
        chunks: list[bytes] = []
        total = 0
        with path.open("rb") as f:
            while True:
                chunk = f.read(min(_READ_CHUNK, limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:
                    raise InputError(f"{what} larger than the {limit} byte limit (stopped "
                                     f"reading after {limit} bytes)", source=source)
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=source) from None
