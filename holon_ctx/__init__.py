"""holon_ctx: turn-based context projection for long-running LLM agents.

The ledger is the truth; a prompt is a projection of it. The library API is what this package
exports (``docs/library.md``; ``docs/api.md`` lists the whole public surface)::

    import holon_ctx

    with holon_ctx.open_session("agent.db") as session:
        session.operator_message("Upgrade the payments service to Python 3.12.")
        request = session.next_request(budget_tokens=8192)
        request.openai_messages        # or request.anthropic_request, request.text
        session.assistant_message("On it.", tool_calls=[holon_ctx.ToolCall("c1", "bash", "ls")])
        session.tool_result("c1", "Dockerfile\\nsrc\\n")

Public modules (their ``__all__`` is the API; RFC 0028):

- ``holon_ctx``: the session API and the errors (RFC 0008: one object, one page);
- ``holon_ctx.lowlevel``: the pieces a session composes, for power users (stores, the stateless
  projector, provider layouts, episode archiving, transcript import, compaction);
- ``holon_ctx.errors``: every exception holon_ctx raises;
- ``holon_ctx.continuity``: the continuity envelope and its governed store;
- ``holon_ctx.postgres``: the PostgreSQL stores;
- ``holon_ctx.integrations.openai_agents``, ``.mini_swe_agent``, ``.langchain``: the adapters.

Everything else is internal: its names may change in any release, whatever their spelling. The
internal modules are ``holon_ctx.calibration``, ``holon_ctx.cli`` (the command line is the
interface, not its modules), ``holon_ctx.compaction``, ``holon_ctx.extras``,
``holon_ctx.ledger``, ``holon_ctx.memory``, ``holon_ctx.models``, ``holon_ctx.projection``,
``holon_ctx.request``, ``holon_ctx.session``, ``holon_ctx.session_args``,
``holon_ctx.session_base``, ``holon_ctx.session_events``, ``holon_ctx.session_upkeep``,
``holon_ctx.tokens``, every module inside ``holon_ctx.continuity``
and ``holon_ctx.postgres`` (use the package, not the module), and any module of
``holon_ctx.integrations`` other than the three adapters. They were not renamed with underscores
(RFC 0028 says why); this list and ``tests/test_public_surface.py`` are the line.

The names below are loaded on first use (PEP 562): ``import holon_ctx.errors`` or the continuity
package alone must not pay for the projector, SQLite stores and episode memory (~0.2 s).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from holon_ctx.compaction import CompactionResult, SessionConfig
    from holon_ctx.errors import (
        BudgetTooSmallError,
        HolonCtxError,
        InputError,
        LedgerFormatError,
        StoreError,
        UnknownRefError,
    )
    from holon_ctx.ledger.store import LedgerStore
    from holon_ctx.ledger.usage import Observation
    from holon_ctx.models import UnknownModelWarning
    from holon_ctx.request import Request
    from holon_ctx.session import Session, ToolCall, open_session
    from holon_ctx.session_upkeep import CompactionPolicy

__version__ = "0.1.0"

__all__ = [
    "BudgetTooSmallError",
    "CompactionPolicy",
    "CompactionResult",
    "HolonCtxError",
    "InputError",
    "LedgerFormatError",
    "LedgerStore",
    "Observation",
    "Request",
    "Session",
    "SessionConfig",
    "StoreError",
    "ToolCall",
    "UnknownModelWarning",
    "UnknownRefError",
    "__version__",
    "open_session",
]

_HOMES = {
    "BudgetTooSmallError": "holon_ctx.errors",
    "HolonCtxError": "holon_ctx.errors",
    "InputError": "holon_ctx.errors",
    "LedgerFormatError": "holon_ctx.errors",
    "StoreError": "holon_ctx.errors",
    "UnknownRefError": "holon_ctx.errors",
    "CompactionPolicy": "holon_ctx.session_upkeep",
    "CompactionResult": "holon_ctx.compaction",
    "SessionConfig": "holon_ctx.compaction",
    "LedgerStore": "holon_ctx.ledger.store",
    "Observation": "holon_ctx.ledger.usage",
    "UnknownModelWarning": "holon_ctx.models",
    "Request": "holon_ctx.request",
    "Session": "holon_ctx.session",
    "ToolCall": "holon_ctx.session",
    "open_session": "holon_ctx.session",
}


def _lazy_names(module: str, homes: dict[str, str],
               names: list[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's PEP 562 ``__getattr__`` and ``__dir__``: each name in ``homes`` is imported from
    its home on first use and kept in the module (``holon_ctx`` and ``holon_ctx.lowlevel``)."""

    def getattr_(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[module], name, value)
        return value

    def dir_() -> list[str]:
        return sorted(names)

    return getattr_, dir_


__getattr__, __dir__ = _lazy_names(__name__, _HOMES, __all__)
