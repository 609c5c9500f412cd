"""Where in a JSON document's text a JSON path's value starts: the line a transcript error names.

A transcript is decoded whole (msgspec, fast, no positions kept) before any record is built, so
a reader's error knows the JSON path of the bad value (``$.messages[12].tool_call_id``) but not
where it is in the file. Keeping positions for every value would cost every import for the sake
of the few that fail; instead, once an error is raised, :func:`line_of` walks the source text
along the path and counts the line. Nothing runs on success.

Theory of operation. The path is split into steps, ``.key`` or ``[index]`` (the forms the readers
build: keys are the formats' own field names, never quoted). From the start of the document each
step moves into the value it names:

* in an object, every member is read to its end: the key is decoded (so ``"con\\u0074ent"`` is
  ``content``) and compared, and its value skipped; the **last** member with the key is the one
  taken, as the decoder keeps the last of duplicate keys;
* in an array, ``index`` elements are skipped.

Skipping a value never recurses: a string is one regular-expression match (escapes included), a
number or literal runs to the next delimiter, and an array or object is skipped by counting
brackets outside strings, so a deeply nested value costs no stack. A key missing from the last
object on the path (``missing required field``, or a field read as null because it is absent)
gives that object's start: the object that lacks it is the place to look. Anything else the walk
cannot follow (a path of another form, a step into the wrong kind of value, text that is not
JSON) gives None, and the error keeps its form without a line: this lookup must never turn a
clear error into a different one.

Cost, on the error path only: the object holding a key is read to its end (for a later
duplicate), so a path into the last message of ``{"messages": [...]}`` reads the text about twice:
0.9 s for 47 MiB, 5.8 s for 236 MiB (msgspec decodes them in 0.13 s and 0.66 s).

Lines are counted in bytes by ``\\n``, as :func:`~holon_ctx.ledger.transcripts.load_json` counts
them for a decoding error, so CRLF files count alike; a document on one line is line 1.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

__all__ = ["line_of", "open_path", "value_offset"]

_WS: Final = re.compile(rb"[ \t\r\n]*")
# A whole string, escapes included: "\"" does not end it (unrolled: no backtracking per byte).
_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# Outside strings only brackets matter; a string is consumed whole so its brackets do not count.
_NESTING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
# A number, true, false or null: a valid document ends one at a delimiter or whitespace.
_SCALAR: Final = re.compile(rb"[^ \t\r\n,\]}]+")
_STEP: Final = re.compile(r"\.([^.\[]+)|\[(0|[1-9][0-9]*)\]")


class _Lost(Exception):
    """The text does not follow the path (not JSON, or not the document the path came from)."""


def _steps(path: str) -> list[str | int] | None:
    """``$.messages[3].content`` as ``["messages", 3, "content"]``; None for another form."""
    if not path.startswith("$"):
        return None
    steps: list[str | int] = []
    pos = 1
    while pos < len(path):
        match = _STEP.match(path, pos)
        if match is None:
            return None
        key, index = match.groups()
        steps.append(key if key is not None else int(index))
        pos = match.end()
    return steps


def _skip_ws(raw: bytes, pos: int) -> int:
    match = _WS.match(raw, pos)
    return pos if match is None else match.end()


def _skip_value(raw: bytes, pos: int) -> int:
    """Offset just past the value that starts at ``pos``."""
    first = raw[pos:pos + 1]
    if first == b'"':
        match = _STRING.match(raw, pos)
        if match is None:
            raise _Lost
        return match.end()
    if first in (b"[", b"{"):
        depth = 0
        for token in _NESTING.finditer(raw, pos):
            bracket = token.group()
            if bracket in (b"[", b"{"):
                depth += 1
            elif bracket in (b"]", b"}"):
                depth -= 1
                if depth == 0:
                    return token.end()
        raise _Lost
    match = _SCALAR.match(raw, pos)
    if match is None:
        raise _Lost
    return match.end()


def _expect(raw: bytes, pos: int, byte: bytes) -> int:
    """Offset after ``byte`` (and the whitespace after it), which must be at ``pos``."""
    if raw[pos:pos + 1] != byte:
        raise _Lost
    return _skip_ws(raw, pos + 1)


def _member(raw: bytes, pos: int, key: str) -> int | None:
    """Where the value of the last member ``key`` of the object at ``pos`` starts; None when the
    object has no such member."""
    pos = _expect(raw, pos, b"{")
    found = None
    if raw[pos:pos + 1] == b"}":
        return None
    wanted = key.encode("utf-8", "surrogatepass")  # a lone surrogate matches no valid text
    while True:
        match = _STRING.match(raw, pos)
        if match is None:
            raise _Lost
        name = raw[match.start() + 1:match.end() - 1]
        if b"\\" in name:
            try:
                same = msgspec.json.decode(match.group(), type=str) == key
            except msgspec.DecodeError:
                raise _Lost from None
        else:
            same = name == wanted
        pos = _expect(raw, _skip_ws(raw, match.end()), b":")
        if same:
            found = pos  # keep reading: a later duplicate is the one the decoder kept
        pos = _skip_ws(raw, _skip_value(raw, pos))
        if raw[pos:pos + 1] == b"}":
            return found
        pos = _expect(raw, pos, b",")


def _element(raw: bytes, pos: int, index: int) -> int | None:
    """Where element ``index`` of the array at ``pos`` starts; None past its end."""
    pos = _expect(raw, pos, b"[")
    if raw[pos:pos + 1] == b"]":
        return None
    for _ in range(index):
        pos = _skip_ws(raw, _skip_value(raw, pos))
        if raw[pos:pos + 1] == b"]":
            return None
        pos = _expect(raw, pos, b",")
    return pos


def value_offset(raw: bytes, path: str) -> int | None:
    """Byte offset in ``raw`` where the value at ``path`` starts; for a key missing from the last
    object on the path, where that object starts; None when the path cannot be followed."""
    steps = _steps(path)
    if steps is None:
        return None
    try:
        pos = _skip_ws(raw, 0)
        for n, step in enumerate(steps):
            if isinstance(step, int):
                found = _element(raw, pos, step)
            else:
                found = _member(raw, pos, step)
                if found is None and n == len(steps) - 1:
                    return pos  # the object that lacks the field
            if found is None:
                return None
            pos = found
    except _Lost:
        return None
    return pos if pos < len(raw) else None


def line_of(raw: bytes, path: str) -> int | None:
    """The 1-based line where :func:`value_offset` finds ``path``, or None."""
    offset = value_offset(raw, path)
    return None if offset is None else raw.count(b"\n", 0, offset) + 1


# For a document cut short: a string either closes or runs to the end of the text (a final lone
# backslash included), so a cut inside a string still ends the walk inside that string.
_CUT_TOKEN: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:(?P<closed>")|\\?\Z)|[\[\]{},:]',
                               re.DOTALL)


class _Open:
    """An array or object still open, and the step into the value being read in it: an object's
    key (``""`` until one is read), an array's index. ``inside`` is whether that value is itself
    open (its text begun and not finished) rather than the cut falling between two values."""

    __slots__ = ("index", "inside", "key")

    def __init__(self, is_object: bool) -> None:
        self.key: str | None = "" if is_object else None
        self.index = 0
        self.inside = False

    def step(self) -> str:
        return f"[{self.index}]" if self.key is None else f".{self.key}"


def open_path(raw: bytes) -> str:
    """The JSON path of the innermost value still open where ``raw`` ends (``$.messages[3]
    .content`` for a transcript cut inside that string): where a truncated document was cut.

    One pass, no recursion, on the error path only. Each open array or object is a frame; a
    frame closed by its bracket is dropped, and the frames left when the text ends are the path.
    A value already complete where the text ends (a closed string or bracket, or the cut falls
    between two members or elements) stops the path at its container. A number or literal at
    the very end counts as open: ``12`` may have been ``123``. Text that is not a cut JSON
    document gives a path that may stop short, never an error."""
    frames: list[_Open] = []
    awaiting_key = False  # the innermost frame is an object between members

    def inside(now: bool) -> None:
        if frames:
            frames[-1].inside = now

    last = 0
    for match in _CUT_TOKEN.finditer(raw):
        last = match.end()
        token = match.group()
        top = frames[-1] if frames else None
        if token[:1] == b'"':
            if top is not None and top.key is not None and awaiting_key:
                try:
                    top.key = msgspec.json.decode(token, type=str)
                except msgspec.DecodeError:  # the key itself was cut
                    top.key = token[1:].decode("utf-8", "replace")
                awaiting_key = False
            else:
                inside(match.group("closed") is None)
        elif token in (b"{", b"["):
            inside(True)
            frames.append(_Open(token == b"{"))
            awaiting_key = token == b"{"
        elif token in (b"}", b"]"):
            if frames:
                frames.pop()
            inside(False)
            awaiting_key = False
        elif token == b":" and top is not None and top.key is not None:
            top.inside = True
        elif token == b"," and top is not None:
            top.inside = False
            if top.key is None:
                top.index += 1
            else:
                awaiting_key = True
    if raw[last:].strip():
        inside(True)  # a number or literal the text ends in
    path = "$"
    for frame in frames:
        if not frame.inside:
            break
        path += frame.step()
    return path
