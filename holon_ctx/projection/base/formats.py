"""Every piece of markup the prompt uses, written (and where a reader needs it, parsed) here only.

The prompt states trust in words: the operator's words sit under ``operator (trusted) REF:``;
untrusted and model-written text sits inside a data fence ``<data REF ORIGIN TRUST>`` …
``</data>`` (RFC 0015); label lines carry runtime facts and sanitised one-line previews (:func:`one_line`).
The fence tag and the trusted label are defined beside the function that keeps quoted text from
forging them (:mod:`holon_ctx.ledger.body`); this module builds every line from those.

Readers of a projection (preview, explain, diff) read the structured fields of its blocks
(:class:`~holon_ctx.projection.base.items.Block`), not this text; the parsers here are for tests and
for text that is not a projection (a prompt pasted back, an episode's pre-rendered forms).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final

from holon_ctx.ledger.body import (
    CLAIMED_LABEL,
    FENCE_TAG,
    OPERATOR_LABEL,
    attribute_value,
    neutralise_fences,
    skeleton,
)

__all__ = [
    "ALERT",
    "EXCERPT_MARK",
    "FENCE_CLOSE",
    "FENCE_OPEN",
    "FOLD_PREFIX",
    "HEADING",
    "IMPLIED_ORIGIN",
    "IMPLIED_TRUST",
    "LEGACY_FENCE_OPEN",
    "QUOTE_END",
    "QUOTE_START",
    "RELATION_PREFIX",
    "REPEAT_MARK",
    "clip_notes",
    "code_span",
    "command_line",
    "excerpt_mark",
    "fence_open",
    "fence_parts",
    "fold_line",
    "forgeries",
    "label_value",
    "neutralise_repeat_marks",
    "one_line",
    "operator_label",
    "quote_text",
    "quoted",
    "repeat_mark",
    "run_status",
    "same_lines_mark",
    "speech",
    "split_quotes",
]

#: Closes a data fence (a line of its own).
FENCE_CLOSE: Final = f"</{FENCE_TAG}>\n"
#: Matches a fence's opening line, in any of its three forms: ``<data REF>`` (the ref's kind
#: implies origin and trust), ``<data REF TRUST>`` (it implies the origin), ``<data REF ORIGIN
#: TRUST>``. Its values hold no white space (ids cannot, and
#: :func:`~holon_ctx.ledger.body.attribute_value` escapes it in anything else), so
#: space-separated words need no quotes (RFC 0015). :func:`fence_parts` reads the words.
FENCE_OPEN: Final = re.compile(rf"^<{FENCE_TAG} (\S+)(?: (\S+))?(?: ([a-z_]+))?>$")
#: The origin a record of each kind (the part of its ref before ``:``) has unless it says
#: otherwise: a fence leaves it out (the ref says it), and names any other.
IMPLIED_ORIGIN: Final = {"tool": "tool", "message": "assistant", "brief": "assistant",
                         "task_result": "task", "external_event": "external",
                         "environment": "runtime"}
#: The trust a record of each kind has unless it says otherwise, when its origin is the implied
#: one: a tool's output and an external event are untrusted external text, a message or a brief
#: the assistant wrote is model output. A fence leaves it out too (``<data tool:x3>``): the
#: section titles say once that fenced text is data, never instructions (RFC 0015, "implied
#: trust"); any other trust is written.
IMPLIED_TRUST: Final = {"tool": "untrusted_external", "message": "model_output",
                        "brief": "model_output", "external_event": "untrusted_external"}
#: The opening line of releases before RFC 0015 (``<data ref="…" origin="…" trust="…">``): still
#: read, for prompts and episode texts written then.
LEGACY_FENCE_OPEN: Final = re.compile(
    rf'^<{FENCE_TAG} ref="([^"]*)" origin="([^"]*)" trust="([a-z_]+)">$')
#: Starts a turn's (and an episode's) heading line.
HEADING: Final = "### "
#: Starts a tool line that needs attention (a failure, an unresolved side effect).
ALERT: Final = "ALERT "
#: Starts a fold line.
FOLD_PREFIX: Final = "- folded "
#: Starts the current input's relation line.
RELATION_PREFIX: Final = "relation: "
_TRUST_WORD = re.compile(r"^[a-z_]+$")
_FENCE_LIKE = re.compile(rf"\u2039/?{FENCE_TAG}\b", re.IGNORECASE)


#: Delimit ledger text a label line quotes (a command, an objective, a file path). The renderer
#: removes them (:func:`split_quotes`) and counts what they held as content, not markup: the
#: prompt-density measure asks how much of a prompt is the ledger's own text (RFC 0015,
#: "quoted content"). Private-use characters, taken out of every preview (:func:`one_line`), so
#: ledger text can neither hold nor fake them; they never reach a prompt.
QUOTE_START: Final = "\ue000"
QUOTE_END: Final = "\ue001"
_QUOTES = str.maketrans("", "", QUOTE_START + QUOTE_END)
_QUOTED = re.compile(f"{QUOTE_START}[^{QUOTE_END}]*{QUOTE_END}")


def quoted(text: str) -> str:
    """``text`` (a preview of ledger text, already one line) marked as quoted content."""
    return f"{QUOTE_START}{text}{QUOTE_END}" if text else ""


def split_quotes(text: str) -> tuple[str, str]:
    """``(shown, frame)``: the text without its quote marks, and without what they quoted (the
    frame alone: the markup)."""
    if QUOTE_START not in text:
        return text, text
    return text.translate(_QUOTES), _QUOTED.sub("", text).translate(_QUOTES)


def one_line(text: str, limit: int = 120) -> str:
    """A sanitised single-line preview: no newlines, no fence tags, bounded length."""
    flat = " ".join(neutralise_fences(text.translate(_QUOTES)).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


#: A runtime-supplied value a label line shows bare (RFC 0027): one word of letters, digits
#: and a few joiners (``bash``, ``src/app.py``, ``ci-1``, ``github:issue-comment``), none of the
#: characters the prompt's structure is made of (``#`` headings, ``·`` and ``→`` in headings and
#: tool lines, backticks, brackets, quotes, ``<`` ``>``, list and table marks, white space), a
#: colon only inside it (``note:`` reads as a label). Anything else — every value of more than
#: one word — is quoted: words in a label line are the runtime's, words in quotes are data.
_PLAIN_VALUE: Final = re.compile(
    r"(?=[^\W_]|[./~][\w./~])[\w.,/+@=~'()?!%&$…-]+(?::[\w.,/+@=~'()?!%&$…-]+)*")
#: The first words of the label lines the renderer writes (case-folded). A value that starts a
#: line is quoted when it is one of them (a tool named ``ALERT`` or ``operator``) or when it
#: holds a colon (``turn:t9``, a ref's shape): what starts a line bare is the runtime's.
_LINE_WORDS: Final = frozenset({
    "alert", "blocked", "blocker", "brief", "capabilities", "completion", "continuing",
    "environment", "exact", "execution", "external", "files", "folded", "message", "objective",
    "operator", "pending", "plan", "previous", "relation", "runtime", "system", "task", "tasks",
    "todos", "tool", "tools", "trigger", "turn", "wait", "waiting", "work", "workspace"})


def quote_text(text: str, limit: int, *, marked: bool = False) -> str:
    """``text`` on one line (:func:`one_line`) between straight double quotes, its own quotes and
    backslashes escaped, so nothing in it can end the quote. ``marked``: the text marked as
    quoted content (:func:`quoted`; only for text that goes through :func:`split_quotes`)."""
    flat = one_line(text, limit).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{quoted(flat) if marked else flat}"'


def label_value(text: str, limit: int, *, line_start: bool = False, marked: bool = False) -> str:
    """A runtime-supplied value (a tool name, a file path, a work-item or wait id, a wait
    condition, an objective, an event source, a task name …) as a label line shows it: on one
    line, no longer than ``limit`` (:func:`one_line`), and quoted (:func:`quote_text`) unless
    it is one plain word that cannot read as the prompt's structure (:data:`_PLAIN_VALUE`).
    ``line_start``: the value starts its line, where a plain word is quoted too when it holds
    a colon or is one of the renderer's own first words (:data:`_LINE_WORDS`; RFC 0027).
    ``marked``: as in :func:`quote_text`. Every runtime value in a label line goes through
    here, or through :func:`code_span` (commands) or :func:`speech` (words someone said)."""
    flat = one_line(text, limit)
    if not flat:
        return flat
    if _PLAIN_VALUE.fullmatch(flat) and not (line_start and (
            ":" in flat or flat.casefold() in _LINE_WORDS)):
        return quoted(flat) if marked else flat
    return quote_text(flat, limit + 2, marked=marked)


def code_span(text: str, limit: int, *, marked: bool = False) -> str:
    """A command as a code span on one line (:func:`command_line`), between backticks that
    outnumber every run of backticks inside it (Markdown's rule), so the command cannot end its
    span and go on as label text. ``marked``: the command marked as quoted content
    (:func:`quoted`; only for text that goes through :func:`split_quotes`)."""
    flat = command_line(text, limit)
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{quoted(flat) if marked else flat}{pad}{fence}"


def speech(text: str, limit: int) -> str:
    """Words someone said, quoted ``“…”`` on one line (:func:`one_line`): quotation marks inside
    become straight ones, so the words cannot end the quote."""
    flat = one_line(text, limit).replace("\u201c", '"').replace("\u201d", '"')
    return f"\u201c{flat}\u201d"


#: A heredoc's opening: ``<<EOF``, ``<<-'EOF'``, ``<< "END"`` (the delimiter is group 1).
_HEREDOC: Final = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")


def command_line(text: str, limit: int) -> str:
    """A command on one line (:func:`one_line`), a heredoc's body left out: ``cat <<'EOF' >
    fix.py … EOF && python fix.py`` rather than the file's text run together on one line, which
    neither reads as the command nor is the ledger's text (RFC 0019, "commands by their first
    line"). Only a heredoc's body goes: every other line of the command is shown (run
    together, as before), and so is whatever follows the heredoc's closing line."""
    lines = text.strip().split("\n")
    for i, line in enumerate(lines[:-1]):
        opened = _HEREDOC.search(line)
        if opened is None:
            continue
        delimiter = opened.group(1)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == delimiter), None)
        if end is None:
            break  # not closed: shown as it is
        after = " ".join(lines[end + 1:]).strip()
        rest = command_line("\n".join(lines[end + 1:]), limit) if after else ""
        shown = " ".join([*lines[:i + 1], "…", delimiter] + ([rest] if rest else []))
        return one_line(shown, limit)
    return one_line(text, limit)


