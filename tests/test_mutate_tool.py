"""tools/mutate.py: any module by name, each mutant's tests derived from coverage, fresh seeds.

The whole tool (a coverage run of the default tier, cosmic-ray per mutant) takes minutes to hours
and is exercised by ``python3 dev.py mutate``; these tests pin the parts that decide what runs.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutate_under_test", ROOT / "tools/mutate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("given", "path"), [
    ("holon_ctx/projection/planning/planner.py", "holon_ctx/projection/planning/planner.py"),
    ("holon_ctx.projection.planning.planner", "holon_ctx/projection/planning/planner.py"),
    ("planner", "holon_ctx/projection/planning/planner.py"),
    ("projection/session/session", "holon_ctx/projection/session/session.py"),
    ("holon_ctx.session", "holon_ctx/session.py"),
    ("ledger/sqlite.py", "holon_ctx/ledger/sqlite.py"),
])
def test_a_module_is_named_by_path_dotted_name_or_unique_suffix(tool: ModuleType, given: str,
                                                                path: str) -> None:
    """Every module of holon_ctx can be given, not only those of a hand-kept table."""
    assert tool.resolve(given) == path


def test_a_name_several_modules_end_with_is_refused_listing_them(tool: ModuleType) -> None:
    """``session`` ends three paths: the tool names them rather than guessing."""
    with pytest.raises(SystemExit) as caught:
        tool.resolve("session")
    message = str(caught.value)
    assert "holon_ctx/session.py" in message
    assert "holon_ctx/projection/session/session.py" in message


def test_an_unknown_module_is_refused(tool: ModuleType) -> None:
    with pytest.raises(SystemExit, match="no module of holon_ctx matches"):
        tool.resolve("no_such_module")


def test_reports_keep_the_old_short_names_and_name_new_modules_by_path(tool: ModuleType) -> None:
    assert tool.report_name("holon_ctx/projection/planning/planner.py") == "planner"
    assert (tool.report_name("holon_ctx/projection/session/session_state.py")
            == "projection.session.session_state")
    assert tool.report_name("holon_ctx/session.py") == "session"


def test_a_mutant_runs_the_tests_of_every_line_it_changes_fastest_first(tool: ModuleType) -> None:
    """The tests of lines first..last (closed), each once, ordered by their unmutated time."""
    found = tool.TestMap({3: ["t::slow", "t::a"], 4: ["t::fast", "t::a"], 9: ["t::other"]},
                         {"t::slow": 5.0, "t::a": 1.0, "t::fast": 0.1, "t::other": 0.0})
    assert found.tests_for(3, 4) == ["t::fast", "t::a", "t::slow"]
    assert found.tests_for(5, 8) == []
    assert found.tests_for(9, 9) == ["t::other"]


def test_a_mutant_on_a_line_no_test_runs_survives_without_a_run(tool: ModuleType,
                                                              tmp_path: Path) -> None:
    """Nothing is run (and nothing could kill it): the outcome says so."""
    runner = tool.Runner(tmp_path, "holon_ctx/x.py", tool.TestMap({}, {}), jobs=1)
    mutant = tool.Mutant("job", "NumberReplacer", 0, 7, 0, 7)
    assert runner.run(mutant) == ("uncovered", "")


def test_mutants_inside_annotations_are_found_by_position(tool: ModuleType) -> None:
    source = "from __future__ import annotations\ndef f(a: int = 1) -> int | None:\n    return a\n"
    spans = tool._annotation_spans(source)
    inside = tool.Mutant("j", "op", 0, 2, 9, 2)    # `int` of `a: int`
    default = tool.Mutant("j", "op", 0, 2, 15, 2)  # the default value 1
    assert tool._in_annotation(inside, spans)
    assert not tool._in_annotation(default, spans)


def _files(**texts: str) -> dict[str, str]:
    return {f"tests/{name}.py": text for name, text in texts.items()}


def test_the_test_modules_of_a_module_are_those_that_name_what_it_defines(tool: ModuleType) -> None:
    """Directly, through a helper of tests/ (transitively) or through a conftest fixture; a test
    module that names nothing of the module is not run for its mutants."""
    files = _files(
        test_direct="from holon_ctx.ledger.sqlite import SqliteStore\n",
        helper_a="from holon_ctx.ledger import sqlite\nstore = sqlite.SqliteStore(':memory:')\n",
        helper_b="import helper_a\n",
        test_through_helpers="from helper_b import x\n",
        conftest=("import pytest\n@pytest.fixture\ndef sqlite_ledger(tmp_path):\n"
                  "    return SqliteStore(tmp_path / 'x.db')\n"
                  "@pytest.fixture\ndef unrelated():\n    return 1\n"),
        test_fixture="def test_x(sqlite_ledger):\n    pass\n",
        test_other_fixture="def test_y(unrelated):\n    pass\n",
        test_nothing="from holon_ctx.projection.planning.planner import plan\n",
        test_by_dotted_name="import holon_ctx.ledger.sqlite as s\n",
    )
    assert tool.select_test_files("holon_ctx/ledger/sqlite.py", files) == [
        "tests/test_by_dotted_name.py", "tests/test_direct.py", "tests/test_fixture.py",
        "tests/test_through_helpers.py"]


def test_names_are_matched_as_words(tool: ModuleType) -> None:
    """``SqliteStoreish`` is not ``SqliteStore``: a prefix does not select a test module."""
    files = _files(test_prefix="SqliteStoreish = 1\n", test_word="x = SqliteStore\n")
    assert tool.select_test_files("holon_ctx/ledger/sqlite.py", files) == ["tests/test_word.py"]


def test_a_module_whose_private_names_another_imports_is_reached_through_it(
        tool: ModuleType) -> None:
    """A base class split off a facade (``_Base`` in ``base.py``, imported by ``facade.py``, in
    turn imported privately by ``front.py``) is named by no test: the tests naming the modules
    that import its private names reach it (transitively). A public import passes nothing on."""
    package = {
        "holon_ctx/base.py": "class _Base:\n    pass\nclass Public:\n    pass\n",
        "holon_ctx/facade.py": "from holon_ctx.base import _Base\nclass _Facade(_Base):\n    pass\n",
        "holon_ctx/front.py": "from holon_ctx.facade import _Facade\ndef open_front():\n    pass\n",
        "holon_ctx/user.py": "from holon_ctx.base import Public\ndef use():\n    pass\n",
    }
    files = _files(test_front="from holon_ctx.front import open_front\n",
                   test_facade="import holon_ctx.facade\n",
                   test_user="from holon_ctx.user import use\n",
                   test_public="from holon_ctx.base import Public\n")
    assert tool.select_test_files("holon_ctx/base.py", files, package) == [
        "tests/test_facade.py", "tests/test_front.py", "tests/test_public.py"]
    assert tool.select_test_files("holon_ctx/user.py", files, package) == ["tests/test_user.py"]


@pytest.fixture
def fake_repo(tool: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """A repository of one module and three test modules; each coverage run is recorded (the
    files it ran) instead of made."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "holon_ctx").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "holon_ctx/mod.py").write_text("def target():\n    return 1\n")
    (tmp_path / "tests/test_a.py").write_text("from holon_ctx.mod import target\n")
    (tmp_path / "tests/test_b.py").write_text("from holon_ctx.mod import target\n")
    (tmp_path / "tests/test_c.py").write_text("x = 1\n")
    # The runner resolves modules under ROOT; the map (tools/mutate_map.py) reads and caches there.
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    monkeypatch.setattr(tool.mutate_map, "ROOT", tmp_path)
    monkeypatch.setattr(tool.mutate_map, "CACHE", tmp_path / ".mutate-cache")
    runs: list[list[str]] = []

    def measure(work: Path, sources: list[str], files: dict[str, list[str]],
                digests: dict[str, str], jobs: int) -> dict[str, dict[str, object]]:
        runs.append(sorted({f for names in files.values() for f in names}))
        return {source: {f: {"digest": digests[f], "lines": {"2": [f"{f}::test_{len(runs)}"]},
                             "seconds": {f"{f}::test_{len(runs)}": 1.0}} for f in names}
                for source, names in files.items()}

    monkeypatch.setattr(tool.TestMap, "measure", staticmethod(measure))
    return runs


