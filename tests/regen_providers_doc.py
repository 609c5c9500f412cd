"""Rewrite the session request shown in docs/providers.md with what its example prints now.

``python3 dev.py shell tests/regen_providers_doc.py`` runs the python block of the "Session
requests" section the way ``tests/test_providers_docs.py`` does and replaces the json block after
it. Review the diff before committing: the test compares against what was written.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).parent.parent / "docs" / "providers.md"


def main() -> None:
    doc = DOC.read_text(encoding="utf-8")
    start, end = doc.index("## Session requests"), doc.index("## Stateless projections")
    section = doc[start:end]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    shown = re.search(r"```json\n(.*?)```", section, re.DOTALL)
    if code is None or shown is None:
        raise SystemExit("docs/providers.md: the Session requests section lost its blocks")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), "providers.md", "exec"), {"__name__": "providers_doc"})
    section = section[:shown.start(1)] + out.getvalue() + section[shown.end(1):]
    DOC.write_text(doc[:start] + section + doc[end:], encoding="utf-8")


if __name__ == "__main__":
    main()
