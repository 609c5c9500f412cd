"""The request a runtime's session would send at a turn, made by a reader (the CLI's ``preview``,
``explain``, ``project``) without writing to the ledger's database (RFC 0024, RFC 0028).

A reader walks from the epochs a runtime saved beside the ledger, read through
(:class:`~holon_ctx.ledger.epochs.ReadThroughEpochs`: its own re-plans stay in memory), and asks
for the turn before the one shown first: a runtime asks every turn, so the request's cached
share is the one it would see. :func:`save_epoch` is the one writer, for the demo's build.
"""

from __future__ import annotations

import contextlib

from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.ledger.epochs import ReadThroughEpochs
from holon_ctx.ledger.epochs_sqlite import epoch_store_for
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.store import LedgerStore
from holon_ctx.projection.base.framing import FramingRule
from holon_ctx.projection.base.model import ControlSource, EpisodeSource
from holon_ctx.projection.base.policy import Policy
from holon_ctx.projection.session.session import Layout, SessionProjector, SessionRequest
from holon_ctx.tokens import TokenCounter

__all__ = ["read_through_request", "request_after_previous", "save_epoch"]


def read_through_request(store: LedgerStore, *, budget_tokens: int, at: str | None,
                         episodes: EpisodeSource | None, control: ControlSource | None,
                         text: bool = False, counter: TokenCounter | None = None,
                         policy: Policy | None = None,
                         framing: FramingRule | None = None) -> SessionRequest:
    """The session request as of turn ``at`` (default: the newest) at ``budget_tokens``: the
    messages a runtime sends (``Session.next_request``), or with ``text`` the text layout of the
    same ledger position (``Request.text``). Each call walks with fresh epochs: a reader's own
    re-plans stay in it, and one made without some episodes is never continued with them."""
    epochs = ReadThroughEpochs(epoch_store_for(store))
    try:
        def projector(layout: Layout) -> SessionProjector:
            return SessionProjector(store, counter, layout=layout, episodes=episodes,
                                    control=control, policy=policy, framing=framing,
                                    epochs=epochs)

        messages = request_after_previous(projector(Layout.MESSAGES), store, budget_tokens, at)
        if not text:
            return messages
        return projector(Layout.TEXT).request(budget_tokens=budget_tokens,
                                              limit_pos=messages.limit_pos)
    finally:
        epochs.close()


def request_after_previous(session: SessionProjector, store: LedgerStore, budget_tokens: int,
                           at: str | None) -> SessionRequest:
    """``session``'s request as of ``at`` (default: the newest turn), made right after the one
    for the turn before it: a runtime asks every turn, so its cached share is that one's."""
    target = at
    if target is None:
        latest = store.latest_turn(store.end_pos())
        target = latest.record.id if latest is not None and isinstance(latest.record, Turn) \
            else None
    if target is not None:
        current = store.turn(target.removeprefix("turn:"))
        if current is not None and isinstance(current.record, Turn):
            before = store.turns_before(current.record.seq, 1, current.pos + 1)
            if before and isinstance(before[0].record, Turn):
                # Only for the cached share: a budget the turn before could not hold says
                # nothing of this turn's request (its refusal stated the earlier turn's need,
                # which the shown turn could refuse again), and a runtime refused there has no
                # previous request either.
                with contextlib.suppress(BudgetTooSmallError):
                    session.request(budget_tokens=budget_tokens, at=before[0].record.id)
    return session.request(budget_tokens=budget_tokens, at=at)


def save_epoch(store: LedgerStore, *, budget_tokens: int, episodes: EpisodeSource | None,
               control: ControlSource | None) -> None:
    """Make the newest turn's request at ``budget_tokens`` as a runtime's session does, saving
    its epoch beside the ledger: readers then start from it (the demo's build, RFC 0024)."""
    epochs = epoch_store_for(store)
    try:
        SessionProjector(store, layout=Layout.MESSAGES, episodes=episodes, control=control,
                         epochs=epochs).request(budget_tokens=budget_tokens)
    finally:
        epochs.close()
