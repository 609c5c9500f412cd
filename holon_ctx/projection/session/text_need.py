"""The need of a request read as text too (``Session.next_request(..., text=True)``).

The text layout is laid out on its own (section headers, trust labels), so near the messages'
floor it can need more than they do, or less (up to 90 tokens more at budgets 100-400). A caller
that reads the text asks for both at once, and a refusal of either states a budget at which both
are made: the search of :mod:`.need`, each try walking the messages and then the text.
"""

from __future__ import annotations

from holon_ctx.errors import BudgetTooSmallError
from holon_ctx.projection.session.need import stated_need
from holon_ctx.projection.session.session import SessionProjector, SessionRequest

__all__ = ["both_layouts"]


def both_layouts(messages: SessionProjector, text: SessionProjector, budget: int, *,
                 at: str | None, end: int, framing: int
                 ) -> tuple[SessionRequest, SessionRequest]:
    """The messages and the text layout of one request under ``budget``, as of turn ``at`` (or
    ``end``), both with the governed state and archive read once (one moment): for a caller
    that reads the text. A refusal of either states a need at which both are made, searched as
    every need is (:func:`~.need.stated_need`), each try walking the messages and then the text: the
    text is laid out on its own (section headers, trust labels) and near the messages' floor can
    need more than they do, or less. ``framing``: what the message framing alone takes; a budget
    at or below it is refused at once (``Session.next_request``). The projectors keep what they
    read at each position for the whole search (``reads_kept``)."""
    moment = messages.moment(at=at, ledger_end=end)

    def both(tokens: int) -> tuple[SessionRequest, SessionRequest]:
        if tokens <= framing:
            raise BudgetTooSmallError(framing + 1, tokens, "the request's message framing")
        made = messages.request(budget_tokens=tokens, at=at, ledger_end=end, moment=moment,
                                state_need=False)
        return made, text.request(budget_tokens=tokens, limit_pos=made.limit_pos, moment=moment,
                                  state_need=False)

    def made(tokens: int) -> int | None:
        try:
            both(tokens)
        except BudgetTooSmallError as again:
            return again.required_tokens
        return None

    with messages.reads_kept(), text.reads_kept():
        try:
            return both(budget)
        except BudgetTooSmallError as refusal:
            raise stated_need(refusal, made) from None
