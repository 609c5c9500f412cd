"""docs/prompt-format.md, the prompt format's one current spec, shows real renders.

Every example block of the page is preceded by ``<!-- example: LEDGER BUDGET LAYOUT -->``; this
module renders that ledger at that budget in that layout and checks that the example's lines
appear in the render, in order and contiguous (a line ``…`` stands for any lines between). An
example that no longer matches means the format changed: update the page with the change.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
from pathlib import Path

import pytest

import holon_ctx
from holon_ctx.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "prompt-format.md"
CORPUS = ROOT.parent / "shared" / "corpora" / "swe-trajectories"
#: An example block; its fence is three backticks or more (more when a line holds three: a
#: command's code span, RFC 0027), and it closes with the same fence on a line of its own.
EXAMPLE = re.compile(r"<!-- example: (\S+) (\d+) (session|stateless) -->\n(?P<fence>```+)text\n"
                     r"(.*?)^(?P=fence)$",
                     re.DOTALL | re.MULTILINE)
GAP = "…"


def _ledger(name: str) -> Path:
    return ROOT / "holon_ctx" / "data" / "demo.jsonl" if name == "demo" else (
        CORPUS / f"{name}.traj.json")


@functools.cache
def render(name: str, budget: int, layout: str) -> str:
    """The prompt text of the ledger's last turn at the budget, in the layout the doc names."""
    path = _ledger(name)
    if layout == "session":
        with holon_ctx.open_session(":memory:") as session:
            session.import_history(path)
            return session.next_request(budget).text
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["project", str(path), "--budget", str(budget), "--mode", "stateless"])
    assert code == 0
    return out.getvalue()


def examples() -> list[tuple[str, int, str, str]]:
    return [(m.group(1), int(m.group(2)), m.group(3), m.group(5))
            for m in EXAMPLE.finditer(DOC.read_text(encoding="utf-8"))]


def appears_in(example: str, text: str) -> bool:
    """The example's runs of lines (split at ``…`` lines) are whole lines of ``text``, in order."""
    lines = text.splitlines()
    start = 0
    for chunk in re.split(rf"^{GAP}\n", example, flags=re.MULTILINE):
        want = chunk.splitlines()
        found = next((i for i in range(start, len(lines) - len(want) + 1)
                      if lines[i:i + len(want)] == want), None)
        if found is None:
            return False
        start = found + len(want)
    return True


def test_the_page_has_examples_of_both_layouts_and_every_ledger_exists() -> None:
    """Both layouts are shown, and each example names a ledger that is there to render."""
    found = examples()
    assert {layout for _, _, layout, _ in found} == {"session", "stateless"}
    for name, _, _, _ in found:
        assert _ledger(name).is_file(), f"docs/prompt-format.md names a missing ledger {name}"


@pytest.mark.parametrize(("name", "budget", "layout", "example"), examples(),
                         ids=lambda v: str(v)[:30])
def test_each_example_is_cut_from_its_render(name: str, budget: int, layout: str,
                                             example: str) -> None:
    """The example's lines are the render's own lines, in order."""
    assert appears_in(example, render(name, budget, layout)), (
        f"this example of docs/prompt-format.md is not in the {layout} render of {name} at "
        f"{budget}:\n{example}")


def test_a_gap_matches_lines_between_and_only_in_order() -> None:
    """``…`` stands for any lines between two runs; the runs must still come in order."""
    text = "a\nb\nc\nd\n"
    assert appears_in("a\n…\nd\n", text)
    assert appears_in("b\nc\n", text)
    assert not appears_in("d\n…\na\n", text)
    assert not appears_in("a\nc\n", text)
