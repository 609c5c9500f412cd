"""Layout helpers for everything the CLI prints by hand: pre-wrapped rich ``Text`` lines.

The preview, ``explain`` and ``diff`` lay their lines out themselves (rich tables only where a
short table is all there is): the output is byte-stable for golden tests and fast to print. Here:
what a line may show of untrusted text (:func:`visible`), wrapping with a hanging indent
(:func:`hang`), label/value rows (:func:`kv`) and one print of many lines (:func:`emit`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from holon_ctx.cli.terminal import terminal_safe

__all__ = ["emit", "hang", "kv", "pct", "visible"]



def visible(line: str) -> str:
    """The line as it can be shown on a terminal: control, bidi and invisible characters escaped
    (``\\x1b``, ``\\u202e``: tool output must not move the cursor, recolour or retitle the
    screen, or reorder what is read), tabs as spaces (a tab's width depends on the column, which
    the gutter shifts). Escaped before layout, so widths are measured on what is shown."""
    if "\t" in line:
        # Tab stops every 8 cells, counted in terminal cells (a CJK character takes two).
        out: list[str] = []
        column = 0
        for i, part in enumerate(line.split("\t")):
            if i:
                pad = 8 - column % 8
                out.append(" " * pad)
                column += pad
            out.append(part)
            column += cell_len(part)
        line = "".join(out)
    return terminal_safe(line)


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def hang(console: Console, line: Text, width: int, indent: int | None = None) -> list[Text]:
    """``line`` wrapped to ``width`` with a hanging indent (default: its own indent plus two)."""
    if line.cell_len <= width:
        return [line]
    plain = line.plain
    if indent is None:
        indent = len(plain) - len(plain.lstrip(" ")) + 2
    first = line.wrap(console, width, overflow="fold")[0]
    rest = line[len(first.plain):]
    first.rstrip()
    rest = rest[len(rest.plain) - len(rest.plain.lstrip(" ")):]
    # A deep indent on a narrow terminal still leaves ten cells, inside the width.
    indent = min(indent, max(0, width - 10))
    room = width - indent
    return [first, *(Text(" " * indent) + part
                     for part in rest.wrap(console, room, overflow="fold"))]


def emit(console: Console, lines: Sequence[Text]) -> None:
    """One print of pre-wrapped lines: rich must not re-wrap them (no_wrap, soft_wrap), and one
    call is much cheaper than a call per line. Trailing blanks go: they only make diffs noisy."""
    for line in lines:
        line.rstrip()
    if console.color_system is None:
        # No colour at all (a pipe, --plain): the text is all there is, and writing it directly
        # skips rich's per-segment rendering (a third of the view's time on the demo).
        console.file.write("".join(f"{line.plain}\n" for line in lines))
        console.file.flush()
        return
    console.print(Text("\n").join(lines), no_wrap=True, crop=False, overflow="ignore",
                  soft_wrap=True)


def kv(console: Console, rows: Sequence[tuple[str, str | Text]], label_w: int = 11) -> list[Text]:
    """Label/value rows; long values wrap under themselves (hanging indent)."""
    out: list[Text] = []
    room = max(20, console.width - label_w)
    for label, value in rows:
        text = value if isinstance(value, Text) else Text(visible(value))
        for i, part in enumerate(text.wrap(console, room, overflow="fold")):
            out.append(Text.assemble((f"{label if i == 0 else '':<{label_w}}", "dim"), part))
    return out
