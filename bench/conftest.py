"""Benchmark fixtures: generated ledger files, made once per session and shared by every benchmark.

Benchmarks run only through ``python3 dev.py bench`` (pytest-benchmark, ``--benchmark-only``); the
default test run collects ``tests/`` alone. ``bench/`` is on ``sys.path`` (pytest's rootdir-less
conftest import), so benchmarks import the generator as ``gen``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from gen import write_ledger
from targets import TARGETS


@pytest.fixture(scope="session")
def ledger_file(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Path]:
    """``ledger_file(n)``: the path of a generated ledger of ``n`` records (seed 0), cached."""
    root = tmp_path_factory.mktemp("ledgers")
    made: dict[int, Path] = {}

    def make(n_records: int) -> Path:
        if n_records not in made:
            made[n_records] = write_ledger(root / f"ledger-{n_records}.jsonl", n_records)
        return made[n_records]

    return make


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled demo ledger, built once by ``holon-ctx demo`` (its saved epoch too)."""
    db = tmp_path_factory.mktemp("bench-demo") / "demo.db"
    subprocess.run([sys.executable, "-m", "holon_ctx", "demo", "--db", str(db), "--plain"],
                   check=True, capture_output=True)
    return db



def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TARGETS:
        terminalreporter.section("speed targets (recorded, not asserted)")
        for line in TARGETS:
            terminalreporter.write_line(line)