def test_the_map_is_reused_when_only_test_modules_changed(tool: ModuleType, tmp_path: Path,
                                                         fake_repo: list[list[str]]) -> None:
    """Only the changed or new test modules run under coverage again, and their part of the map
    replaces the old one; a module removed drops its part; a change to another module of
    holon_ctx keeps the map (a lower bound, see TestMap); a change to the module measures all."""
    first = tool.TestMap.load_or_measure(tmp_path, "holon_ctx/mod.py")
    assert fake_repo == [["tests/test_a.py", "tests/test_b.py"]]
    assert first.tests_for(2, 2) == ["tests/test_a.py::test_1", "tests/test_b.py::test_1"]

    tool.TestMap.load_or_measure(tmp_path, "holon_ctx/mod.py")
    assert len(fake_repo) == 1  # nothing changed: nothing runs

    (tmp_path / "tests/test_b.py").write_text("from holon_ctx.mod import target  # more\n")
    (tmp_path / "tests/test_d.py").write_text("from holon_ctx.mod import target\n")
    second = tool.TestMap.load_or_measure(tmp_path, "holon_ctx/mod.py")
    assert fake_repo[1:] == [["tests/test_b.py", "tests/test_d.py"]]
    assert second.tests_for(2, 2) == ["tests/test_a.py::test_1", "tests/test_b.py::test_2",
                                      "tests/test_d.py::test_2"]

    (tmp_path / "tests/test_a.py").unlink()
    third = tool.TestMap.load_or_measure(tmp_path, "holon_ctx/mod.py")
    assert len(fake_repo) == 2
    assert third.tests_for(2, 2) == ["tests/test_b.py::test_2", "tests/test_d.py::test_2"]

    (tmp_path / "holon_ctx/other.py").write_text("x = 1\n")  # another module: the map stays
    tool.TestMap.load_or_measure(tmp_path, "holon_ctx/mod.py")
    assert len(fake_repo) == 2

    (tmp_path / "holon_ctx/mod.py").write_text("def target():\n    return 2\n")
    tool.TestMap.load_or_measure(tmp_path, "holon_ctx/mod.py")
    assert fake_repo[2:] == [["tests/test_b.py", "tests/test_d.py"]]


