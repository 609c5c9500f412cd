"""The wheel and the sdist (issue 27, item 2): what they hold, and that the wheel alone runs.

``python3 dev.py build`` (``python -m build``) makes both. The default tier builds them offline
(``--no-isolation``: the backend comes with the dev tools), checks what is inside — the whole
package, ``py.typed`` and the demo ledger; no tests, benchmarks or dev tools — and runs the demo
and the LangChain integration from the wheel's files alone, with the checkout out of the way. The
slow tier installs the wheel into a clean venv per extra (from PyPI, the only registry reached)
and runs the demo and that extra's integration there, as another project would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "holon_ctx"
LIBRARY_DOC = ROOT / "docs" / "library.md"

#: A chat-model stand-in run with the LangChain integration (the docs' example, shortened).
LANGCHAIN = """
import holon_ctx
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from holon_ctx.integrations.langchain import LedgerHistory

model = FakeMessagesListChatModel(responses=[AIMessage("It is 4 °C in Oslo.")])
history = LedgerHistory(holon_ctx.open_session("lc.db"), budget_tokens=4096)
state = {"messages": [SystemMessage("You report the weather."), HumanMessage("Oslo?")]}
print(model.invoke(history.pre_model_hook(state)["llm_input_messages"]).text)
print(holon_ctx.__file__)
"""


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel and an sdist of this checkout, built offline."""
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
                            str(out), str(ROOT)], capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return out


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("holon_ctx-*.whl")
    return wheel


def test_the_wheel_holds_the_package_and_its_data_only(dist: Path) -> None:
    """Every module of the package, ``py.typed`` and the demo ledger; nothing of the tests,
    benchmarks or dev tools; the console script ``holon-ctx``."""
    names = set(zipfile.ZipFile(_wheel(dist)).namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py")}
    assert modules <= names
    assert {"holon_ctx/py.typed", "holon_ctx/data/demo.jsonl"} <= names
    # The demo story is a dev tool (tools/make_demo_ledger.py): the wheel ships its data only.
    assert not any("demo_ledger" in n for n in names)
    top = {n.split("/")[0] for n in names}
    assert top == {"holon_ctx", next(t for t in top if t.endswith(".dist-info"))}
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    meta = next(n for n in names if n.endswith("entry_points.txt"))
    assert "holon-ctx = holon_ctx.cli.main:main" in zipfile.ZipFile(
        _wheel(dist)).read(meta).decode()


def test_the_sdist_holds_what_builds_the_package_and_no_tests(dist: Path) -> None:
    (sdist,) = dist.glob("holon_ctx-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "holon_ctx/py.typed",
            "holon_ctx/data/demo.jsonl"} <= names
    assert {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py")} <= names
    for dev_only in ("tests/", "bench/", "tools/", "mutation/", ".ci/", "dev.py"):
        assert not any(n.startswith(dev_only) for n in names), dev_only


def test_the_wheels_files_alone_run_the_demo_and_an_integration(dist: Path,
                                                                tmp_path: Path) -> None:
    """Unpacked on its own and put first on the path (the checkout is elsewhere and the working
    directory is empty), the wheel's code builds and previews the demo, and the LangChain
    integration runs over it (langchain-core comes from the test's environment)."""
    target = tmp_path / "site"
    zipfile.ZipFile(_wheel(dist)).extractall(target)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target), "PAGER": "cat"}
    demo = subprocess.run([sys.executable, "-m", "holon_ctx", "demo", "--plain", "--width", "80"],
                          cwd=work, env=env, capture_output=True, text=True, check=False)
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.startswith("holon-ctx preview of turn:t276 at a budget of 8192 tokens")
    assert (work / ".holon" / "demo.db").is_file()
    run = subprocess.run([sys.executable, "-c", LANGCHAIN], cwd=work, env=env,
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    answer, module = run.stdout.splitlines()
    assert answer == "It is 4 °C in Oslo."
    assert Path(module).is_relative_to(target)


# -- the slow tier: a clean venv per extra, as another project installs it ---------------------
def _doc_example(heading: str) -> str:
    """The first python block after ``heading`` in docs/library.md."""
    text = LIBRARY_DOC.read_text(encoding="utf-8")
    at = text.index(heading)
    found = re.search(r"^```python\n(.*?)^```$", text[at:], re.MULTILINE | re.DOTALL)
    assert found is not None
    return "import holon_ctx\n" + found.group(1)


def _postgres_example() -> str:
    url = os.environ.get("HOLON_CTX_TEST_POSTGRES",
                         "postgresql://postgres@127.0.0.1:5432/postgres")
    return textwrap.dedent(f"""
        import os, holon_ctx
        from holon_ctx.postgres import delete_session
        key = f"wheel-test-{{os.getpid()}}"
        try:
            with holon_ctx.open_session({url!r}, session_key=key) as session:
                session.operator_message("Rotate the staging certificates.")
                print(session.next_request(budget_tokens=800).used_tokens > 0)
        finally:
            delete_session({url!r}, key)
    """)


EXTRAS = {
    "": None,
    "openai-agents": "### OpenAI Agents SDK",
    "mini-swe-agent": "### mini-swe-agent",
    "langchain": "### LangChain and LangGraph",
    "postgres": "postgres",
}


@pytest.mark.slow
@pytest.mark.parametrize("extra", list(EXTRAS), ids=[e or "core" for e in EXTRAS])
def test_the_wheel_installs_into_a_clean_venv_with_each_extra(
        extra: str, dist: Path, tmp_path: Path) -> None:
    """``pip install 'holon_ctx-….whl[EXTRA]'`` in a new venv: the demo runs there, and so does
    the extra's integration as docs/library.md shows it (PostgreSQL: a session on the local
    server through ``open_session``); a missing extra is one line naming the wheel's pip
    command."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    requirement = f"{_wheel(dist)}[{extra}]" if extra else str(_wheel(dist))
    install = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check",
                              "-q", requirement], capture_output=True, text=True, check=False)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"PAGER": "cat", "MSWEA_SILENT_STARTUP": "1",
            "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "mswea")}
    demo = subprocess.run([str(env_dir / "bin" / "holon-ctx"), "demo", "--plain"], cwd=work,
                          env=env, capture_output=True, text=True, check=False)
    assert demo.returncode == 0, demo.stderr
    assert "holon-ctx preview of turn:t276" in demo.stdout
    if not extra:
        missing = subprocess.run([str(python), "-c", "import holon_ctx.integrations.langchain"],
                                 cwd=work, env=env, capture_output=True, text=True, check=False)
        last = missing.stderr.strip().splitlines()[-1]
        assert last.endswith(f"pip install '{_wheel(dist)}[langchain]'"), last
        return
    heading = EXTRAS[extra]
    assert heading is not None
    script = _postgres_example() if extra == "postgres" else _doc_example(heading)
    run = subprocess.run([str(python), "-c", script], cwd=work, env=env, capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip()
    # The Agents SDK example disables tracing: nothing tries to reach the tracing service.
    assert "Tracing" not in run.stderr
