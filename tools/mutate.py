"""Mutation-test any module of holon_ctx: ``python3 dev.py mutate MODULE`` (see docs/testing.md).

Each mutant is one small change to the module (an operator swapped, a constant changed, a branch
inverted, …) made by cosmic-ray; the tests that run the mutated line are run against it, and a
mutant none of them fails on *survived*.

How the tests of a mutant are chosen (no hand-kept table): the test modules that can reach the
module (those naming what it defines, directly or through a helper of tests/ or a conftest
fixture; ``--all-tests``: every test module) run under coverage with one context per test
(pytest-cov ``--cov-context=test``), restricted to the module. That gives, for each line of the
module, the tests that execute it, and for each test its time. A mutant runs exactly the tests
that execute the lines it changes, fastest first, stopping at the first failure; a mutant on a
line no test executes survives without a run (listed as "not run by any test"). The map is cached
under ``.mutate-cache/`` per module and per content of the code; when only test modules changed,
only those run under coverage again and replace their part of the map (``TestMap``).

Samples. ``--sample N`` draws N of the module's mutants with a seed that is fresh on every run
(from the operating system) and printed; ``--seed S`` draws the same sample again. A rate a
document reports is measured on a sample whose seed was drawn *after* the tests it credits were
written: the seed is in the report's first line, and docs/testing.md records it.

    python3 dev.py mutate holon_ctx/projection/session/session.py --sample 40
    python3 dev.py mutate session_state --sample 40    # a unique suffix of a module's path
    python3 dev.py mutate planner --limit 20           # the first 20 mutants only (a quick look)
    python3 dev.py mutate planner --recheck            # only the survivors of the last report
    python3 dev.py mutate planner --sample 40 --jobs 2 # two mutants at a time (two copies)

The run happens in copies of the repository, so the working tree is never touched. The report
(kill rate, seed, commit, each survivor with file, line, operator and the line's text) is printed
and written to ``mutation/NAME.txt``, NAME being the module's path under ``holon_ctx`` with dots
(``projection.session.session``; the seven modules measured before this tool keep their short names).

Mutants inside type annotations are not run: with ``from __future__ import annotations`` an
annotation is never evaluated, so they are equivalent by construction (counted in the report).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The test map lives beside this file (tools/ is not a package; run as a script or loaded by path).
sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutate_map  # noqa: E402  (its pytest plugin's text, for the tests)
from mutate_map import (  # noqa: E402
    TestMap,
    _copy_repo,
    _env,
    import_time_users,
    report_name,
    select_test_files,
)

#: What tests/test_mutate_tool.py reads off this module (the map's names included).
__all__ = ["Mutant", "Runner", "TestMap", "import_time_users", "main", "mutate_map",
           "report_name",
           "resolve", "select_test_files"]

#: A mutant's tests get this many times their unmutated time, plus the interpreter's start, and
#: at least the floor: on the loaded shared machine a tight timeout kills sound mutants.
TIMEOUT_FACTOR = 4.0
TIMEOUT_FLOOR_S = 60.0
TIMEOUT_START_S = 20.0


def resolve(name: str) -> str:
    """The module's path from the repository root: a path, a dotted name or a unique suffix."""
    candidates = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "holon_ctx").rglob("*.py"))
    wanted = name.removesuffix(".py").replace(".", "/").strip("/")
    if f"{wanted}.py" in candidates:
        return f"{wanted}.py"
    found = [c for c in candidates if c.removesuffix(".py") == wanted
             or c.removesuffix(".py").endswith(f"/{wanted}")]
    if len(found) == 1:
        return found[0]
    if not found:
        raise SystemExit(f"mutate: no module of holon_ctx matches {name!r}")
    raise SystemExit(f"mutate: {name!r} names several modules: {', '.join(found)}; give more "
                     "of the path")




def _commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "holon_ctx", "tests"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.strip()
    return head + ("+changes" if dirty else "")




