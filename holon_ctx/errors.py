"""The one exception tree of holon_ctx.

::

    HolonCtxError
    ├── InputError (ValueError)            the caller's data is wrong; always locatable
    │   └── LedgerFormatError              a JSONL/transcript line failed to decode or validate
    ├── StoreError                         the store cannot be used (corrupt, newer schema, closed)
    ├── UnknownRefError (KeyError)         a ref or turn id that the ledger does not hold
    └── BudgetTooSmallError (ValueError)   the budget cannot hold even the pinned references

    EngineError (RuntimeError)             an engine bug (an internal check failed): not the
                                           caller's fault, so deliberately outside HolonCtxError

Every HolonCtxError renders as one line; the CLI prints ``str(error)`` and exits with status 2.
An EngineError is reported as an internal error (exit status 70) and asks for a bug report.
Errors carry the objects involved as attributes so a library caller can act on them without
parsing text.
"""

from __future__ import annotations

__all__ = [
    "BudgetTooSmallError",
    "EngineError",
    "HolonCtxError",
    "InputError",
    "LedgerFormatError",
    "StoreError",
    "UnknownRefError",
]


class HolonCtxError(Exception):
    """Base of every error holon_ctx raises on purpose."""


class InputError(HolonCtxError, ValueError):
    """The caller's input is wrong. ``source``/``line``/``path`` locate it when known."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        path: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.path = path
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.source is not None:
            where = self.source if self.line is None else f"{self.source}:{self.line}"
            where += ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        field = f"{self.path}: " if self.path else ""
        return f"{where}{field}{self.message}"


class LedgerFormatError(InputError):
    """A ledger or transcript line failed to decode or validate (names file, line and field)."""


class StoreError(HolonCtxError):
    """The store cannot be opened or used: corrupt file, unknown schema version, closed handle."""


class UnknownRefError(HolonCtxError, KeyError):
    """A ref (``kind:id``) or turn id that the ledger does not hold."""

    def __init__(self, ref: str, *, hint: str = "") -> None:
        self.ref = ref
        self.hint = hint
        super().__init__(ref)

    def __str__(self) -> str:
        return f"unknown ref {self.ref!r}" + (f": {self.hint}" if self.hint else "")


class BudgetTooSmallError(HolonCtxError, ValueError):
    """The budget cannot hold even the pinned references; says what is required and available."""

    def __init__(self, required_tokens: int, available_tokens: int, what: str) -> None:
        self.required_tokens = required_tokens
        self.available_tokens = available_tokens
        self.what = what
        super().__init__(
            f"budget too small: {what} need {required_tokens} tokens, "
            f"only {available_tokens} available"
        )


class EngineError(RuntimeError):
    """An internal consistency check of the engine failed (e.g. a planned token count disagrees
    with the text). A bug to report, never a problem with the caller's input."""
