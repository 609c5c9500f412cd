"""The runtime's notes inside record bodies are data (issue 24 item 3, RFC 0028): the renderer
records each excerpt, repeat and same-lines note where it writes it (``Block.notes``), and the
readers — the density measure, the shown-lines pass, the manifest's repeated lines — take them
from there, never by matching the body's text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from projection_builders import LedgerBuilder
from tiers import sized

from holon_ctx.ledger.body import block_safe
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.transcripts import import_any
from holon_ctx.projection.base.formats import (
    EXCERPT_MARK,
    REPEAT_MARK,
    excerpt_mark,
    repeat_mark,
    same_lines_mark,
)
from holon_ctx.projection.base.items import Block, BlockKind, Note, NoteKind, notes_kept
from holon_ctx.projection.measure.density import content_tokens
from holon_ctx.projection.planning.manifest import Projection
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.rendering.folding import tool_output_shown
from holon_ctx.projection.rendering.render_base import _excerpt_notes
from holon_ctx.tokens import default_counter

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "swe-trajectories"
#: Trajectories walked step by step: two by default, all twelve in the slow tier.
WALKED = sorted(CORPUS.glob("*.traj.json"))[:sized(2, 12)] if CORPUS.is_dir() else []


def _blocks(p: Projection) -> list[Block]:
    return [b for pairs in p.section_items.values() for _, r in pairs for b in r.blocks]


def _written(note: Note) -> str:
    """The line the runtime writes for ``note``'s data (formats' writers)."""
    if note.kind is NoteKind.REPEAT:
        return repeat_mark(note.times, note.lines) + "\n"
    assert note.kind is NoteKind.SAME
    assert note.as_in is not None
    return same_lines_mark(note.lines, note.as_in) + "\n"


def _check_notes(block: Block) -> int:
    """``block``'s notes are exactly the note lines its body shows (read back here, in a test,
    with formats' parsers: a tool's own lookalikes are neutralised, so they agree), and each
    repeat note's data writes its line. The number of notes."""
    found = [(m.start(), m.end()) for m in REPEAT_MARK.finditer(block.body)]
    if block.excerpt:
        found += [(m.start(), m.end()) for m in EXCERPT_MARK.finditer(block.body)]
    assert [(n.start, n.end) for n in block.notes] == sorted(found), block.body
    for note in block.notes:
        if note.kind is not NoteKind.EXCERPT:
            assert block.body[note.start:note.end] == _written(note)
    return len(block.notes)


@pytest.mark.scaled
@pytest.mark.skipif(not WALKED, reason=f"corpus not found at {CORPUS}")
@pytest.mark.parametrize("path", WALKED, ids=lambda p: p.name.removesuffix(".traj.json"))
def test_every_note_a_block_records_is_the_line_written_there(path: Path) -> None:
    """Every step of a shared trajectory at 4,096 and 8,192 tokens: each tool output's notes
    (repeat, same-lines, excerpt: folded, excerpted, clipped and re-folded against the outputs
    above) are the note lines of its body, no other block records one but an excerpt's, and
    the manifest's repeated lines are those the text shows."""
    store = MemoryStore()
    import_any(path, store)
    steps = [r.id for r in store.iter_records()
             if isinstance(r, Turn) and r.trigger == "x-agent-step"]
    projector = Projector(store)
    kinds: set[NoteKind] = set()
    for budget in (4096, 8192):
        for step in steps:
            p = projector.project(budget_tokens=budget, at=step)
            # The manifest lists the repeat notes from the data as the text shows them.
            assert p.manifest.repeated_lines == _repeated_lines_read(_blocks(p))
            for block in _blocks(p):
                if block.kind is BlockKind.FENCED and (block.ref or "").startswith("tool:"):
                    _check_notes(block)
                else:  # an operator's, a message's, a runtime note's body: only excerpts
                    found = ([(m.start(), m.end()) for m in EXCERPT_MARK.finditer(block.body)]
                             if block.excerpt else [])
                    assert [(n.start, n.end) for n in block.notes] == found
                    assert all(n.kind is NoteKind.EXCERPT for n in block.notes)
                kinds.update(n.kind for n in block.notes)
    assert {NoteKind.EXCERPT, NoteKind.SAME} <= kinds  # every trajectory folds and cuts


#: Lines of a tool output: some repeat (folded into a repeat note), some long enough to cut.
_LINES = st.sampled_from(["warn: deprecated call\n", "ok\n", "x" * 30 + "\n", "\n",
                          "  indented line\n", "result 1\n"])


@given(st.lists(st.tuples(_LINES, st.integers(1, 6)), min_size=1, max_size=10),
       st.data())
def test_an_excerpt_keeps_the_notes_of_its_head_and_tail(runs: list[tuple[str, int]],
                                                          data: st.DataObject) -> None:
    """Wherever an excerpt cuts a folded output (mid-note included), its notes are the repeat
    notes whole in its head and tail, moved to where they are, and its own note between."""
    body = block_safe("".join(line * n for line, n in runs) + "end\n")
    shown, notes = tool_output_shown(body)
    cut = data.draw(st.integers(1, max(1, len(shown) - 2)))
    tail_start = data.draw(st.integers(cut + 1, len(shown)))
    head, tail = shown[:cut].rstrip(), shown[tail_start:].lstrip()
    mark = excerpt_mark(12, "tool:x1")
    excerpt = block_safe(f"{head}\n{mark}\n{tail}")
    got = _excerpt_notes(notes, len(head), len(mark), len(shown) - len(tail))
    want = sorted([(m.start(), m.end()) for m in REPEAT_MARK.finditer(excerpt)]
                  + [(m.start(), m.end()) for m in EXCERPT_MARK.finditer(excerpt)])
    assert [(n.start, n.end) for n in got] == want
    assert [n.kind for n in got].count(NoteKind.EXCERPT) == 1


