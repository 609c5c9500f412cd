"""Small defects found by trying the CLI as a new user would (branch polish, part 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_huge_turn import huge_turn

from holon_ctx import ToolCall
from holon_ctx.cli.main import main
from holon_ctx.errors import InputError

ONE_TURN = '{"type":"turn","id":"t1","seq":1,"trigger":"operator_input"}\n'


@pytest.mark.parametrize("argv", [["stats", "--db", "{d}"], ["import", "{f}", "--db", "{d}"],
                                  ["import", "{f}", "--db", "{d}/"],
                                  ["preview", "--db", "{d}", "--budget", "3000"]],
                         ids=["stats", "import", "import-slash", "preview"])
def test_a_directory_given_as_db_is_named_as_one(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It said ``not a usable holon-ctx database (unable to open database file)``, SQLite's words."""
    (tmp_path / "adir").mkdir()
    (tmp_path / "l.jsonl").write_text(ONE_TURN, encoding="utf-8")
    d, f = str(tmp_path / "adir"), str(tmp_path / "l.jsonl")
    assert main([a.format(d=d, f=f) for a in argv]) == 2
    assert capsys.readouterr().err == f"holon-ctx: error: {d}: is a directory, not a database file\n"
    assert list((tmp_path / "adir").iterdir()) == []


@pytest.mark.parametrize(("turns", "words"), [(1, "1 model call at"), (2, "2 model calls at")])
def test_replay_counts_its_calls_in_words(turns: int, words: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """It said ``replay of 1 model calls``."""
    src = tmp_path / "l.jsonl"
    src.write_text("".join(ONE_TURN.replace("t1", f"t{n}").replace('"seq":1', f'"seq":{n}')
                           for n in range(1, turns + 1)), encoding="utf-8")
    assert main(["replay", str(src), "--budget", "2000"]) == 0
    assert capsys.readouterr().out.startswith(f"replay of {words} 2,000 tokens")


def test_explain_of_a_record_appended_since_the_re_plan_says_it_is_in_the_request(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A session's plan is as of its re-plan; the newest record of a huge turn (its 60th run,
    tool:x61) came after it and is in the request's appended part. explain said
    ``not_yet_appended — appended after turn:t0, the turn projected`` beside ``in the request …
    the history appended since``."""
    db = str(tmp_path / "huge.db")
    huge_turn(db, records=60, words=20, steps=False, seed=3, max_bytes=1500)
    assert main(["explain", "--db", db, "--budget", "4000", "tool:x61", "--json"]) == 0
    e = json.loads(capsys.readouterr().out)
    assert e["session"]["in_request"] == "appended"
    assert e["status"] == "in_full"
    assert e["to_get_in"] == "nothing: it is in the request"


@pytest.mark.parametrize("mode", ["session", "stateless"])
def test_preview_counts_a_huge_turns_folded_records_as_left_out(
        mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The prompt showed ``folded tool:x2–tool:x60 … (59 earlier records of this turn)`` while
    the summary said ``left out nothing: every candidate is in the prompt in full`` (session):
    a huge turn is one item shown in full, its older records left out by ref only."""
    db = str(tmp_path / "huge.db")
    huge_turn(db, records=60, words=20, steps=False, seed=3, max_bytes=1500)
    assert main(["project", "--db", db, "--budget", "1500", "--mode", mode, "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    earlier = sum(1 for s in manifest["sections"] for o in s["omitted"]
                  if o["reason"] == "earlier_record_of_huge_turn")
    assert earlier > 0
    assert main(["preview", "--db", db, "--budget", "1500", "--mode", mode, "--plain",
                 "--width", "400", "--no-pager"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("left out "))
    assert f"{earlier} earlier records of a huge turn counted on its fold line" in line
    assert "every candidate is in the prompt in full" not in line


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_tool_call_arguments_with_a_non_finite_float_are_refused(value: float) -> None:
    """A mapping was stored as ``{"b": NaN}``, which is not JSON (json.dumps writes it unless
    told not to): refused where the call is built, naming the field."""
    with pytest.raises(InputError) as info:
        ToolCall("c1", "bash", {"nested": [{"b": value}]})
    assert str(info.value) == "ToolCall: arguments: a float that is NaN or infinite is not JSON"


def test_tool_call_arguments_that_hold_themselves_are_refused() -> None:
    args: dict[str, object] = {}
    args["self"] = args
    with pytest.raises(InputError, match=r"^ToolCall: arguments: not JSON: Circular reference"):
        ToolCall("c1", "bash", args)
    assert json.loads(ToolCall("c1", "bash", {"ok": 1.5}).arguments) == {"ok": 1.5}


@pytest.mark.parametrize(("argv", "said"), [
    (["stats", ""], "SOURCE is empty: name a file"),
    (["preview", "", "--budget", "4000"], "SOURCE is empty: name a file"),
    (["stats", "--db", ""], "--db is empty: name a database file or a postgresql:// URL"),
    (["import", "", "--db", "{tmp}/x.db"], "FILE is empty: name a file"),
    (["import", "{ledger}", "--db", ""], "--db is empty: name a database file or a postgresql:// URL"),
    (["export", "--db", "{tmp}/x.db", "-o", ""], "-o is empty: name a file"),
    (["explain", "{ledger}", "--budget", "3000", ""], "SOURCE or REF is empty: name a file and a ref"),
    (["replay", "{ledger}", "--budget", "3000", "--price", ""],
     "--price is empty: name a price table or its file"),
], ids=["stats", "preview", "stats-db", "import-file", "import-db", "export-o", "explain-ref",
        "replay-price"])
def test_an_empty_path_is_named_as_empty(argv: list[str], said: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """An empty path read as the current directory: ``.: cannot read: Is a directory``, or
    ``.: not a usable holon-ctx database``; ``export -o ""`` wrote to stdout."""
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(ONE_TURN, encoding="utf-8")
    assert main([a.format(tmp=tmp_path, ledger=ledger) for a in argv]) == 2
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", f"holon-ctx: error: {said}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.jsonl"]
