"""Mutation-test one core module: ``python3 dev.py mutate MODULE`` (see docs/testing.md).

Each mutant is one small change to the module (an operator swapped, a constant changed, a branch
inverted, …) made by cosmic-ray; the module's focused tests run against it, and a mutant the tests
do not fail on *survived*. The run happens in a copy of the repository, so the working tree is
never touched, with one worker: the machine is shared. At the end it prints the kill rate and every
survivor (file, line, operator), and writes them to ``mutation/MODULE.txt``.

    python3 dev.py mutate planner             # every mutant of the module
    python3 dev.py mutate planner --sample 120 # a seeded random sample of 120 (the rate then
                                               # estimates the module's; the report says so)
    python3 dev.py mutate planner --limit 40   # the first 40 mutants only (a quick look)

Mutants inside type annotations are not run: with ``from __future__ import annotations`` an
annotation is never evaluated, so they are equivalent by construction (counted in the report).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Module → (source file, its focused tests). Each test selection runs in a few seconds: it is run
#: once per mutant.
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "planner": ("holon_ctx/projection/planner.py", ("tests/test_planner.py",)),
    "retention": ("holon_ctx/projection/retention.py",
                  ("tests/test_retention.py", "tests/test_relation_retention.py")),
    "facts": ("holon_ctx/ledger/facts.py", ("tests/test_retention.py",)),
    "render": ("holon_ctx/projection/render.py", ("tests/test_render.py",)),
    "folding": ("holon_ctx/projection/folding.py", ("tests/test_folding.py",)),
    "chains": ("holon_ctx/projection/chains.py", ("tests/test_chains.py",)),
    "builder": ("holon_ctx/memory/builder.py", ("tests/test_episodes_builder.py",)),
    "validator": ("holon_ctx/continuity/validator.py",
                  ("tests/continuity/test_continuity_codes.py",
                   "tests/continuity/test_continuity_protocol.py")),
}


def _copy_repo(dest: Path) -> None:
    """The tracked and untracked (not ignored) files of the repository, copied to ``dest``."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.split("\n")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def _config(module: str, tests: tuple[str, ...]) -> str:
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly",
               "-p", "no:cacheprovider", *tests]
    return (f'[cosmic-ray]\nmodule-path = "{module}"\ntimeout = 40.0\nexcluded-modules = []\n'
            f'test-command = "{" ".join(command)}"\n\n[cosmic-ray.distributor]\nname = "local"\n')


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="dev.py mutate", description=__doc__.split("\n")[0])
    parser.add_argument("module", choices=sorted(MODULES))
    parser.add_argument("--limit", type=int, default=0, help="test only the first N mutants")
    parser.add_argument("--sample", type=int, default=0,
                        help="test a seeded random sample of N mutants")
    args = parser.parse_args(argv)
    source, tests = MODULES[args.module]
    with tempfile.TemporaryDirectory(prefix="holon-mutate-") as tmp:
        work = Path(tmp)
        _copy_repo(work)
        (work / "cr.toml").write_text(_config(source, tests), encoding="utf-8")
        cosmic = [sys.executable, "-m", "cosmic_ray.cli"]
        subprocess.run([*cosmic, "init", "cr.toml", "cr.sqlite"], cwd=work, check=True)
        skipped = _drop_annotation_mutants(work / "cr.sqlite", (ROOT / source).read_text())
        if args.limit:
            _keep_first(work / "cr.sqlite", args.limit)
        elif args.sample:
            _keep_sample(work / "cr.sqlite", args.sample)
        # The tests must pass on the unmutated copy, or every mutant would count as killed.
        baseline = subprocess.run([*cosmic, "baseline", "cr.toml"], cwd=work, check=False)
        if baseline.returncode:
            print(f"mutate: the tests of {args.module} fail without any mutant", file=sys.stderr)
            return 1
        subprocess.run([*cosmic, "exec", "cr.toml", "cr.sqlite"], cwd=work, check=True)
        dump = subprocess.run([*cosmic, "dump", "cr.sqlite"], cwd=work, check=True,
                              capture_output=True, text=True).stdout
    report = _report(args.module, source, dump, skipped=skipped,
                     sample=args.sample or args.limit)
    out = ROOT / "mutation" / f"{args.module}.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text(report, encoding="utf-8")
    print(report, end="")
    return 0


