"""Rewrite the output blocks of docs/library.md with what its examples print now.

``python3 dev.py shell tests/regen_library_docs.py`` runs the page the way
``tests/test_library_docs.py`` does (every python block in order, one namespace, a fresh
directory) and replaces each ``text`` block that follows a python block with that block's output.
Review the diff (``git diff docs/library.md``) before committing: the test then compares against
what was written, so a regeneration must be a decision, not a side effect of running tests.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from test_library_docs import _BLOCK, DOC


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    matches = list(_BLOCK.finditer(text))
    namespace: dict[str, object] = {"__name__": "library_docs"}
    outputs: dict[int, str] = {}
    cwd = os.getcwd()
    os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-"))
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            for i, m in enumerate(matches):
                if m.group(1) != "python":
                    continue
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    exec(compile(m.group(2), f"{DOC.name}#{i}", "exec"), namespace)
                nxt = matches[i + 1] if i + 1 < len(matches) else None
                if nxt is not None and nxt.group(1) == "text":
                    outputs[i + 1] = out.getvalue()
        finally:
            os.chdir(cwd)
    pieces: list[str] = []
    last = 0
    for i, m in enumerate(matches):
        if i in outputs:
            pieces.append(text[last:m.start(2)])
            pieces.append(outputs[i])
            last = m.end(2)
    pieces.append(text[last:])
    new = "".join(pieces)
    if new != text:
        DOC.write_text(new, encoding="utf-8")
        print(f"rewrote {len(outputs)} output blocks of {DOC}")
    else:
        print("docs/library.md is current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
