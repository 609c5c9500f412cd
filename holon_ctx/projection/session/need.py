"""The budget a refusal states: one that makes the request (Session.next_request, the CLI).

A refusal's first figure is a floor a layer below reports (the planner's pinned minimum plus what
the epoch's tail and framing took), and it can fall short or overshoot: on a one-message session
a budget of 5 was told 12, 12 was refused asking 22, and the request was made only at 38. A
runtime (or a person at the CLI) retries with the figure it is told, so the figure is searched:
raised by what each refusal reports, at least doubled, until a request is made, then halved down
between the highest budget refused and the lowest made, to within ``1 / SLACK`` of the need (each
try walks the session at that budget: on the demo ~1 s for a refusal and ~5 s for a request made,
so the last few tokens of precision cost more than a person waiting at the CLI should pay). Every
need stated was made; past ``TRIES`` refusals without one, it is stated as a floor ("at least").
"""

from __future__ import annotations

from collections.abc import Callable

from holon_ctx.errors import BudgetTooSmallError

#: Refusals tried upward before the need is stated as a floor: each try is a re-plan of the turn
#: and at least doubles the budget, so 12 reach 4,096 times the first floor; as many again halve
#: the way down to the lowest budget made.
TRIES = 12

#: The halving stops once the lowest budget made is within ``need // SLACK`` tokens of the highest
#: refused: exact below ``2 * SLACK`` tokens (a one-message session is told its least budget).
SLACK = 32


def stated_need(refusal: BudgetTooSmallError, made: Callable[[int], int | None]
                ) -> BudgetTooSmallError:
    """``refusal`` restated with a budget that works: ``made(tokens)`` is None when a request at
    ``tokens`` is made, else the need its refusal reports."""
    budget = refusal.available_tokens
    refused, need = budget, max(refusal.required_tokens, budget + 1)
    tries = 0
    while (reported := made(need)) is not None:
        tries += 1
        if tries >= TRIES:
            return BudgetTooSmallError(max(reported, need + 1), budget, refusal.what,
                                       at_least=True)
        refused, need = need, max(reported, 2 * need)
    while need - refused > max(1, need // SLACK) and tries < 2 * TRIES:
        tries += 1
        middle = (refused + need) // 2
        if made(middle) is None:
            need = middle
        else:
            refused = middle
    return BudgetTooSmallError(need, budget, refusal.what)

