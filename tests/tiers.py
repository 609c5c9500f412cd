"""The suite's two tiers (docs/testing.md, "Two tiers").

``python3 dev.py test`` is the default run: every area of the code, each property and stress test
at a size that still binds. ``python3 dev.py test --slow`` is the slow tier: the tests marked
``slow`` (only there) and ``scaled`` (run in both tiers, larger in this one). CI runs both.

``--slow`` sets ``HOLON_CTX_TEST_TIER=slow`` before any test module is imported (tests/conftest.py),
so a module reads its sizes at import time with :func:`sized`; child processes see it too.
"""

from __future__ import annotations

import os

#: True in the slow tier (``python3 dev.py test --slow``).
SLOW: bool = os.environ.get("HOLON_CTX_TEST_TIER") == "slow"


def sized(default: int, slow: int) -> int:
    """``default`` in the default run, ``slow`` in the slow tier."""
    return slow if SLOW else default


#: The default run's longest files, longest first (CPU, 2026-12-06, main at 950c99f after the
#: stateless plans stopped walking twice; roughly 25-85 s each, together about half the run's
#: 750 s of CPU). tests/conftest.py starts them first: ``dev.py test`` hands files to its two
#: processes in the order collected (``--no-loadscope-reorder``; xdist would otherwise start
#: the files with the most tests first and a long file of two tests last, alone on one core).
#: A file missing here only starts later; re-measure with ``--durations=0`` when one grows.
LONG_FILES: tuple[str, ...] = (
    "test_cli_preview_demo.py", "test_request_part_blocks.py", "test_concurrent_compaction.py",
    "test_docs_examples_run.py", "test_preview_line_marks.py", "test_prompt_density.py",
    "test_projection_invariants.py", "test_postgres_read_ahead.py", "test_cli_terminal.py",
    "test_compaction.py", "test_early_decisions.py", "test_golden_requests.py",
    "test_what_the_prompt_keeps.py", "test_never_over_budget.py", "test_cli_write_errors.py",
    "test_state_never_stale.py", "test_session_projection.py",
)
