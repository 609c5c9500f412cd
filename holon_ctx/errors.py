"""The one exception tree of holon_ctx.

::

    HolonCtxError
    ├── InputError (ValueError)            the caller's data is wrong; always locatable
    │   └── LedgerFormatError              a JSONL/transcript line failed to decode or validate
    │       ├── DuplicateIdError           a record's ref is already in the ledger (``ref``)
    │       └── WaitNotOpenedError         a record names a wait the ledger never opened (``wait_id``)
    ├── StoreError                         the store cannot be used (corrupt, newer schema, closed)
    ├── UnknownRefError (KeyError)         a ref or turn id that the ledger does not hold
    └── BudgetTooSmallError (ValueError)   the budget cannot hold even the pinned references

    EngineError (RuntimeError)             an engine bug (an internal check failed): not the
                                           caller's fault, so deliberately outside HolonCtxError

Every HolonCtxError renders as one line; the CLI prints ``str(error)`` and exits with status 2.
A value an error quotes goes through :func:`quote_value` (one line, escaped, clipped); a message
that still holds a line break (a server's ``DETAIL:`` line, a value quoted some other way) has it
folded to a space, so no error is two lines (RFC 0027).
An EngineError is reported as an internal error (exit status 70) and asks for a bug report.
Errors carry the objects involved as attributes so a library caller can act on them without
parsing text.
"""

from __future__ import annotations

__all__ = [
    "BudgetTooSmallError",
    "DuplicateIdError",
    "EngineError",
    "HolonCtxError",
    "InputError",
    "LedgerFormatError",
    "StoreError",
    "UnknownRefError",
    "WaitNotOpenedError",
    "first_line",
    "quote_value",
]

#: Characters of a value an error quotes whole; a longer one is clipped and its length given.
QUOTED_CHARS = 80


def quote_value(value: object, limit: int = QUOTED_CHARS) -> str:
    """``value`` as an error quotes it: ``repr`` (quoted, newlines, controls and lone surrogates
    escaped, so it is one line and prints on any terminal), clipped past ``limit`` characters of
    the value with its length said (``'aaaa…' (10,240 characters)``): a 10 KB session key is not
    echoed whole."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value):,} characters)"
    return repr(value)


def first_line(error: BaseException) -> str:
    """The first line of another library's error (a server's ``DETAIL:`` and ``HINT:`` lines
    dropped), spaces collapsed."""
    text = str(error).split("\n", 1)[0]
    return " ".join(text.split()) or type(error).__name__


class HolonCtxError(Exception):
    """Base of every error holon_ctx raises on purpose."""

    def __str__(self) -> str:
        # One line, whatever went into the message (see the module docstring).
        text = super().__str__()
        return " ".join(text.splitlines()) if "\n" in text or "\r" in text else text


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

    def at_line(self, line: int) -> None:
        """Name ``line`` too, found after the error was raised: a transcript reader works on the
        decoded document and knows only the path; the line is looked up in the source text
        when an error needs it (:mod:`holon_ctx.ledger.jsonlocate`)."""
        self.line = line
        self.args = (self._render(),)

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


class DuplicateIdError(LedgerFormatError):
    """A record's ref is already in the ledger; ``ref`` names it (``kind:id``), so a caller
    that minted the id can tell its own clash from another's without reading the message."""

    def __init__(self, ref: str, *, source: str | None = None, line: int | None = None,
                 hint: str = "") -> None:
        self.ref = ref
        super().__init__(f"duplicate id: {ref} is already in the ledger"
                         + (f"; {hint}" if hint else ""), source=source, line=line, path="$.id")


class WaitNotOpenedError(LedgerFormatError):
    """A record names a wait the ledger never opened: a wait transition that ends it (``path``
    ``$.status``) or an event or task result that answers it (``$.wait_id``). ``wait_id`` names
    the wait, so a caller can tell this from the ledger's other rules without reading the
    message."""

    def __init__(self, wait_id: str, message: str, *, path: str, source: str | None = None,
                 line: int | None = None) -> None:
        self.wait_id = wait_id
        super().__init__(message, source=source, line=line, path=path)


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
    """The budget cannot hold even the pinned references; says what is required and available.

    A session's refusal states a budget its request is made at (``Session.next_request``);
    ``at_least`` marks a need that is only a floor (the tries ran out before one worked)."""

    def __init__(self, required_tokens: int, available_tokens: int, what: str, *,
                 at_least: bool = False) -> None:
        self.required_tokens = required_tokens
        self.available_tokens = available_tokens
        self.what = what
        self.at_least = at_least
        super().__init__(
            f"budget too small: {what} need {'at least ' if at_least else ''}{required_tokens} "
            f"tokens, only {available_tokens} available"
        )


class EngineError(RuntimeError):
    """An internal consistency check of the engine failed (e.g. a planned token count disagrees
    with the text). A bug to report, never a problem with the caller's input."""