def _jobs(db: sqlite3.Connection) -> list[tuple[str, int, int]]:
    return [(job, row, col) for job, row, col in db.execute(
        "SELECT w.job_id, m.start_pos_row, m.start_pos_col FROM work_items w "
        "JOIN mutation_specs m ON m.job_id=w.job_id ORDER BY w.rowid")]


def _drop(db: sqlite3.Connection, jobs: list[str]) -> None:
    for job in jobs:
        db.execute("DELETE FROM mutation_specs WHERE job_id=?", (job,))
        db.execute("DELETE FROM work_items WHERE job_id=?", (job,))


def _drop_annotation_mutants(session: Path, source: str) -> int:
    spans = _annotation_spans(source)
    with sqlite3.connect(session) as db:
        inside = [job for job, row, col in _jobs(db)
                  if any(lo <= (row, col) < hi for lo, hi in spans)]
        _drop(db, inside)
    return len(inside)


def _keep_sample(session: Path, n: int) -> None:
    with sqlite3.connect(session) as db:
        jobs = [job for job, _, _ in _jobs(db)]
        keep = set(random.Random(11).sample(jobs, min(n, len(jobs))))
        _drop(db, [job for job in jobs if job not in keep])


def _keep_first(session: Path, limit: int) -> None:
    with sqlite3.connect(session) as db:
        _drop(db, [job for job, _, _ in _jobs(db)][limit:])


def _annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions of every type annotation: with ``from __future__ import
    annotations`` they are never evaluated, so a mutant inside one is equivalent by construction."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        notes: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            notes.append(node.returns)
            args = node.args
            notes.extend(a.annotation for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])
            notes.extend(a.annotation for a in (args.vararg, args.kwarg) if a is not None)
        elif isinstance(node, ast.AnnAssign):
            notes.append(node.annotation)
        spans.extend(((n.lineno, n.col_offset), (n.end_lineno or n.lineno, n.end_col_offset or 0))
                     for n in notes if n is not None)
    return spans


def _report(name: str, source: str, dump: str, *, skipped: int = 0, sample: int = 0) -> str:
    """Kill rate and survivors from ``cosmic-ray dump`` (one JSON ``[work_item, result]`` a line).

    Survivors inside type annotations are listed apart as equivalent (see _annotation_spans);
    the kill rate is given with and without them.
    """
    text = (ROOT / source).read_text(encoding="utf-8")
    lines = text.split("\n")
    spans = _annotation_spans(text)
    outcomes: dict[str, int] = {}
    survivors: list[str] = []
    in_annotations = 0
    for row in filter(None, dump.split("\n")):
        item, result = json.loads(row)
        outcome = str((result or {}).get("test_outcome") or "not run").lower()
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome != "survived":
            continue
        spec = item["mutations"][0]
        pos = (spec["start_pos"][0], spec["start_pos"][1])
        if any(lo <= pos < hi for lo, hi in spans):
            in_annotations += 1
            continue
        survivors.append(f"{source}:{pos[0]}: {spec['operator_name'].split('/')[-1]} "
                         f"#{spec['occurrence']}: {lines[pos[0] - 1].strip()}")
    killed, survived = outcomes.get("killed", 0), outcomes.get("survived", 0)
    tested = killed + survived
    real = tested - in_annotations
    others = {k: v for k, v in outcomes.items() if k not in ("killed", "survived")}
    scope = f"a sample of {tested}" if sample else f"{tested}"
    head = (f"{name} ({source}): {scope} mutants tested ({skipped} inside type annotations not "
            f"run: equivalent), {killed} killed, {survived} survived: "
            f"{killed / tested if tested else 0:.1%} killed"
            + (f"; {in_annotations} further survivors inside annotations, "
               f"{killed / real if real else 0:.1%} of the other {real}" if in_annotations else "")
            + f"; other outcomes: {others or 'none'}\n")
    return head + "".join(f"  survived: {s}\n" for s in sorted(survivors))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
