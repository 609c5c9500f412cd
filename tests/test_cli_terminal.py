"""No control, bidi or invisible character from the ledger reaches a terminal (issue 10, item 13).

The line (RFC 0007): the library's text is never changed; CLI *data* (``project``, ``export``,
``--json``) is exact into a file or pipe and made safe on a terminal; CLI *views* (``preview``,
``explain``, ``diff``, messages, errors) are always made safe.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon_ctx.cli.terminal import json_safe, terminal_safe
from holon_ctx.ledger.importer import export_jsonl, import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.projection.planning.projector import Projector

ROOT = Path(__file__).resolve().parent.parent
#: What a hostile tool output or event may carry: OSC retitle + BEL, clear screen, cursor up,
#: carriage return overwrite, 8-bit CSI, bidi override and isolate, zero width, line separator.
HOSTILE = ("\x1b]0;pwned\x07", "\x1b[2J", "\x1b[1A", "\rApproved", "\x9b31m", "\u202e",
           "\u2066", "\u200b", "\u2028", "\U000e0041")
RAW = list("\x1b\x07\r\x9b\u202e\u2066\u200b\u2028\U000e0041")
BUDGET = "3000"


def _ledger(tmp_path: Path) -> Path:
    text = "build log: " + " | ".join(HOSTILE) + " | exe.\u202elive"
    lines = [
        {"type": "turn", "id": "t1", "seq": 1, "trigger": "operator_input"},
        {"type": "message", "id": "m1", "turn_id": "t1", "role": "operator",
         "text": "Check the build \u202eplease"},
        {"type": "tool", "id": "x1", "turn_id": "t1", "tool_name": "shell", "status": "ok",
         "args_preview": "make \x1b[31mall", "output": text},
        {"type": "external_event", "id": "e1", "turn_id": "t1", "source": "ci\x1b[2J",
         "text": text},
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_text("".join(json.dumps({"v": 1, **line}) + "\n" for line in lines),
                    encoding="utf-8")
    return path


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "TERM": "xterm-256color", "PAGER": "cat", "COLUMNS": "120", "LINES": "50"}
    env.pop("HOLON_CTX_PAGER", None)
    return env


def in_terminal(*argv: str) -> tuple[int, str]:
    """Run ``python -m holon_ctx ARGV`` with a pty as stdout and stderr; (status, output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "holon_ctx", *argv], stdin=slave,
                            stdout=slave, stderr=slave, env=_env(), close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    status = proc.wait(timeout=60)
    # The pty turns "\n" into "\r\n" (a terminal's doing, not ours).
    return status, b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def in_pipe(*argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "holon_ctx", *argv], capture_output=True,
                          env=_env(), timeout=60, check=False)


def _raw_in(text: str, *, colours_allowed: bool = False) -> list[str]:
    """Unsafe characters found in ``text`` (rich's own colour codes allowed when asked)."""
    if colours_allowed:
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return [c for c in RAW if c in text]


# --- the helpers ------------------------------------------------------------------------------
def test_terminal_safe_escapes_what_drives_a_terminal_and_keeps_the_rest() -> None:
    """Escapes are visible and unambiguous; newline, tab, CJK and emoji are kept."""
    assert terminal_safe("a\x1b]0;x\x07b") == "a\\x1b]0;x\\x07b"
    assert terminal_safe("exe.\u202elive") == "exe.\\u202elive"
    assert terminal_safe("x\rApproved\x9b") == "x\\x0dApproved\\x9b"
    assert terminal_safe("tag\U000e0041") == "tag\\U000e0041"
    assert terminal_safe("行\t🚀\n👍🏽") == "行\t🚀\n👍🏽"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_nothing_unsafe_survives_and_json_keeps_its_value(text: str) -> None:
    """No control, format or separator character is left; JSON escaping loses nothing."""
    safe = terminal_safe(text)
    assert not [c for c in safe if c not in "\n\t"
                and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]
    encoded = json.dumps(text, ensure_ascii=False)
    escaped = json_safe(encoded)
    assert json.loads(escaped) == text
    assert not [c for c in escaped if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]


