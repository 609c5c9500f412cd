"""Golden tests: the preview, explain and diff of a small hand-written ledger at a fixed width.

The ledger (tests/golden/small.jsonl) holds one work item: an operator request, a failing test run,
provider retries and scheduler ticks (folded), a task result, an injection attempt in an issue
comment, a CI event resolving a wait, and a new operator turn. Regenerate the golden files with
``python3 dev.py goldens`` (it writes them and shows the diff to review); the tests only compare.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from rich.console import Console
from stateless_cli import stateless

from holon_ctx.cli.main import main
from holon_ctx.cli.preview import print_preview
from holon_ctx.cli.preview_cmds import trust_lookup
from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore

GOLDEN = Path(__file__).parent / "golden"
SMALL = GOLDEN / "small.jsonl"
WIDTH = 100
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def check_golden(name: str, actual: str) -> None:
    """Compare ``actual`` with the golden file ``name``. Under ``python3 dev.py goldens``
    (HOLON_CTX_WRITE_GOLDEN=1) write it instead, and compare nothing: regeneration is a separate
    step whose result a person reviews as a diff, never a test that passes by writing its answer."""
    path = GOLDEN / name
    if os.environ.get("HOLON_CTX_WRITE_GOLDEN") == "1":
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"missing golden file {path}; run `python3 dev.py goldens`"
    assert actual == path.read_text(encoding="utf-8"), (
        f"{name} differs from its golden file; if the change is intended, run "
        "`python3 dev.py goldens` and review the diff")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(stateless(list(argv)))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


@pytest.fixture(scope="module")
def small_store() -> MemoryStore:
    store = MemoryStore()
    import_jsonl(SMALL, store)
    return store


def preview_text(store: MemoryStore, budget: int, *, colour: bool) -> str:
    from holon_ctx.cli.epochs_view import epoch_view
    from holon_ctx.projection.planning.projector import Projector

    buf = io.StringIO()
    out = Console(file=buf, width=WIDTH, force_terminal=colour, no_color=not colour,
                  color_system="256" if colour else None, highlight=False, soft_wrap=False)
    projector = Projector(store)
    # As the CLI does: the stateless view, with the session epoch of the same turn and budget.
    epoch = epoch_view(store, projector, budget, None).line()
    print_preview(out, projector.project(budget_tokens=budget), trust_lookup(store), epoch=epoch)
    return buf.getvalue()


def test_preview_plain_matches_golden(small_store: MemoryStore) -> None:
    """The plain preview at width 100 is byte-for-byte the reviewed golden file."""
    check_golden("preview_small_700_plain.txt", preview_text(small_store, 700, colour=False))


def test_preview_colour_matches_golden(small_store: MemoryStore) -> None:
    """The coloured preview is the reviewed golden file, and without its codes it is the plain one."""
    coloured = preview_text(small_store, 700, colour=True)
    check_golden("preview_small_700_colour.ansi", coloured)
    assert "\x1b[" in coloured
    assert _ANSI.sub("", coloured) == preview_text(small_store, 700, colour=False)


def test_plain_preview_has_no_line_wider_than_the_width(small_store: MemoryStore) -> None:
    """Every line fits the width (long prompt lines wrap under their gutter)."""
    from rich.cells import cell_len

    for budget in (700, 2000):
        text = preview_text(small_store, budget, colour=False)
        assert max(cell_len(line) for line in text.splitlines()) <= WIDTH
        assert all(line == line.rstrip() for line in text.splitlines())


def test_preview_cli_plain_matches_golden(capsys: pytest.CaptureFixture[str]) -> None:
    """`holon-ctx preview FILE --plain --width 100` prints the golden preview, with no colour."""
    out = run_cli(capsys, "preview", str(SMALL), "--budget", "700", "--plain", "--width", "100")
    assert "\x1b[" not in out
    check_golden("preview_small_700_plain.txt", out)


def test_preview_not_a_terminal_has_no_colour(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --plain, output to a pipe (not a terminal) still carries no escape codes."""
    out = run_cli(capsys, "preview", str(SMALL), "--budget", "700", "--width", "100")
    assert "\x1b[" not in out
    assert "holon-ctx preview of turn:t10" in out


@pytest.mark.parametrize(("ref", "golden"), [
    ("external_event:e1", "explain_small_700_injection.txt"),
    ("turn:t3", "explain_small_700_folded.txt"),
    ("tool:x1", "explain_small_700_tool_in.txt"),
])
def test_explain_matches_golden(capsys: pytest.CaptureFixture[str], ref: str, golden: str) -> None:
    """`explain` of an omitted, a folded and an included ref prints the reviewed text."""
    out = run_cli(capsys, "explain", str(SMALL), "--budget", "700", ref, "--plain", "--width",
                  "100")
    check_golden(golden, out)


def test_diff_matches_golden(capsys: pytest.CaptureFixture[str]) -> None:
    """`diff` between budgets 700 and 2000 prints the reviewed text."""
    out = run_cli(capsys, "diff", str(SMALL), "--budget", "700", "--budget", "2000", "--plain",
                  "--width", "100")
    check_golden("diff_small_700_2000.txt", out)