def test_a_helper_change_measures_every_selected_module_again(tool: ModuleType, tmp_path: Path,
                                                             fake_repo: list[list[str]]) -> None:
    """A helper of tests/ can change what any test runs: it is part of the map's key."""
    (tmp_path / "tests/helper.py").write_text("x = 1\n")
    tool.TestMap.load_or_measure(tmp_path, "holon_ctx/mod.py")
    (tmp_path / "tests/helper.py").write_text("x = 2\n")
    tool.TestMap.load_or_measure(tmp_path, "holon_ctx/mod.py")
    assert fake_repo == [["tests/test_a.py", "tests/test_b.py"]] * 2


def test_a_line_run_at_import_runs_the_tests_of_the_lines_that_use_it(tool: ModuleType) -> None:
    """A constant, a def's signature and a class attribute run while pytest collects (no test's
    context): their mutants run the tests of the lines using them, not none."""
    source = ("LIMIT = 3\n"                       # 1
              "def f(a, *, b=LIMIT):\n"           # 2
              "    return a + b\n"                # 3
              "class C:\n"                        # 4
              "    SIZE = 2\n"                    # 5
              "    def g(self):\n"                # 6
              "        return self.SIZE\n"        # 7
              "def h():\n"                        # 8
              "    return 0\n")                   # 9
    users = tool.import_time_users(source)
    assert users[1] == {2}
    assert users[2] == {3}
    assert users[5] == {7}
    assert users[6] == {7}
    found = tool.TestMap({2: [], 3: ["t::f"], 7: ["t::g"], 9: ["t::h"]},
                         {"t::f": 1.0, "t::g": 1.0, "t::h": 1.0}, users)
    assert found.tests_for(2, 2) == ["t::f"]
    assert found.tests_for(5, 5) == ["t::g"]
    assert found.tests_for(1, 1) == ["t::f"]  # through the signature it is a default of
    assert found.tests_for(8, 8) == ["t::h"]