def _attr(value: str) -> str:
    """A fence attribute value that cannot end the attribute: ids pass as they are (their rule
    keeps markup out, RFC 0007), anything else is escaped (``attribute_value``)."""
    return attribute_value(value)


@functools.lru_cache(maxsize=65536)
def fence_open(ref: str, origin: str, trust: str) -> str:
    """The line that opens a data fence around text from ``ref``: ``<data REF ORIGIN TRUST>``;
    ``<data REF TRUST>`` when the ref's kind implies the origin (:data:`IMPLIED_ORIGIN`);
    ``<data REF>`` when it implies the trust as well (:data:`IMPLIED_TRUST`)."""
    kind = ref.partition(":")[0]
    if IMPLIED_ORIGIN.get(kind) != origin:
        return f"<{FENCE_TAG} {_attr(ref)} {_attr(origin)} {_attr(trust)}>\n"
    if IMPLIED_TRUST.get(kind) == trust:
        return f"<{FENCE_TAG} {_attr(ref)}>\n"
    return f"<{FENCE_TAG} {_attr(ref)} {_attr(trust)}>\n"


def fence_parts(line: str) -> tuple[str, str, str] | None:
    """``(ref, origin, trust)`` of a fence's opening line (without its newline), in today's
    forms or the quoted one of earlier releases; None for any other line. A word left out is
    the one the ref's kind implies ("unknown" when it implies none)."""
    legacy = LEGACY_FENCE_OPEN.match(line)
    if legacy is not None:
        return legacy.group(1), legacy.group(2), legacy.group(3)
    m = FENCE_OPEN.match(line)
    if m is None:
        return None
    ref, second, third = m.groups()
    kind = ref.partition(":")[0]
    if third is not None:  # three words (the pattern fills the second group first)
        origin, trust = second, third
    elif second is not None:  # two: the origin is implied
        if not _TRUST_WORD.match(second):
            return None
        origin, trust = IMPLIED_ORIGIN.get(kind, "unknown"), second
    else:
        origin = IMPLIED_ORIGIN.get(kind, "unknown")
        trust = IMPLIED_TRUST.get(kind, "unknown")
    return ref, origin, trust


