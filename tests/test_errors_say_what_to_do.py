"""Errors that say what to do (issue 27, item 3): a missing extra names the pip command that works
for this install; ``open_session`` opens a ``postgresql://`` URL (or says what it needs); a
missing directory is named; a ledger or transcript file given where a database belongs gets the
way to read it; library errors never name the CLI's flags; a format error's JSON path exists in
the input it names."""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon_ctx
from holon_ctx import extras
from holon_ctx.cli.main import build_parser, main
from holon_ctx.errors import HolonCtxError, InputError, LedgerFormatError
from holon_ctx.ledger.transcript_build import LedgerBuilder
from holon_ctx.ledger.transcript_chat import read_anthropic, read_openai

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "holon_ctx" / "data" / "demo.jsonl"
CHAT = [{"role": "system", "content": "You help."}, {"role": "user", "content": "Hi?"},
        {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye."}]


# -- a missing extra ---------------------------------------------------------------------------
@pytest.mark.parametrize(("module", "dependency", "extra"), [
    ("holon_ctx.integrations.langchain", "langchain_core", "langchain"),
    ("holon_ctx.integrations.openai_agents", "agents", "openai-agents"),
])
def test_a_missing_extra_is_one_line_naming_the_pip_command(module: str, dependency: str,
                                                            extra: str) -> None:
    """Importing an integration without its extra fails with one line (no chained traceback)
    that names the extra and the pip command for this install, never an index holon-ctx is not
    on; it is still an ImportError."""
    script = (f"import sys; sys.modules[{dependency!r}] = None\n"
              f"try:\n    import {module}\n"
              "except ImportError as e:\n    print(type(e).__name__); print(e)\n"
              f"import {module}\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    kind, message = run.stdout.splitlines()
    assert kind == "ModuleNotFoundError"
    assert message == (f"{module} needs the {extra!r} extra ({dependency} is not installed): "
                       f"{extras.install_command(extra)}")
    assert "pip install" in message
    # The uncaught import: the traceback's last line is the same one line, with nothing chained.
    assert run.stderr.strip().splitlines()[-1] == f"ModuleNotFoundError: {message}"
    assert "During handling" not in run.stderr


class _Dist:
    """A stand-in for an installed distribution's metadata."""

    def __init__(self, direct_url: dict[str, Any] | None,
                 requires: tuple[str, ...] = ('langchain-core<2,>=1.0; extra == "langchain"',)
                 ) -> None:
        self.metadata = {"Name": "holon-ctx"}
        self._direct_url = direct_url
        self.requires = list(requires)

    def read_text(self, name: str) -> str | None:
        return json.dumps(self._direct_url) if name == "direct_url.json" and self._direct_url \
            else None


@pytest.mark.parametrize(("how", "expected"), [
    ("checkout", "pip install -e '{checkout}[langchain]'"),
    ("checkout-copy", "pip install '{checkout}[langchain]'"),
    ("wheel", "pip install '{wheel}[langchain]'"),
    ("wheel-gone", "pip install 'langchain-core<2,>=1.0'"),
    ("index", "pip install 'holon-ctx[langchain]'"),
])
def test_the_install_command_fits_how_holon_ctx_was_installed(
        how: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a checkout (editable or not) or a wheel file, the command installs that with the
    extra; a wheel since deleted gets the extra's own requirements (on PyPI); an install from an
    index gets the index's form (that index has holon-ctx)."""
    checkout = tmp_path / "holon ctx"
    checkout.mkdir()
    wheel = tmp_path / "holon_ctx-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    dist = {"checkout": _Dist({"url": checkout.as_uri(), "dir_info": {"editable": True}}),
            "checkout-copy": _Dist({"url": checkout.as_uri(), "dir_info": {}}),
            "wheel": _Dist({"url": wheel.as_uri(), "archive_info": {}}),
            "wheel-gone": _Dist({"url": (tmp_path / "gone.whl").as_uri(), "archive_info": {}}),
            "index": _Dist(None)}[how]
    # Not run from a checkout of its own: the module's file is "installed".
    monkeypatch.setattr(extras, "__file__", str(tmp_path / "site" / "holon_ctx" / "extras.py"))
    monkeypatch.setattr(extras.importlib.metadata, "distributions", lambda: [dist])
    # The checkout's name has a space: the path is quoted for the shell.
    assert extras.install_command("langchain") == expected.format(checkout=checkout, wheel=wheel)


# -- open_session and its paths ----------------------------------------------------------------
def test_open_session_opens_a_postgresql_session(pg_url: str, pg_session_key: str) -> None:
    """A postgresql:// URL with a session key is that session's ledger (made if missing), with
    its episodes and governed state beside it; a second open continues it."""
    from holon_ctx.postgres import PostgresStore

    with holon_ctx.open_session(pg_url, session_key=pg_session_key) as session:
        assert isinstance(session.store, PostgresStore)
        assert session.store.session == pg_session_key
        session.operator_message("Rotate the staging certificates.")
    with holon_ctx.open_session(pg_url, session_key=pg_session_key) as again:
        assert again.current_turn is not None
        assert "Rotate the staging certificates." in again.next_request(budget_tokens=800).text


@pytest.mark.parametrize(("where", "key", "needle"), [
    ("postgresql://nobody@127.0.0.1:1/none", None, "pass session_key=KEY"),
    ("agent.db", "agent-1", "session key picks a session of a postgresql:// database"),
])
def test_open_session_says_what_a_url_or_a_key_needs(where: str, key: str | None, needle: str,
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL without a key, or a key without a URL, is refused before anything is opened or
    made, naming the argument."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as caught:
        holon_ctx.open_session(where, session_key=key)
    assert needle in str(caught.value)
    assert caught.value.path == "session_key"
    assert list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The library and every CLI path (a new database, an existing one) name the directory that
    is missing and say to create it; nothing is made."""
    where = tmp_path / "no" / "such" / "a.db"
    with pytest.raises(HolonCtxError) as caught:
        holon_ctx.open_session(where)
    assert f"the directory {str(where.parent)!r} does not exist: create it first" in str(
        caught.value)
    for argv in (["import", str(DEMO), "--db", str(where)],
                 ["stats", "--db", str(where)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"the directory {str(where.parent)!r} does not exist" in err
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("name", ["agent.jsonl", "agent.json", "run.traj.JSON"])
def test_a_new_database_named_like_a_file_format_is_refused(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A new ledger under a JSONL or JSON name (SQLite bytes every reader would take for a ledger
    file or a transcript) is refused by the library and the CLI (import, and demo, which makes
    its directory), saying to name it .db; nothing is made, not even demo's directory."""
    where = tmp_path / name
    with pytest.raises(InputError) as caught:
        holon_ctx.open_session(where)
    assert str(caught.value) == (
        f"{where}: a new ledger database would be SQLite under a {where.suffix} name, which "
        "readers take for ledger JSONL or a transcript: name it .db (ledger JSONL is what "
        "export writes)")
    for argv in (["import", str(DEMO), "--db", str(where)],
                 ["demo", "--db", str(tmp_path / "new" / name), "--no-pager"]):
        assert main(argv) == 2
        assert capsys.readouterr().err == "holon-ctx: error: " + str(caught.value).replace(
            str(where), argv[argv.index("--db") + 1]) + "\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["ledger", "transcript"])
def test_a_file_given_as_a_database_gets_the_way_to_read_it(
        kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ledger JSONL or a JSON transcript given where a database belongs: the CLI says to pass
    it as SOURCE (or import it), the library to import it into a ledger; neither touches it."""
    if kind == "ledger":
        path = tmp_path / "run.jsonl"
        path.write_bytes(DEMO.read_bytes()[:20000].rsplit(b"\n", 1)[0] + b"\n")
    else:
        path = tmp_path / "chat.json"
        path.write_text(json.dumps(CHAT))
    before = path.read_bytes()
    assert main(["preview", "--db", str(path), "--budget", "4096"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "pass it as SOURCE, without --db" in err
    assert f"holon-ctx import {path} --db" in err
    with pytest.raises(InputError) as caught:
        holon_ctx.open_session(path)
    assert "session.import_history(path)" in str(caught.value)
    assert "--" not in str(caught.value)
    assert path.read_bytes() == before


# -- library errors never name CLI flags --------------------------------------------------------
def _cli_flags() -> set[str]:
    flags: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            flags.update(s for s in action.option_strings if s.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(build_parser())
    return flags - {"--help", "--version"}


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant of a module but its docstrings (which talk about the CLI freely)."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                                | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_library_code_names_no_cli_flag() -> None:
    """No text outside holon_ctx/cli/ (messages, hints, reasons) names one of holon-ctx's flags:
    the library's errors reach callers who cannot pass them (the CLI gives its own wording, e.g.
    ``cli/common.FORMAT_OPTION``). The shell-command reader and the transcript reader quote
    other programs' flags."""
    flags = _cli_flags()
    pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(f) for f in sorted(flags)) +
                         r")(?![\w-])")
    allowed = {"transcript_shell.py", "transcripts.py"}
    found = []
    for path in sorted((ROOT / "holon_ctx").rglob("*.py")):
        if "cli" in path.relative_to(ROOT).parts or path.name in allowed:
            continue
        for line, text in _strings(ast.parse(path.read_text(encoding="utf-8"))):
            if pattern.search(text):
                found.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert found == []
    # transcripts.py names none of the CLI's flags: the CLI passes its --from as option=.
    tree = ast.parse((ROOT / "holon_ctx" / "ledger" / "transcripts.py").read_text())
    assert [t for _, t in _strings(tree) if pattern.search(t)] == []


def test_import_history_names_its_own_argument(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A guessed format that would trust several user messages is refused: the library says
    ``format="openai"``, the CLI ``--from openai``, for the same file."""
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT))
    with holon_ctx.open_session(":memory:") as session, pytest.raises(InputError) as caught:
        session.import_history(path)
    assert 'Say which format it is with format="openai"' in str(caught.value)
    assert "--from" not in str(caught.value)
    assert main(["stats", str(path)]) == 2
    assert "Say which format it is with --from openai" in capsys.readouterr().err


# -- a format error's path exists in the input -------------------------------------------------
def _resolve(data: Any, path: str) -> tuple[bool, bool]:
    """``(parent exists, whole path exists)`` for a JSON path like ``$[2].tool_calls[0].id``."""
    steps = re.findall(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]", path[1:])
    assert path.startswith("$")
    assert "".join(f".{k}" if k else f"[{i}]" for k, i in steps) == path[1:], path
    node = data
    for n, (key, index) in enumerate(steps):
        last = n == len(steps) - 1
        if key and isinstance(node, dict) and key in node:
            node = node[key]
        elif index and isinstance(node, list) and int(index) < len(node):
            node = node[int(index)]
        else:
            return last, False
    return True, True


_JUNK = st.one_of(st.integers(), st.none(), st.booleans(), st.lists(st.integers(), max_size=2),
                  st.text(max_size=3))


@st.composite
def _broken_transcripts(draw: st.DrawFn) -> tuple[str, Any]:
    """A chat transcript (bare list or ``{"messages": …}``, OpenAI or Anthropic) with one field
    of one message, or the message itself, replaced by junk."""
    fmt = draw(st.sampled_from(["openai", "anthropic"]))
    messages: list[Any] = [
        {"role": "user", "content": "Run the tests."},
        {"role": "assistant", "content": "On it.",
         **({"tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "bash", "arguments": "{}"}}]}
            if fmt == "openai" else {})},
        ({"role": "tool", "tool_call_id": "c1", "content": "ok"} if fmt == "openai" else
         {"role": "user", "content": [{"type": "text", "text": "ok"}]}),
    ]
    i = draw(st.integers(0, len(messages) - 1))
    field = draw(st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "whole"]))
    if field == "whole":
        messages[i] = draw(_JUNK)
    else:
        messages[i][field] = draw(_JUNK)
    bare = draw(st.booleans())
    return fmt, messages if bare else {"messages": messages}


@settings(max_examples=60, deadline=None)
@given(_broken_transcripts())
def test_a_format_errors_path_exists_in_the_input(case: tuple[str, Any]) -> None:
    """Whichever field is wrong, in a bare message list or under ``messages``, the error's path
    leads into the input given: its parent always, the field itself unless it is missing."""
    fmt, data = case
    reader = read_openai if fmt == "openai" else read_anthropic
    error: LedgerFormatError | None = None
    try:
        reader(data, LedgerBuilder(source="t.json"))
    except LedgerFormatError as exc:
        error = exc
    if error is None:
        return  # the junk happened to be acceptable (an int role is not; a missing id may be)
    assert error.path is not None
    parent, whole = _resolve(data, error.path)
    assert parent, (error.path, data)
    assert whole or "missing" in error.message, (error.path, error.message, data)


@pytest.mark.parametrize("command", ["import", "demo"])
def test_a_session_key_with_a_sqlite_database_is_refused_before_anything_is_made(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--session-key picks a session of a postgresql:// database; with a SQLite file (one
    ledger) import stored the ledger and dropped the key, and demo built its database before
    refusing. Both refuse it first, in one line, and make nothing."""
    db = tmp_path / "run.db"
    argv = ([command, str(DEMO), "--db", str(db)] if command == "import"
            else [command, "--db", str(db), "--no-pager"])
    assert main([*argv, "--session-key", "agent-1"]) == 2
    assert capsys.readouterr().err == (
        f"holon-ctx: error: {db}: --session-key applies to a postgresql:// --db only\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["import", "-", "--db", "run.db"], ["stats", "-"]])
def test_a_dash_for_standard_input_is_told_its_name(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``-`` is standard input to many tools; here it names no file, and the error says which
    name reads standard input."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "holon-ctx: error: -: no such file; standard input is read as /dev/stdin\n")
    assert list(tmp_path.iterdir()) == []
