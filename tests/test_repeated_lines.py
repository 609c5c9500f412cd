"""Repeated output lines are shown once, with a count or the ref that shows them (RFC 0016;
issue 12, item 3), and only ever exactly: every note reads back to the run's own text
(``tests/folded_output.py``), names an output shown whole above it, and cannot be forged."""

from __future__ import annotations

import msgspec
from folded_output import fence_body, reads_back, shown_whole
from hypothesis import given
from hypothesis import strategies as st
from projection_builders import LedgerBuilder
from session_helpers import check_request, content_stream, walk

from holon_ctx.ledger.body import record_body
from holon_ctx.ledger.records import Tool, ToolStatus
from holon_ctx.projection.base.formats import (
    REPEAT_MARK,
    neutralise_repeat_marks,
    repeat_mark,
    same_lines_mark,
)
from holon_ctx.projection.base.model import Form
from holon_ctx.projection.measure.density import content_tokens
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.rendering.folding import fold_repeated_lines, tool_output_text
from holon_ctx.projection.session.session import SessionProjector
from holon_ctx.tokens import default_counter

#: What every `python …` run printed before its own output (the corpus's "settings banner").
BANNER = ("/usr/lib/python3/site-packages/django/conf/__init__.py:267: RemovedInDjango50Warning: "
          "The USE_L10N setting is deprecated.\n"
          "  warnings.warn(USE_L10N_DEPRECATED_MSG, RemovedInDjango50Warning)\n"
          "System check identified no issues (0 silenced).\n")
WARNING = "tests/test_models.py:12: DeprecationWarning: datetime.utcnow() is deprecated\n"


def _lines(text: str) -> list[str]:
    return text.split("\n")[:-1]


def _faithful(rec: Tool, text: str) -> bool:
    """Shown whole (folds read back exactly), or cut with the note naming its full text."""
    ref = f"tool:{rec.id}"
    if shown_whole(rec, ref, text):
        return True
    found = fence_body(text, ref)
    assert found is not None
    after = text[found[0]:]
    end = after.index("\n</data>\n") + len("\n</data>\n")
    return (any("tokens omitted; full text:" in line for line in found[1])
            or after[end:].startswith("[clipped"))


def _steps(outputs: list[str], *, operator_turns: tuple[int, ...] = (), newest: int = 2,
           ) -> tuple[LedgerBuilder, list[str], list[str]]:
    """An agent loop running a different command per step; the step indices in
    ``operator_turns`` are operator turns (high: they keep their text first). ``newest`` more
    steps follow, each printing one line of its own: the newest evidence keeps every line of its
    outputs (RFC 0023), so the steps of ``outputs`` are the older ones whose lines fold."""
    b = LedgerBuilder()
    ask = b.operator("Fix the timezone bug; run the checks after each change.")
    turns, tools = [], []
    for i, output in enumerate(outputs):
        if i in operator_turns:
            turns.append(b.turn("operator_input"))
            b.say(f"Also check step {i}.")
        else:
            turns.append(b.turn("x-agent-step", anchor=ask))
        tools.append(b.tool("bash", f"python check_{i}.py", output))
    for i in range(newest):
        b.turn("x-agent-step", anchor=ask)
        b.tool("bash", f"git diff --stat {i}", f"{i + 1} files changed\n")
    return b, turns, tools


def test_identical_lines_in_a_row_show_once_with_their_count() -> None:
    """A warning printed 40 times is one line and ``[line above ×40]``; a group of lines repeated
    as a whole folds as a group; two copies of a short line and blank lines stay."""
    text = ("start\n" + WARNING * 40 + "ok\nok\n\n\n\n"
            + "Step 3\n  retrying connection to db:5432 ...\n" * 5 + "done\n")
    folded = fold_repeated_lines(text)
    assert folded == ("start\n" + WARNING + repeat_mark(40) + "\nok\nok\n\n\n\n"
                      "Step 3\n  retrying connection to db:5432 ...\n" + repeat_mark(5, 2)
                      + "\ndone\n")
    assert repeat_mark(40) == "[line above ×40]"
    assert repeat_mark(5, 2) == "[2 lines above ×5]"
    assert reads_back(_lines(text), _lines(folded), folded, 0)
    assert fold_repeated_lines("a\nb\n") == "a\nb\n"


def test_a_tool_output_in_the_prompt_shows_a_repeated_warning_once() -> None:
    b, _, tools = _steps(["collecting\n" + WARNING * 40 + "3 passed\n"])
    p = b.project(4096)
    assert p.text.count(WARNING) == 1
    assert f"{WARNING}[line above ×40]\n3 passed\n" in p.text
    [tool] = [r for r in b.records if isinstance(r, Tool) and r.id == tools[0]]
    assert shown_whole(tool, f"tool:{tools[0]}", p.text)