class Mutant:
    """One cosmic-ray work item: operator, occurrence and where it changes the source."""

    def __init__(self, job: str, operator: str, occurrence: int, first: int, col: int,
                 last: int, source: str = "") -> None:
        self.job, self.operator, self.occurrence = job, operator, occurrence
        self.first, self.col, self.last = first, col, last
        #: The module it mutates (empty: the runner's only module).
        self.source = source


def _mutants(work: Path, source: str) -> list[Mutant]:
    config = (f'[cosmic-ray]\nmodule-path = "{source}"\ntimeout = 60.0\nexcluded-modules = []\n'
              f'test-command = "true"\n\n[cosmic-ray.distributor]\nname = "local"\n')
    (work / "cr.toml").write_text(config, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "cosmic_ray.cli", "init", "cr.toml", "cr.sqlite"],
                   cwd=work, check=True, env=_env(work))
    with sqlite3.connect(work / "cr.sqlite") as db:
        rows = db.execute("SELECT job_id, operator_name, occurrence, start_pos_row, "
                          "start_pos_col, end_pos_row FROM mutation_specs ORDER BY rowid")
        return [Mutant(job, op.split("/")[-1], occ, r0, c0, r1, source)
                for job, op, occ, r0, c0, r1 in rows]


def _annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions of every type annotation: with ``from __future__ import
    annotations`` they are never evaluated, so a mutant inside one is equivalent by construction."""
    spans: list[tuple[tuple[int, int], tuple[int, int]]] = []
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


def _in_annotation(mutant: Mutant, spans: Iterable[tuple[tuple[int, int], tuple[int, int]]]) -> bool:
    return any(lo <= (mutant.first, mutant.col) < hi for lo, hi in spans)


class Runner:
    """Runs mutants, each in one of ``jobs`` copies of the repository (one mutant per copy at a
    time: cosmic-ray changes the file in place and puts it back)."""

    def __init__(self, base: Path, source: str, tests: TestMap, jobs: int,
                 others: dict[str, TestMap] | None = None) -> None:
        self.source, self.tests = source, tests
        #: Every module's map (a run over several modules: ``others``), by path.
        self.maps = {source: tests, **(others or {})}
        self.copies = [base]
        for n in range(1, jobs):
            extra = base.parent / f"copy{n}"
            shutil.copytree(base, extra, symlinks=True)
            self.copies.append(extra)
        self._free = list(self.copies)
        self._lock = threading.Lock()
        self._serial = 0

    def run(self, mutant: Mutant) -> tuple[str, str]:
        """(outcome, removed line text); outcome is killed, survived or uncovered."""
        source = mutant.source or self.source
        found = self.maps[source]
        tests = found.tests_for(mutant.first, mutant.last)
        if not tests:
            return "uncovered", ""
        with self._lock:
            work = self._free.pop()
            self._serial += 1
            listing = work / f"sel-{self._serial}.txt"
        try:
            listing.write_text("\n".join(tests), encoding="utf-8")
            budget = sum(found.seconds.get(t, 1.0) for t in tests)
            timeout = max(TIMEOUT_FLOOR_S, TIMEOUT_FACTOR * budget + TIMEOUT_START_S)
            command = f"{sys.executable} _mutate_run.py {listing.name}"
            try:
                out = subprocess.run(
                    [sys.executable, "-m", "cosmic_ray.cli", "mutate-and-test", source,
                     f"core/{mutant.operator}", str(mutant.occurrence), command],
                    cwd=work, env=_env(work), check=True, capture_output=True, text=True,
                    timeout=timeout).stdout
            except subprocess.TimeoutExpired:
                # Counted killed, as cosmic-ray counts a timeout; the worker died before it could
                # undo its change.
                shutil.copy2(ROOT / source, work / source)
                return "killed", ""
            result = json.loads(out)
            removed = next((ln[1:].strip() for ln in str(result.get("diff") or "").split("\n")
                            if ln.startswith("-") and not ln.startswith("---")), "")
            outcome = str(result.get("test_outcome") or "").lower()
            return ("killed" if outcome == "killed" else "survived"), removed
        finally:
            listing.unlink(missing_ok=True)
            with self._lock:
                self._free.append(work)


def _survivor_row(source: str, lines: list[str], mutant: Mutant, uncovered: bool) -> str:
    tag = " (not run by any test)" if uncovered else ""
    return (f"  survived: {source}:{mutant.first}: {mutant.operator} #{mutant.occurrence}{tag}: "
            f"{lines[mutant.first - 1].strip()}")


def measure(source: str | list[str], *, sample: int, seed: int | None, limit: int, jobs: int,
            all_tests: bool = False) -> int:
    """Mutate one module, or several as one (a module split into siblings: one coverage run,
    one sample drawn over all their mutants in the order given, one report named by all)."""
    sources = [source] if isinstance(source, str) else list(source)
    name = "+".join(report_name(s) for s in sources)
    commit = _commit()  # the tree the copies are made of (the run may outlast later commits)
    lines = {s: (ROOT / s).read_text(encoding="utf-8").split("\n") for s in sources}
    with tempfile.TemporaryDirectory(prefix="holon-mutate-") as tmp:
        work = Path(tmp) / "copy0"
        work.mkdir()
        _copy_repo(work)
        maps = TestMap.load_or_measure_many(work, sources, all_tests=all_tests, jobs=jobs)
        everything: list[Mutant] = []
        chosen: list[Mutant] = []
        for s in sources:
            mutants = _mutants(work, s)
            spans = _annotation_spans("\n".join(lines[s]))
            everything += mutants
            chosen += [m for m in mutants if not _in_annotation(m, spans)]
        annotations = len(everything) - len(chosen)
        scope = f"all {len(chosen)}"
        if limit:
            chosen, scope = chosen[:limit], f"the first {min(limit, len(chosen))}"
        elif sample:
            seed = secrets.randbelow(2**31) if seed is None else seed
            import random  # noqa: PLC0415

            picked = set(random.Random(seed).sample(range(len(chosen)), min(sample, len(chosen))))
            chosen = [m for i, m in enumerate(chosen) if i in picked]
            scope = f"a sample of {len(chosen)} (seed {seed})"
            print(f"mutate: seed {seed} (give --seed {seed} to draw this sample again)",
                  file=sys.stderr)
        runner = Runner(work, sources[0], maps[sources[0]], jobs, maps)
        outcomes: list[tuple[Mutant, str]] = []
        started = time.monotonic()

        def one(mutant: Mutant) -> tuple[Mutant, str]:
            outcome, _ = runner.run(mutant)
            done = len(outcomes) + 1
            print(f"mutate: {done}/{len(chosen)} {mutant.source}:{mutant.first} "
                  f"{mutant.operator} #{mutant.occurrence}: {outcome} "
                  f"({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
            outcomes.append((mutant, outcome))
            return mutant, outcome

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(one, chosen))
    killed = sum(1 for _, o in results if o == "killed")
    mapped = "the default tier" if all_tests else "the test modules that name the module"
    uncovered = [m for m, o in results if o == "uncovered"]
    survivors = [m for m, o in results if o != "killed"]
    tested = len(results)
    split = "" if len(sources) == 1 else " (" + ", ".join(
        f"{s}: {sum(1 for m, o in results if m.source == s and o == 'killed')} of "
        f"{sum(1 for m, _ in results if m.source == s)}" for s in sources) + ")"
    head = (f"{name} ({', '.join(sources)}): {scope} of {len(everything) - annotations} mutants "
            f"outside type annotations ({annotations} inside not run: equivalent), on {commit}: "
            f"{killed} killed{split}, {len(survivors)} survived ({len(uncovered)} on lines no "
            f"test runs): {killed / tested if tested else 0:.1%} killed; tests: those that run "
            f"the mutated lines (coverage of {mapped})\n")
    order = {s: i for i, s in enumerate(sources)}
    report = head + "".join(
        _survivor_row(m.source, lines[m.source], m, m in uncovered) + "\n"
        for m in sorted(survivors, key=lambda m: (order[m.source], m.first, m.operator,
                                                  m.occurrence)))
    out = ROOT / "mutation" / f"{name}.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text(report, encoding="utf-8")
    print(report, end="")
    return 0


def recheck(source: str, jobs: int, all_tests: bool = False) -> int:
    """Run again the survivors of the last report against today's tests; rewrite the report.

    Tests only ever get added between the two runs, so a mutant killed before is still killed:
    the new rate over the same mutants is exact. A survivor is named by operator and occurrence,
    which only hold for the same source: a survivor whose line no longer reads as it did is
    refused, and the module must be measured afresh."""
    name = report_name(source)
    path = ROOT / "mutation" / f"{name}.txt"
    head, *rows = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    lines = (ROOT / source).read_text(encoding="utf-8").split("\n")
    wanted: list[tuple[str, Mutant]] = []
    for row in rows:
        if not row.startswith("  survived: "):
            continue  # a line a previous recheck added
        where, op, rest = row.removeprefix("  survived: ").split(" ", 2)
        nth, text = rest.split(": ", 1)
        line = int(where.rstrip(":").rsplit(":", 1)[1])
        if lines[line - 1].strip() != text:
            print(f"mutate: {source}:{line} changed since the report; measure afresh",
                  file=sys.stderr)
            return 1
        wanted.append((row, Mutant("", op, int(nth.split()[0].lstrip("#")), line, 0, line)))
    with tempfile.TemporaryDirectory(prefix="holon-mutate-") as tmp:
        work = Path(tmp) / "copy0"
        work.mkdir()
        _copy_repo(work)
        by_key = {(m.operator, m.occurrence): m for m in _mutants(work, source)}
        runner = Runner(work, source, TestMap.load_or_measure(work, source, all_tests=all_tests,
                                                              jobs=jobs), jobs)
        left: list[str] = []
        for _row, mutant in wanted:
            real = by_key.get((mutant.operator, mutant.occurrence))
            if real is None or real.first != mutant.first:
                print(f"mutate: {mutant.operator} #{mutant.occurrence} no longer mutates line "
                      f"{mutant.first}; measure afresh", file=sys.stderr)
                return 1
            outcome, _ = runner.run(real)
            if outcome != "killed":
                left.append(_survivor_row(source, lines, real, outcome == "uncovered"))
    total = re.search(r"(?:a sample of |all |the first )(\d+)", head)
    tested = int(total[1]) if total else len(wanted)
    note = (f"after a recheck against the tests of {_commit()}: {tested - len(left)} of the "
            f"{tested} killed, {(tested - len(left)) / tested:.1%} "
            f"({len(wanted) - len(left)} of the {len(wanted)} survivors the report listed are "
            "now killed)\n")
    report = head + "\n" + note + "".join(f"{row}\n" for row in left)
    path.write_text(report, encoding="utf-8")
    print(report, end="")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="dev.py mutate", description=__doc__.split("\n")[0])
    parser.add_argument("module", nargs="+", help="a module of holon_ctx: path, dotted name or "
                        "unique suffix (planner, projection/session, holon_ctx.session); several "
                        "are mutated as one (one coverage run, one sample over all their mutants)")
    parser.add_argument("--limit", type=int, default=0, help="test only the first N mutants")
    parser.add_argument("--sample", type=int, default=0,
                        help="test a random sample of N mutants (fresh seed, printed)")
    parser.add_argument("--seed", type=int, default=None, help="the sample's seed (reproduce)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at a time (copies)")
    parser.add_argument("--recheck", action="store_true",
                        help="run again only the survivors listed in the module's report")
    parser.add_argument("--all-tests", action="store_true",
                        help="map the mutants' tests from the whole default tier, not only the "
                        "test modules that name the module's names")
    args = parser.parse_args(argv)
    sources = [resolve(m) for m in args.module]
    if args.recheck:
        if len(sources) > 1:
            parser.error("--recheck takes one module")
        return recheck(sources[0], max(1, args.jobs), all_tests=args.all_tests)
    return measure(sources[0] if len(sources) == 1 else sources, sample=args.sample,
                   seed=args.seed, limit=args.limit, jobs=max(1, args.jobs),
                   all_tests=args.all_tests)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
