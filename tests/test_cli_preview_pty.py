"""The preview as a person sees it: the CLI run in a pseudo-terminal, as an interactive shell would."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

SMALL = Path(__file__).parent / "golden" / "small.jsonl"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_in_pty(argv: list[str], *, columns: int, rows: int = 50, pager: str = "cat") -> str:
    """Run ``python -m holon_ctx …`` with a pty as stdout (and a real window size); all output.

    ``pager`` is what PAGER says; "cat" (no pager) by default, since a real one would wait for keys.
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(rows),
           "PAGER": pager}
    for name in ("NO_COLOR", "FORCE_COLOR", "HOLON_CTX_PAGER"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "holon_ctx", *argv], stdin=slave,
                            stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end of the pty
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=60) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def test_preview_in_a_terminal_is_coloured_and_readable() -> None:
    """On a 256-colour terminal the preview has colour, a header, budget bars and the sections
    (of the stateless plan: the session request's are its messages, test_preview_is_sent)."""
    out = run_in_pty(["preview", str(SMALL), "--budget", "700", "--mode", "stateless"],
                     columns=100)
    assert "\x1b[" in out
    seen = _ANSI.sub("", out)
    lines = seen.splitlines()
    assert lines[0] == "holon-ctx preview of turn:t10 at a budget of 700 tokens"
    assert any(line.startswith("recent_turns  │█") for line in lines)
    for title in ("## Environment", "## Current work item", "## Recent turns",
                  "## Continuation anchor and current input"):
        # Titles of the sections that hold turns go on to say what fenced text is.
        assert any(line == title or line.startswith(title + " (") for line in lines), title
    # Trust is visible per line: the operator's words, the fenced injection-free tool output.
    assert "op │Good. Merge it once review passes." in lines
    assert 'ext│<data tool:x1>' in lines
    assert max(len(line) for line in lines) <= 100


def test_preview_adapts_to_a_narrow_terminal() -> None:
    """At 72 columns nothing runs past the edge: prompt lines wrap under their gutter."""
    out = _ANSI.sub("", run_in_pty(["preview", str(SMALL), "--budget", "700"], columns=72))
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 72
    assert any(line.startswith("   ┊") for line in lines)


def test_plain_in_a_terminal_has_no_colour() -> None:
    """--plain turns colour off even on a terminal."""
    out = run_in_pty(["preview", str(SMALL), "--budget", "700", "--plain"], columns=100)
    assert "\x1b[" not in out
    assert "## Recent turns" in out


def test_long_preview_goes_through_the_pager() -> None:
    """Taller than the terminal, the coloured preview is handed to PAGER, as git log does."""
    out = run_in_pty(["preview", str(SMALL), "--budget", "700"], columns=100, rows=30,
                     pager="sed s/^/PAGED:/")
    lines = out.splitlines()
    assert lines, out
    assert all(line.startswith("PAGED:") for line in lines)
    assert "\x1b[" in out
    assert _ANSI.sub("", lines[0]) == "PAGED:holon-ctx preview of turn:t10 at a budget of 700 tokens"


def test_no_pager_flag_prints_directly() -> None:
    """--no-pager prints on the terminal even when PAGER is set and the output is long."""
    out = run_in_pty(["preview", str(SMALL), "--budget", "700", "--no-pager"], columns=100,
                     rows=30, pager="sed s/^/PAGED:/")
    assert "PAGED:" not in out
    assert "## Recent turns" in _ANSI.sub("", out)


def test_short_output_is_not_paged() -> None:
    """Output that fits the terminal is printed, not paged."""
    out = run_in_pty(["preview", str(SMALL), "--budget", "700"], columns=100, rows=500,
                     pager="sed s/^/PAGED:/")
    assert "PAGED:" not in out