# --- data: exact off a terminal, safe on one ------------------------------------------------
def test_project_text_is_exact_into_a_pipe_and_safe_on_a_terminal(tmp_path: Path) -> None:
    """The prompt piped out is the library's byte for byte; on a terminal nothing acts."""
    src = _ledger(tmp_path)
    store = MemoryStore()
    import_jsonl(src, store)
    library = Projector(store).project(budget_tokens=int(BUDGET)).text
    assert "\x1b]0;pwned\x07" in library  # the library never changes text
    # The stateless plan, as the library's Projector makes it (the session's: test_preview_is_sent).
    piped = in_pipe("project", str(src), "--budget", BUDGET, "--mode", "stateless")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.decode("utf-8") == library
    status, shown = in_terminal("project", str(src), "--budget", BUDGET, "--mode", "stateless")
    assert status == 0, shown
    assert _raw_in(shown) == []
    assert "\\x1b]0;pwned\\x07" in shown
    assert "exe.\\u202elive" in shown


@pytest.mark.parametrize("fmt", ["json", "openai", "anthropic"])
def test_project_json_on_a_terminal_is_the_same_json_escaped(tmp_path: Path, fmt: str) -> None:
    """Manifest and provider requests: \\u escapes on a terminal, the same value as piped."""
    src = _ledger(tmp_path)
    piped = in_pipe("project", str(src), "--budget", BUDGET, "--format", fmt)
    assert piped.returncode == 0, piped.stderr
    status, shown = in_terminal("project", str(src), "--budget", BUDGET, "--format", fmt)
    assert status == 0, shown
    assert _raw_in(shown) == []
    assert json.loads(shown) == json.loads(piped.stdout)


def test_export_is_canonical_into_a_pipe_and_escaped_on_a_terminal(tmp_path: Path) -> None:
    """export stays byte-identical to the library's canonical JSONL unless a terminal reads it."""
    src = _ledger(tmp_path)
    db = tmp_path / "h.db"
    assert in_pipe("import", str(src), "--db", str(db)).returncode == 0
    store = MemoryStore()
    import_jsonl(src, store)
    canonical = io.BytesIO()
    export_jsonl(store, canonical)
    piped = in_pipe("export", "--db", str(db))
    assert piped.stdout == canonical.getvalue()
    status, shown = in_terminal("export", "--db", str(db))
    assert status == 0, shown
    assert _raw_in(shown) == []
    # split("\n"), not splitlines(): U+2028 inside a JSON string is a line break to splitlines.
    assert [json.loads(line) for line in shown.strip("\n").split("\n")] == [
        json.loads(line) for line in canonical.getvalue().decode().strip("\n").split("\n")]


# --- views: always safe -----------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ("preview", "--plain"),
    ("preview",),
    ("explain", "tool:x1"),
    ("explain", "external_event:e1"),
    ("diff", "--budget", "400"),
])
def test_views_never_carry_raw_controls(tmp_path: Path, argv: tuple[str, ...]) -> None:
    """preview, explain and diff: escaped on a terminal and into a pipe alike."""
    src = _ledger(tmp_path)
    command, *rest = argv
    args = [command, str(src), "--budget", BUDGET, *rest]
    piped = in_pipe(*args)
    assert piped.returncode == 0, piped.stderr
    assert _raw_in(piped.stdout.decode("utf-8")) == []
    status, shown = in_terminal(*args)
    assert status == 0, shown
    assert _raw_in(shown, colours_allowed=True) == []


def test_errors_never_carry_raw_controls(tmp_path: Path) -> None:
    """A file name or value with escape sequences comes back escaped in the one-line error."""
    name = tmp_path / "x\x1b]0;pwned\x07\u202e.jsonl"
    name.write_text('{"v":1,"type":"turn","id":"t\\u202e1","seq":1,"trigger":"operator_input"}\n',
                    encoding="utf-8")
    piped = in_pipe("project", str(name), "--budget", "100")
    assert piped.returncode == 2
    err = piped.stderr.decode("utf-8")
    assert err.count("\n") == 1
    assert _raw_in(err) == []
    assert "\\x1b]0;pwned\\x07\\u202e.jsonl" in err
