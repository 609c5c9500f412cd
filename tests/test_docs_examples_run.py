"""Every example in the docs runs in a test (issue 27, item 6), and the integrations return what
the docs say they return.

* Python blocks: each block of docs/*.md and README.md is either run by the test module named in
  ``ELSEWHERE`` or run here, in page order in one namespace, after a short setup that makes the
  names a fragment uses (``store``, ``projection``, a ledger ``agent.db`` with some history, the
  test PostgreSQL server for a ``postgresql://`` URL). A new block must be added to one of the two.
* Shell lines: every ``holon-ctx`` command of an ``sh`` or ``console`` block parses, with its
  placeholders (``FILE``, ``N``, ``SOURCE`` …) filled in.
* Console blocks of docs/cli.md: each command runs against the demo database and prints every
  line the page shows, in order (a block may cut lines out, never change one). The error
  examples run in the default tier, the rest in the slow tier (each projects the demo, some many
  times).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import holon_ctx
from holon_ctx.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CORPUS = ROOT.parent / "shared" / "corpora" / "swe-trajectories"
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)

#: Python blocks run by another test module: (page, block's first line) -> that module.
ELSEWHERE = {
    ("library.md", None): "tests/test_library_docs.py",  # every python block of the page
    ("README.md", "import holon_ctx"): "tests/test_library_docs.py",
    ("projection.md", "import holon_ctx"): "tests/test_library_docs.py",
    ("episodes.md", "import holon_ctx"): "tests/test_library_docs.py",
    ("continuity.md", "import holon_ctx"): "tests/test_library_docs.py",
    ("providers.md", "import json"): "tests/test_providers_docs.py",
}
#: Python blocks run here, by page: each page's blocks in order, in one namespace, after SETUP.
HERE = {
    "continuity.md": ("from datetime import UTC, datetime, timedelta",
                      "from holon_ctx import SessionConfig"),
    "episodes.md": ("from holon_ctx.lowlevel import (",),
    "projection.md": ("from holon_ctx.lowlevel import Projector, SqliteStore",),
    "providers.md": ("from holon_ctx.lowlevel import (",),
    "typing.md": ("for message in to_openai_messages(projection):",),
    "import.md": ("from holon_ctx.lowlevel import MemoryStore, detect_format, import_any, "
                  "read_transcript",),
    "postgres.md": ("from holon_ctx.continuity import ContinuityStore",),
}
#: What a page's fragments assume is already there (run before its blocks, in the same namespace).
SETUP = {
    "providers.md": "from holon_ctx.ledger.sqlite import SqliteStore\n"
                    "from holon_ctx.tokens import default_counter\n"
                    "store, counter = SqliteStore('agent.db'), default_counter()\n",
    "typing.md": "from holon_ctx.ledger.sqlite import SqliteStore\n"
                 "from holon_ctx.projection.planning.projector import Projector\n"
                 "from holon_ctx.projection.provider_formats.providers import to_openai_messages\n"
                 "projection = Projector(SqliteStore('agent.db')).project(budget_tokens=4096)\n",
    "postgres.md": "from holon_ctx.ledger.codec import decode_line\n"
                   "records = [decode_line(line, source='demo.jsonl', line=n) for n, line in "
                   "enumerate(open(DEMO, 'rb').read().splitlines()[:40], 1)]\n",
}


def _python_blocks() -> list[tuple[str, str]]:
    pages = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
    return [(page.name, m.group(2)) for page in pages
            for m in _BLOCK.finditer(page.read_text(encoding="utf-8")) if m.group(1) == "python"]


def test_every_python_block_is_run_by_a_test() -> None:
    """Each python block of the docs is run here or by the module ``ELSEWHERE`` names (which
    exists and reads that page)."""
    unclaimed = []
    for page, code in _python_blocks():
        first = code.splitlines()[0]
        module = ELSEWHERE.get((page, None)) or ELSEWHERE.get((page, first))
        if module is not None:
            assert page in (ROOT / module).read_text(encoding="utf-8") or \
                page == "README.md", (page, module)
            continue
        if first not in HERE.get(page, ()):
            unclaimed.append((page, first))
    assert unclaimed == []


def _ledger_with_history(where: Path) -> None:
    with holon_ctx.open_session(where / "agent.db", compaction=None) as session:
        session.set_environment(guidance="You fix failing tests.", workspace="/srv/shop")
        for i in range(40):
            session.operator_message(f"request {i}: look at file_{i}.py")
            session.assistant_message(f"looked at file_{i}.py")


def _run_page(page: str, tmp_path: Path, substitute: dict[str, str] | None = None) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"docs_{page}",
                                 "DEMO": str(ROOT / "holon_ctx" / "data" / "demo.jsonl")}
    if page in SETUP:
        exec(compile(SETUP[page], f"{page}#setup", "exec"), namespace)
    ran = 0
    for name, code in _python_blocks():
        if name != page or code.splitlines()[0] not in HERE[page]:
            continue
        for old, new in (substitute or {}).items():
            code = code.replace(old, new)
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, f"{page}#python{ran}", "exec"), namespace)
        ran += 1
    assert ran == len(HERE[page])
    return namespace


@pytest.mark.parametrize("page", ["continuity.md", "episodes.md", "projection.md", "providers.md",
                                  "typing.md"])
def test_the_pages_fragments_run(page: str, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's fragments run as written over a ledger with some history."""
    monkeypatch.chdir(tmp_path)
    _ledger_with_history(tmp_path)
    namespace = _run_page(page, tmp_path)
    made = namespace.get("prompt", namespace.get("projection", namespace.get("cache_key")))
    assert made is not None


