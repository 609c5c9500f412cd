"""Optional extras: the one-line error when one is missing, with the pip command that adds it.

holon-ctx is not on a package index, so ``pip install 'holon-ctx[langchain]'`` cannot work for a
user who installed it from a checkout or a wheel (RFC 0021). The command named is the one that
works for *this* install, read from its metadata (PEP 610's ``direct_url.json``):

* from a checkout, editable or not: ``pip install [-e] '/path/to/holon_ctx[EXTRA]'``;
* from a wheel file that is still there: ``pip install '/path/holon_ctx-….whl[EXTRA]'``;
* from an index (a private mirror): ``pip install 'holon-ctx[EXTRA]'``, since that index has it;
* otherwise: the extra's own requirements (``pip install 'langchain-core<2,>=1.0'``), which are on
  PyPI whatever holon-ctx came from.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shlex
from pathlib import Path
from urllib.parse import unquote, urlparse

from holon_ctx.errors import quote_value

__all__ = ["install_command", "missing_extra"]

_DIST = "holon-ctx"
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _distributions() -> list[importlib.metadata.Distribution]:
    return [d for d in importlib.metadata.distributions()
            if (d.metadata["Name"] or "").lower().replace("_", "-") == _DIST]


def _origin(dists: list[importlib.metadata.Distribution]) -> tuple[str, bool] | None:
    """Where the install came from, as a local path, and whether it is editable (PEP 610)."""
    for dist in dists:
        raw = dist.read_text("direct_url.json")
        if not raw:
            continue  # e.g. a checkout's own egg-info, found first when run from the checkout
        try:
            info = json.loads(raw)
        except json.JSONDecodeError:
            continue
        url = urlparse(str(info.get("url", "")))
        if url.scheme != "file":
            return None
        editable = bool((info.get("dir_info") or {}).get("editable"))
        return unquote(url.path), editable
    return None


def _requirements(dists: list[importlib.metadata.Distribution], extra: str) -> list[str]:
    for dist in dists:
        found = [req.split(";")[0].strip() for req in dist.requires or []
                 if (m := _EXTRA_MARKER.search(req)) and m.group(1) == extra]
        if found:
            return found
    return []


def install_command(extra: str) -> str:
    """The pip command that adds ``extra`` to this install of holon-ctx (module docstring)."""
    dists = _distributions()
    origin = _origin(dists)
    if origin is not None and Path(origin[0]).exists():
        path, editable = origin
        return f"pip install {'-e ' if editable else ''}{shlex.quote(f'{path}[{extra}]')}"
    checkout = Path(__file__).resolve().parents[1]
    if origin is None and (checkout / "pyproject.toml").is_file() and (checkout / "dev.py").is_file():
        # Run from a checkout without an install record (PYTHONPATH, or its egg-info only).
        return f"pip install -e {shlex.quote(f'{checkout}[{extra}]')}"
    if dists and origin is None:
        # Installed from an index (no direct URL recorded): the same index has the extra.
        return f"pip install {shlex.quote(f'{_DIST}[{extra}]')}"
    requirements = _requirements(dists, extra)
    if requirements:
        return "pip install " + " ".join(shlex.quote(r) for r in requirements)
    return f"pip install {shlex.quote(f'{_DIST}[{extra}]')}"


def missing_extra(module: str, extra: str, error: ImportError) -> ModuleNotFoundError:
    """The error for importing ``module`` without ``extra``: one line naming what is missing and
    the pip command that adds it (raise it ``from None``: the chained traceback says no more)."""
    # The distribution's top-level package, not the submodule the import happened to reach.
    missing = (error.name or "a dependency").split(".")[0]
    return ModuleNotFoundError(f"{module} needs the {quote_value(extra)} extra ({missing} is not installed): "
                               f"{install_command(extra)}", name=error.name)
