"""The continuity package stays separate: it imports only itself and ``holon_ctx.errors``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import holon_ctx.continuity

PACKAGE = Path(holon_ctx.continuity.__file__).parent
MODULES = sorted(PACKAGE.glob("*.py"))


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_imports_nothing_else_from_holon_ctx(path: Path) -> None:
    """Only ``holon_ctx.continuity.*`` and ``holon_ctx.errors`` may be imported, and never rich."""
    for name in _imports(path):
        if name.startswith("holon_ctx"):
            assert name == "holon_ctx.errors" or name.startswith("holon_ctx.continuity"), name
        assert not name.startswith("rich"), name


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_modules_are_small_and_declare_all(path: Path) -> None:
    """House style: under ~400 lines and an explicit ``__all__``."""
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    assert "__all__" in text


def test_public_api_is_exported() -> None:
    """Everything in ``__all__`` exists on the package."""
    for name in holon_ctx.continuity.__all__:
        assert hasattr(holon_ctx.continuity, name), name
