#!/usr/bin/env python3
"""One entry point for a fresh machine: ``python3 dev.py [--verbose] JOB [ARGS...]``.

    demo    build the bundled demo ledger and preview it (arguments go to ``holon-ctx demo``)
    test    the default test run (arguments go to pytest); ``test --slow`` runs the slow tier
            (docs/testing.md); the whole suite runs on two processes (pytest-xdist)
    lint    ruff check and mypy --strict
    bench   the benchmarks in bench/ (arguments go to pytest)
    goldens regenerate the golden files in tests/golden and show the diff to review (the tests
            only ever compare against them)
    mutate  mutation-test any module, e.g. ``python3 dev.py mutate planner --sample 40`` (docs/testing.md)
    cli     any holon-ctx command, e.g. ``python3 dev.py cli stats FILE.jsonl``
    shell   the venv's python with the given arguments
    build   a wheel and an sdist of holon-ctx into dist/ (``python -m build``; README: "Install it
            into another project")

``--verbose`` (or ``-v``), before the job, shows pip's whole output while installing; otherwise
the install says what it does in two lines and its log goes to ``.venv/pip.log`` (printed in full
if it fails).

Paths are the caller's: ``demo``, ``cli`` and ``shell`` run in the directory you ran dev.py from;
``test``, ``lint`` and ``bench`` run at the repository root, with path arguments that exist where
you are passed on as absolute paths.

Why a script rather than make or tox: the README promises commands that work with nothing but
``python3``. This file creates (or reuses) ``.venv``, installs what the job needs when
``pyproject.toml`` changed since the last install (or the job needs more than is installed), then
runs the requested job inside the venv.

Two install levels (RFC 0021): ``demo`` and ``cli`` need holon-ctx with its runtime dependencies
only (about 50 MB); every other job also needs the dev tools (pytest, hypothesis, ruff, mypy, the
integrations' extras: about 1 GB), which are added to the same ``.venv`` the first time such a job
runs. The stamp records the level and the ``pyproject.toml`` it was made from.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
STAMP = VENV / ".holon-install-stamp"
LOG = VENV / "pip.log"
JOBS = ("demo", "test", "lint", "bench", "shell", "cli", "goldens", "mutate", "build")
#: Jobs that need only holon-ctx and its runtime dependencies; the others need the dev tools.
RUNTIME_JOBS = frozenset({"demo", "cli"})
#: What each install level puts into the venv: the project alone, or with its dev extras.
LEVELS = {"runtime": "", "dev": "[dev]"}
#: Processes for a whole-suite run: the project's machine has two cores (docs/testing.md).
TEST_WORKERS = "2"
#: Arguments after which the caller has chosen how pytest runs (or that need one process).
_SERIAL_CHOICES = ("-n", "--numprocesses", "--dist", "--pdb", "--trace", "no:xdist", "-pno:xdist")
#: Test modules that write golden files when HOLON_CTX_WRITE_GOLDEN=1 (see goldens()).
GOLDEN_TESTS = ("tests/test_cli_preview_golden.py", "tests/test_cli_preview_widths.py",
                "tests/test_golden_requests.py")
#: Of those, the ones with golden cases in the slow tier too (written by a second, --slow run).
GOLDEN_SLOW_TESTS = ("tests/test_golden_requests.py",)
#: The request digests (tests/test_golden_requests.py): one line per request, ``TURN TOKENS ...``.
GOLDEN_REQUESTS = "tests/golden/requests"


def _stamp_value(level: str = "dev") -> str:
    """What STAMP holds after an install at ``level``: the level and pyproject.toml's digest."""
    return f"{level} {hashlib.sha256((ROOT / 'pyproject.toml').read_bytes()).hexdigest()}"


def _installed() -> tuple[str, str] | None:
    """``(level, digest)`` of the venv's last install, or None when there is none."""
    if not PY.exists() or not STAMP.exists():
        return None
    level, _, digest = STAMP.read_text().strip().rpartition(" ")
    # A stamp of the digest alone was written before the levels existed, by a dev install.
    return level or "dev", digest


def _say(text: str) -> None:
    print(f"dev.py: {text}", file=sys.stderr, flush=True)


