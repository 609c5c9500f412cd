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
    ("holon_ctx/projection/planner.py", "holon_ctx/projection/planner.py"),
    ("holon_ctx.projection.planner", "holon_ctx/projection/planner.py"),
    ("planner", "holon_ctx/projection/planner.py"),
    ("projection/session", "holon_ctx/projection/session.py"),
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
    assert "holon_ctx/projection/session.py" in message


def test_an_unknown_module_is_refused(tool: ModuleType) -> None:
    with pytest.raises(SystemExit, match="no module of holon_ctx matches"):
        tool.resolve("no_such_module")


def test_reports_keep_the_old_short_names_and_name_new_modules_by_path(tool: ModuleType) -> None:
    assert tool.report_name("holon_ctx/projection/planner.py") == "planner"
    assert tool.report_name("holon_ctx/projection/session_state.py") == "projection.session_state"
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
