"""Helpers for the session-projection tests: walking a ledger turn by turn, checking requests."""

from __future__ import annotations

from collections.abc import Iterator

from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.provider_formats.native import Part
from holon_ctx.projection.provider_formats.providers import measure
from holon_ctx.projection.session.session import Layout, SessionProjector, SessionRequest
from holon_ctx.tokens import default_counter

__all__ = ["check_request", "content_stream", "turn_ids", "walk"]


def turn_ids(store: LedgerStore) -> list[str]:
    return [r.id for r in store.iter_records() if isinstance(r, Turn)]


def walk(projector: SessionProjector, budget: int) -> Iterator[SessionRequest]:
    """One request as of each turn, in order (what a runtime calling every turn gets)."""
    for turn_id in turn_ids(projector.store):
        yield projector.request(budget_tokens=budget, at=turn_id)


def content_stream(parts: tuple[Part, ...]) -> list[tuple[str, str, tuple[str, ...]]]:
    """What a provider caches, in order: each part's role, content and calls (no markers)."""
    return [(p.role.value, p.content, tuple(c.call_id for c in p.calls)) for p in parts
            if p.content or p.calls]


def check_request(request: SessionRequest) -> None:
    """The request holds its budget, re-measured, and says its size exactly."""
    counter = default_counter()
    assert counter.count(request.text) == request.used_tokens
    if request.layout is Layout.TEXT:
        assert request.request_tokens == request.used_tokens
    else:
        assert measure(request.openai_messages(), counter) == request.request_tokens
        assert measure(request.anthropic_request(), counter) <= request.request_tokens
        assert "".join(m["content"] or "" for m in request.openai_messages()) == request.text
    assert request.used_tokens <= request.request_tokens <= request.budget_tokens
    assert request.manifest.used_tokens == request.used_tokens
