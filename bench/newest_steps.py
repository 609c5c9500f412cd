"""The newest two steps verbatim (issue 25, item 1): the share of points where they are.

``python3 dev.py shell bench/newest_steps.py [--every-step]`` prints, for both corpora
(``../shared/corpora/swe-trajectories`` and ``swe-trajectories-validation``) at 4,096 and 8,192
tokens, the share of points at which each of the newest two agent steps is shown *verbatim* —
every record's text as it is, no repeated-lines note (``[line above ×N]``, ``[N lines as in
REF]``) in place of any of its lines — or cut to fit with a pointer to its full text (an excerpt's
``full text: REF`` note, or a ``[clipped …]`` note after its fence). Points: 25%, 50%, 75% and
100% of each trajectory's steps (the frontier checks' points), or every step with
``--every-step``. ``bench/test_bench_newest_steps.py`` runs the same walk under pytest-benchmark.

A note is read strictly here: the oracle of RFC 0016 (``tests/folded_output.py``) reads notes
back and accepts them; this measure does not, since the model acts on the newest observation as it
reads it (RFC 0023).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import attrs

from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.records import Turn
from holon_ctx.ledger.store import StoredRecord
from holon_ctx.ledger.transcripts import import_any
from holon_ctx.projection.planning.projector import Projector

ROOT = Path(__file__).resolve().parents[1]
# The oracle the tests use (tests/folded_output.py), independent of the code it measures.
sys.path.insert(0, str(ROOT / "tests"))
from folded_output import verbatim_or_pointer  # noqa: E402

SHARED = ROOT.parent / "shared" / "corpora"
CORPORA = {"swe-trajectories": SHARED / "swe-trajectories",
           "swe-trajectories-validation": SHARED / "swe-trajectories-validation"}
BUDGETS = (4096, 8192)
FRACTIONS = (0.25, 0.5, 0.75, 1.0)


@attrs.frozen
class Point:
    """One projection: which trajectory, step and budget, and whether its newest two steps are
    verbatim (or cut with a pointer); ``failure`` says how the first one that is not fails."""

    trajectory: str
    step: int
    budget: int
    ok: bool
    failure: str = ""


class Walk:
    """A trajectory imported once, with its agent steps in order."""

    def __init__(self, path: Path) -> None:
        self.name = path.name.removesuffix(".traj.json")
        self.store = MemoryStore()
        import_any(path, self.store)
        self.steps = [r.id for r in self.store.iter_records()
                      if isinstance(r, Turn) and r.trigger == "x-agent-step"]
        self.projector = Projector(self.store)
        self._records: dict[str, list[StoredRecord]] = {}
        for stored in self.store.records_between(0, self.store.end_pos()):
            tid = getattr(stored.record, "turn_id", None)
            if tid is not None:
                self._records.setdefault(tid, []).append(stored)

    def points(self, every_step: bool) -> Iterator[int]:
        if every_step:
            yield from range(1, len(self.steps) + 1)
        else:
            yield from dict.fromkeys(max(1, round(len(self.steps) * f)) for f in FRACTIONS)

    def check(self, k: int, budget: int) -> Point:
        text = self.projector.project(budget_tokens=budget, at=self.steps[k - 1]).text
        for turn_id in self.steps[max(0, k - 2):k]:
            for stored in self._records.get(turn_id, []):
                why = verbatim_or_pointer(stored.record, stored.ref, text)
                if why:
                    return Point(self.name, k, budget, False, why)
        return Point(self.name, k, budget, True)


def walk(corpus: Path, budget: int, *, every_step: bool = False) -> list[Point]:
    """Every point of every trajectory of ``corpus`` at ``budget``."""
    out: list[Point] = []
    for path in sorted(corpus.glob("*.traj.json")):
        w = Walk(path)
        out.extend(w.check(k, budget) for k in w.points(every_step))
    return out


def main(argv: list[str]) -> int:
    every = "--every-step" in argv
    print("| corpus | budget | points | newest two steps verbatim or with a pointer |")
    print("|---|---:|---:|---:|")
    for name, corpus in CORPORA.items():
        if not corpus.is_dir():
            print(f"corpus not found: {corpus}", file=sys.stderr)
            return 2
        for budget in BUDGETS:
            points = walk(corpus, budget, every_step=every)
            ok = sum(p.ok for p in points)
            print(f"| {name} | {budget:,} | {len(points)} | {ok}/{len(points)} "
                  f"({ok / len(points):.1%}) |")
            for p in points:
                if not p.ok:
                    print(f"  fails: {p.trajectory} step {p.step}: {p.failure}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