def test_the_import_pages_fragment_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/import.md's library fragment reads a trajectory and a chat transcript as it says."""
    trajectories = sorted(CORPUS.glob("*.traj.json"))
    if not trajectories:
        pytest.skip(f"corpus not found at {CORPUS}")
    monkeypatch.chdir(tmp_path)
    shutil.copy(trajectories[0], tmp_path / "run.traj.json")
    (tmp_path / "chat.json").write_text(json.dumps([
        {"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hello."}]))
    namespace = _run_page("import.md", tmp_path)
    assert namespace["stored"] > 0
    assert namespace["records"]


def test_the_postgres_pages_fragment_runs(pg_url: str, pg_session_key: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/postgres.md's stores, on the test server under a test session key."""
    from holon_ctx.postgres import delete_session

    monkeypatch.chdir(tmp_path)
    namespace = _run_page("postgres.md", tmp_path, {
        '"postgresql://agent@db.internal:5432/agents"': repr(pg_url),
        '"agent-42"': repr(pg_session_key)})
    try:
        assert namespace["prompt"].used_tokens > 0
    finally:
        for name in ("episodes", "ledger"):
            namespace[name].close()
        delete_session(pg_url, pg_session_key)


# -- shell lines ---------------------------------------------------------------------------------
_PLACEHOLDERS = {"FILE": "run.jsonl", "PATH": "run.db", "N": "8192", "SOURCE": "run.jsonl",
                 "TABLE": "anthropic", "REF": "turn:t1", "KEY": "k", "W": "80"}


def _shell_commands() -> list[tuple[str, str]]:
    found = []
    for page in [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]:
        for m in _BLOCK.finditer(page.read_text(encoding="utf-8")):
            if m.group(1) not in ("sh", "console"):
                continue
            for line in m.group(2).splitlines():
                if m.group(1) == "console":
                    # A console block's commands follow "$ "; its other lines are output.
                    if not line.startswith("$ "):
                        continue
                    line = line[2:]
                if line.startswith("holon-ctx "):
                    found.append((page.name, line))
    return found


def _argv(line: str) -> list[str]:
    command = line.split(" #", maxsplit=1)[0].split(" | ", maxsplit=1)[0]
    # "--from auto|ledger|…" and "--format openai|anthropic": the first choice stands for all.
    words = [w.split("|")[0] if "|" in w and not w.startswith(("'", '"')) else w
             for w in shlex.split(command)[1:]]
    return [_PLACEHOLDERS.get(w.strip("[]"), w.strip("[]")) for w in words if w not in ("[", "]")]


def test_every_shell_line_parses() -> None:
    """Each ``holon-ctx …`` line of the docs is a command the CLI accepts as written."""
    lines = _shell_commands()
    assert len(lines) >= 20
    # The error examples that show argparse refusing a value are meant not to parse.
    refused = {c for c, shown in _console_runs() if shown and ": error: argument " in shown[0]}
    assert refused
    for page, line in lines:
        if line in refused:
            continue
        try:
            build_parser().parse_args(_argv(line))
        except SystemExit as exc:
            pytest.fail(f"{page}: {line!r} does not parse (exit {exc.code})")


# -- the console blocks of docs/cli.md ---------------------------------------------------------
def _console_runs() -> list[tuple[str, list[str]]]:
    """``(command, lines shown)`` for each ``$ holon-ctx`` command of docs/cli.md."""
    runs: list[tuple[str, list[str]]] = []
    for m in _BLOCK.finditer((DOCS / "cli.md").read_text(encoding="utf-8")):
        if m.group(1) != "console":
            continue
        for line in m.group(2).splitlines():
            if line.startswith("$ "):
                runs.append((line[2:], []))
            elif runs:
                runs[-1][1].append(line.rstrip())
    return runs


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the demo database where cli.md's commands look (``.holon/demo.db``)
    and the files its error examples name."""
    where = tmp_path_factory.mktemp("cli-docs")
    assert main(["demo", "--db", str(where / ".holon" / "demo.db"), "--plain", "--no-pager"]) == 0
    (where / "broken.jsonl").write_bytes(
        (ROOT / "holon_ctx" / "data" / "demo.jsonl").read_bytes().split(b"\n")[0] + b"\n{\"v\":")
    (where / "notes.txt").write_text("shopping: eggs, flour\n")
    return where


def _output(command: str, where: Path) -> str:
    argv = _argv(command)
    env = {**os.environ, "COLUMNS": "100", "PAGER": "cat"}
    run = subprocess.run([sys.executable, "-m", "holon_ctx", *argv], cwd=where, env=env,
                         capture_output=True, text=True, check=False)
    out = run.stdout + run.stderr
    if " | python -m json.tool" in command and run.returncode == 0:
        # What `python -m json.tool` prints: four spaces, non-ASCII escaped.
        out = json.dumps(json.loads(run.stdout), indent=4) + "\n"
    return out


def _check_shown(command: str, shown: list[str], where: Path) -> None:
    actual = [line.rstrip() for line in _output(command, where).splitlines()]
    at = 0
    # A cut is marked "[… N lines of the prompt not shown here …]": the page's, not the CLI's.
    for line in (s for s in shown if s and not (s.startswith("[…") and s.endswith("…]"))):
        while at < len(actual) and actual[at] != line:
            at += 1
        assert at < len(actual), f"{command!r}: the page shows {line!r}, not printed (in order)"
        at += 1


_ERRORS = [(c, s) for c, s in _console_runs() if s and s[0].startswith("holon-ctx")
           and ("error" in s[0])]


@pytest.mark.parametrize(("command", "shown"), _ERRORS, ids=[c for c, _ in _ERRORS])
def test_cli_error_examples_print_what_the_page_shows(command: str, shown: list[str],
                                                      demo_dir: Path) -> None:
    _check_shown(command, shown, demo_dir)


_VIEWS = [(c, s) for c, s in _console_runs() if (c, s) not in _ERRORS]


@pytest.mark.slow
@pytest.mark.parametrize(("command", "shown"), _VIEWS, ids=[c for c, _ in _VIEWS])
def test_cli_examples_print_what_the_page_shows(command: str, shown: list[str],
                                                demo_dir: Path) -> None:
    _check_shown(command, shown, demo_dir)


# -- what the integrations return ----------------------------------------------------------------
def _request_with_tools() -> holon_ctx.Request:
    session = holon_ctx.open_session(":memory:", compaction=None)
    session.set_environment(guidance="You report the weather.")
    session.operator_message("Oslo?")
    session.assistant_message("", tool_calls=[holon_ctx.ToolCall("c1", "weather",
                                                                 {"city": "Oslo"})])
    session.tool_result("c1", "4 °C, rain")
    session.assistant_message("It is 4 °C and raining.")
    session.operator_message("And Bergen?")
    return session.next_request(budget_tokens=4096)


def test_to_messages_is_the_native_sequence_the_docs_describe() -> None:
    """``to_messages`` gives one LangChain message per OpenAI message, in its native role: a
    SystemMessage, the history (HumanMessage, AIMessage with tool calls, ToolMessage), and the
    current state as the last HumanMessage, as docs/library.md says."""
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from holon_ctx.integrations.langchain import to_messages

    request = _request_with_tools()
    messages = to_messages(request)
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage,
             "tool": ToolMessage}
    roles = [m["role"] for m in request.openai_messages]
    assert [type(m) for m in messages] == [kinds[r] for r in roles]
    assert isinstance(messages[0], SystemMessage)
    assert isinstance(messages[-1], HumanMessage)
    assert any(isinstance(m, AIMessage) and m.tool_calls for m in messages)
    assert any(isinstance(m, ToolMessage) for m in messages)
    doc = (DOCS / "library.md").read_text(encoding="utf-8")
    assert "`to_messages(request)` gives the request's messages as LangChain messages, one for " \
           "one" in " ".join(doc.split())


def test_get_items_is_the_native_sequence_the_docs_describe() -> None:
    """``LedgerSession.get_items`` is the request as Responses input items, one for one: a
    system message, the history's own items (function calls and outputs too), and the current
    state as the last user message once the history outgrows the budget."""
    pytest.importorskip("agents")
    import asyncio

    from holon_ctx.integrations.openai_agents import LedgerSession, input_items

    session = holon_ctx.open_session(":memory:", compaction=None)
    session.set_environment(guidance="You report the weather.")
    session.operator_message("Oslo?")
    session.assistant_message("", tool_calls=[holon_ctx.ToolCall("c1", "weather", {})])
    session.tool_result("c1", "4 °C, rain")
    ledger = LedgerSession(session, budget_tokens=4096)
    items = asyncio.run(ledger.get_items())
    assert items == input_items(ledger.last_request.openai_messages)
    kinds = [i.get("type") or i["role"] for i in items]  # type: ignore[union-attr]
    assert kinds[0] == "system"
    # The whole history fits: it ends with the history's last item (RFC 0025), not a tail.
    assert kinds[-1] == "function_call_output"
    assert {"function_call", "function_call_output"} <= set(kinds)


def test_the_agents_example_runs_without_tracing_noise(tmp_path: Path) -> None:
    """The docs' Agents SDK example, in its own process: it prints its answer and nothing about
    tracing (the SDK's tracing is on by default and cannot reach its service here)."""
    pytest.importorskip("agents")
    doc = (DOCS / "library.md").read_text(encoding="utf-8")
    at = doc.index("### OpenAI Agents SDK")
    code = next(m.group(2) for m in _BLOCK.finditer(doc, at) if m.group(1) == "python")
    run = subprocess.run([sys.executable, "-c", "import holon_ctx\n" + code], cwd=tmp_path,
                         capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Paris. turn:t0\n"
    assert "Tracing" not in run.stderr
    assert "tracing" not in run.stderr.lower()
