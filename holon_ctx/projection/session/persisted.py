"""A frozen part as an epoch's row stores it: its message content only when it is not its text.

Most parts of a request are user-role text whose message content *is* its text (``text_part``):
persisted as they are, each such text was written twice, about a quarter of an epoch's row (on
the bench's 100k-message history, 52 KB of a 205 KB row; RFC 0024 decision 6, amended
2026-12-06 afternoon). A re-plan writes the row whole, so every byte is paid at each re-plan
and again when the WAL is copied into the file. Stored here once, read back as the same
:class:`~holon_ctx.projection.provider_formats.native.Part` (the same strings, the same counts):
what is left out is exactly what equals what is kept.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from holon_ctx.projection.base.framing import Role
from holon_ctx.projection.base.spans import Span
from holon_ctx.projection.provider_formats.native import Call, Part

__all__ = ["PersistedPart", "persisted_parts", "restored_parts"]


class PersistedPart(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """:class:`Part`'s fields; ``content`` and ``content_tokens`` None when they equal
    ``text`` and ``text_tokens`` (left out of the row, as are the other defaults)."""

    role: Role
    text: str
    text_tokens: int
    content: str | None = None
    content_tokens: int | None = None
    calls: tuple[Call, ...] = ()
    call_id: str | None = None
    refs: tuple[str, ...] = ()
    stable_end: bool = False
    spans: tuple[Span, ...] = ()


def persisted_parts(parts: Iterable[Part]) -> list[PersistedPart]:
    """``parts`` as a row stores them (see the module docstring)."""
    return [PersistedPart(
        role=p.role, text=p.text, text_tokens=p.text_tokens,
        content=None if p.content == p.text else p.content,
        content_tokens=None if p.content_tokens == p.text_tokens else p.content_tokens,
        calls=p.calls, call_id=p.call_id, refs=p.refs, stable_end=p.stable_end, spans=p.spans)
        for p in parts]


def restored_parts(parts: Iterable[PersistedPart]) -> list[Part]:
    """The parts :func:`persisted_parts` stored, as they were."""
    return [Part(
        role=p.role, text=p.text, text_tokens=p.text_tokens,
        content=p.text if p.content is None else p.content,
        content_tokens=p.text_tokens if p.content_tokens is None else p.content_tokens,
        calls=p.calls, call_id=p.call_id, refs=p.refs, stable_end=p.stable_end, spans=p.spans)
        for p in parts]
