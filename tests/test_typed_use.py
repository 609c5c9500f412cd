"""Typed use from outside the repository (issue 16): mypy finds the install, providers are typed.

The mypy test runs the type checker of this venv on a script in a temporary directory, with no
MYPYPATH and no configuration, as a user's project would: it must see holon_ctx through the
editable install (a static .pth entry, pyproject's ``package-dir``) and read its ``py.typed``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from provider_shapes import OPENAI_BY_ROLE, assert_anthropic_declared, assert_declared

from holon_ctx.ledger.importer import import_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.projection.planning.projector import Projection, Projector
from holon_ctx.projection.provider_formats.providers import to_anthropic_messages, to_openai_messages

SMALL = Path(__file__).parent / "golden" / "small.jsonl"

USER_SCRIPT = '''\
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.provider_formats.providers import to_anthropic_messages, to_openai_messages


def prompt_parts(store: MemoryStore) -> list[str]:
    projection = Projector(store).project(budget_tokens=2000)
    request = to_anthropic_messages(projection)
    parts = [block["text"] for block in request["messages"][0]["content"]
             if block["type"] == "text"]
    for message in to_openai_messages(projection):
        if message["role"] == "system":
            parts.insert(0, message["content"])
    return parts
'''
MISTAKE = '''\
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.provider_formats.providers import to_openai_messages


def first(store: MemoryStore) -> str:
    message = to_openai_messages(Projector(store).project(budget_tokens=2000))[0]
    reveal_type(message["role"])
    return message["contents"]
'''


def test_mypy_strict_on_a_users_script_finds_holon_ctx(tmp_path: Path) -> None:
    """``mypy --strict`` from an unrelated directory, without MYPYPATH: a correct script passes,
    and a wrong key on a provider message is caught (the types are real, not Any)."""
    (tmp_path / "agent.py").write_text(USER_SCRIPT)
    (tmp_path / "mistake.py").write_text(MISTAKE)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}

    def check(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
             "--cache-dir", str(tmp_path / ".mypy_cache"), name],
            cwd=tmp_path, env=env, capture_output=True, text=True, check=False)

    ok = check("agent.py")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = check("mistake.py")
    assert "import-not-found" not in wrong.stdout
    assert "Literal['system'] | Literal['user'] | Literal['assistant'] | Literal['tool']" \
        in wrong.stdout
    assert 'TypedDict "OpenAIUserMessage" has no key "contents"' in wrong.stdout


@pytest.fixture(scope="module")
def projections() -> list[Projection]:
    store = MemoryStore()
    import_jsonl(SMALL, store)
    projector = Projector(store)
    return [projector.project(budget_tokens=b) for b in (300, 700, 2000)]


def test_requests_match_their_declared_shapes(projections: list[Projection]) -> None:
    """Every request built here decodes strictly into its TypedDict and encodes back to the same
    JSON (a key the type does not declare would be dropped and show): the declared shapes are
    the ones on the wire."""
    for p in projections:
        for message in to_openai_messages(p):
            assert_declared(message, OPENAI_BY_ROLE[message["role"]])
        assert_anthropic_declared(dict(to_anthropic_messages(p)))
