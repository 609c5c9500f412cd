"""The test map of tools/mutate.py: which tests run each line of the mutated module.

Split from the runner (tools/mutate.py) by concern: this part decides which test modules can
reach a module (``select_test_files``), runs them once under coverage with one context per test
and keeps the result per line (``TestMap``, cached under ``.mutate-cache/``); the runner draws
mutants and runs each against the tests this map names. The repository copies both make
(``_copy_repo``: the work tree plus the two pytest helpers below, ``_env``) are here because the
coverage run is the first to need one.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TypedDict

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".mutate-cache"
#: Report names kept from the hand-kept table this tool replaced (mutation/*.txt, docs/testing.md).
LEGACY_NAMES = {
    "holon_ctx/projection/planning/planner.py": "planner",
    "holon_ctx/projection/planning/retention.py": "retention",
    "holon_ctx/ledger/facts.py": "facts",
    "holon_ctx/projection/rendering/render.py": "render",
    "holon_ctx/projection/rendering/folding.py": "folding",
    "holon_ctx/projection/base/chains.py": "chains",
    "holon_ctx/memory/builder.py": "builder",
    "holon_ctx/continuity/validator.py": "validator",
}


def report_name(source: str) -> str:
    return LEGACY_NAMES.get(source) or source.removeprefix("holon_ctx/").removesuffix(".py") \
        .replace("/", ".")


#: A pytest plugin loaded in the coverage run: each test's outcome and time, by node id.
_TIMES_PLUGIN = '''
import json, os
_times = {}
def pytest_runtest_logreport(report):
    entry = _times.setdefault(report.nodeid, [0.0, True])
    entry[0] += report.duration
    entry[1] = entry[1] and not report.failed and not report.skipped
def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        with open(os.environ["HOLON_MUTATE_TIMES"], "w", encoding="utf-8") as out:
            json.dump(_times, out)
'''
#: Runs the node ids listed in a file (one per line): a command line of thousands of ids, some
#: with brackets and spaces, would not survive cosmic-ray's split of its test command.
_RUNNER = '''
import sys
import pytest
ids = [line for line in open(sys.argv[1], encoding="utf-8").read().split("\\n") if line]
sys.exit(pytest.main(["-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                      "-p", "no:xdist", *ids]))
'''


def _tree_files() -> list[str]:
    """The tracked and untracked (not ignored) files of the repository."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return [n for n in out.split("\n") if n and (ROOT / n).is_file()]


def _copy_repo(dest: Path) -> None:
    for name in _tree_files():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    (dest / "_mutate_times.py").write_text(_TIMES_PLUGIN, encoding="utf-8")
    (dest / "_mutate_run.py").write_text(_RUNNER, encoding="utf-8")


def _env(work: Path) -> dict[str, str]:
    # The work copy's holon_ctx, not the editable install's (which points at ROOT).
    return {**os.environ, "PYTHONPATH": str(work), "HYPOTHESIS_PROFILE": "ci"}


#: Test modules (``test_*.py``) are the unit of the map's reuse; every other file under tests/
#: (helpers, conftest, golden data) can change what any test does, so it is part of the code.
class _Part(TypedDict):
    """One test module's part of a map: its digest, the tests of each line, each test's time."""

    digest: str
    lines: dict[str, list[str]]
    seconds: dict[str, float]


def _is_test_module(name: str) -> bool:
    return name.startswith("tests/") and Path(name).name.startswith("test_") \
        and name.endswith(".py")


def _digest(names: Iterable[str], extra: str = "") -> str:
    digest = hashlib.sha256()
    for name in sorted(names):
        digest.update(name.encode() + b"\0" + (ROOT / name).read_bytes())
    digest.update(extra.encode())
    return digest.hexdigest()[:24]


def _defined_names(text: str) -> set[str]:
    """The names a module defines at its top level (classes, functions, assigned names)."""
    names: set[str] = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


def _mentions(names: Iterable[str]) -> re.Pattern[str]:
    alternatives = "|".join(sorted(map(re.escape, names)))
    return re.compile(rf"\b(?:{alternatives})\b")


