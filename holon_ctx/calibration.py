"""Calibration from usage: the provider's own count of each request, and the safety factor it teaches.

Theory of operation (RFC 0022). Where holon_ctx cannot count a request exactly as the provider does
(Anthropic publishes no tokenizer; an unknown model; a runtime that adds text of its own), the
provider still says afterwards how many input tokens it counted. ``Session.observe_usage`` records
that figure beside the estimate the request was built with — an :class:`Observation` — in a
:class:`UsageStore` beside the ledger (the SQLite file's ``usage_observations`` table, a PostgreSQL
session's ``holon_usage`` rows, or memory). Per model, the ratio observed / estimated of the
newest :data:`WINDOW` observations gives a safety factor :func:`safety_factor`:

* an upper prediction bound for the next ratio — the mean plus Student's *t* at 99.9% times the
  standard deviation, widened by ``sqrt(1 + 1/n)`` for the mean's own uncertainty — never below
  the largest ratio seen (the bound of a run of identical ratios is that ratio), and with few
  observations no more than one spread (largest less smallest) beyond the largest;
* never below 1, and exactly 1 when no observation ever exceeded its estimate: a count that is
  already an upper bound (OpenAI's models) stays one, and a plan never holds more than the budget
  by holon_ctx's own count;
* with fewer than :data:`MIN_OBSERVATIONS`, the larger of the model's prior factor and the largest
  ratio seen.

The session then plans under ``budget / factor`` (:meth:`Calibration.planned_budget`), so the
provider's count, ``ratio × estimate``, stays under the budget. The window slides: a factor learnt
while requests were small (when a runtime's fixed additions, such as tool schemas, weigh most)
gives way to the ratios of full requests, and a factor is a fixed point ``r·B/(B-c)`` for a fixed
addition ``c``, which is what makes the whole call fit. A planned budget changes in steps of
:data:`FACTOR_STEP` (the factor is rounded up to it, and lowered only by two steps at once), so a
session's cached prefix is not re-planned at every observation.

Pure logic here; the observations and their stores are :mod:`holon_ctx.ledger.usage` (memory),
:mod:`holon_ctx.ledger.usage_sqlite` and :mod:`holon_ctx.postgres.usage`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import fmean, stdev
from typing import Final

import attrs

from holon_ctx.ledger.usage import WINDOW, Observation, UsageStore

__all__ = ["FACTOR_STEP", "MIN_OBSERVATIONS", "Calibration", "safety_factor"]

#: Observations before the prediction bound replaces the prior.
MIN_OBSERVATIONS: Final = 3
#: Factors are rounded up to a multiple of this (a planned budget moves in ~1% steps).
FACTOR_STEP: Final = 0.01
#: One-sided Student t quantiles at 99.9% by degrees of freedom (the normal's 3.090 beyond 120).
_T999: Final = ((1, 318.31), (2, 22.327), (3, 10.215), (4, 7.173), (5, 5.893), (6, 5.208),
                (7, 4.785), (8, 4.501), (9, 4.297), (10, 4.144), (12, 3.930), (15, 3.733),
                (20, 3.552), (25, 3.450), (30, 3.385), (40, 3.307), (60, 3.232), (120, 3.160))


def _t999(df: int) -> float:
    for limit, value in _T999:
        if df <= limit:
            return value
    return 3.090


def safety_factor(ratios: Sequence[float], prior: float = 1.0) -> float:
    """The factor a plan divides its budget by (see the module docstring), rounded up to
    :data:`FACTOR_STEP`."""
    if ratios and max(ratios) <= 1.0 and len(ratios) >= MIN_OBSERVATIONS:
        # The estimate was an upper bound on every count seen (OpenAI's rule is one by
        # construction): nothing to correct, however the ratios spread below 1.
        return 1.0
    if len(ratios) < MIN_OBSERVATIONS:
        raw = max(prior, *ratios) if ratios else prior
    else:
        n = len(ratios)
        bound = fmean(ratios) + _t999(n - 1) * stdev(ratios) * math.sqrt(1 + 1 / n)
        # With few observations t is large (22 at n = 3); one spread beyond the largest ratio
        # caps it there (from ~20 observations on, the bound is below the cap).
        top = max(ratios)
        raw = max(top, min(bound, 2 * top - min(ratios)))
    steps = math.ceil(round(max(1.0, raw) / FACTOR_STEP, 6))
    return steps * FACTOR_STEP


@attrs.define
class Calibration:
    """One session's calibration for one model: the factor now, and the budget to plan under."""

    store: UsageStore
    model: str
    prior: float = 1.0
    #: The factor in use (None until first asked); lowered only by two steps at once.
    _factor: float | None = None

    def observations(self) -> list[Observation]:
        return self.store.recent(self.model, WINDOW)

    def factor(self) -> float:
        """The factor in use: raised at once when the observations ask for more, lowered only
        when they allow two steps less (a budget that flips between neighbours re-plans)."""
        fresh = safety_factor([o.ratio for o in self.observations()], self.prior)
        current = self._factor
        if current is None or fresh > current or fresh <= current - 2 * FACTOR_STEP + 1e-9:
            self._factor = fresh
        assert self._factor is not None
        return self._factor

    def planned_budget(self, budget_tokens: int, factor: float | None = None) -> int:
        """The budget a plan is made under so the provider's count stays within ``budget_tokens``
        (``factor``: the one :meth:`factor` just gave, so the observations are read once)."""
        return max(1, math.floor(budget_tokens / (factor or self.factor()) + 1e-9))

    def record(self, observation: Observation) -> None:
        self.store.add(observation)