def run_status(status: str, exit_code: int | None) -> str:
    """How a tool run ended, as a label says it: ``ok`` for a success (exit code 0 or none),
    else the status and the exit code (``error exit 2``, ``ok exit 1``: a success the tool
    reported with a non-zero code keeps it). RFC 0015: "exit 0" after "ok" said nothing new on
    every line of every step."""
    if status == "ok" and exit_code in (0, None):
        return "ok"
    return status + (f" exit {exit_code}" if exit_code is not None else "")


def operator_label(ref: str) -> str:
    """The label above the operator's own words (which are shown unfenced)."""
    return f"{OPERATOR_LABEL} {ref}:"


def excerpt_mark(omitted_tokens: int, ref: str) -> str:
    """The line between the head and the tail of an excerpted body."""
    return f"… [{omitted_tokens}+ tokens omitted; full text: {ref}] …"


#: Finds the line :func:`excerpt_mark` writes, inside an excerpted body.
EXCERPT_MARK: Final = re.compile(r"^… \[\d+\+ tokens omitted; full text: [^\n]*\] …\n",
                                 re.MULTILINE)


def repeat_mark(count: int, period: int = 1) -> str:
    """The line after a run of identical lines shown once (RFC 0016): ``[line above ×40]`` —
    the line above stands for ``count`` consecutive copies of itself, the one shown included —
    or ``[3 lines above ×40]`` for a group of ``period`` lines repeated as a whole."""
    what = "line" if period == 1 else f"{period} lines"
    return f"[{what} above ×{count}]"