def _private_importers(source: str, package: dict[str, str]) -> set[str]:
    """The modules of ``package`` (path → text) that import a private name (``_SessionBase``)
    from ``source``, and transitively those that import a private name from them.

    A private name is the package's own business: no test names it, a test reaches it through the
    module that imports it (a base class split off a facade, ``session_base`` under ``session``).
    Without this, a module split off another by pure moves would have no test selected."""
    found: set[str] = set()
    todo = [source]
    while todo:
        wanted = todo.pop().removesuffix(".py").replace("/", ".")
        for name, text in package.items():
            if name in found or name == source:
                continue
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.ImportFrom) and node.module == wanted and any(
                        a.name.startswith("_") and not a.name.startswith("__")
                        for a in node.names):
                    found.add(name)
                    todo.append(name)
                    break
    return found


def _package_texts() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
            for p in sorted((ROOT / "holon_ctx").rglob("*.py"))}


def select_test_files(source: str, files: dict[str, str],
                      package: dict[str, str] | None = None) -> list[str]:
    """The test modules that can run ``source``: those that mention a name it defines, or a name
    of a module that imports a private name from it (``_private_importers``; ``package`` maps
    the paths of holon_ctx to their text, read from the tree when not given), directly or
    through the tests' helper modules and conftest fixtures that do (transitively).

    ``files`` maps each path under tests/ to its text. A test reaches a module by naming what it
    defines (``SqliteStore``, ``prepare_compaction``), by importing a helper module of tests/ that
    does (``session_helpers``), or by asking for a conftest fixture that does. A test that reaches
    it only through an API of another module without naming anything of it (``open_session`` on a
    ``.db`` path reaches ``SqliteStore``) is left out: the selection can only miss tests, never add
    one that cannot run the module, so a rate measured with it is a lower bound (``--all-tests``
    measures with the whole tier)."""
    package = _package_texts() if package is None else package
    module = source.removesuffix(".py").replace("/", ".")
    names = _defined_names(package.get(source) or (ROOT / source).read_text(encoding="utf-8")) \
        | {module}
    for importer in _private_importers(source, package):
        names |= _defined_names(package[importer]) \
            | {importer.removesuffix(".py").replace("/", ".")}
    helpers = {n: t for n, t in files.items() if not _is_test_module(n) and n.endswith(".py")}
    changed = True
    while changed:  # helpers that mention the names (or a helper that does) pass them on
        changed = False
        pattern = _mentions(names)
        for name, text in helpers.items():
            if Path(name).name == "conftest.py":
                tree = ast.parse(text)
                found = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)
                         and pattern.search(ast.get_source_segment(text, f) or "")}
            else:
                found = {Path(name).stem} if pattern.search(text) else set()
            if found - names:
                names |= found
                changed = True
    pattern = _mentions(names)
    return sorted(n for n, t in files.items() if _is_test_module(n) and pattern.search(t))


