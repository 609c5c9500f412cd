"""docs/providers.md quotes real output: its corpus excerpts are regenerated and compared."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.transcripts import import_any
from holon_ctx.projection.planning.projector import Projector
from holon_ctx.projection.provider_formats.providers import (
    CACHE_CONTROL,
    framing_tokens,
    measure,
    to_anthropic_messages,
)
from holon_ctx.tokens import default_counter

DOC = Path(__file__).resolve().parents[1] / "docs" / "providers.md"
TRAJ = (Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "swe-trajectories"
        / "django__django-10914.traj.json")
pytestmark = pytest.mark.skipif(not TRAJ.exists(), reason=f"corpus not found at {TRAJ}")


@pytest.fixture(scope="module")
def request_at_t60() -> dict[str, object]:
    store = MemoryStore()
    import_any(TRAJ, store)
    projection = Projector(store).project(budget_tokens=8192 - framing_tokens(), at="t60")
    return to_anthropic_messages(projection)


def text_blocks(request: dict[str, object]) -> tuple[str, str]:
    system = request["system"][0]  # type: ignore[index]
    user = request["messages"][0]["content"][0]  # type: ignore[index]
    assert system["cache_control"] == CACHE_CONTROL
    return system["text"], user["text"]


def test_the_frontier_excerpt_is_the_projected_work_refs(request_at_t60: dict[str, object]) -> None:
    """The work-refs block quoted in the doc is the projection's own, line for line."""
    doc = DOC.read_text(encoding="utf-8")
    quoted = re.search(r"```text\n(## Work refs\n.*?)```", doc, re.DOTALL)
    assert quoted is not None
    _, user = text_blocks(request_at_t60)
    assert quoted.group(1) in user


def test_the_layout_example_starts_and_ends_as_the_request(
        request_at_t60: dict[str, object]) -> None:
    """The shortened request in the doc keeps the real first lines, stub line and measure."""
    doc = DOC.read_text(encoding="utf-8")
    system, user = text_blocks(request_at_t60)
    # As the doc's JSON block writes them (line breaks and quotes escaped).
    assert json.dumps("\n".join(system.split("\n")[:3]), ensure_ascii=False)[1:-1] in doc
    assert json.dumps("\n".join(user.split("\n")[:3]), ensure_ascii=False)[1:-1] in doc
    stub = re.search(r"^tool:x38: .*$", doc, re.MULTILINE)
    assert stub is not None
    assert stub.group(0) + "\n" in user
    assert measure(request_at_t60, default_counter()) <= 8192


def test_the_session_request_example_is_what_the_library_builds() -> None:
    """The session request shown in the doc is the output of the code above it, byte for byte."""
    import contextlib
    import io

    doc = DOC.read_text(encoding="utf-8")
    section = doc[doc.index("## Session requests"):doc.index("## Stateless projections")]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    shown = re.search(r"```json\n(.*?)```", section, re.DOTALL)
    assert code is not None
    assert shown is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), "providers.md", "exec"), {"__name__": "providers_doc"})
    assert out.getvalue() == shown.group(1)
