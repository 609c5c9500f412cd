"""docs/import.md shows real output: its examples are regenerated from the corpus and compared."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_transcripts import BAD, located

from holon_ctx.cli.main import main
from holon_ctx.ledger.codec import encode_record
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.transcripts import import_any

DOC = Path(__file__).resolve().parents[1] / "docs" / "import.md"
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "swe-trajectories"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")


def block(name: str) -> str:
    """The fenced block after ``<!-- example:NAME -->`` in the doc."""
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"<!-- example:{name} -->\n```\w*\n(.*?)^```$", text,
                      re.DOTALL | re.MULTILINE)
    assert match, name
    return match.group(1)


def short(line: bytes, limit: int = 90) -> str:
    """A canonical ledger line with strings over ``limit`` characters shortened, as the doc does."""
    data = json.loads(line)
    for key, value in data.items():
        if isinstance(value, str) and len(value) > limit:
            data[key] = value[: limit - 3] + "…"
    return json.dumps(data, ensure_ascii=False)


@needs_corpus
def test_import_session_is_what_the_cli_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The import example is the CLI's own stderr and stdout on the corpus file."""
    src = tmp_path / "sympy__sympy-23534.traj.json"
    src.write_bytes((CORPUS / src.name).read_bytes())
    monkeypatch.chdir(tmp_path)
    assert main(["import", src.name, "--db", "run.db"]) == 0
    out = capsys.readouterr()
    assert block("import") == f"$ holon-ctx import {src.name} --db run.db\n{out.err}{out.out}"


@needs_corpus
@pytest.mark.parametrize(("name", "file", "refs"), [
    ("records", "sympy__sympy-23534", None),
    ("django", "django__django-10914", ["tool:x20", "tool:x32", "message:m76", "message:n77"]),
])
def test_record_examples_are_the_imported_records(name: str, file: str,
                                                  refs: list[str] | None) -> None:
    """The JSON examples are the canonical lines of the imported records, shortened alike."""
    store = MemoryStore()
    import_any(CORPUS / f"{file}.traj.json", store)
    if refs is None:
        lines = [short(encode_record(r)) for r in list(store.iter_records())[:10]]
    else:
        found = [store.get(ref) for ref in refs]
        lines = [short(encode_record(s.record)) for s in found if s is not None]
    assert block(name) == "\n".join(lines) + "\n"


def test_error_examples_are_cases_of_the_bad_input_table() -> None:
    """Every located error the doc quotes for a transcript is one the test table checks, at the
    line it has in the case's file (written with one-space indentation)."""
    text = DOC.read_text(encoding="utf-8")
    quoted = re.findall(r"^holon-ctx: error: x\.json:(\d+): (\$\S*): (.+)$", text, re.MULTILINE)
    assert len(quoted) >= 7
    table = {(str(located(content, path)), path, message) for _, _, content, path, message in BAD}
    assert set(quoted) <= table
