"""Counts read as English (issue 16): "1 turn", never "1 turns", in every command's output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from holon_ctx.cli.main import main
from holon_ctx.cli.wording import plural

SMALL = Path(__file__).parent / "golden" / "small.jsonl"
#: A count of one followed by a plural noun.
ONE_PLURAL = re.compile(r"(?<![\d.,/])\b1 (?:[a-z]+ )?(?:turns|records|episodes|items|tokens|"
                        r"runs|scenarios|steps|files)\b")


@pytest.mark.parametrize(("count", "noun", "many", "text"), [
    (0, "turn", None, "0 turns"),
    (1, "turn", None, "1 turn"),
    (2, "turn", None, "2 turns"),
    (1, "source record", None, "1 source record"),
    (3, "unresolved item", None, "3 unresolved items"),
    (2, "entry", "entries", "2 entries"),
    (1, "entry", "entries", "1 entry"),
])
def test_plural(count: int, noun: str, many: str | None, text: str) -> None:
    """One takes the singular; zero and more the plural."""
    assert plural(count, noun, many) == text


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out + out.err


def test_commands_say_one_in_the_singular(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """import, stats and episodes archive/list/show/verify, on a ledger of one
    turn and on one-turn episodes, print no "1 <plural>"."""
    one = tmp_path / "one.jsonl"
    one.write_text("\n".join(SMALL.read_text().splitlines()[1:3]) + "\n")
    outputs = [_run(capsys, "import", str(one), "--db", str(tmp_path / "one.db")),
               _run(capsys, "stats", str(one))]
    db = str(tmp_path / "small.db")
    outputs.append(_run(capsys, "import", str(SMALL), "--db", db))
    outputs.append(_run(capsys, "episodes", "archive", "--db", db, "--recent", "2",
                        "--max-range", "1"))
    outputs.append(_run(capsys, "episodes", "list", "--db", db, "--limit", "1", "--plain"))
    show = _run(capsys, "episodes", "show", "e1-1", "--db", db)
    assert "(closed range, 1 turn: t1)" in show
    outputs.append(show)
    outputs.append(_run(capsys, "episodes", "verify", "--db", db))
    for text in outputs:
        assert ONE_PLURAL.search(text) is None, text
    assert "(1 turn, 2 records in the ledger)" in outputs[0]
    assert "ledger: 1 turn, 2 records" in outputs[1]


@pytest.mark.parametrize(("appended", "words"), [
    (0, "0 records appended since"), (1, "1 record appended since"),
    (2, "2 records appended since")])
def test_the_epoch_line_counts_records_appended_in_english(appended: int, words: str) -> None:
    """preview's and explain's epoch line: "1 record appended since" (the demo's newest turn),
    never "1 records"."""
    from types import SimpleNamespace

    from holon_ctx.cli.epochs_view import EpochView

    request = SimpleNamespace(manifest=SimpleNamespace(session={"appended_records": appended}),
                              request_tokens=4645, cached_tokens=0)
    line = EpochView(request, "turn:t276", "episode_item_resolved").line()  # type: ignore[arg-type]
    assert line.startswith(f"since turn:t276 (episode item resolved), {words} — ")
