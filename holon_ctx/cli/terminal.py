"""What the CLI writes where a person reads it: no raw control, bidi or invisible characters.

Ledger text is untrusted: a tool's output can carry ESC/OSC sequences (move the cursor, recolour
or retitle the terminal, write to the clipboard), a carriage return that overwrites a line, or
U+202E and other bidi controls that make ``invoice\\u202efdp.exe`` read as ``invoiceexe.pdf``.
None of that may reach a terminal. Where the line is (RFC 0007):

* the library never changes text: ``Projection.text`` is the prompt exactly as the model gets it;
* *data* the CLI writes (``project`` in every format, ``export``, ``--json`` outputs) is exact when
  it goes to a file or a pipe, and made safe only when it goes to a terminal: text with visible
  escapes, JSON with ``\\u`` escapes (the same JSON value, so nothing is lost);
* *views* (``preview``, ``explain``, ``diff``, ``stats``, ``episodes``, ``compact``, messages and
  errors) are for people only and are always made safe, on a terminal or not.

Made safe means: C0 controls except newline and tab, DEL, C1 controls, and characters of the
categories format (bidi controls, zero-width characters, the byte-order mark, tag characters),
line and paragraph separator, and lone surrogates are written as ``\\xNN`` (below U+0100),
``\\uNNNN`` or ``\\UNNNNNNNN``.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterable
from typing import IO, Any, Final

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

__all__ = [
    "SafeConsole",
    "is_terminal",
    "json_safe",
    "say",
    "terminal_safe",
    "write_data_json",
    "write_data_text",
]

#: The same set as the module docstring; explicit ranges so the search runs in C.
_UNSAFE: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f]"
)
_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal_safe(text: str) -> str:
    """``text`` with every unsafe character written as a visible escape (newline, tab kept)."""
    if text.isascii() and text.isprintable():
        return text
    text = _UNSAFE.sub(lambda m: _escape(m.group()), text)
    if text.isprintable() or not any(unicodedata.category(c) in _CATEGORIES
                                     for c in text if c not in "\n\t"):
        return text
    # A format character newer than the table above (Unicode grows): escape by category.
    return "".join(_escape(c) if c not in "\n\t" and unicodedata.category(c) in _CATEGORIES
                   else c for c in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a JSON \u escape is UTF-16: astral characters take a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_safe(text: str) -> str:
    """Encoded JSON with unsafe characters as ``\\u`` escapes: the same JSON value.

    JSON structure is ASCII, so an unsafe character can only sit inside a string, where an escape
    means the same character. Encoders already escape C0; DEL, C1, bidi and format do not get the
    same care from every encoder (``json.dumps(ensure_ascii=False)``, msgspec).
    """
    return _UNSAFE.sub(lambda m: _json_escape(m.group()), text)


def is_terminal(stream: IO[Any]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def write_data_text(text: str) -> None:
    """Data as text (the prompt): exact into a file or pipe, visible escapes on a terminal."""
    sys.stdout.write(terminal_safe(text) if is_terminal(sys.stdout) else text)


def write_data_json(data: str | bytes) -> None:
    """Encoded JSON: exact into a file or pipe, unsafe characters ``\\u``-escaped on a terminal."""
    if is_terminal(sys.stdout):
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        sys.stdout.write(json_safe(text))
    elif isinstance(data, bytes):
        sys.stdout.buffer.write(data)
    else:
        sys.stdout.write(data)


def say(*parts: object, file: IO[str] | None = None) -> None:
    """``print`` for messages and views: always made safe."""
    print(terminal_safe(" ".join(str(p) for p in parts)), file=file or sys.stdout)


class SafeConsole(Console):
    """A rich console that writes every piece of text made safe (rich's own codes untouched).

    Rich keeps ESC and bidi controls in text it prints; this escapes the text of each rendered
    segment. Control segments (cursor movement rich itself asks for) and styles pass through.
    """

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or not segment.text:
                yield segment
            else:
                safe = terminal_safe(segment.text)
                yield segment if safe is segment.text else Segment(safe, segment.style)