def same_lines_mark(count: int, ref: str) -> str:
    """The line that stands for ``count`` lines of a tool output that the output ``ref``, shown
    above in the same prompt, printed in the same order (RFC 0016): ``[4 lines as in tool:x9]``."""
    what = "line" if count == 1 else f"{count} lines"
    return f"[{what} as in {ref}]"


#: Finds a line :func:`repeat_mark` or :func:`same_lines_mark` writes, inside a tool output's
#: body.
REPEAT_MARK: Final = re.compile(
    r"^\[(?:line|\d+ lines) (?:above ×\d+|as in [^\s\]]+)\]\n", re.MULTILINE)
#: A line of quoted text a reader could take for one of those notes, read leniently (see
#: :func:`_read_as`): brackets or parentheses, "x" or "*" for "×", any spacing.
_REPEAT_LOOKALIKE: Final = re.compile(
    r"^\s*[\[(]\s*(?:\d+\s*)?lines?\s*(?:above\s*[×x*]\s*\d+|as\s*in\s*\S+?)\s*[\])]\s*$")
#: Where such a line could start (one pass over the whole text before any line is read).
_NOTE_START: Final = re.compile(r"^\s*[\[(]\s*(?:\d+\s*)?lines?\b", re.MULTILINE)
#: What the opening bracket of a quoted repeat-note lookalike becomes (not a bracket to the
#: skeleton, so the line no longer reads as the runtime's note).
_QUOTED_BRACKET: Final = "\u2045"


def _read_as(text: str) -> str:
    """``text`` as a lenient reader takes it: the fence skeleton (confusables mapped, invisible
    characters dropped), then NFKC and case folding for the letters that table leaves alone (it
    maps only those of the fence tag and the trusted label). Line breaks stay where they were
    (the notes are whole lines)."""
    if text.isascii():
        return text.lower()
    # The skeleton drops the default-ignorable characters (zero-width, bidi, tags) already.
    return unicodedata.normalize("NFKC", skeleton(text)).casefold()


def neutralise_repeat_marks(text: str) -> str:
    """``text`` with every line that reads as a repeat note (:func:`repeat_mark`,
    :func:`same_lines_mark`, or a lookalike of either) rewritten so that it does not: its
    opening bracket becomes ``⁅``. Tool output goes through this before the renderer adds its
    own notes, so a note in a fence is always the runtime's (as
    :func:`~holon_ctx.ledger.body.neutralise_fences` does for fence tags)."""
    read = _read_as(text)
    # Every note names "line" (the pattern's one fixed word): a substring test first skips the
    # multiline search, a scan of every line start of an 8 KB output, on almost all text.
    if "line" not in read or not _NOTE_START.search(read):
        return text  # almost all text: a few passes in C
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if _REPEAT_LOOKALIKE.match(_read_as(line)):
            for j, char in enumerate(line):
                if _read_as(char) in ("[", "("):
                    lines[i] = line[:j] + _QUOTED_BRACKET + line[j + 1:]
                    break
    return "\n".join(lines)


def clip_notes(ref: str) -> tuple[str, ...]:
    """The notes after a clipped block, shortest first (the clipper takes the one that fills the
    room best, the shorter on a tie: RFC 0015). Each names the ref of the full text: a clipped
    item always says where the rest is. Two lengths give the clipper two ways to use the last
    tokens of a binding budget."""
    return (f"[clipped; full text: {ref}]", f"[clipped to fit the budget; full text: {ref}]")


def fold_line(span: str, summary: str, count: int) -> str:
    """One counted line standing for a run of low-value turns."""
    return f"{FOLD_PREFIX}{span}: {summary} ({count} low-value turns)"


def forgeries(shown: str) -> tuple[int, int]:
    """In text as shown (after :func:`neutralise_fences`): fence-like tags and forged operator
    labels that were neutralised."""
    return len(_FENCE_LIKE.findall(shown)), shown.count(CLAIMED_LABEL)
