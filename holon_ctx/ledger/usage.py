"""Usage observations: a provider's reported input tokens beside holon_ctx's estimate (RFC 0022).

Appended by ``Session.observe_usage``, read by :mod:`holon_ctx.calibration` (the safety factor of a
model: its newest :data:`WINDOW` observations) and by ``replay`` / ``explain`` (estimate against
observed, by turn). Not derived from the ledger — the provider's count exists nowhere else — so the
stores keep them beside it, appended and never changed: the SQLite ledger's file
(:mod:`holon_ctx.ledger.usage_sqlite`, a table created on first use), a PostgreSQL session's rows
(:mod:`holon_ctx.postgres.usage`, schema version 5), or :class:`MemoryUsageStore`. Types and the
in-memory store only here, with no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

import msgspec

__all__ = ["WINDOW", "MemoryUsageStore", "Observation", "UsageStore"]

#: Observations per model the safety factor is computed from (the newest).
WINDOW: Final = 64


class Observation(msgspec.Struct, frozen=True, kw_only=True):
    """One request's estimate beside the provider's reported input tokens."""

    #: The calibration key: the model's name (``ModelProfile.calibration_key``).
    model: str
    #: The counter and framing rule the estimate was made with.
    counter: str
    framing: str
    #: The turn the request answered (``turn:t41``).
    turn: str
    #: The budget asked for, and the one the plan was made under (``budget / factor``).
    budget_tokens: int
    planned_tokens: int
    #: holon_ctx's count of the request as sent, and the provider's.
    estimated_tokens: int
    observed_tokens: int

    @property
    def ratio(self) -> float:
        return self.observed_tokens / max(1, self.estimated_tokens)


class UsageStore(Protocol):
    """Where observations are kept (beside the ledger; appended, never changed)."""

    def add(self, observation: Observation) -> None: ...

    def recent(self, model: str, limit: int = WINDOW) -> list[Observation]:
        """The newest ``limit`` observations of ``model``, oldest first."""
        ...

    def of_turns(self, turns: Sequence[str]) -> list[Observation]:
        """Every observation of these turns, oldest first (``replay`` and ``explain``)."""
        ...

    def close(self) -> None: ...


class MemoryUsageStore:
    """Observations in memory (an in-memory ledger's, as long as it lives)."""

    def __init__(self) -> None:
        self._rows: list[Observation] = []

    def add(self, observation: Observation) -> None:
        self._rows.append(observation)

    def recent(self, model: str, limit: int = WINDOW) -> list[Observation]:
        mine = [o for o in self._rows if o.model == model]
        return mine[-limit:] if limit > 0 else []

    def of_turns(self, turns: Sequence[str]) -> list[Observation]:
        wanted = set(turns)
        return [o for o in self._rows if o.turn in wanted]

    def close(self) -> None:
        return None
