"""``--mode stateless`` for CLI tests that specify the stateless view.

Since RFC 0024 decision 5, ``preview``, ``explain``, ``diff`` and ``project`` show the session
request a runtime gets by default. The tests written for the stateless plan (its sections, entry
budgets and goldens) still specify that view, now behind ``--mode stateless``; the session view's
are in test_preview_is_sent.py.
"""

from __future__ import annotations

__all__ = ["stateless"]

#: ``stats`` too: its ``--budget`` table follows the same default (session) since 2026-12-04.
_VIEWS = frozenset({"preview", "explain", "diff", "project", "demo", "stats"})


def stateless(argv: list[str]) -> list[str]:
    """``argv`` with ``--mode stateless`` when it runs a view command that names no mode."""
    if argv and argv[0] in _VIEWS and "--mode" not in argv:
        return [argv[0], "--mode", "stateless", *argv[1:]]
    return argv
