"""Values quoted in errors: one line, escaped, clipped; odd input is the project's error (issue 23
defect 8, RFC 0027)."""

from __future__ import annotations

from pathlib import Path

import pytest

import holon_ctx
from holon_ctx.cli.main import main
from holon_ctx.errors import HolonCtxError, InputError, StoreError, quote_value
from holon_ctx.postgres import PostgresStore


@pytest.mark.parametrize("content", [
    '{"type": ["turn"]}', '{"type": {"turn": 1}}', '{"type": ["turn"]}\n{"type": "turn"}\n',
    '[{"role": ["user"], "content": "x"}]', '{"trajectory_format": ["x"], "messages": []}',
])
@pytest.mark.parametrize("command", ["import", "preview"])
def test_a_value_of_the_wrong_json_type_in_format_detection_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, command: str) -> None:
    """A list or an object where format detection expects a string: exit 2, one line naming
    the file, no traceback (it was ``TypeError: unhashable type: 'list'``)."""
    src = tmp_path / "odd.json"
    src.write_text(content)
    argv = ([command, str(src), "--db", str(tmp_path / "x.db")] if command == "import"
            else [command, str(src), "--budget", "1000"])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith(f"holon-ctx: error: {src}")
    assert "Traceback" not in err


@pytest.mark.parametrize(("history", "said"), [
    ("a\x00b", "NUL character"),
    ("\ud800", "U+D800"),
    ("ok/\udfff.json", "U+DFFF"),
    ("x" * 5000 + "\x00", "(5,001 characters)"),
])
def test_an_unusable_file_name_is_the_projects_error(history: str, said: str) -> None:
    """A name no file can have is an InputError of one line (not ValueError or
    UnicodeEncodeError), the name quoted and clipped."""
    with holon_ctx.open_session(":memory:") as session, pytest.raises(InputError) as err:
        session.import_history(history)
    message = str(err.value)
    assert said in message
    assert "\n" not in message
    assert len(message) < 300


def test_every_error_is_one_line_whatever_its_message_held() -> None:
    """The safety net: a message that still holds a line break (a server's DETAIL line, a value
    quoted some other way) renders on one line."""
    assert str(StoreError("conflict\nDETAIL:  Key (sid)=(1) already exists.")) == (
        "conflict DETAIL:  Key (sid)=(1) already exists.")
    assert str(InputError("bad\r\nvalue", source="f.json", line=3)) == "f.json:3: bad value"


@pytest.mark.parametrize(("value", "shown"), [
    ("abc", "'abc'"),
    ("a\nb", "'a\\nb'"),
    ("\ud800", "'\\ud800'"),
    ("\x1b[2J", "'\\x1b[2J'"),
    ("k" * 10240, "'" + "k" * 80 + "'… (10,240 characters)"),
    (42, "42"),
])
def test_quote_value_is_one_line_escaped_and_clipped(value: object, shown: str) -> None:
    assert quote_value(value) == shown


def test_a_ten_kilobyte_session_key_is_clipped_in_its_error(pg_url: str) -> None:
    """A session key the store refuses is named by its first 80 characters and its length."""
    with pytest.raises(StoreError) as err:
        PostgresStore(pg_url, session="k" * 10240 + "\n")
    message = str(err.value)
    assert "(10,241 characters)" in message
    assert len(message) < 300
    assert "\n" not in message


def test_a_governed_journal_conflict_is_one_line_without_detail(pg_url: str,
                                                                pg_session_key: str) -> None:
    """PostgreSQL's DETAIL line is not in the error: one line, the server's first."""
    from holon_ctx.continuity.exceptions import DuplicateRecordError
    from holon_ctx.postgres.continuity import PostgresContinuityBackend

    backend = PostgresContinuityBackend(pg_url, session=pg_session_key)
    at = "2026-12-01T00:00:00.000000Z"
    try:
        backend.append_envelope("ce-1", "s1", b"{}", at)
        backend.append_step("ce-1", "boundary", b"{}", at)
        with pytest.raises(DuplicateRecordError) as err:
            backend.append_step("ce-1", "boundary", b"{}", at)
    finally:
        backend.close()
    assert "DETAIL" not in str(err.value)
    assert "\n" not in str(err.value)
    assert isinstance(err.value, HolonCtxError)



def test_governed_store_errors_clip_a_ten_kilobyte_value() -> None:
    """Errors of holon_ctx.continuity quote values through quote_value (as session.py's do): a
    10 KB value is clipped, with its length, not echoed whole."""
    from datetime import UTC, datetime

    from holon_ctx.continuity import ApprovalStatus, ContinuityStore

    big = "v" * 10_240
    now = datetime(2026, 1, 1, tzinfo=UTC)
    governed = ContinuityStore.in_memory()
    calls = {
        "approval": lambda: governed.set_approval_status(big, ApprovalStatus.APPROVED, at=now),
        "constraint": lambda: governed.withdraw_constraint("s1", big, at=now),
        "clock": lambda: governed.stamp(big),  # type: ignore[arg-type]
    }
    for what, call in calls.items():
        with pytest.raises(HolonCtxError) as caught:
            call()
        message = str(caught.value)
        assert "\n" not in message, what
        assert len(message) < 300, (what, len(message))
        assert "(10,240 characters)" in message, (what, message)
