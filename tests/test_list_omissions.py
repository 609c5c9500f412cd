"""Lists are never silently short (issue 12, item 4): a cut list says how many it left out and
where they are, and the file being edited now is never the one dropped."""

from __future__ import annotations

from projection_builders import LedgerBuilder

from holon_ctx.projection.base.policy import Policy
from holon_ctx.projection.planning.frontier import Tally, files_line
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.session.session import SessionPolicy, SessionProjector


def _edits(files: int) -> tuple[LedgerBuilder, str]:
    """An agent writes ``files`` files one run each, then edits the first file again."""
    b = LedgerBuilder()
    anchor = b.operator("Rename the settings module everywhere.", work_item="w1")
    b.work_item("w1", objective="Rename the settings module everywhere.")
    for i in range(files):
        b.turn("x-agent-step", anchor=anchor, work_item="w1")
        b.tool("bash", f"sed -i s/old/new/ src/mod_{i:02d}.py", "", files=[f"src/mod_{i:02d}.py"])
    b.turn("x-agent-step", anchor=anchor, work_item="w1")
    last = b.tool("bash", "vim src/mod_00.py", "", files=["src/mod_00.py"])
    return b, last


def test_the_frontier_names_the_current_edit_target_and_counts_the_files_it_leaves_out() -> None:
    """30 files, 24 named: the file written last is named, the line says 6 are left out and
    names the runs that wrote them."""
    b, _last = _edits(30)
    store = b.store()
    planned = Projector(store).project(budget_tokens=400, verify=True)
    line = next(ln for ln in planned.text.split("\n") if ln.startswith("files modified: "))
    assert "src/mod_00.py" in line  # the current edit target, first written long ago
    assert line.count("src/mod_") == 24
    assert "; 6 written earlier not named here (written by " in line
    assert "tool:x4" not in line  # mod_00's first write: its last writer is named instead
    # A planned session epoch states the frontier in its history at a re-plan (RFC 0025
    # decision 5), here at turn:t1 before any write; the runs after it are history lines, each
    # naming what it wrote, the current edit target last.
    session = SessionProjector(store, session=SessionPolicy(whole_history=False)).request(
        budget_tokens=8192)
    for i in range(30):
        assert f"wrote src/mod_{i:02d}.py" in session.text
    last_run = [ln for ln in session.text.split("\n") if ln.startswith("tool:x")][-1]
    assert last_run.endswith("wrote src/mod_00.py")


def test_files_line_names_every_file_when_they_fit() -> None:
    tally = Tally(files={"a.py": ["tool:x1"], "b.py": ["tool:x2"]})
    assert files_line(tally.files, 24, 120) == "files modified: a.py, b.py"
    assert files_line(tally.files, 1, 120) == (
        "files modified: b.py; 1 written earlier not named here (written by tool:x1)")


def test_a_tool_line_says_how_many_files_it_does_not_name() -> None:
    """A run that wrote more files than its line names says how many more and where they are."""
    b = LedgerBuilder()
    anchor = b.operator("Format the package.", work_item="w1")
    b.turn("x-agent-step", anchor=anchor, work_item="w1")
    limit = Policy().text.files_on_line
    b.tool("bash", "ruff format src", "", files=[f"src/f{i}.py" for i in range(limit + 2)])
    p = b.project(8192)
    assert f"; wrote {', '.join(f'src/f{i}.py' for i in range(limit))} and 2 more" in p.text

