"""``holon-ctx episodes list|show|archive|rebuild|verify`` and episodes in ``holon-ctx project``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_episodes_kit import billing_conversation

from holon_ctx.cli.main import main
from holon_ctx.ledger.codec import write_jsonl
from holon_ctx.ledger.records import Message, MessageRole


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A SQLite ledger of the billing conversation, long enough to outgrow project's window."""
    conv, _ = billing_conversation(frontend_turns=90)
    src = tmp_path / "conv.jsonl"
    with src.open("wb") as out:
        write_jsonl(conv.records, out)
    path = tmp_path / "conv.db"
    assert main(["import", str(src), "--db", str(path)]) == 0
    capsys.readouterr()
    return path


def test_archive_list_show_rebuild_verify(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The episode commands archive, tabulate, show, rebuild identically and verify."""
    assert main(["episodes", "list", "--db", str(db)]) == 0
    assert "no episodes" in capsys.readouterr().out
    assert main(["episodes", "archive", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("archived ")
    assert "older than the recent 48" in out
    assert main(["episodes", "archive", "--db", str(db)]) == 0
    assert capsys.readouterr().out.startswith("nothing new to archive")
    assert main(["episodes", "list", "--db", str(db), "--plain"]) == 0
    table = capsys.readouterr().out
    assert "episode:e0-3" in table
    assert "new_intent" in table
    assert "conversation" in table
    assert main(["episodes", "show", "episode:e0-3", "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "covers: turn:t0 – turn:t3" in shown
    assert "digest: sha256:" in shown
    assert "source refs: turn:t0, message:m1" in shown
    assert "Decision: billing uses PostgreSQL 16" in shown
    assert main(["episodes", "show", "e0-3", "--db", str(db), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["episode"]["id"] == "e0-3"
    assert record["recaps"] == []
    assert main(["episodes", "rebuild", "--db", str(db)]) == 0
    assert "identical ids and digests" in capsys.readouterr().out
    assert main(["episodes", "verify", "--db", str(db)]) == 0
    assert "all match" in capsys.readouterr().out


def test_project_recalls_episodes_from_a_sqlite_ledger(db: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``project --db`` recalls archived episodes into the episode section and the manifest."""
    assert main(["project", "--db", str(db), "--budget", "2048", "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert before["episodes"] == []
    assert main(["episodes", "archive", "--db", str(db), "--recent", "16"]) == 0
    capsys.readouterr()
    assert main(["project", "--db", str(db), "--budget", "2048", "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["episodes"][0]["ref"] == "episode:e0-3"
    assert manifest["episodes"][0]["covers"] == ["turn:t0", "turn:t3"]
    assert "PostgreSQL 16" in manifest["text"]
    assert manifest["used_tokens"] <= 2048


@pytest.mark.parametrize(("argv", "message"), [
    (["episodes", "show", "e9-99"], "unknown ref 'episode:e9-99'"),
    (["episodes", "show", "nonsense"], "expected an episode id"),
    (["episodes", "archive", "--max-range", "3"], "rebuild"),
])
def test_bad_input_is_one_line_and_exit_2(db: Path, capsys: pytest.CaptureFixture[str],
                                          argv: list[str], message: str) -> None:
    """Unknown episodes, malformed ids and conflicting settings exit 2 with one line."""
    assert main(["episodes", "archive", "--db", str(db)]) == 0
    capsys.readouterr()
    assert main([*argv, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_missing_database_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --db that does not exist is one clear line and exit 2, and no file is created."""
    missing = tmp_path / "none.db"
    assert main(["episodes", "list", "--db", str(missing)]) == 2
    assert "no such database file" in capsys.readouterr().err
    assert not missing.exists()


def test_show_on_a_ledger_without_episodes_is_unknown_ref(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``show`` before any archive names the episode it could not find (exit 2)."""
    src = tmp_path / "one.jsonl"
    with src.open("wb") as out:
        write_jsonl([Message(id="m1", role=MessageRole.OPERATOR, text="hello")], out)
    path = tmp_path / "one.db"
    assert main(["import", str(src), "--db", str(path)]) == 0
    capsys.readouterr()
    assert main(["episodes", "show", "e0-0", "--db", str(path)]) == 2
    assert "unknown ref 'episode:e0-0'" in capsys.readouterr().err


def _plain_conversation(path: Path, turns: int) -> None:
    """A plain conversation on one topic (no rule cuts it before ``max_range``), as a ledger."""
    from projection_builders import LedgerBuilder, sqlite_store

    b = LedgerBuilder()
    for i in range(turns):
        b.chat(f"About the launch checklist, venue and catering, point {i}.", "Noted.")
    sqlite_store(b.records, str(path)).close()


def test_archive_recent_archives_every_turn_outside_the_window(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a 61-turn conversation, ``archive --recent 48`` archives the 13 turns outside the
    window, closing the range open at its edge (``recent_edge``); a rebuild then gives the same
    bytes, also after a later run archived more (RFC 0029: the edge is a fact of the archive)."""
    db = tmp_path / "conv.db"
    _plain_conversation(db, 61)
    assert main(["episodes", "archive", "--db", str(db), "--recent", "48"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("archived 1 episode (e1-13) covering 13 turns older than the recent 48")
    assert main(["episodes", "list", "--db", str(db), "--plain"]) == 0
    assert "recent_edge" in capsys.readouterr().out
    assert main(["episodes", "rebuild", "--db", str(db)]) == 0
    assert "identical ids and digests" in capsys.readouterr().out
    assert main(["episodes", "verify", "--db", str(db)]) == 0
    assert "all match" in capsys.readouterr().out
    _plain_conversation(tmp_path / "longer.db", 100)
    longer = tmp_path / "longer.db"
    assert main(["episodes", "archive", "--db", str(longer), "--recent", "48",
                 "--at", f"t{3 * 74 + 1}"]) == 0  # the 75th turn (chat ids: t, m, m)
    assert main(["episodes", "archive", "--db", str(longer), "--recent", "48"]) == 0
    assert main(["episodes", "list", "--db", str(longer), "--plain"]) == 0
    table = capsys.readouterr().out
    # Each run closed the range open at its edge (turns 27 and 52), after 16-turn ranges.
    assert all(f"episode:{e} " in table for e in ("e1-16", "e17-27", "e28-43", "e44-52"))
    assert main(["episodes", "rebuild", "--db", str(longer)]) == 0
    assert "identical ids and digests" in capsys.readouterr().out
