"""Shared test configuration: the two tiers, Hypothesis profiles and the PostgreSQL database
(keep this file small; fixtures live near use).

Tiers (docs/testing.md): the default run deselects the tests marked ``slow``; ``--slow`` runs only
the slow tier, the tests marked ``slow`` or ``scaled`` (``scaled`` ones run in both tiers, larger in
the slow one: tests/tiers.py).

Two profiles. ``dev`` (the default) explores randomly and prints the blob that reproduces a
failure. ``ci`` (chosen when ``CI`` is set, as ``.ci/run`` does) is derandomized, so a CI run is
repeatable; the examples it tries are still fixed by each test's ``max_examples``. Either profile
can be forced with ``HYPOTHESIS_PROFILE=dev|ci``. No deadline: the first example of a test pays for
loading the tiktoken vocabulary, and a 2-core machine shared with other jobs has noisy timings.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import tiers
from hypothesis import settings
from summary import LINES
from tiers import LONG_FILES


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", default=False,
                     help="run the slow tier (tests marked slow or scaled, at their full sizes) "
                          "instead of the default run; CI runs both (docs/testing.md)")


def pytest_configure(config: pytest.Config) -> None:
    # Before collection, so modules read their sizes (tests/tiers.py) with the tier already set;
    # xdist workers run this hook too, and subprocesses inherit the variable.
    if config.getoption("slow"):
        os.environ["HOLON_CTX_TEST_TIER"] = "slow"
        # tiers was imported by this file (LONG_FILES), before this hook: its SLOW was read
        # then, and every scaled test ran the slow tier at its default size.
        tiers.SLOW = True


def _in_slow_tier(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in ("slow", "scaled"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = bool(config.getoption("slow"))
    kept, dropped = [], []
    for item in items:
        wanted = _in_slow_tier(item) if slow else item.get_closest_marker("slow") is None
        (kept if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    # Long files go first (each keeping its own order), so that with a file to each of two
    # processes (dev.py) no long file starts last and runs alone: the measured longest
    # (tiers.LONG_FILES, longest first), then the other files with scaled tests.
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    scaled_files = {item.path for item in items if item.get_closest_marker("scaled") is not None}
    items.sort(key=lambda item: rank.get(item.path.name,
                                         len(rank) + (item.path not in scaled_files)))
    scaled = sum(1 for item in kept if item.get_closest_marker("scaled") is not None)
    config.stash[_SLOW_TIER] = (0, 0) if slow else (len(dropped), scaled)


#: A default run's count of slow-tier tests deselected and of scaled tests run smaller.
_SLOW_TIER = pytest.StashKey[tuple[int, int]]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the lines to the controller
        workeroutput["holon_lines"] = session.config.stash.get(LINES, [])
        workeroutput["holon_slow_tier"] = session.config.stash.get(_SLOW_TIER, (0, 0))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller, as a worker finishes: keep its lines for the summary."""
    output = getattr(node, "workeroutput", {})
    node.config.stash.setdefault(LINES, []).extend(output.get("holon_lines", []))
    # Every worker collects the whole run, so each counts the same tests.
    node.config.stash[_SLOW_TIER] = tuple(output.get("holon_slow_tier", (0, 0)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    for line in config.stash.get(LINES, []):
        terminalreporter.write_line(line)
    if config.getoption("slow"):
        terminalreporter.write_line("slow tier: the tests marked slow or scaled, at full size; "
                                    "the default run is python3 dev.py test")
    elif any(counts := config.stash.get(_SLOW_TIER, (0, 0))):
        terminalreporter.write_line(
            f"default run: {counts[0]} slow-tier tests deselected, {counts[1]} scaled tests run "
            "smaller; python3 dev.py test --slow runs the slow tier (CI runs both)")


settings.register_profile("dev", deadline=None, print_blob=True)
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


# -- PostgreSQL ---------------------------------------------------------------------------------
# Here rather than near use because several test files share one database per run. Every run makes
# its own uniquely named database and drops it at the end, so runs of several engineers (or CI) on
# one server never meet. The server is required: when it is unreachable the run stops with one
# line. HOLON_CTX_SKIP_POSTGRES=1 is the one switch that runs everything else without it.
PG_ADMIN_URL = os.environ.get("HOLON_CTX_TEST_POSTGRES",
                              "postgresql://postgres@127.0.0.1:5432/postgres")
SKIP_POSTGRES = os.environ.get("HOLON_CTX_SKIP_POSTGRES", "") not in ("", "0")
_session_keys = itertools.count()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URL of a database made for this test run (dropped after it)."""
    if SKIP_POSTGRES:
        pytest.skip("HOLON_CTX_SKIP_POSTGRES is set: PostgreSQL tests skipped")
    import psycopg

    name = f"holon_test_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        pytest.exit(f"PostgreSQL tests: cannot reach {PG_ADMIN_URL} ({reason}); start the server, "
                    "or set HOLON_CTX_SKIP_POSTGRES=1 to run the other tests", returncode=3)
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlsplit(PG_ADMIN_URL)._replace(path=f"/{name}").geturl()
    finally:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture
def pg_session_key(request: pytest.FixtureRequest) -> str:
    """A session key no other test of the run uses."""
    return f"{request.node.name[:80]}-{next(_session_keys)}"
