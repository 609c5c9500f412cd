"""Speed targets, recorded instead of asserted.

A time depends on the machine and its load, so a benchmark that misses its target reports it (at
the end of the run, ``conftest.pytest_terminal_summary``) and never turns it into a failed test.
"""

from __future__ import annotations

#: Speed targets met or missed in this run, in the order they were checked.
TARGETS: list[str] = []


def target(name: str, value: float, limit: float, *, at_most: bool = True) -> bool:
    """Record whether ``value`` meets ``limit`` (at most, or at least); True when it does."""
    met = value <= limit if at_most else value >= limit
    sign = "<=" if at_most else ">="
    TARGETS.append(f"{'met' if met else 'NOT MET'}: {name} = {value:,.3f} (target {sign} {limit:,})")
    return met
