"""Words the CLI builds from counts: one place, so no command prints "1 turns"."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``"1 turn"``, ``"3 turns"``; ``many`` for a noun whose plural is not noun + "s"."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"
