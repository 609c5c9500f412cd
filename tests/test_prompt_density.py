"""Dense, faithful prompts (issue 12, items 1, 3 and 9): the newest steps are never cut while the
budget has room, markup stays a small share of the prompt, and the manifest is the same bytes in
any process and hash seed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from projection_builders import LedgerBuilder

from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.transcripts import import_any
from holon_ctx.projection.density import density
from holon_ctx.projection.model import Form
from holon_ctx.projection.projector import Projector
from holon_ctx.tokens import default_counter

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "swe-trajectories"
DEMO = ROOT / "holon_ctx" / "data" / "demo.jsonl"
#: Two of the shared trajectories: a short django fix and a long sphinx one.
SAMPLES = ("django__django-10914", "sphinx-doc__sphinx-10614")


def _long_output(n_lines: int) -> str:
    return "".join(f"tests/test_mod_{i}.py::test_case_{i} PASSED [{i % 100:3d}%]\n"
                   for i in range(n_lines))


def _agent_loop(steps: int, last_output_lines: int) -> tuple[LedgerBuilder, list[str]]:
    """An operator request, then agent steps with short outputs; the last with a long one."""
    b = LedgerBuilder()
    ask = b.operator("Make the test suite pass; do not touch the migrations.")
    turns = []
    for i in range(steps):
        turns.append(b.turn("x-agent-step", anchor=ask))
        b.assistant(f"Step {i}: run the suite again.\n\n```bash\npytest -q tests/part_{i}\n```")
        last = i == steps - 1
        b.tool("bash", f"pytest -q tests/part_{i}",
               _long_output(last_output_lines if last else 3 + i % 4))
    return b, turns


def test_the_newest_step_is_shown_whole_while_the_budget_has_room() -> None:
    """A last step whose output is past the per-field cap is shown whole when it fits."""
    b, turns = _agent_loop(6, 150)
    p = b.project(16384)
    assert p.used_tokens < p.budget_tokens - 1000  # room to spare
    d = density(p, default_counter(), [f"turn:{t}" for t in turns[-2:]])
    assert d.cut == ()
    last_output = b.records[-1]
    assert getattr(last_output, "output", "") in p.text
    assert "tokens omitted" not in p.text


def test_when_the_budget_binds_older_steps_lose_text_first() -> None:
    """Below what the whole history needs, the newest step keeps more of its output than any
    older step keeps of its own, and the older steps give way first."""
    b, turns = _agent_loop(30, 150)
    counter = default_counter()
    whole = b.project(32768)
    assert density(whole, counter, [f"turn:{turns[-1]}"]).cut == ()
    p = b.project(4096)
    decisions = {d.key: d for d in p.decisions}
    newest = decisions[f"turn:{turns[-1]}"]
    assert newest.form is Form.FULL
    # Older steps are compacted or left out before the newest loses its text: the newest is
    # larger than its capped form (it was given room) ...
    assert newest.tokens > newest.full_tokens
    # ... and some older step is below its full form.
    assert any(decisions[f"turn:{t}"].form is not Form.FULL
               for t in turns[:-2] if f"turn:{t}" in decisions)


def _walk(name: str, budget: int) -> list[tuple[float, bool]]:
    store = MemoryStore()
    import_any(CORPUS / f"{name}.traj.json", store)
    steps = [r.id for r in store.iter_records()
             if isinstance(r, Turn) and r.trigger == "x-agent-step"]
    projector = Projector(store)
    counter = default_counter()
    out = []
    for i, step in enumerate(steps):
        d = density(projector.project(budget_tokens=budget, at=step), counter,
                    [f"turn:{s}" for s in steps[max(0, i - 1):i + 1]])
        out.append((d.markup_share, d.cut_with_room))
    return out


@pytest.mark.parametrize("name", SAMPLES)
def test_markup_share_and_cut_with_room_on_shared_trajectories(name: str) -> None:
    """At 8,192 tokens on every step: no newest step cut with room left, and markup (headings,
    labels, fences, stubs) under a fifth of the prompt (it was 27% before issue 12)."""
    # The corpus sits beside the repository here and in CI: missing is a setup error.
    assert CORPUS.is_dir(), f"corpus not found at {CORPUS}"
    points = _walk(name, 8192)
    assert points
    assert sum(cut for _, cut in points) == 0
    shares = sorted(share for share, _ in points)
    assert shares[len(shares) // 2] < 0.20, shares[len(shares) // 2]


@pytest.mark.parametrize("mode", ["session", "stateless"])
def test_the_manifest_is_the_same_bytes_in_any_process_and_hash_seed(mode: str) -> None:
    """``holon-ctx project --json`` on the bundled demo ledger, in two interpreters with
    different hash seeds, at a budget that binds and at one that does not."""
    for budget in ("2048", "16384"):
        outputs = set()
        for seed in ("0", "4242"):
            env = {**os.environ, "PYTHONHASHSEED": seed}
            out = subprocess.run(
                [sys.executable, "-m", "holon_ctx", "project", str(DEMO), "--budget", budget,
                 "--json", "--mode", mode],
                env=env, cwd=ROOT, capture_output=True, check=True)
            outputs.add(out.stdout)
        assert len(outputs) == 1
        assert b'"allocated_tokens"' in next(iter(outputs))
