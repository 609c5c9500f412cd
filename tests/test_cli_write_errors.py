"""Write errors are one line, exit 2, and leave no partial file that looks complete (issue 10, item 8).

``-o /dev/full`` and stdout on a full disk used to end in an ``OSError`` traceback. A full disk is
played by ``/dev/full`` and by a file-size limit (``RLIMIT_FSIZE``) in the child process.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from ledger_procs import child_env, ledger_ids

from holon_ctx.cli.main import main

DEMO = resources.files("holon_ctx").joinpath("data/demo.jsonl")
FULL = Path("/dev/full")
needs_full = pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("w") / "demo.db"
    with resources.as_file(DEMO) as src:
        assert main(["import", str(src), "--db", str(path)]) == 0
    return path


def _small_files() -> None:
    # Writes past 100 kB fail with EFBIG (as on a full disk) instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))


def _cli(argv: list[str], stdout: object = subprocess.PIPE,
         limited: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "holon_ctx", *argv], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, env=child_env(), timeout=120,
                          preexec_fn=_small_files if limited else None, check=False)


@needs_full
@pytest.mark.parametrize("argv", [
    ["export", "--db", "{db}"],
    ["project", "--db", "{db}", "--budget", "4000"],
    ["project", "--db", "{db}", "--budget", "4000", "--format", "openai"],
    ["stats", "--db", "{db}"],
    ["preview", "--db", "{db}", "--budget", "4000", "--plain"],
], ids=["export", "project", "project-openai", "stats", "preview"])
def test_stdout_on_a_full_disk_is_one_line(db: Path, argv: list[str]) -> None:
    with FULL.open("w") as full:
        done = _cli([a.replace("{db}", str(db)) for a in argv], stdout=full)
    assert done.returncode == 2
    assert done.stderr == "holon-ctx: error: cannot write the output: No space left on device\n"


@needs_full
def test_export_to_dev_full_is_one_line(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--db", str(db), "-o", str(FULL)]) == 2
    assert capsys.readouterr().err == ("holon-ctx: error: /dev/full: cannot write: No space left "
                                       "on device\n")


@pytest.mark.parametrize("existing", [None, "an older export\n"])
def test_an_export_cut_short_leaves_no_partial_file(db: Path, tmp_path: Path,
                                                    existing: str | None) -> None:
    out = tmp_path / "day.jsonl"
    if existing is not None:
        out.write_text(existing, encoding="utf-8")
    done = _cli(["export", "--db", str(db), "-o", str(out)], limited=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"holon-ctx: error: {out}: cannot write: File too large\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if existing is None else ["day.jsonl"])
    if existing is not None:
        assert out.read_text(encoding="utf-8") == existing


def test_stdout_to_a_file_cut_short_is_one_line(db: Path, tmp_path: Path) -> None:
    with (tmp_path / "out.jsonl").open("w") as out:
        done = _cli(["export", "--db", str(db)], stdout=out, limited=True)
    assert done.returncode == 2
    assert done.stderr == "holon-ctx: error: cannot write the output: File too large\n"


def test_a_complete_export_replaces_the_file_keeping_its_mode(db: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    out = tmp_path / "day.jsonl"
    out.write_text("old\n", encoding="utf-8")
    out.chmod(0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(out)
    assert main(["export", "--db", str(db), "-o", str(link)]) == 0
    assert link.is_symlink()
    assert out.stat().st_mode & 0o777 == 0o640
    with resources.as_file(DEMO) as src:
        assert main(["export", "--db", str(db)]) == 0
        assert capsys.readouterr().out.encode() == out.read_bytes()
        assert len(out.read_bytes()) >= len(src.read_bytes()) // 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["day.jsonl", "link.jsonl"]


def _more(tmp_path: Path, turns: int) -> Path:
    src = tmp_path / "more.jsonl"
    src.write_text("".join(f'{{"v":1,"type":"turn","id":"z{k}","seq":{1000 + k},'
                           f'"trigger":"timer","label":"{"x" * 200}"}}\n' for k in range(turns)),
                   encoding="utf-8")
    return src


@pytest.mark.parametrize("into", ["new", "existing"])
def test_an_import_onto_a_full_disk_is_one_line_and_keeps_nothing(db: Path, tmp_path: Path,
                                                                  into: str) -> None:
    """SQLite rolls back by itself when the disk is full; the import used to then fail on its own
    ROLLBACK ("no transaction is active") with a traceback that hid the cause."""
    target = tmp_path / "l.db"
    if into == "existing":
        target.write_bytes(db.read_bytes())
    before = sorted(p.name for p in tmp_path.iterdir())
    done = _cli(["import", str(_more(tmp_path, 3000)), "--db", str(target)], limited=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"holon-ctx: error: {target}: cannot write: ")
    assert done.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "more.jsonl"])
    if into == "existing":
        assert ledger_ids(target) == ledger_ids(db)