def test_several_modules_share_one_coverage_run(tool: ModuleType, tmp_path: Path,
                                                fake_repo: list[list[str]]) -> None:
    """Modules mutated as one (a module split into siblings) run the test modules any of them
    needs measured in one coverage run; each keeps its own map and its own cache, and each
    map holds every selected module's coverage of it: a sibling named by no test (imported by
    public names from another) is still run by the tests naming the other."""
    (tmp_path / "holon_ctx/sibling.py").write_text("def other():\n    return 1\n")
    (tmp_path / "tests/test_c.py").write_text("from holon_ctx.sibling import other\n")
    maps = tool.TestMap.load_or_measure_many(tmp_path, ["holon_ctx/mod.py",
                                                        "holon_ctx/sibling.py"])
    assert fake_repo == [["tests/test_a.py", "tests/test_b.py", "tests/test_c.py"]]
    every = ["tests/test_a.py::test_1", "tests/test_b.py::test_1", "tests/test_c.py::test_1"]
    assert maps["holon_ctx/mod.py"].tests_for(2, 2) == every
    assert maps["holon_ctx/sibling.py"].tests_for(2, 2) == every
    assert tool.TestMap.load_or_measure(tmp_path, "holon_ctx/sibling.py").tests_for(2, 2) == [
        "tests/test_c.py::test_1"]  # alone, a module's map is its own selection's
    (tmp_path / "tests/test_c.py").write_text("from holon_ctx.sibling import other  # more\n")
    tool.TestMap.load_or_measure(tmp_path, "holon_ctx/mod.py")
    assert len(fake_repo) == 1  # mod.py's map is cached and test_c.py is not one of its tests
    tool.TestMap.load_or_measure_many(tmp_path, ["holon_ctx/mod.py", "holon_ctx/sibling.py"])
    assert fake_repo[1:] == [["tests/test_c.py"]]


def test_a_class_decorator_runs_the_tests_of_the_lines_that_name_the_class(
        tool: ModuleType) -> None:
    """``@attrs.define`` removed breaks every construction of the class: its mutant runs the
    tests of the lines that name the class and of the class's body (before, none: its line runs
    at import only)."""
    source = ("import attrs\n"                   # 1
              "@attrs.define\n"                  # 2
              "class Seg:\n"                     # 3
              "    turn: str\n"                  # 4
              "def make():\n"                    # 5
              "    return Seg(turn='t')\n"       # 6
              "def other():\n"                   # 7
              "    return 1\n")                  # 8
    users = tool.import_time_users(source)
    assert 6 in users[2]
    assert 8 not in users[2]
    found = tool.TestMap({6: ["t::make"], 8: ["t::other"]}, {"t::make": 1.0, "t::other": 1.0},
                         users)
    assert found.tests_for(2, 2) == ["t::make"]


def test_a_coverage_run_that_collects_nothing_is_refused_not_cached(tool: ModuleType,
                                                                    tmp_path: Path) -> None:
    """A test module that fails to import aborts pytest's whole session (exit 2): the run is
    refused with pytest's own lines, not turned into a map where no test runs any line (which
    was cached and reported every mutant as run by no test)."""
    (tmp_path / "holon_ctx").mkdir()
    (tmp_path / "holon_ctx/__init__.py").write_text("")
    (tmp_path / "holon_ctx/mod.py").write_text("def target():\n    return 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_ok.py").write_text(
        "from holon_ctx.mod import target\n\ndef test_target():\n    assert target() == 1\n")
    (tmp_path / "tests/test_broken.py").write_text("from no_such_helper import thing\n")
    (tmp_path / "_mutate_times.py").write_text(tool.mutate_map._TIMES_PLUGIN)
    files = {"holon_ctx/mod.py": ["tests/test_broken.py", "tests/test_ok.py"]}
    digests = {"tests/test_broken.py": "b", "tests/test_ok.py": "o"}
    with pytest.raises(SystemExit, match=r"pytest exit 2, 0 tests passed\); nothing was cached"
                                         r"(.|\n)*no_such_helper"):
        tool.TestMap.measure(tmp_path, ["holon_ctx/mod.py"], files, digests, 1)
    (tmp_path / "tests/test_broken.py").write_text("def test_fails():\n    assert False\n")
    parts = tool.TestMap.measure(tmp_path, ["holon_ctx/mod.py"], files, digests, 1)
    assert parts["holon_ctx/mod.py"]["tests/test_ok.py"]["lines"] == {
        "2": ["tests/test_ok.py::test_target"]}
    assert parts["holon_ctx/mod.py"]["tests/test_broken.py"]["lines"] == {}