def import_time_users(text: str) -> dict[int, set[int]]:
    """For each line the import of a module runs (a def's signature, defaults and decorators; a
    class's attributes; a module's constants), the lines that use what it defines.

    Coverage records those lines under no test's context (the import happens while pytest
    collects), so by themselves they would look run by no test, and a mutant there (a constant
    changed, a default flipped) would survive without a run. A def's header is used by the lines
    of its body; an assigned name by every line that reads it (as a name or an attribute)."""
    tree = ast.parse(text)
    reads: dict[str, set[int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.setdefault(node.id, set()).add(node.lineno)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            reads.setdefault(node.attr, set()).add(node.lineno)
    users: dict[int, set[int]] = {}

    def visit(body: list[ast.stmt]) -> None:
        for stmt in body:
            end = stmt.end_lineno or stmt.lineno
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([stmt.lineno, *(d.lineno for d in stmt.decorator_list)])
                inside = set(range(stmt.body[0].lineno, end + 1))
                for line in range(start, stmt.body[0].lineno):
                    users.setdefault(line, set()).update(inside)
            elif isinstance(stmt, ast.ClassDef):
                # Its decorators and bases (``@attrs.define`` removed): used wherever the
                # class is named (its instances are made there) and by its own body.
                start = min([stmt.lineno, *(d.lineno for d in stmt.decorator_list)])
                used = reads.get(stmt.name, set()) | set(range(stmt.body[0].lineno, end + 1))
                for line in range(start, stmt.body[0].lineno):
                    users.setdefault(line, set()).update(used)
                visit(stmt.body)
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                used = {line for n in names for line in reads.get(n, ())}
                own = set(range(stmt.lineno, end + 1))
                for line in own:
                    users.setdefault(line, set()).update(used - own)

    visit(tree.body)
    return users


class TestMap:
    """For each line of the module, the tests that execute it; for each test, its time (s).

    Built from a coverage run of the test modules that can reach the module (``select_test_files``)
    and cached under ``.mutate-cache/`` per module, keyed by the module's own text,
    pyproject.toml and every file under tests/ that is not a test module. Within that key each
    test module's part is kept with its digest: when only test modules changed, just the changed
    and new ones run under coverage again and replace their part (a test module removed, or no
    longer selected, drops its part). So writing tests costs a coverage run of the file being
    written, not of the tier.

    Another module of holon_ctx changing (a merge of others' work) keeps the map: it can only
    make the map miss a test that now runs a line (that mutant is then run against fewer tests)
    or list one that no longer does (it runs and passes): either way a mutant is killed less
    often, never more, so a rate stays a lower bound. (A change that broke a test would count
    as a kill: measure on a tree whose suite passes.)"""

    def __init__(self, lines: dict[int, list[str]], seconds: dict[str, float],
                 users: dict[int, set[int]] | None = None) -> None:
        self.lines = lines
        self.seconds = seconds
        #: Lines run when the module is imported (outside any test's context) → the lines that
        #: use what they define (``import_time_users``).
        self.users = users or {}

    def tests_for(self, first: int, last: int) -> list[str]:
        wanted: set[int] = set()
        todo = list(range(first, last + 1))
        while todo:  # transitively: a constant used in a signature is used by the body
            line = todo.pop()
            if line not in wanted:
                wanted.add(line)
                todo.extend(self.users.get(line, ()))
        chosen = {t for line in wanted for t in self.lines.get(line, ())}
        return sorted(chosen, key=lambda t: (self.seconds.get(t, 0.0), t))

    @classmethod
    def load_or_measure(cls, work: Path, source: str, *, all_tests: bool = False,
                        jobs: int = 1) -> TestMap:
        return cls.load_or_measure_many(work, [source], all_tests=all_tests, jobs=jobs)[source]

    @classmethod
    def load_or_measure_many(cls, work: Path, sources: list[str], *, all_tests: bool = False,
                             jobs: int = 1) -> dict[str, TestMap]:
        """Each module's map; the test modules any of them needs measured again run in one
        coverage run of all of them (a module split in three costs one run, not three)."""
        tree = _tree_files()
        texts = {n: (ROOT / n).read_text(encoding="utf-8", errors="replace")
                 for n in tree if n.startswith("tests/") and n.endswith(".py")}
        package = _package_texts()
        cached: dict[str, Path] = {}
        parts: dict[str, dict[str, _Part]] = {}
        stale: dict[str, list[str]] = {}
        digests: dict[str, str] = {}
        selections = {s: (sorted(n for n in texts if _is_test_module(n)) if all_tests
                          else select_test_files(s, texts, package)) for s in sources}
        if len(sources) > 1:
            # Siblings mutated as one are reached by one another's tests: a module a sibling
            # imports by public names (replan.py, imported by session_epochs.py) is named by
            # no test, yet every test of the facade runs it. The coverage run measures every
            # module over every file any of them selects anyway; each keeps all of it.
            union = sorted({n for names in selections.values() for n in names})
            selections = dict.fromkeys(sources, union)
        for source in sources:
            # The module's own text (its line numbers), not the rest of holon_ctx: see the
            # class docstring for why another module's change may leave the map as it is.
            code = [n for n in tree if n in ("pyproject.toml", source)
                    or (n.startswith("tests/") and not _is_test_module(n))]
            key = _digest(code, source + ("\0all" if all_tests else ""))
            selected = selections[source]
            digests.update({n: _digest([n]) for n in selected if n not in digests})
            cached[source] = CACHE / f"{report_name(source)}-{key}.json"
            old: dict[str, _Part] = {}
            if cached[source].exists():
                old = json.loads(cached[source].read_text(encoding="utf-8"))["files"]
            parts[source] = {n: p for n, p in old.items()
                             if n in selected and digests.get(n) == p["digest"]}
            stale[source] = [n for n in selected if n not in parts[source]]
            print(f"mutate: {len(selected)} test modules can reach {source}"
                  f"{' (--all-tests)' if all_tests else ''}; {len(selected) - len(stale[source])}"
                  f" from {cached[source].relative_to(ROOT)}, {len(stale[source])} to run under "
                  "coverage", file=sys.stderr, flush=True)
        if any(stale.values()):
            measured = cls.measure(work, sources, stale, digests, jobs)
            CACHE.mkdir(exist_ok=True)
            for source in sources:
                if stale[source]:
                    parts[source].update(measured[source])
                    cached[source].write_text(json.dumps({"files": parts[source]}),
                                              encoding="utf-8")
        maps: dict[str, TestMap] = {}
        for source in sources:
            lines: dict[int, list[str]] = {}
            seconds: dict[str, float] = {}
            for part in parts[source].values():
                for line, tests in part["lines"].items():
                    lines.setdefault(int(line), []).extend(tests)
                seconds.update(part["seconds"])
            maps[source] = cls({k: sorted(v) for k, v in lines.items()}, seconds,
                               import_time_users((ROOT / source).read_text(encoding="utf-8")))
        return maps

    @staticmethod
    def measure(work: Path, sources: list[str], files: dict[str, list[str]],
                digests: dict[str, str], jobs: int) -> dict[str, dict[str, _Part]]:
        """Run the test modules ``files`` lists for each module under coverage of every module,
        once, one context per test: for each module, each of its files' part of the map."""
        import coverage  # noqa: PLC0415 - a dev dependency, only this tool needs it

        run = sorted({n for names in files.values() for n in names})
        env = {**_env(work), "COVERAGE_FILE": str(work / ".coverage"),
               "HOLON_MUTATE_TIMES": str(work / "times.json")}
        started = time.monotonic()
        spread = ["-n", str(jobs), "--dist", "loadfile"] if jobs > 1 else ["-p", "no:xdist"]
        covs = [f"--cov={s.removesuffix('.py').replace('/', '.')}" for s in sources]
        (work / ".coverage").unlink(missing_ok=True)
        done = subprocess.run([sys.executable, "-m", "pytest", *spread,
                               "-p", "no:randomly", "-p", "no:cacheprovider", "-p",
                               "_mutate_times", *covs, "--cov-context=test", "--cov-report=",
                               "-q", *run],
                              cwd=work, env=env, check=False, capture_output=True, text=True)
        times_file = work / "times.json"
        times = json.loads(times_file.read_text(encoding="utf-8")) if times_file.exists() else {}
        passed = {t for t, (_, ok) in times.items() if ok}
        # Exit 1 is a failing test (left out of the map); any other failure, or no test passing,
        # is a run that did not happen (a collection error aborts the whole session): a map made
        # of it would list every line as run by no test and be cached as if measured.
        if done.returncode not in (0, 1) or not passed:
            tail = "\n".join((done.stdout + done.stderr).strip().split("\n")[-12:])
            raise SystemExit(f"mutate: the coverage run of {len(run)} test modules failed "
                             f"(pytest exit {done.returncode}, {len(passed)} tests passed); "
                             f"nothing was cached. Its last lines:\n{tail}")
        data = coverage.CoverageData(basename=str(work / ".coverage"))
        data.read()
        out: dict[str, dict[str, _Part]] = {}
        for source in sources:
            target = next((f for f in data.measured_files() if f.endswith(f"/{source}")), None)
            parts: dict[str, _Part] = {
                n: {"digest": digests[n], "lines": {}, "seconds": {}} for n in files[source]}
            for test, (spent, _) in times.items():
                part = parts.get(test.split("::", 1)[0])
                if part is not None:
                    part["seconds"][test] = spent
            if target is not None:
                for line, contexts in data.contexts_by_lineno(target).items():
                    for test in sorted({c.rsplit("|", 1)[0] for c in contexts if c} & passed):
                        part = parts.get(test.split("::", 1)[0])
                        if part is not None:
                            part["lines"].setdefault(str(line), []).append(test)
            reach = {t for p in parts.values() for ts in p["lines"].values() for t in ts}
            print(f"mutate: {len(reach)} tests run {source}", file=sys.stderr)
            out[source] = parts
        print(f"mutate: coverage of {len(run)} test modules took "
              f"{time.monotonic() - started:.0f} s; {len(passed)} tests passed", file=sys.stderr)
        return out
