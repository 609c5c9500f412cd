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
    importers = set()
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(m.startswith("tiktoken") for m in mods):
                importers.add(str(path.relative_to(PKG)))
    assert importers == {"tokens.py"}
