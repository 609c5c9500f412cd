"""The layers stay honest: the pure core does no I/O, only the CLI renders, continuity stands alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "holon_ctx"


def _imports(package: str) -> dict[str, set[str]]:
    """Module path → every module it imports (absolute names, relative ones resolved)."""
    found: dict[str, set[str]] = {}
    for path in sorted((PKG / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
        found[str(path.relative_to(PKG.parent))] = names
    return found


@pytest.mark.parametrize("package", ["projection", "memory"])
def test_core_does_no_io_and_no_rendering(package: str) -> None:
    """projection/ and memory/ import neither rich, sqlite3, the SQLite stores nor the CLI."""
    banned = ("rich", "sqlite3", "holon_ctx.cli", "holon_ctx.ledger.sqlite",
              "holon_ctx.ledger.episode_store", "holon_ctx.continuity", "subprocess")
    offenders = {mod: sorted(n for n in names if n.startswith(banned))
                 for mod, names in _imports(package).items()}
    assert {m: n for m, n in offenders.items() if n} == {}


def test_continuity_imports_only_errors_from_holon_ctx() -> None:
    """The envelope validator knows nothing of prompts: it imports holon_ctx.errors only."""
    offenders = {mod: sorted(n for n in names if n.startswith("holon_ctx")
                             and not n.startswith(("holon_ctx.continuity", "holon_ctx.errors")))
                 for mod, names in _imports("continuity").items()}
    assert {m: n for m, n in offenders.items() if n} == {}


def test_only_the_cli_imports_rich() -> None:
    """rich is the shell's concern: no module outside holon_ctx/cli imports it."""
    outside = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] == "cli":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rich"):
                outside[str(rel)] = node.module
            if isinstance(node, ast.Import) and any(a.name.startswith("rich") for a in node.names):
                outside[str(rel)] = "rich"
    assert outside == {}


def test_only_tokens_imports_tiktoken() -> None:
    """tiktoken has one importer, holon_ctx/tokens.py, which makes it work offline."""
    importers = {str(path.relative_to(PKG)) for path in sorted(PKG.rglob("*.py"))
                 if any(m.startswith("tiktoken") for m in _module_imports(path))}
    assert importers == {"tokens.py"}


def _module_imports(path: Path) -> list[str]:
    """Every module name one file imports (``from x import y`` counts as ``x``)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
    return names


#: Third-party packages only the optional integrations may import (pyproject's extras).
INTEGRATION_PACKAGES = ("agents", "minisweagent", "langchain_core", "langchain", "langgraph",
                        "openai", "litellm")


def test_core_imports_no_integration_package() -> None:
    """Outside holon_ctx/integrations nothing imports an optional extra (or the integrations)."""
    offenders = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        bad = [m for m in _module_imports(path) if m.split(".")[0] in INTEGRATION_PACKAGES
               or m.startswith("holon_ctx.integrations")]
        if bad and rel.parts[0] != "integrations":
            offenders[str(rel)] = bad
    assert offenders == {}


def test_the_library_api_loads_no_optional_extra() -> None:
    """Opening a session and asking for a request, in a fresh interpreter, loads none of them."""
    import subprocess
    import sys

    code = (
        "import sys, holon_ctx\n"
        "from holon_ctx.ledger.memory import MemoryStore\n"
        "s = holon_ctx.open_session(MemoryStore())\n"
        "s.operator_message('hi')\n"
        "s.next_request(500)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {INTEGRATION_PACKAGES!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""