def _pip(args: list[str], *, verbose: bool) -> None:
    """Run pip in the venv: streamed when verbose, else into LOG, which is shown if pip fails."""
    command = [str(PY), "-m", "pip", "--disable-pip-version-check", *args]
    if verbose:
        subprocess.run(command, check=True)
        return
    with LOG.open("a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    if code:
        sys.stderr.write(LOG.read_text(encoding="utf-8", errors="replace"))
        _say(f"pip failed (exit status {code}); its output is above and in {LOG}")
        raise SystemExit(code)


def ensure_env(*, verbose: bool = False, level: str = "dev") -> None:
    """Create the venv and install the project at ``level`` (``runtime``: its dependencies only;
    ``dev``: with the dev tools) unless the install stamp says that much is current."""
    installed = _installed()
    if installed is not None and installed[0] == "dev":
        level = "dev"  # an update keeps the dev tools a venv already has
    if installed is not None and installed == tuple(_stamp_value(level).split(" ")):
        return
    fresh = not PY.exists()
    started = time.monotonic()
    what = ("holon-ctx with its runtime dependencies only (`dev.py test` adds the dev tools)"
            if level == "runtime" else "holon-ctx with its dev tools")
    if fresh:
        head = f"first run: creating .venv and installing {what}"
    elif installed is not None and installed[1] == _stamp_value(level).split(" ")[1]:
        head = "this job needs the dev tools: adding them to .venv"
    else:
        head = f"pyproject.toml changed: updating {what} in .venv"
    _say(head + ("" if verbose else "; pip's log: .venv/pip.log"))
    if fresh:
        try:
            venv.EnvBuilder(with_pip=True).create(VENV)
        except subprocess.CalledProcessError as exc:
            _say(f"could not create .venv ({exc}); on Debian/Ubuntu install python3-venv")
            raise SystemExit(1) from None
    LOG.write_text("", encoding="utf-8")
    if level == "dev":
        # The dev tools' wheels want a recent pip; the runtime install does not, and skipping the
        # upgrade keeps the demo's first run short (the bundled pip installs it fine).
        _pip(["install", "--upgrade", "pip"], verbose=verbose)
    _pip(["install", "-e", f"{ROOT}{LEVELS[level]}"], verbose=verbose)
    STAMP.write_text(_stamp_value(level))
    _say(f"ready in {time.monotonic() - started:.0f} s")


def from_caller(args: list[str], cwd: Path) -> list[str]:
    """``args`` with each one that names an existing path relative to ``cwd`` made absolute
    (a pytest node id ``FILE::TEST`` counts by its file), so a job run at ROOT finds it."""
    out: list[str] = []
    for arg in args:
        head, sep, tail = arg.partition("::")
        path = cwd / head
        if not arg.startswith("-") and head and not Path(head).is_absolute() and path.exists():
            arg = f"{path.resolve()}{sep}{tail}"
        out.append(arg)
    return out


def test_args(args: list[str]) -> list[str]:
    """pytest's arguments for ``dev.py test ARGS``: the whole suite (no file or node id named) runs
    on TEST_WORKERS processes, each test file whole on one of them (module fixtures are built
    once, and a module's report of its examples sees all of them), the longest files started
    first; a named file or test runs in
    this process, as does any run where the caller chose (``-n``, ``--dist``, ``-p no:xdist``) or
    debugs (``--pdb``, ``--trace``)."""
    named = any(not a.startswith("-") and Path(a.partition("::")[0]).exists() for a in args)
    chose = any(a.split("=")[0] in _SERIAL_CHOICES or (a.startswith("-n") and a[2:3].isdigit())
                for a in args)
    if named or chose:
        return args
    # In the order collected: tests/conftest.py puts the longest files first (tests/tiers.py).
    return ["-n", TEST_WORKERS, "--dist", "loadfile", "--no-loadscope-reorder", *args]


def run(args: list[str], cwd: Path = ROOT) -> int:
    return subprocess.run([str(PY), *args], cwd=cwd, check=False).returncode


def goldens() -> int:
    """Rewrite every golden file from the current code (both tiers' cases), then show what
    changed: the text goldens as a diff, the request digests as a list of changed requests."""
    env = {**os.environ, "HOLON_CTX_WRITE_GOLDEN": "1"}
    (ROOT / GOLDEN_REQUESTS).mkdir(parents=True, exist_ok=True)
    base = [str(PY), "-m", "pytest", "-q", "-p", "no:randomly"]
    for args in ([*GOLDEN_TESTS], ["--slow", *GOLDEN_SLOW_TESTS]):
        code = subprocess.run([*base, *args], cwd=ROOT, env=env, check=False).returncode
        if code:
            _say("writing the golden files failed; nothing to review")
            return code
    subprocess.run(["git", "status", "--short", "--", "tests/golden"], cwd=ROOT, check=False)
    subprocess.run(["git", "--no-pager", "diff", "--", "tests/golden", f":!{GOLDEN_REQUESTS}/*.txt"],
                   cwd=ROOT, check=False)
    for line in changed_requests():
        print(line)
    _say("golden files rewritten: review the diff above, then commit it or `git checkout "
         "tests/golden` to undo")
    return 0


def _digests(text: str) -> dict[str, tuple[str, str]]:
    """A request digest file as turn → (request tokens, digests)."""
    rows = (line.split(" ", 2) for line in text.splitlines() if line and not line.startswith("#"))
    return {row[0]: (row[1], row[2]) for row in rows if len(row) == 3}


def changed_requests() -> list[str]:
    """One line per request digest file that differs from the last commit: how many of its
    requests changed, the first few turns, and how their tokens moved (a digest alone says
    nothing a reviewer can read; ``git diff`` of the JSON files kept whole says the rest)."""
    listed = subprocess.run(["git", "ls-files", "--modified", "--others", "--exclude-standard",
                             "--", f"{GOLDEN_REQUESTS}/*.txt"], cwd=ROOT, capture_output=True,
                            text=True, check=False).stdout.split()
    out = []
    for rel in sorted(listed):
        shown = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=ROOT, capture_output=True,
                               text=True, check=False)
        if shown.returncode:
            out.append(f"{Path(rel).stem}: new, {len(_digests((ROOT / rel).read_text()))} requests")
            continue
        old_text = shown.stdout
        old, new = _digests(old_text), _digests((ROOT / rel).read_text(encoding="utf-8"))
        changed = [t for t in new if old.get(t) != new[t]]
        gone = [t for t in old if t not in new]
        moved = ", ".join(f"{t} {old[t][0]}→{new[t][0]}" for t in changed[:5]
                          if t in old and old[t][0] != new[t][0])
        out.append(f"{Path(rel).stem}: {len(changed)} of {len(new)} requests changed"
                   + (f" (first: {', '.join(changed[:5])})" if changed else "")
                   + (f"; tokens {moved}" if moved else "")
                   + (f"; {len(gone)} no longer made" if gone else ""))
    return out


