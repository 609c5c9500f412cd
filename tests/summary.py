"""Lines a test module shows at the end of the run (tests/conftest.py prints them).

With xdist the tests run in worker processes that have no terminal: each worker hands its lines
to the controller (``workeroutput``), which prints them with its summary, so a line such as the
property tests' coverage shares shows in a parallel run as in a serial one.
"""

from __future__ import annotations

import pytest

LINES = pytest.StashKey[list[str]]()


def show_at_end(config: pytest.Config, line: str) -> None:
    """Print ``line`` in the run's terminal summary."""
    config.stash.setdefault(LINES, []).append(line)