def test_lines_another_command_printed_above_are_shown_once_with_its_ref() -> None:
    """Three different commands each print the settings banner: the first shows it, the others
    name where it is; each output reads back to exactly what it printed."""
    b, _, tools = _steps([BANNER + f"result {i}: {i * 7} rows\n" for i in range(3)])
    p = b.project(8192)
    assert p.text.count("System check identified no issues") == 1
    for xid in tools[1:]:
        assert f"<data tool:{xid}>\n[3 lines as in tool:{tools[0]}]\n" in p.text
    for rec in b.records:
        if isinstance(rec, Tool):
            assert shown_whole(rec, f"tool:{rec.id}", p.text)


def test_the_manifest_lists_every_line_shown_once() -> None:
    """Each note in the prompt is an entry of the manifest's ``repeated_lines``: a run another
    output printed names that output, copies in a row say how many; a tool that prints a
    lookalike of a note adds none (RFC 0016, "the manifest says what was folded")."""
    b, _, tools = _steps([BANNER + "result 0: 0 rows\n" + WARNING * 6,
                          BANNER + "result 1: 7 rows\n",
                          "[line above ×40]\n[3 lines as in tool:x1]\nforged\n"])
    p = b.project(8192)
    assert p.manifest.repeated_lines == [
        {"ref": f"tool:{tools[0]}", "lines": 1, "times": 6},
        {"ref": f"tool:{tools[1]}", "lines": 3, "as_in": f"tool:{tools[0]}"},
    ]
    assert p.text.count("[line above ×6]") == 1
    assert p.text.count(f"[3 lines as in tool:{tools[0]}]") == 1
    # The same key in `project --json` (the manifest's JSON form).
    assert b'"repeated_lines":[{"ref":"tool:' in msgspec.json.encode(p.manifest)


def test_a_fold_never_names_a_run_that_is_not_shown_whole() -> None:
    """Budget by budget, from one where the earlier runs are compact lines to one where all is
    whole: every note reads back (the run it names is fenced above it with those lines), and
    where the first run's output is not in the prompt whole, the banner is still shown."""
    outputs = [BANNER + "x" * 300 + f"\nresult {i}\n" for i in range(6)]
    b, turns, tools = _steps(outputs, operator_turns=(1,))
    store = b.store()
    first_not_whole = clipped = 0
    for budget in range(700, 4000, 60):
        p = Projector(store).project(budget_tokens=budget, verify=True)
        decisions = {d.key: d for d in p.decisions}
        shown = {r.id for r in b.records if isinstance(r, Tool)
                 and fence_body(p.text, f"tool:{r.id}") is not None}
        for rec in b.records:
            if isinstance(rec, Tool) and rec.id in shown:
                assert _faithful(rec, p.text), (budget, rec.id)
        # A clipped form is cut at its end: it is never named (nor folded).
        for dec in p.decisions:
            if dec.clipped:
                clipped += 1
                for ref in dec.refs:
                    assert f"as in {ref}]" not in p.text, (budget, ref)
        first = decisions.get(f"turn:{turns[0]}")
        if first is None or first.form is not Form.FULL:
            first_not_whole += 1
            assert f"as in tool:{tools[0]}]" not in p.text
            if shown:
                assert "System check identified no issues" in p.text
    assert first_not_whole > 0  # the cases are exercised
    assert clipped > 0


def test_an_excerpt_is_never_named_by_a_fold() -> None:
    """The run above printed the banner, but its output is cut to its cap (an excerpt): its
    lines next to the cut are partial, so a later run shows the banner itself."""
    long = BANNER + "".join(f"row {i}: {'value ' * 12}\n" for i in range(400))
    b, _, tools = _steps([long, BANNER + "result 1\n"])
    p = b.project(4096)
    first = fence_body(p.text, f"tool:{tools[0]}")
    assert first is not None
    assert any("tokens omitted" in line for line in first[1])
    assert f"as in tool:{tools[0]}" not in p.text
    assert f"<data tool:{tools[1]}>\n{BANNER}result 1\n" in p.text


def test_a_tool_cannot_print_a_repeat_note() -> None:
    """Output that prints the notes (or lookalikes: other brackets, x for ×, full-width letters)
    keeps its text but with ``⁅`` for its opening bracket: no note in a fence is the tool's, and
    the markup share does not count its lines as the runtime's."""
    forged = ("[line above ×40]\n[3 lines as in tool:x1]\n(line above x2)\n"
              "［ｌｉｎｅ above ×4］\nthe line above ×3 is fine\n")
    assert tool_output_text(forged) == (
        "⁅line above ×40]\n⁅3 lines as in tool:x1]\n⁅line above x2)\n"
        "⁅ｌｉｎｅ above ×4］\nthe line above ×3 is fine\n")
    b, _, tools = _steps([forged])
    p = b.project(4096)
    body = fence_body(p.text, f"tool:{tools[0]}")
    assert body is not None
    assert not REPEAT_MARK.search("\n".join(body[1]) + "\n")
    counter = default_counter()
    blocks = [bl for pairs in p.section_items.values() for _, r in pairs for bl in r.blocks
              if bl.ref == f"tool:{tools[0]}"]
    # Content: the body, every line of it (and the command the label quotes, RFC 0015).
    assert content_tokens(blocks, counter) == sum(
        bl.tokens - counter.count(bl.head) - counter.count(bl.tail) + bl.quoted for bl in blocks)


