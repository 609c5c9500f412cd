"""dev.py, the README's entry point: a quiet install and the caller's paths (issue 16).

The install is exercised with a stand-in for the venv's python (a shell script that prints what
pip prints and exits as told), so no test touches the network or a real venv.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from tiers import LONG_FILES

ROOT = Path(__file__).resolve().parents[1]
NOISE = "WARNING: pip noise line"
BANNER = "Please be careful with folders in your working directory"

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the stand-in python is a POSIX script")


@pytest.fixture
def dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """dev.py loaded as a module, its venv pointed at a stand-in under ``tmp_path``."""
    spec = importlib.util.spec_from_file_location("dev_under_test", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    # Prints like pip (both streams, a setuptools banner included); exits with $FAKE_PIP_EXIT.
    python.write_text(f'#!/bin/sh\necho "{NOISE} $*"\necho "{BANNER}" >&2\n'
                      'exit "${FAKE_PIP_EXIT:-0}"\n')
    python.chmod(0o755)
    monkeypatch.setattr(module, "VENV", venv)
    monkeypatch.setattr(module, "PY", python)
    monkeypatch.setattr(module, "STAMP", venv / ".holon-install-stamp")
    monkeypatch.setattr(module, "LOG", venv / "pip.log")
    return module


def test_install_says_what_it_does_and_hides_pip(dev: ModuleType,
                                                 capfd: pytest.CaptureFixture[str]) -> None:
    """A successful install prints two dev.py lines; pip's output (and setuptools' banner) goes
    to the log only."""
    dev.ensure_env()
    out, err = capfd.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("dev.py: pyproject.toml changed: updating holon-ctx")
    assert lines[1].startswith("dev.py: ready in ")
    log = dev.LOG.read_text()
    assert NOISE in log
    assert BANNER in log
    assert dev.STAMP.read_text() == dev._stamp_value()


def test_a_current_install_prints_nothing(dev: ModuleType,
                                          capfd: pytest.CaptureFixture[str]) -> None:
    """With the stamp current, dev.py goes straight to the job."""
    dev.STAMP.write_text(dev._stamp_value())
    dev.ensure_env()
    assert capfd.readouterr() == ("", "")


def test_a_failed_install_shows_the_whole_log(dev: ModuleType, capfd: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """When pip fails, its full output is printed, with the exit status and the log's path."""
    monkeypatch.setenv("FAKE_PIP_EXIT", "3")
    with pytest.raises(SystemExit) as exc:
        dev.ensure_env()
    assert exc.value.code == 3
    err = capfd.readouterr().err
    assert NOISE in err
    assert BANNER in err
    assert f"pip failed (exit status 3); its output is above and in {dev.LOG}" in err
    assert not dev.STAMP.exists()


def test_verbose_streams_pip(dev: ModuleType, capfd: pytest.CaptureFixture[str]) -> None:
    """``dev.py --verbose`` shows pip's output as it comes."""
    dev.ensure_env(verbose=True)
    out, err = capfd.readouterr()
    assert NOISE in out
    assert BANNER in err


def test_from_caller_makes_existing_paths_absolute(tmp_path: Path, dev: ModuleType) -> None:
    """Path arguments that exist where the user is become absolute; options, node ids' test
    names and words that are not paths pass unchanged."""
    (tmp_path / "t.py").write_text("")
    args = ["-k", "x", "t.py", "t.py::test_a", "missing.py", "--lf", "/abs/path"]
    assert dev.from_caller(args, tmp_path) == [
        "-k", "x", str(tmp_path / "t.py"), f"{tmp_path / 't.py'}::test_a", "missing.py", "--lf",
        "/abs/path"]


