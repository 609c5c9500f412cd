"""Argument checks for the library API: each value is checked where the caller hands it over.

A runtime calls :class:`holon_ctx.Session` helpers with plain Python values. A wrong one (a number
for a text, ``"done"`` for a tool status, an id with a space) must fail *at that call*, with one line
naming the helper and the argument — ``operator_message: text: expected a string, got int`` — not
later, deep inside the append path, as an ``AttributeError``. Every failure is an
:class:`~holon_ctx.errors.InputError` whose ``source`` is the helper and ``path`` the argument.

The rules for ids are the ledger's own (``holon_ctx.ledger.codec.id_error``): non-empty, at most
256 characters, no whitespace, control or invisible characters, no markup characters and nothing
that looks like a data fence or the trusted-operator label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, TypeVar

from holon_ctx.errors import InputError, quote_value
from holon_ctx.ledger.codec import id_error
from holon_ctx.ledger.fieldcheck import unicode_error
from holon_ctx.ledger.records import EXTENSION_TRIGGER, KNOWN_TRIGGERS, Todo

__all__ = [
    "check_flag",
    "check_id",
    "check_int",
    "check_positive",
    "check_status",
    "check_strings",
    "check_text",
    "check_todos",
    "check_trigger",
    "check_turn_ref",
    "type_name",
]

_E = TypeVar("_E", bound=StrEnum)


def type_name(value: Any) -> str:
    """How a value's type reads in an error (``None`` reads as ``None``)."""
    return "None" if value is None else type(value).__name__


def check_text(where: str, name: str, value: Any, *, required: bool = False) -> str:
    """A string (non-empty when ``required``), as a plain ``str``: a subclass (LangChain's text
    accessor, a numpy string) passes the type check but cannot be stored, so it is copied.
    A lone surrogate is refused here, at the call that gave it: a value the session holds before
    writing it (an announced call's name and arguments) would otherwise fail only later, in
    another helper or in ``close``."""
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type_name(value)}", source=where, path=name)
    if required and not value.strip():
        raise InputError("must not be empty", source=where, path=name)
    problem = unicode_error(value)
    if problem is not None:
        raise InputError(problem, source=where, path=name)
    return value if type(value) is str else str.__str__(value)


def check_id(where: str, name: str, value: Any) -> str:
    """An id as the ledger accepts it (``codec.id_error``: length, whitespace, markup, lookalikes)."""
    text = check_text(where, name, value)
    problem = id_error(text)
    if problem:
        raise InputError(problem, source=where, path=name)
    return text


def check_turn_ref(where: str, name: str, value: Any) -> str:
    """A turn given as ``"turn:t5"`` or ``"t5"``; returns the turn id."""
    text = check_id(where, name, value)
    kind, sep, ident = text.partition(":")
    if not sep:
        return text
    if kind != "turn" or not ident:
        raise InputError(f"expected a turn ('turn:t5' or 't5'), got {quote_value(text)}", source=where,
                         path=name)
    return ident


def check_status(where: str, name: str, value: Any, enum: type[_E]) -> _E:
    """One of an enum's values, given as the member or its string."""
    allowed = ", ".join(m.value for m in enum)
    if not isinstance(value, str):
        raise InputError(f"expected one of {allowed}, got {type_name(value)}", source=where,
                         path=name)
    try:
        return enum(value)
    except ValueError:
        raise InputError(f"expected one of {allowed}, got {quote_value(value)}", source=where,
                         path=name) from None


def check_trigger(where: str, name: str, value: Any) -> str:
    """A known trigger or an ``x-name`` extension trigger."""
    text = check_text(where, name, value, required=True)
    if text not in KNOWN_TRIGGERS and not EXTENSION_TRIGGER.match(text):
        known = ", ".join(sorted(KNOWN_TRIGGERS))
        raise InputError(f"expected one of {known} or an extension 'x-name', got {quote_value(text)}",
                         source=where, path=name)
    return text


def check_flag(where: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"expected True or False, got {type_name(value)}", source=where,
                         path=name)
    return value


def check_int(where: str, name: str, value: Any) -> int | None:
    """An integer or None (a bool is not an integer here)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer or None, got {type_name(value)}", source=where,
                         path=name)
    return value


def check_positive(where: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected a positive integer, got {type_name(value)}", source=where,
                         path=name)
    if value <= 0:
        raise InputError(f"expected a positive integer, got {value}", source=where, path=name)
    return value


def check_strings(where: str, name: str, value: Any) -> list[str]:
    """A sequence of strings (a bare string is refused: it is almost always a mistake)."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InputError(f"expected a list of strings, got {type_name(value)}", source=where,
                         path=name)
    out: list[str] = []
    for i, item in enumerate(value):
        out.append(check_text(where, f"{name}[{i}]", item))
    return out


def check_todos(where: str, name: str, value: Any) -> list[Todo]:
    """Todos as a list of texts (all open) or a mapping text → done."""
    if isinstance(value, Mapping):
        todos = []
        for key, done in value.items():
            text = check_text(where, f"{name} key", key, required=True)
            todos.append(Todo(text=text, done=check_flag(where, f"{name}[{quote_value(text)}]", done)))
        return todos
    return [Todo(text=t) for t in check_strings(where, name, value)]
