"""Shared test configuration: Hypothesis profiles (keep this file small; fixtures live near use).

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
from urllib.parse import urlsplit

import pytest
from hypothesis import settings

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
