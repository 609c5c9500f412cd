"""Shared test configuration: Hypothesis profiles (keep this file small; fixtures live near use).

Two profiles. ``dev`` (the default) explores randomly and prints the blob that reproduces a
failure. ``ci`` (chosen when ``CI`` is set, as ``.ci/run`` does) is derandomized, so a CI run is
repeatable; the examples it tries are still fixed by each test's ``max_examples``. Either profile
can be forced with ``HYPOTHESIS_PROFILE=dev|ci``. No deadline: the first example of a test pays for
loading the tiktoken vocabulary, and a 2-core machine shared with other jobs has noisy timings.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("dev", deadline=None, print_blob=True)
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
