"""Field types of records built in Python, checked before they are appended.

A record decoded from JSON has the types its class declares (the decoder enforces them). A record
built in Python does not: ``Message(role="operator", ...)`` is accepted by the constructor with a
plain string where a :class:`~holon_ctx.ledger.records.MessageRole` belongs, ``exit_code="0"``
with a string, ``text=None``, and the append path then failed somewhere deep with an
``AttributeError``. :func:`check_types` walks the declared fields of the record (and of nested
structs such as ``Todo``) and words the first mismatch as ``"$.field: expected …, got …"``, the
voice of every other ledger error. Subclasses of ``str`` (a :class:`~holon_ctx.ledger.records.
Trigger`, an application's own string type) are strings; ``bool`` is not an integer.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

import msgspec

from holon_ctx.errors import quote_value
from holon_ctx.ledger.records import Record

__all__ = ["check_types", "unicode_error"]

#: A checker returns None when the value fits, else what was expected (for the message).
_Check = Callable[[Any, str], tuple[str, str] | None]


def check_types(record: object) -> str | None:
    """``"$.field: expected …, got …"`` for the first field of the wrong type, or None."""
    checker = _struct_checker(type(record)) if isinstance(record, msgspec.Struct) else None
    if checker is None or not isinstance(record, typing.get_args(Record)):
        names = ", ".join(t.__name__ for t in typing.get_args(Record))
        return f"$: expected a ledger record ({names}), got {_got(record)}"
    problem = checker(record, "$")
    return None if problem is None else f"{problem[0]}: {problem[1]}"


def unicode_error(text: str) -> str | None:
    """What keeps ``text`` from being valid Unicode (a lone UTF-16 surrogate, which no UTF-8
    ledger, request or HTTP body can hold), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"a lone UTF-16 surrogate {quote_value(text[exc.start])} at character "
                f"{exc.start}: text must be valid Unicode")
    return None


def _got(value: Any) -> str:
    text = repr(value)
    if len(text) > 40:
        text = text[:39] + "…"
    return f"{type(value).__name__} {text}"


@cache
def _struct_checker(cls: type) -> _Check | None:
    if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
        return None
    fields = [(f.name, _checker(f.type)) for f in msgspec.structs.fields(cls)]

    def check(value: Any, path: str) -> tuple[str, str] | None:
        if not isinstance(value, cls):
            return path, f"expected a {cls.__name__}, got {_got(value)}"
        for name, field_check in fields:
            problem = field_check(getattr(value, name), f"{path}.{name}")
            if problem is not None:
                return problem
        return None

    return check


def _checker(tp: Any) -> _Check:
    origin = typing.get_origin(tp)
    if origin is typing.Union or isinstance(tp, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = _checker(options[0] if len(options) == 1 else typing.Union[tuple(options)])  # noqa: UP007

        def optional(value: Any, path: str) -> tuple[str, str] | None:
            return None if value is None else inner(value, path)

        return optional
    if origin is list:
        (item_type,) = typing.get_args(tp)
        item = _checker(item_type)

        def items(value: Any, path: str) -> tuple[str, str] | None:
            if not isinstance(value, list):
                return path, f"expected a list, got {_got(value)}"
            for i, v in enumerate(value):
                problem = item(v, f"{path}[{i}]")
                if problem is not None:
                    return problem
            return None

        return items
    struct = _struct_checker(tp)
    if struct is not None:
        return struct
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        allowed = ", ".join(str(m.value) for m in tp)
        # A plain string equal to a value is still refused: code compares members by identity.
        hint = (f" (use {tp.__name__}({quote_value('value')}))" if issubclass(tp, str) else "")

        def member(value: Any, path: str) -> tuple[str, str] | None:
            if isinstance(value, tp):
                return None
            return path, (f"expected a {tp.__name__} (one of {allowed}), got {_got(value)}"
                          f"{hint.replace(repr('value'), repr(value))}")

        return member
    return _scalar_checker(tp)


def _scalar_checker(tp: Any) -> _Check:
    if tp is bool:
        def boolean(value: Any, path: str) -> tuple[str, str] | None:
            return None if type(value) is bool else (path, f"expected a bool, got {_got(value)}")
        return boolean
    if tp is int:
        def integer(value: Any, path: str) -> tuple[str, str] | None:
            if isinstance(value, int) and not isinstance(value, bool):
                return None
            return path, f"expected an int, got {_got(value)}"
        return integer
    if tp is str:
        def string(value: Any, path: str) -> tuple[str, str] | None:
            if not isinstance(value, str):
                return path, f"expected a str, got {_got(value)}"
            problem = unicode_error(value)
            return None if problem is None else (path, problem)
        return string
    raise TypeError(f"no field check for {quote_value(tp)}")  # a new field type: teach this module