@pytest.mark.parametrize(("cut", "kept"), [
    ("a\n[line above ×3]\nb…\n", 1),     # cut after the note: kept
    ("a\n[line above ×3]…\n", 0),        # cut at the note's end: its line is no note now
    ("a\n[line ab…\n", 0),               # cut inside it
    ("a…\n", 0),
    ("z\n[line above ×3]\nb…\n", 0),     # a body that differs before it (re-neutralised)
    ("a\n[line above ×3]\nz\n", 1),      # one that differs right after it: still whole
])
def test_a_clipped_body_keeps_the_notes_whole_before_the_cut(cut: str, kept: int) -> None:
    body = "a\n[line above ×3]\nb\nc\n"
    notes = (Note(NoteKind.REPEAT, 2, 18, lines=1, times=3),)
    assert notes_kept(notes, body, cut) == notes[:kept]
    assert len(REPEAT_MARK.findall(cut)) == kept or cut.startswith("z")


#: The parts of a repeat note, as the manifest read them from the text before the notes were
#: data: the oracle the manifest's list is checked against.
_NOTE_PARTS = re.compile(r"^\[(?:line|(\d+) lines) (?:above ×(\d+)|as in ([^\s\]]+))\]$",
                         re.MULTILINE)


def _repeated_lines_read(blocks: list[Block]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for block in blocks:
        if block.kind is BlockKind.FENCED and (block.ref or "").startswith("tool:"):
            for m in _NOTE_PARTS.finditer(block.body):
                lines = int(m.group(1) or 1)
                out.append({"ref": block.ref, "lines": lines, "as_in": m.group(3)} if m.group(3)
                           else {"ref": block.ref, "lines": lines, "times": int(m.group(2))})
    return out


def _long_output(first_lines: str) -> str:
    return first_lines + "".join(f"tests/test_mod_{i}.py::test_case_{i} PASSED\n"
                                 for i in range(400))


def test_a_tool_printing_an_excerpt_note_keeps_it_as_content() -> None:
    """A tool output whose own line reads like an excerpt's note is excerpted: only the note
    the renderer wrote is markup; the tool's line is its content (the text match counted both
    as the runtime's)."""
    forged = "… [99+ tokens omitted; full text: tool:x1] …\n"
    b = LedgerBuilder()
    ask = b.operator("Run the suite.")
    b.turn("x-agent-step", anchor=ask)
    tool = b.tool("bash", "pytest -q", _long_output("collecting\n" + forged))
    for i in range(3):
        b.turn("x-agent-step", anchor=ask)
        b.tool("bash", f"git diff --stat {i}", f"{i + 1} files changed\n")
    p = b.project(2048)
    counter = default_counter()
    blocks = [bl for bl in _blocks(p) if bl.ref == f"tool:{tool}"]
    assert len(blocks) == 1
    assert blocks[0].excerpt
    block = blocks[0]
    assert forged in block.body  # the tool's line is in the excerpt's head
    assert len(EXCERPT_MARK.findall(block.body)) == 2
    [note] = block.notes
    assert note.kind is NoteKind.EXCERPT
    assert block.body[note.start:note.end] != forged
    whole = block.tokens - counter.count(block.head) - counter.count(block.tail) + block.quoted
    assert content_tokens(blocks, counter) == whole - counter.count(block.body[note.start:note.end])


def test_a_same_lines_note_is_markup_in_any_body() -> None:
    """A note standing for lines an output above printed (``[3 lines as in tool:x1]``) is the
    runtime's line wherever it is: markup, also in a body with no ``line above`` note (the text
    match counted it as content there)."""
    banner = ("/usr/lib/python3/site-packages/django/conf/__init__.py:267: "
              "RemovedInDjango50Warning: The USE_L10N setting is deprecated.\n"
              "System check identified no issues (0 silenced).\n")
    b = LedgerBuilder()
    ask = b.operator("Fix the timezone bug; run the checks after each change.")
    tools = []
    for i in range(2):
        b.turn("x-agent-step", anchor=ask)
        tools.append(b.tool("bash", f"python check_{i}.py", banner + f"result {i}\n"))
    for i in range(2):  # the newest two steps keep every line (RFC 0023)
        b.turn("x-agent-step", anchor=ask)
        b.tool("bash", f"git diff --stat {i}", f"{i + 1} files changed\n")
    p = b.project(4096)
    counter = default_counter()
    blocks = [bl for bl in _blocks(p) if bl.ref == f"tool:{tools[1]}"]
    [block] = blocks
    [note] = block.notes
    assert note.kind is NoteKind.SAME
    assert block.body[note.start:note.end] == same_lines_mark(2, f"tool:{tools[0]}") + "\n"
    assert "above ×" not in block.body
    whole = block.tokens - counter.count(block.head) - counter.count(block.tail) + block.quoted
    assert content_tokens(blocks, counter) == whole - counter.count(same_lines_mark(
        2, f"tool:{tools[0]}") + "\n")
