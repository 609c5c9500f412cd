"""A --db that is not a usable database URL is refused in one line, before any connection.

libpq's parser took ``postgresql://:::@`` for an empty user with the password ``::`` on the
default host, so the CLI connected to localhost and answered about a session there; a port of
``abc`` came back as a host that "cannot be resolved"; ``mysql://h/db`` was taken for a SQLite
path in a directory named ``mysql:``. None of these needs a server to be refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from holon_ctx.cli.main import main
from holon_ctx.postgres.connection import connect, describe, url_problem

MALFORMED = [
    ("postgresql://:::@", "no user name before '@'"),
    ("postgresql://:s3cret@db.example/app", "no user name before '@'"),
    ("postgresql://@/app", "no user name before '@'"),
    ("postgresql://u:s3cret@localhost:99999/app", "port '99999' is not a number from 1 to 65535"),
    ("postgresql://u:s3cret@localhost:abc/app", "port 'abc' is not a number from 1 to 65535"),
    ("postgresql://localhost:0/app", "port '0' is not a number from 1 to 65535"),
    ("postgresql://h1:5432,h2:x/app", "port 'x' is not a number from 1 to 65535"),
    ("postgresql://localhost/app?port=12ab", "port '12ab' is not a number from 1 to 65535"),
    ("postgresql://u:s3cret@[::1/app", "an IPv6 address is written [ADDRESS]:PORT"),
    ("postgresql://[::1]5432/app", "an IPv6 address is written [ADDRESS]:PORT"),
    ("postgresql://fe80::1:5432/app", "is not HOST:PORT"),
    ("postgresql://db host/app", "holds a space or a control character"),
    ("postgresql://u:s3cret@h/app?bogus=1", 'not a usable PostgreSQL URL: invalid URI query '
                                            'parameter: "bogus"'),
]

#: Forms libpq means something by: each must still be accepted.
VALID = [
    "postgresql://",
    "postgresql:///app",
    "postgres://u:p@h/app",
    "postgresql://u@h:5432/app?sslmode=require&application_name=x",
    "postgresql://h1:5432,h2,h3:5433/app",
    "postgresql://[::1]:5432/app",
    "postgresql://[::1]/app",
    "postgresql://%2Fvar%2Frun%2Fpostgresql/app",
    "postgresql://h:/app",
    "postgresql://:5432/app",
    "postgresql://u:p%40ss@h/app",
]


@pytest.mark.parametrize(("url", "problem"), MALFORMED, ids=[u for u, _ in MALFORMED])
def test_a_malformed_url_is_named_as_such(url: str, problem: str) -> None:
    found = url_problem(url)
    assert found is not None
    assert problem in found
    assert "s3cret" not in found + describe(url)


@pytest.mark.parametrize("url", VALID)
def test_what_libpq_means_by_a_url_is_kept(url: str) -> None:
    assert url_problem(url) is None


def test_connect_refuses_before_dialling(monkeypatch: pytest.MonkeyPatch) -> None:
    """The library's own entry refuses too, without calling libpq's connect at all."""
    import psycopg

    def dial(*args: object, **kwargs: object) -> None:
        raise AssertionError("connected to a malformed URL")

    monkeypatch.setattr(psycopg, "connect", dial)
    with pytest.raises(ValueError, match="no user name before '@'"):
        connect("postgresql://:::@")


@pytest.mark.parametrize(("url", "problem"), MALFORMED[:3] + MALFORMED[4:5],
                         ids=[u for u, _ in MALFORMED[:3] + MALFORMED[4:5]])
@pytest.mark.parametrize("argv", [["stats"], ["project", "--budget", "900"], ["db", "sessions"],
                                  ["db", "migrate"]], ids=lambda a: "-".join(a[:2]))
def test_the_cli_refuses_a_malformed_url_in_one_line(
        url: str, problem: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    key = [] if argv[0] == "db" else ["--session-key", "k"]
    assert main([*argv, "--db", url, *key]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.count("\n") == 1
    assert problem in out.err
    assert "s3cret" not in out.err


@pytest.mark.parametrize("url", ["mysql://u:s3cret@h/app", "postgresql+psycopg://u:s3cret@h/app",
                                 "sqlite:///ledger.db"])
@pytest.mark.parametrize("argv", [["stats"], ["import", "{ledger}"], ["demo", "--no-pager"],
                                  ["compact"], ["episodes", "list"], ["db", "sessions"]],
                         ids=lambda a: "-".join(a[:2]))
def test_a_url_of_another_scheme_is_refused_not_taken_for_a_path(
        url: str, argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """It was read as a SQLite path (``the directory 'mysql:/h' does not exist``); nothing is
    made, and the URL's password is not printed."""
    monkeypatch.chdir(tmp_path)
    ledger = Path(__file__).resolve().parents[1] / "holon_ctx" / "data" / "demo.jsonl"
    assert main([a.format(ledger=ledger) for a in argv] + ["--db", url]) == 2
    out = capsys.readouterr()
    scheme = url.split("://", maxsplit=1)[0]
    assert out.err == (f"holon-ctx: error: --db: a {scheme}:// URL is not a database holon-ctx "
                       "opens: it takes a postgresql:// URL or the path of a SQLite file\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["mysql://u:s3cret@h/app", "postgresql+psycopg://u:s3cret@h/app",
                                 "sqlite:///ledger.db"])
