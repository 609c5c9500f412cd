"""Exceptions raised by the *write* side of the continuity package.

Validation (``rehydrate``, ``verify_envelope``) never raises: bad data becomes findings. Writes
(``prepare_compaction`` and the governed store's setters) refuse bad input loudly instead, because
the runtime calling them is the party that can fix it::

    holon_ctx.errors.HolonCtxError
    ├── InputError (ValueError)
    │   └── ContinuityInputError            a write was given malformed or inconsistent data
    │       ├── UntrustedClockError         naive time, or time earlier than the store has seen
    │       ├── CompactionConflictError     an envelope id reused with different inputs
    │       └── DuplicateRecordError        an append-only record with this identity exists
    └── StoreError
        └── GovernedStateError              governed state a write depends on is missing/unreadable
"""

from __future__ import annotations

from holon_ctx.errors import InputError, StoreError, quote_value

__all__ = [
    "CompactionConflictError",
    "ContinuityInputError",
    "DuplicateRecordError",
    "GovernedStateError",
    "UntrustedClockError",
]


class ContinuityInputError(InputError):
    """A continuity write was given malformed or inconsistent data (``path`` names the field)."""


class UntrustedClockError(ContinuityInputError):
    """The injected clock returned a naive datetime or went backwards against the store."""


class CompactionConflictError(ContinuityInputError):
    """An envelope id was reused with inputs that differ from the steps already persisted."""

    def __init__(self, envelope_id: str, step: str, message: str) -> None:
        self.envelope_id = envelope_id
        self.step = step
        super().__init__(f"envelope {quote_value(envelope_id)}: step {step}: {message}")


class GovernedStateError(StoreError):
    """Governed state that a write depends on is missing or cannot be read."""


class DuplicateRecordError(ContinuityInputError):
    """An append-only record (envelope, journal step) with this identity already exists."""