def main(argv: list[str]) -> int:
    verbose = bool(argv) and argv[0] in ("-v", "--verbose")
    argv = argv[1:] if verbose else argv
    job = argv[0] if argv else "help"
    rest = argv[1:]
    if job not in JOBS:
        print(__doc__)
        return 0 if job in {"help", "-h", "--help"} else 2
    ensure_env(verbose=verbose, level="runtime" if job in RUNTIME_JOBS else "dev")
    here = Path.cwd()
    if job == "demo":
        return run(["-m", "holon_ctx", "demo", *rest], here)
    if job == "cli":
        return run(["-m", "holon_ctx", *rest], here)
    if job == "shell":
        return run(rest, here)
    if job == "test":
        return run(["-m", "pytest", *test_args(from_caller(rest, here))])
    if job == "lint":
        code = run(["-m", "ruff", "check", "."])
        return code or run(["-m", "mypy", "--strict", "holon_ctx"])
    if job == "goldens":
        return goldens()
    if job == "mutate":
        return run(["tools/mutate.py", *rest])
    if job == "build":
        return run(["-m", "build", "--outdir", str(ROOT / "dist"), *rest, str(ROOT)])
    # bench: the whole directory unless the caller names what to run (a file or a node id);
    # naming both would make pytest collect every benchmark anyway.
    chosen = from_caller(rest, here)
    named = any(not a.startswith("-") and Path(a.partition("::")[0]).exists() for a in chosen)
    return run(["-m", "pytest", *([] if named else ["bench"]), "--benchmark-only",
                "-p", "no:randomly", *chosen])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
