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
