"""The budget a refusal states: one that makes the request (Session.next_request, the CLI).

A refusal's first figure is a floor a layer below reports (the planner's pinned minimum plus what
the epoch's tail and framing took), and it can fall short or overshoot: on a one-message session
a budget of 5 was told 12, 12 was refused asking 22, and the request was made only at 38. A
runtime (or a person at the CLI) retries with the figure it is told, so the figure is searched:
each try walks the session at one budget from its checkpoint turn, and every need stated was
made; past ``TRIES`` refusals without one, it is stated as a floor ("at least").

How it searches, and why so. A refused try stops at the first re-plan that refuses, so it is
cheap; a try that is made walks every turn from the checkpoint, re-planning at nearly each at a
small budget (on the demo 0.01-1.3 s refused, 2.5-6 s made: the first made try also reads every
position once). The search therefore spends refusals to save made tries:

- Up: each refusal's report is tried next. It is the floor of the position the walk refused
  at, so a walk at it passes that position and refuses at a later one, or is made: the tries
  climb the session's floors and the first one made is usually the need itself (the demo: 17
  refusals, 2.6 s in all, then one made try, at 812). A report within a slack
  (``need // SLACK``, at least a token) of the budget refused says little (a layer's "one token
  more"): it is replaced by a step of ``1 / 2**STEP_SHIFT`` of that budget, doubled with each
  such report in a row up to doubling the budget, so reports that creep still reach 4,096
  times the first figure in 16 tries. Doubling at every refusal, as before, overshot the demo's
  need to 896 and then halved down through three made tries.
- Down: the least budget made is sought between the highest refused and the lowest made, to
  within a slack. When the highest refusal asked for the budget made (or more), that budget
  is likely the need, and one refused try a slack below it ends the search (the demo: 787,
  0.7 s). Otherwise, and once that try was made, the interval is halved. Splitting it nearer
  the refused end (a refusal, the cheap answer, more likely) gains little: with the least
  budget equally likely anywhere in it and a made try costing 5 refused ones, a quarter split
  costs 3 % less than halving over 16 slacks and 8 % more over 4 (at 20 refused ones, 13-22 %
  less); the reports, not the split, are what place the tries.
"""

from __future__ import annotations

from collections.abc import Callable

from holon_ctx.errors import BudgetTooSmallError

#: Refusals tried upward before the need is stated as a floor: a report that creeps still
#: reaches 4,096 times the first figure in 16 (the step doubles to doubling the budget), and
#: reports that climb the session's floors need more tries than doubling did (the demo: 19).
TRIES = 24

#: The search downward stops after this many tries, stating the lowest budget made: enough to
#: halve a report 10,000 times too high down to its slack.
DOWN_TRIES = 24

#: A report that says little is replaced by a step of ``budget >> STEP_SHIFT`` (1/16), the shift
#: one less with each such report in a row until the step is the budget itself.
STEP_SHIFT = 4

#: The search down stops once the lowest budget made is within ``need // SLACK`` tokens of the
#: highest refused: exact below ``2 * SLACK`` tokens (a one-message session is told its least
#: budget).
SLACK = 32


def stated_need(refusal: BudgetTooSmallError, made: Callable[[int], int | None]
                ) -> BudgetTooSmallError:
    """``refusal`` restated with a budget that works: ``made(tokens)`` is None when a request at
    ``tokens`` is made, else the need its refusal reports."""
    budget = refusal.available_tokens
    refused, asked = budget, refusal.required_tokens
    need = max(asked, budget + 1)
    tries = creeping = 0
    while (reported := made(need)) is not None:
        tries += 1
        if tries >= TRIES:
            return BudgetTooSmallError(max(reported, need + 1), budget, refusal.what,
                                       at_least=True)
        # A report within a slack of the budget refused says little (a layer's "one token
        # more"): it is replaced by a step of 1/16 of the budget, doubled with each such report
        # in a row, up to doubling the budget.
        creeping = creeping + 1 if reported <= need + max(1, need // SLACK) else 0
        step = need >> max(0, STEP_SHIFT + 1 - creeping) if creeping else 1
        refused, asked, need = need, reported, max(reported, need + max(1, step))
    return BudgetTooSmallError(_least_made(refused, asked, need, made), budget, refusal.what)


def _least_made(refused: int, asked: int, need: int, made: Callable[[int], int | None]) -> int:
    """The lowest budget made found between ``refused`` (whose refusal reported ``asked``) and
    ``need`` (made), once within ``need // SLACK`` of a refused one or after ``DOWN_TRIES``."""
    confirm = asked >= need
    for _ in range(DOWN_TRIES):
        slack = max(1, need // SLACK)
        gap = need - refused
        if gap <= slack:
            break
        # The refusal below asked for the budget made (or more): likely the need itself, which
        # one refusal a slack below confirms. Made there, that try is not repeated until a
        # refusal asks for the budget made again (it would step down a slack at a time).
        probe = need - slack if confirm else refused + gap // 2
        reported = made(probe)
        if reported is None:
            need, confirm = probe, False
        else:
            refused, confirm = probe, reported >= need
    return need