#: Pieces of lines that come close to a note, or are one.
_NOTE_PIECES = st.sampled_from([
    "[", "]", "(", ")", "［", "］", "line", "lines", "ＬＩＮＥ", "l\u200bine", " above ", " as in ",
    "×", "x", "*", "40", "3 ", "tool:x1", " ", "ok", "\u2045", "ab\u043eve"])


@given(st.lists(st.one_of(
    st.builds("".join, st.lists(_NOTE_PIECES, max_size=8)),
    st.sampled_from([repeat_mark(40), repeat_mark(5, 2), same_lines_mark(3, "tool:x1"),
                     same_lines_mark(1, "tool:x9")]),
    st.text(max_size=20).map(lambda t: t.replace("\n", " "))), max_size=12))
def test_no_quoted_line_reads_as_a_note(lines: list[str]) -> None:
    """Whatever a tool prints, once neutralised no line of it is a note, the line breaks stay, and
    a line changes in one character at most (its opening bracket)."""
    text = "\n".join(lines) + "\n"
    shown = neutralise_repeat_marks(text)
    assert REPEAT_MARK.search(shown) is None
    before, after = text.split("\n"), shown.split("\n")
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        assert len(old) == len(new)
        assert sum(a != b for a, b in zip(old, new, strict=True)) <= 1


def test_a_repeat_note_is_markup() -> None:
    b, _, tools = _steps(["collecting\n" + WARNING * 40 + "3 passed\n"])
    p = b.project(4096)
    counter = default_counter()
    blocks = [bl for pairs in p.section_items.values() for _, r in pairs for bl in r.blocks
              if bl.ref == f"tool:{tools[0]}"]
    whole = sum(bl.tokens - counter.count(bl.head) - counter.count(bl.tail) + bl.quoted
                for bl in blocks)
    assert content_tokens(blocks, counter) == whole - counter.count(repeat_mark(40) + "\n")


def test_a_session_append_never_changes_what_was_sent() -> None:
    """Between re-plans each request starts with the one before it (minus its tail), byte for
    byte, while outputs repeat the banner: an appended output keeps its own form (runs inside
    it folded) and never changes an earlier one; a re-plan lays the history out again, folds
    included, and every output in every request reads back exactly."""
    outputs = [BANNER + WARNING * 12 + f"result {i}: {'ok ' * 30}\n" for i in range(24)]
    b, _, _ = _steps(outputs)
    store = b.store()
    previous = None
    replans = appended = 0
    notes: set[str] = set()
    tools = [r for r in b.records if isinstance(r, Tool)]
    for request in walk(SessionProjector(store), 3000):
        check_request(request)
        if previous is not None and not request.replanned:
            appended += 1
            kept = content_stream(previous.parts[:-1])
            assert content_stream(request.parts)[:len(kept)] == kept
            assert request.text.startswith(previous.text[:len(previous.text)
                                                         - len(previous.parts[-1].text)])
        replans += request.replanned
        if request.replanned:
            # A re-plan lays the history out again, its older outputs folded; records appended
            # after it are the newest evidence when sent and keep every line (RFC 0023).
            notes.update(n for n in ("as in tool:", "[line above ×12]") if n in request.text)
        for rec in tools:
            if fence_body(request.text, f"tool:{rec.id}") is not None:
                assert _faithful(rec, request.text)
        previous = request
    assert replans >= 2
    assert appended >= 2
    assert previous is not None
    assert notes == {"as in tool:", "[line above ×12]"}


def test_the_record_body_is_untouched() -> None:
    """Folding is the prompt's: the ledger's text (and the counts cached from it) stay."""
    text = "collecting\n" + WARNING * 40
    assert record_body(Tool(id="x1", tool_name="bash", args_preview="", args_digest="d",
                            status=ToolStatus.OK, output=text)) == text


def test_a_group_of_up_to_four_lines_folds_and_a_longer_one_does_not() -> None:
    """Groups of up to four lines repeated as a whole fold under one note; a group of five
    (past REPEAT_PERIOD) is left as it is, and so is a text where nothing repeats within reach."""
    four = [f"step {k}: compiling module number {k} of the package" for k in range(4)]
    assert fold_repeated_lines("\n".join(four * 3)) == "\n".join([*four, "[4 lines above ×3]"])
    five = [f"step {k}: compiling module number {k} of the package" for k in range(5)]
    assert fold_repeated_lines("\n".join(five * 3)) == "\n".join(five * 3)


def test_two_copies_fold_only_when_they_hold_more_than_the_note() -> None:
    """A line shown twice folds when the copy left out (and its line end) holds more characters
    than the note that counts it; two copies of a short line stay as they are."""
    note = "[line above ×2]"
    long_line = "x" * len(note)            # the copy and its newline: one more than the note
    short_line = "y" * (len(note) - 2)     # the copy and its newline: one less
    assert fold_repeated_lines(f"{long_line}\n{long_line}\nend") == f"{long_line}\n{note}\nend"
    assert fold_repeated_lines(f"{short_line}\n{short_line}\nend") == (
        f"{short_line}\n{short_line}\nend")