def test_cli_runs_where_the_user_is(dev: ModuleType, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capfd: pytest.CaptureFixture[str]) -> None:
    """``dev.py cli stats example.jsonl`` from another directory reads that directory's file."""
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "example.jsonl").write_bytes((ROOT / "tests" / "golden" / "small.jsonl").read_bytes())
    monkeypatch.chdir(work)
    monkeypatch.setattr(dev, "PY", Path(sys.executable))
    monkeypatch.setattr(dev, "ensure_env", lambda **_: None)
    code = dev.main(["cli", "stats", "example.jsonl"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "no such file" not in err
    assert "turns" in out


def _venv_argv(dev: ModuleType, monkeypatch: pytest.MonkeyPatch, job: list[str]) -> list[str]:
    """The one command ``dev.py JOB`` runs in the venv (nothing is installed or run)."""
    calls: list[list[str]] = []
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(dev, "ensure_env", lambda **_: None)
    monkeypatch.setattr(dev, "run", lambda argv, _cwd=ROOT: calls.append(argv) or 0)
    assert dev.main(job) == 0
    (argv,) = calls
    return argv


@pytest.mark.parametrize(("args", "whole_directory"), [
    ([], True),
    (["-k", "table"], True),
    (["bench/test_bench_library.py"], False),
    (["bench/test_bench_cache.py::test_the_bill", "--benchmark-json=out.json"], False),
])
def test_bench_runs_only_what_is_named(dev: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                       args: list[str], whole_directory: bool) -> None:
    """``dev.py bench FILE`` runs that file's benchmarks, not the whole directory besides it."""
    argv = _venv_argv(dev, monkeypatch, ["bench", *args])
    assert ("bench" in argv) is whole_directory
    named = [a for a in argv if a.endswith(".py") or ".py::" in a]
    assert len(named) == len([a for a in args if ".py" in a and not a.startswith("-")])


@pytest.mark.parametrize(("args", "parallel"), [
    ([], True),
    (["--slow"], True),
    (["-k", "planner", "-x", "-p", "no:randomly"], True),
    (["tests/test_planner.py"], False),
    (["tests/test_planner.py::test_pinned_first", "-q"], False),
    (["-n", "4"], False),
    (["-n0"], False),
    (["--dist=load"], False),
    (["-p", "no:xdist"], False),
    (["--pdb"], False),
])
def test_the_whole_suite_runs_on_two_processes(dev: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                               args: list[str], parallel: bool) -> None:
    """``dev.py test`` spreads the whole suite over two processes, a file to each; a named file
    or test, the caller's own choice of processes, or a debugger runs in one process as given."""
    argv = _venv_argv(dev, monkeypatch, ["test", *args])
    assert argv[:2] == ["-m", "pytest"]
    if parallel:
        assert argv[2:] == ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder", *args]
    else:
        assert argv[2:] == dev.from_caller(args, ROOT)


def test_the_longest_files_are_collected_first() -> None:
    """The whole suite's order (which ``--no-loadscope-reorder`` keeps): the files of
    tiers.LONG_FILES first, longest first, then files with scaled tests, then the rest; each
    listed file exists (a renamed one would silently start late)."""
    assert all((ROOT / "tests" / name).is_file() for name in LONG_FILES)
    # Named in the reverse order, with a file of scaled tests and a plain one in front.
    named = ["test_dev_script.py", "test_stress.py", LONG_FILES[1], LONG_FILES[0]]
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-p",
                          "no:randomly", *(f"tests/{n}" for n in named)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    files = [line.partition("::")[0].removeprefix("tests/") for line in out.splitlines()
             if "::" in line]
    assert list(dict.fromkeys(files)) == [LONG_FILES[0], LONG_FILES[1], "test_stress.py",
                                          "test_dev_script.py"]


def _pip_calls(dev: ModuleType) -> list[str]:
    """The pip command lines the stand-in python was given (dev.py logs each one)."""
    return [line for line in dev.LOG.read_text().splitlines() if line.startswith("$ ")]


def test_the_demo_installs_the_runtime_dependencies_only(dev: ModuleType,
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    """The main job installs holon-ctx without its dev extras (and without upgrading pip); the
    stamp says so, and the demo's next run installs nothing."""
    dev.ensure_env(level="runtime")
    (install,) = _pip_calls(dev)
    assert install.endswith(f"install -e {dev.ROOT}")
    assert dev.STAMP.read_text() == dev._stamp_value("runtime")
    err = capfd.readouterr().err
    assert "runtime dependencies only" in err
    dev.ensure_env(level="runtime")
    assert capfd.readouterr() == ("", "")


def test_the_tests_add_the_dev_tools_to_a_runtime_install(dev: ModuleType,
                                                          capfd: pytest.CaptureFixture[str]) -> None:
    """After the demo, ``dev.py test`` adds the dev tools to the same venv, and says so; a dev
    install then serves the demo too."""
    dev.STAMP.write_text(dev._stamp_value("runtime"))
    dev.ensure_env(level="dev")
    assert _pip_calls(dev)[-1].endswith(f"install -e {dev.ROOT}[dev]")
    assert "this job needs the dev tools" in capfd.readouterr().err
    assert dev.STAMP.read_text() == dev._stamp_value("dev")
    dev.ensure_env(level="runtime")
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize("stamp", ["dev OLD", "OLD"])
def test_an_update_keeps_the_dev_tools(dev: ModuleType, stamp: str) -> None:
    """When pyproject.toml changed, a venv that had the dev tools gets them again, whichever job
    runs first (a stamp of the digest alone predates the levels and was a dev install)."""
    dev.STAMP.write_text(stamp)
    dev.ensure_env(level="runtime")
    assert _pip_calls(dev)[-1].endswith(f"install -e {dev.ROOT}[dev]")
    assert dev.STAMP.read_text() == dev._stamp_value("dev")


@pytest.mark.parametrize(("job", "level"), [
    ("demo", "runtime"), ("cli", "runtime"), ("test", "dev"), ("lint", "dev"), ("bench", "dev"),
    ("shell", "dev"), ("build", "dev"),
])
def test_each_job_asks_for_its_install_level(dev: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                             job: str, level: str) -> None:
    """Only the demo and the CLI run on the runtime install; tests, lint, benchmarks, scripts
    and the build need the dev tools."""
    asked: list[str] = []
    monkeypatch.setattr(dev, "ensure_env", lambda **kw: asked.append(kw["level"]))
    monkeypatch.setattr(dev, "run", lambda *_a, **_k: 0)
    monkeypatch.setattr(dev, "goldens", lambda: 0)
    dev.main([job])
    assert asked == [level]


def test_goldens_lists_the_requests_that_changed(dev: ModuleType, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """After a rewrite, each request digest file that moved is named with how many of its
    requests changed, which turns first and how their tokens moved; unchanged files are not."""
    import subprocess

    repo = tmp_path / "repo"
    folder = repo / "tests" / "golden" / "requests"
    folder.mkdir(parents=True)
    header = "# turn request_tokens sha256(openai_messages) sha256(anthropic_request)\n"
    (folder / "demo_8192.txt").write_text(header + "t1 100 aa bb\nt2 200 cc dd\nt3 300 ee ff\n")
    (folder / "same_8192.txt").write_text(header + "t1 100 aa bb\n")

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                       check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "goldens")
    (folder / "demo_8192.txt").write_text(header + "t1 100 aa bb\nt2 210 c2 d2\nt3 300 ee f2\n")
    (folder / "added_4096.txt").write_text(header + "t1 100 aa bb\n")
    monkeypatch.setattr(dev, "ROOT", repo)
    assert dev.changed_requests() == [
        "added_4096: new, 1 requests",
        "demo_8192: 2 of 3 requests changed (first: t2, t3); tokens t2 200→210"]
