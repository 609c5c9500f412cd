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
    python3 dev.py mutate planner --recheck    # only the survivors of mutation/planner.txt,
                                               # against today's tests (after adding some)

Mutants inside type annotations are not run: with ``from __future__ import annotations`` an
annotation is never evaluated, so they are equivalent by construction (counted in the report).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Module → (source file, its focused tests). Each test selection runs in a few seconds: it is run
#: once per mutant.
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    # The grow steps (issue 12: the newest step whole while the budget has room) are tested on
    # real projections in the prompt-density module; its three planner tests take ~3 s.
    "planner": ("holon_ctx/projection/planner.py",
                ("tests/test_planner.py",
                 "tests/test_prompt_density.py::"
                 "test_the_newest_step_is_shown_whole_while_the_budget_has_room",
                 "tests/test_prompt_density.py::"
                 "test_when_the_budget_binds_older_steps_lose_text_first",
                 "tests/test_prompt_density.py::"
                 "test_the_room_a_clipped_trail_leaves_goes_to_the_newest_step")),
    "retention": ("holon_ctx/projection/retention.py",
                  ("tests/test_retention.py", "tests/test_relation_retention.py")),
    "facts": ("holon_ctx/ledger/facts.py", ("tests/test_retention.py",)),
    # A re-run's compact form (the changed lines) is rendered here and specified end to end in
    # test_folding.py (about 5 s more per mutant).
    # The grow's last characters (RFC 0016), the quoted ledger text of a label and the short
    # fence and tool label (RFC 0015) are specified in test_prompt_density.py; the in-output
    # folds of repeated lines in test_repeated_lines.py (each selection about 3 s more).
    "render": ("holon_ctx/projection/render.py",
               ("tests/test_render.py", "tests/test_folding.py", "tests/test_repeated_lines.py",
                "tests/test_prompt_density.py::"
                "test_no_newest_step_is_cut_while_a_token_of_the_budget_is_left",
                "tests/test_prompt_density.py::"
                "test_ledger_text_quoted_on_a_label_is_content_and_its_frame_is_markup",
                "tests/test_prompt_density.py::"
                "test_a_tool_label_says_ok_for_exit_0_and_names_the_ref_once")),
    "folding": ("holon_ctx/projection/folding.py",
                ("tests/test_folding.py", "tests/test_repeated_lines.py")),
    "chains": ("holon_ctx/projection/chains.py", ("tests/test_chains.py",)),
    "builder": ("holon_ctx/memory/builder.py", ("tests/test_episodes_builder.py",)),
    # The adversarial table is the validator's specification (one attack, one decision and
    # primary reason per case): without it most of the checks are run by no focused test.
    "validator": ("holon_ctx/continuity/validator.py",
                  ("tests/continuity/test_continuity_adversarial.py",
                   "tests/continuity/test_continuity_codes.py",
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


def _test_command(tests: tuple[str, ...]) -> str:
    return " ".join([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly",
                     "-p", "no:cacheprovider", *tests])


def _baseline(work: Path, tests: tuple[str, ...]) -> float | None:
    """A timeout for one mutant's tests (four times their time unmutated, at least 40 s), or
    None when they fail unmutated."""
    start = time.monotonic()
    run = subprocess.run(_test_command(tests).split(" "), cwd=work, check=False,
                         capture_output=True)
    return None if run.returncode else max(40.0, 4 * (time.monotonic() - start))


def _config(module: str, tests: tuple[str, ...], timeout: float) -> str:
    return (f'[cosmic-ray]\nmodule-path = "{module}"\ntimeout = {timeout:.1f}\n'
            f'excluded-modules = []\n'
            f'test-command = "{_test_command(tests)}"\n\n[cosmic-ray.distributor]\n'
            f'name = "local"\n')


def _recheck(module: str, source: str, tests: tuple[str, ...]) -> int:
    """Run again the survivors of the last report against today's tests; rewrite the report.

    Tests only ever get added between the two runs, so a mutant killed before is still killed:
    the new rate over the same mutants is exact, for a fraction of a full run's time. A survivor
    is named by operator and occurrence, which only hold for the same source: a survivor whose
    line no longer reads as it did is refused, and the module must be measured afresh.
    """
    path = ROOT / "mutation" / f"{module}.txt"
    head, *rows = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    lines = (ROOT / source).read_text(encoding="utf-8").split("\n")
    survivors = []
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
        survivors.append((row, op, int(nth.lstrip("#"))))
    killed_now: list[str] = []
    with tempfile.TemporaryDirectory(prefix="holon-mutate-") as tmp:
        work = Path(tmp)
        _copy_repo(work)
        timeout = _baseline(work, tests)
        if timeout is None:
            print(f"mutate: the tests of {module} fail without any mutant", file=sys.stderr)
            return 1
        for row, op, occurrence in survivors:
            try:
                out = subprocess.run(
                    [sys.executable, "-m", "cosmic_ray.cli", "mutate-and-test", source,
                     f"core/{op}", str(occurrence), _test_command(tests)],
                    cwd=work, check=True, capture_output=True, text=True, timeout=timeout).stdout
            except subprocess.TimeoutExpired:
                # Counted killed, as cosmic-ray counts a timeout; the worker died before it could
                # undo its change.
                shutil.copy2(ROOT / source, work / source)
                killed_now.append(row)
                continue
            result = json.loads(out)
            removed = [ln[1:].strip() for ln in str(result.get("diff") or "").split("\n")
                       if ln.startswith("-") and not ln.startswith("---")]
            if row.split(": ", 3)[-1] not in removed:
                print(f"mutate: {op} #{occurrence} no longer mutates the reported line; "
                      "measure afresh", file=sys.stderr)
                return 1
            if result.get("test_outcome") == "killed":
                killed_now.append(row)
    left = [row for row, _, _ in survivors if row not in killed_now]
    # Every mutant of the run not listed as a survivor was killed (or is an annotation
    # survivor, which the tool never runs).
    tested = int(re.search(r"(\d+) mutants tested", head)[1])  # type: ignore[index]
    note = (f"after a recheck against the current tests: {tested - len(left)} of the {tested} "
            f"killed, {(tested - len(left)) / tested:.1%} ({len(killed_now)} of the "
            f"{len(survivors)} survivors the report listed are now killed)\n")
    report = head + "\n" + note + "".join(f"{row}\n" for row in left)
    path.write_text(report, encoding="utf-8")
    print(report, end="")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="dev.py mutate", description=__doc__.split("\n")[0])
    parser.add_argument("module", choices=sorted(MODULES))
    parser.add_argument("--limit", type=int, default=0, help="test only the first N mutants")
    parser.add_argument("--sample", type=int, default=0,
                        help="test a seeded random sample of N mutants")
    parser.add_argument("--recheck", action="store_true",
                        help="run again only the survivors listed in mutation/MODULE.txt")
    args = parser.parse_args(argv)
    source, tests = MODULES[args.module]
    if args.recheck:
        return _recheck(args.module, source, tests)
    with tempfile.TemporaryDirectory(prefix="holon-mutate-") as tmp:
        work = Path(tmp)
        _copy_repo(work)
        # The tests must pass on the unmutated copy, or every mutant would count as killed. Their
        # time there sets the timeout: on a loaded machine a fixed one kills sound mutants.
        timeout = _baseline(work, tests)
        if timeout is None:
            print(f"mutate: the tests of {args.module} fail without any mutant", file=sys.stderr)
            return 1
        (work / "cr.toml").write_text(_config(source, tests, timeout), encoding="utf-8")
        cosmic = [sys.executable, "-m", "cosmic_ray.cli"]
        subprocess.run([*cosmic, "init", "cr.toml", "cr.sqlite"], cwd=work, check=True)
        skipped = _drop_annotation_mutants(work / "cr.sqlite", (ROOT / source).read_text())
        if args.limit:
            _keep_first(work / "cr.sqlite", args.limit)
        elif args.sample:
            _keep_sample(work / "cr.sqlite", args.sample)
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
