"""The public surface (RFC 0028, docs/api.md): a few public modules with ``__all__``, everything
else internal and listed as such, and no doc that imports an internal module."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import holon_ctx

ROOT = Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"
#: The public modules: exactly these may be imported by users and by the docs.
PUBLIC = ("holon_ctx", "holon_ctx.lowlevel", "holon_ctx.errors", "holon_ctx.continuity", "holon_ctx.postgres",
          "holon_ctx.integrations", "holon_ctx.integrations.openai_agents",
          "holon_ctx.integrations.mini_swe_agent", "holon_ctx.integrations.langchain")
#: Internal modules and packages, as holon_ctx's docstring and docs/api.md list them (a package
#: covers its modules); the modules inside the public packages continuity and postgres too.
INTERNAL = ("holon_ctx.calibration", "holon_ctx.cli", "holon_ctx.compaction",
            "holon_ctx.extras", "holon_ctx.ledger", "holon_ctx.memory",
            "holon_ctx.models", "holon_ctx.projection", "holon_ctx.request", "holon_ctx.session",
            "holon_ctx.session_args", "holon_ctx.session_base", "holon_ctx.session_events",
            "holon_ctx.session_upkeep", "holon_ctx.tokens")
#: An import statement in a doc's code: ``import holon_ctx.x`` or ``from holon_ctx.x import``.
IMPORT = re.compile(r"^\s*(?:from\s+(holon_ctx[\w.]*)\s+import|import\s+(holon_ctx[\w.]*))",
                    re.MULTILINE)


def _all_modules() -> list[str]:
    found = ["holon_ctx"]
    for info in pkgutil.walk_packages(holon_ctx.__path__, "holon_ctx."):
        found.append(info.name)
    return found


def _internal(name: str) -> bool:
    # Inside the public packages, only the package (and the three adapters) is the API; a helper
    # module an adapter shares (integrations/held.py, say) is internal like the rest.
    inside_public_package = name.startswith(("holon_ctx.continuity.", "holon_ctx.postgres.",
                                             "holon_ctx.integrations."))
    return inside_public_package or any(name == m or name.startswith(m + ".") for m in INTERNAL)


def test_every_module_is_public_or_listed_internal() -> None:
    """No module is in neither list: a new module is internal (listed) or public (documented)."""
    unlisted = [m for m in _all_modules() if m not in PUBLIC and not _internal(m)
                and m != "holon_ctx.__main__"]
    assert unlisted == []


def test_the_internal_list_is_the_one_the_docstring_and_the_doc_give() -> None:
    """holon_ctx's docstring and docs/api.md name every internal module or package."""
    doc = API_DOC.read_text(encoding="utf-8")
    docstring = holon_ctx.__doc__ or ""
    for name in INTERNAL:
        assert f"``{name}``" in docstring, name
        assert f"`{name}`" in doc, name


@pytest.mark.parametrize("module", [m for m in PUBLIC if not m.startswith(
    "holon_ctx.integrations.")])
def test_a_public_module_lists_its_names_and_each_resolves(module: str) -> None:
    """Every name in ``__all__`` resolves, and docs/api.md names every one (the continuity
    package has its own page, docs/continuity.md)."""
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    doc = API_DOC.read_text(encoding="utf-8")
    for name in names:
        value = getattr(mod, name)
        assert value is not None
        # errors' exceptions are its API; a helper it also exports (for formatting messages) is
        # described with the errors, not listed name by name.
        helper = module == "holon_ctx.errors" and not (
            isinstance(value, type) and issubclass(value, BaseException))
        if module != "holon_ctx.continuity" and not helper:
            assert f"`{name}`" in doc, f"{module}.{name} is not in docs/api.md"


@pytest.mark.parametrize("module", PUBLIC)
def test_every_public_module_defines_all(module: str) -> None:
    """Each public module's file assigns ``__all__`` (read from its source: the integrations need
    their extras to import)."""
    path = ROOT / Path(*module.split("."))
    source = (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text(
        encoding="utf-8")
    assert re.search(r"^__all__\b", source, re.MULTILINE), module


def test_no_doc_imports_an_internal_module() -> None:
    """The README and every page of docs/ import public modules only."""
    offenders = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for m in IMPORT.finditer(page.read_text(encoding="utf-8")):
            module = m.group(1) or m.group(2)
            if module not in PUBLIC:
                offenders.append(f"{page.name}: {module}")
    assert offenders == []


def test_the_scan_finds_both_forms_of_import() -> None:
    """The scan reads ``from X import`` and ``import X`` lines, indented or not."""
    text = "from holon_ctx.ledger.sqlite import SqliteStore\n    import holon_ctx.memory\nx = 1\n"
    assert [m.group(1) or m.group(2) for m in IMPORT.finditer(text)] == [
        "holon_ctx.ledger.sqlite", "holon_ctx.memory"]


def test_the_lowlevel_module_loads_a_name_only_when_it_is_used() -> None:
    """``import holon_ctx.lowlevel`` loads neither the projector nor the stores; using a name
    loads its home and returns the very object that lives there."""
    import subprocess
    import sys

    code = ("import sys, holon_ctx.lowlevel as low\n"
            "print('holon_ctx.projection.planning.projector' in sys.modules)\n"
            "from holon_ctx.projection.planning.projector import Projector\n"
            "print(low.Projector is Projector)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
