"""What every validator check shares: its inputs, and field-by-field comparison.

Each field maps to one reason code (:data:`~holon_ctx.continuity.codes.FIELD_CODE`), whichever
comparison finds the difference; set-valued fields report both what is missing and what is extra.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import attrs

from holon_ctx.continuity.codes import FIELD_CODE, SET_FIELD_CODES
from holon_ctx.continuity.decision import Finding
from holon_ctx.continuity.state import GovernedState, ResumeContext

__all__ = ["CheckContext", "compare", "show"]


@attrs.frozen
class CheckContext:
    """Everything one check may read (pure data)."""

    fields: Mapping[str, Any]
    resume: ResumeContext
    governed: GovernedState
    now: datetime | None
    envelope_mode: bool
    envelope_id: str | None = None
    summary_bytes: bytes | None = None


def show(value: object) -> str:
    # ascii() makes confusables and invisible characters visible in details (а → \u0430).
    text = ascii(value.value if hasattr(value, "value") else value)
    return text if len(text) <= 120 else text[:117] + "..."


def compare(fields: Mapping[str, Any], reference: Mapping[str, Any], where: str) -> Iterable[Finding]:
    """Field-by-field comparison of ``fields`` against ``reference`` (only keys in both)."""
    for name, expected in reference.items():
        if name not in fields:
            continue
        actual = fields[name]
        if name in SET_FIELD_CODES:
            dropped, unknown = SET_FIELD_CODES[name]
            for item in sorted(set(expected) - set(actual)):
                yield Finding(dropped, f"$.{name}", f"{where} has {show(item)}, envelope lacks it")
            for item in sorted(set(actual) - set(expected)):
                yield Finding(unknown, f"$.{name}", f"{show(item)} is not in {where}")
        elif actual != expected:
            yield Finding(FIELD_CODE[name], f"$.{name}", f"{show(actual)} != {where} {show(expected)}")
