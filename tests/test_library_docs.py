"""docs/library.md runs as written: every python block, in order, in one namespace, in a fresh
directory; a text block right after a python block is that block's exact output."""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "library.md"
_BLOCK = re.compile(r"^```(python|text)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def examples() -> list[tuple[str, str | None]]:
    """``(code, expected output or None)`` for each python block of the page, in order."""
    blocks = [(m.group(1), m.group(2)) for m in _BLOCK.finditer(DOC.read_text(encoding="utf-8"))]
    out: list[tuple[str, str | None]] = []
    for i, (kind, body) in enumerate(blocks):
        if kind == "python":
            following = blocks[i + 1] if i + 1 < len(blocks) else None
            out.append((body, following[1] if following and following[0] == "text" else None))
    return out


def test_every_example_runs_and_prints_what_the_page_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """All python blocks run in order (one namespace, a fresh directory); outputs match."""
    for extra in ("agents", "minisweagent", "langchain_core"):
        pytest.importorskip(extra)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-"))
    monkeypatch.setenv("MSWEA_SILENT_STARTUP", "1")
    namespace: dict[str, object] = {"__name__": "library_docs"}
    found = examples()
    assert len(found) >= 8
    for n, (code, expected) in enumerate(found):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{DOC.name}#python{n}", "exec"), namespace)
        if expected is not None:
            assert out.getvalue() == expected, f"python block {n} of {DOC.name}"
    assert os.path.exists(tmp_path / "agent.db")


def test_the_page_imports_only_from_the_public_api() -> None:
    """The examples import holon_ctx itself; deep modules appear only for the framework
    integrations (each an optional extra)."""
    allowed = ("holon_ctx.integrations.",)
    for code, _ in examples():
        for line in code.splitlines():
            m = re.match(r"\s*from (holon_ctx\S*) import", line)
            if m and m.group(1) != "holon_ctx":
                assert m.group(1).startswith(allowed), line


def test_the_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """README's "Use it as a library" block runs as written."""
    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    (code,) = [m.group(2) for m in _BLOCK.finditer(readme) if m.group(1) == "python"]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "agent.db").exists()


@pytest.mark.parametrize("page", ["projection.md", "episodes.md", "continuity.md"])
def test_the_library_snippets_of_other_pages_run(page: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each page's library-API snippet (a python block that starts with ``import holon_ctx``)
    runs against a ledger with some history."""
    import holon_ctx

    monkeypatch.chdir(tmp_path)
    with holon_ctx.open_session("agent.db", compaction=None) as session:
        for i in range(60):
            session.operator_message(f"request {i}: look at file_{i}.py")
            session.assistant_message(f"looked at file_{i}.py")
    text = (DOC.parent / page).read_text(encoding="utf-8")
    snippets = [m.group(2) for m in _BLOCK.finditer(text)
                if m.group(1) == "python" and m.group(2).startswith("import holon_ctx\n")]
    assert len(snippets) == 1
    namespace: dict[str, object] = {"__name__": "page"}
    exec(compile(snippets[0], page, "exec"), namespace)
    assert isinstance(namespace.get("prompt", namespace.get("request")), holon_ctx.Request)