@pytest.mark.parametrize("key", [None, "k"])
def test_open_session_refuses_a_url_of_another_scheme(
        url: str, key: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library took it for a SQLite path: ``the directory 'mysql:/u:s3cret@h' does not
    exist``, the password in the message."""
    import holon_ctx

    monkeypatch.chdir(tmp_path)
    scheme = url.split("://", maxsplit=1)[0]
    with pytest.raises(holon_ctx.InputError) as info:
        holon_ctx.open_session(url, session_key=key)
    assert str(info.value) == (f"open_session: where: a {scheme}:// URL is not a ledger holon_ctx "
                               "opens: give a postgresql:// URL, the path of a SQLite file or a "
                               "LedgerStore")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["postgresql://u:s3c?ret@h/app",
                                 "postgresql://u:s3c?ret@h:5432/app?sslmode=require"])
def test_a_password_holding_a_question_mark_is_a_password(url: str) -> None:
    """libpq looks for the user's ``@`` up to the first ``/`` only, so an unencoded ``?`` is part
    of the password (``conninfo_to_dict`` gives ``password='s3c?ret'``). It was taken for the
    start of the query: the URL was refused as "port 'ret'…" or "port 's3c'…" and described as
    ``postgresql://u:s3c``, part of the password in the message."""
    pytest.importorskip("psycopg")
    from psycopg.conninfo import conninfo_to_dict

    assert conninfo_to_dict(url)["password"] == "s3c?ret"
    assert url_problem(url) is None
    assert "s3c" not in describe(url)
    assert describe(url).startswith("postgresql://u@h")


@pytest.mark.parametrize(("url", "problem"), [
    ("postgresql://u:s3c ret@h/app", "unexpected spaces found in the password"),
    ("postgresql://u:s3c%zzret@h/app", "invalid percent-encoded token: the password"),
    ("postgresql://u:s3c%00ret@h/app", "forbidden value %00 in percent-encoded value: the password"),
    ("postgresql://u@h/app?password=s3c ret", "unexpected spaces found in the password"),
    ("postgresql://u@h/app?sslmode=require&password=s3c%zz",
     "invalid percent-encoded token: the password"),
])
def test_libpq_s_message_does_not_quote_the_password(url: str, problem: str) -> None:
    """libpq's parser quotes the value it could not decode, the password included: the message
    was 'unexpected spaces found in "s3c ret"'. What it says of the value is kept."""
    pytest.importorskip("psycopg")
    found = url_problem(url)
    assert found is not None
    assert problem in found
    assert "s3c" not in found + describe(url)


@pytest.mark.parametrize("url", ["postgresql://agent:s3c/ret@db.example/app",
                                 "postgresql://agent:123/s3cret@127.0.0.1:5432/app",
                                 "postgresql://agent:s3c/r?et@db.example/app?sslmode=require"])
def test_a_slash_in_the_password_is_refused_without_showing_it(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """libpq reads 'agent:s3c/ret@db.example/app' as host 'agent', port 's3c' and database
    'ret@db.example/app': a '/' ends its search for the user's '@'. The error said "port 's3c'
    is not a number" under the name postgresql://agent:s3c/ret@db.example/app, or, with a
    numeric start, dialled host 'agent' and printed the same name: the whole password."""
    problem = url_problem(url)
    assert problem is not None
    assert "%2F" in problem
    assert "s3c" not in problem + describe(url)
    assert describe(url).startswith("postgresql://agent@")
    assert main(["stats", "--db", url, "--session-key", "k"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "s3c" not in err
