"""holon_ctx: turn-based context projection for long-running LLM agents.

The ledger is the truth; a prompt is a projection of it. The library API is what this package
exports (``docs/library.md``)::

    import holon_ctx

    with holon_ctx.open_session("agent.db") as session:
        session.operator_message("Upgrade the payments service to Python 3.12.")
        request = session.next_request(budget_tokens=8192)
        request.openai_messages        # or request.anthropic_request, request.text
        session.assistant_message("On it.", tool_calls=[holon_ctx.ToolCall("c1", "bash", "ls")])
        session.tool_result("c1", "Dockerfile\\nsrc\\n")

Everything else stays importable from its own module (``holon_ctx.projection.projector``,
``holon_ctx.ledger.sqlite``, ``holon_ctx.memory``, …) for power users.

The names below are loaded on first use (PEP 562): ``import holon_ctx.errors`` or the continuity
package alone must not pay for the projector, SQLite stores and episode memory (~0.2 s).
"""

from __future__ import annotations

import importlib
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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'holon_ctx' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
