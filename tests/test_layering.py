"""The layers stay honest: the pure core does no I/O, only the CLI renders, continuity stands alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "holon_ctx"


def _imports(package: str) -> dict[str, set[str]]:
    """Module path → every module it imports (absolute names, relative ones resolved)."""
    found: dict[str, set[str]] = {}
    for path in sorted((PKG / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
        found[str(path.relative_to(PKG.parent))] = names
    return found


@pytest.mark.parametrize("package", ["projection", "memory"])
def test_core_does_no_io_and_no_rendering(package: str) -> None:
    """projection/ and memory/ import neither rich, sqlite3, the SQLite stores nor the CLI."""
    banned = ("rich", "sqlite3", "holon_ctx.cli", "holon_ctx.ledger.sqlite",
              "holon_ctx.ledger.episode_store", "holon_ctx.continuity", "subprocess")
    offenders = {mod: sorted(n for n in names if n.startswith(banned))
                 for mod, names in _imports(package).items()}
    assert {m: n for m, n in offenders.items() if n} == {}


def test_continuity_imports_only_errors_from_holon_ctx() -> None:
    """The envelope validator knows nothing of prompts: it imports holon_ctx.errors only."""
    offenders = {mod: sorted(n for n in names if n.startswith("holon_ctx")
                             and not n.startswith(("holon_ctx.continuity", "holon_ctx.errors")))
                 for mod, names in _imports("continuity").items()}
    assert {m: n for m, n in offenders.items() if n} == {}


def test_only_the_cli_imports_rich() -> None:
    """rich is the shell's concern: no module outside holon_ctx/cli imports it."""
    outside = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] == "cli":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rich"):
                outside[str(rel)] = node.module
            if isinstance(node, ast.Import) and any(a.name.startswith("rich") for a in node.names):
                outside[str(rel)] = "rich"
    assert outside == {}


def test_only_tokens_imports_tiktoken() -> None:
    """tiktoken has one importer, holon_ctx/tokens.py, which makes it work offline."""
    importers = {str(path.relative_to(PKG)) for path in sorted(PKG.rglob("*.py"))
                 if any(m.startswith("tiktoken") for m in _module_imports(path))}
    assert importers == {"tokens.py"}


def _module_imports(path: Path) -> list[str]:
    """Every module name one file imports (``from x import y`` counts as ``x``)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
    return names


#: Third-party packages only the optional integrations may import (pyproject's extras).
INTEGRATION_PACKAGES = ("agents", "minisweagent", "langchain_core", "langchain", "langgraph",
                        "openai", "litellm")


def test_core_imports_no_integration_package() -> None:
    """Outside holon_ctx/integrations nothing imports an optional extra (or the integrations)."""
    offenders = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        bad = [m for m in _module_imports(path) if m.split(".")[0] in INTEGRATION_PACKAGES
               or m.startswith("holon_ctx.integrations")]
        if bad and rel.parts[0] != "integrations":
            offenders[str(rel)] = bad
    assert offenders == {}


def test_the_library_api_loads_no_optional_extra() -> None:
    """Opening a session and asking for a request, in a fresh interpreter, loads none of them."""
    import subprocess
    import sys

    code = (
        "import sys, holon_ctx\n"
        "from holon_ctx.ledger.memory import MemoryStore\n"
        "s = holon_ctx.open_session(MemoryStore())\n"
        "s.operator_message('hi')\n"
        "s.next_request(500)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {INTEGRATION_PACKAGES!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


# -- the full order (issue 24 item 4, RFC 0028) -----------------------------------------------
#: Each top-level module or package of holon_ctx and its layer: a module may import its own layer
#: and the ones below it, never one above. errors/tokens ← continuity ← ledger ← memory ←
#: projection ← session ← integrations/CLI. The PostgreSQL stores sit beside memory: they
#: implement the ledger's, memory's and continuity's stores, and the session opens them.
LAYERS: dict[str, int] = {
    "errors": 0, "tokens": 0, "extras": 0, "models": 0,
    "continuity": 1,
    "ledger": 2,
    "memory": 3, "postgres": 3,
    "projection": 4,
    "calibration": 5, "compaction": 5, "request": 5, "session": 5, "session_args": 5,
    "session_base": 5, "session_events": 5, "session_upkeep": 5, "lowlevel": 5,
    "": 5,  # "" is holon_ctx/__init__.py
    "integrations": 6, "cli": 6, "__main__": 6,
}
#: Imports that go up the order today, each with why it is still there. This list may only
#: shrink: the test fails on a new upward import and on one that is gone but still listed.
KNOWN_UPWARD: dict[tuple[str, str], str] = {
    # The SQLite episode store is memory's store (it stores memory's episodes and postings);
    # it lives in ledger/ beside the SQLite ledger it shares a file with. Moving it into memory/
    # would put sqlite3 into the pure core (test above); its place is a store layer (RFC 0028).
    ("holon_ctx.ledger.episode_store", "holon_ctx.memory.episodes"): "store of memory's episodes",
    ("holon_ctx.ledger.episode_store", "holon_ctx.memory.index"): "store of memory's index",
    ("holon_ctx.ledger.episode_store", "holon_ctx.memory.store"): "store of memory's rows",
    # The episode builder writes a claim's one-line text with the prompt's label helpers
    # (one_line, label_value, code_span, speech from projection/base/formats.py). Episodes themselves
    # cross to the projection as data and are rendered there (projection/rendering/episode_forms.py).
    ("holon_ctx.memory.builder", "holon_ctx.projection.base.formats"): "episode text uses prompt markup",
    # A model profile names its provider's framing rule, which projection/base/framing.py defines
    # (being changed); the rule table belongs with the token counting, in layer 0.
    ("holon_ctx.models", "holon_ctx.projection.base.framing"): "framing rules live in projection",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    top = module.removeprefix("holon_ctx").removeprefix(".").split(".")[0]
    assert top in LAYERS, f"{module}: not in the layer table (add its package to LAYERS)"
    return LAYERS[top]


def _holon_imports() -> list[tuple[str, str]]:
    """(importer, imported) for every import of a holon_ctx module in holon_ctx, type-only and
    function-level imports included: a dependency is one whenever it is written."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        importer = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{importer}: relative import"
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found.extend((importer, n) for n in names if n.split(".")[0] == "holon_ctx")
    return found


def test_every_import_follows_the_layer_order() -> None:
    """No module imports one of a higher layer, except the known list; a fixed exception must
    leave the list (it may only shrink)."""
    upward = {(a, b) for a, b in _holon_imports() if _layer(b) > _layer(a)}
    new = sorted(upward - set(KNOWN_UPWARD))
    gone = sorted(set(KNOWN_UPWARD) - upward)
    assert new == [], f"imports against the layer order (errors ← … ← CLI): {new}"
    assert gone == [], f"no longer imported: remove from KNOWN_UPWARD: {gone}"


def test_the_layer_table_names_every_package() -> None:
    """Every top-level module and package of holon_ctx has a layer."""
    tops = {p.relative_to(PKG).parts[0].removesuffix(".py") for p in PKG.rglob("*.py")}
    assert tops - {"__init__"} <= set(LAYERS)


# -- module size (issue 24 item 5) -------------------------------------------------------------
#: The most lines a module of holon_ctx may have (issue 24, RFC 0028): new code goes into a new
#: module rather than growing a big one.
MAX_MODULE_LINES = 600
#: Modules over the limit today, each with why. This list may only shrink.
KNOWN_LONG: dict[str, str] = {}


def test_no_module_is_over_600_lines() -> None:
    """Every module of holon_ctx has at most 600 lines, but the known list; a module brought under
    the limit must leave the list."""
    sizes = {str(p.relative_to(PKG)): len(p.read_text(encoding="utf-8").splitlines())
             for p in sorted(PKG.rglob("*.py"))}
    long = {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES}
    assert sorted(set(long) - set(KNOWN_LONG)) == [], f"over {MAX_MODULE_LINES} lines: {long}"
    assert sorted(set(KNOWN_LONG) - set(long)) == [], "under the limit now: remove from KNOWN_LONG"


# -- import cycles (issue 24, "Done when") ------------------------------------------------------
#: Import cycles still there, each as its sorted modules, with why. This list may only shrink.
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}


def _import_graph() -> dict[str, set[str]]:
    """Module → the holon_ctx modules it imports, anywhere in it; ``from package import module``
    counts as importing that module (and the package)."""
    modules = {_module_name(path) for path in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for importer, imported in _holon_imports():
        if imported in modules and imported != importer:
            graph[importer].add(imported)
    for path in sorted(PKG.rglob("*.py")):
        importer = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                graph[importer].update(f"{node.module}.{a.name}" for a in node.names
                                       if f"{node.module}.{a.name}" in modules)
    return graph


def _cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[tuple[str, ...]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = [stack.pop()]
            while component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.add(tuple(sorted(component)))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    """A three-module circle and a self-contained pair are found; a chain is not a cycle."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert _cycles(graph) == {("a", "b", "c"), ("d", "e")}


def test_no_import_cycle() -> None:
    """No holon_ctx module imports itself through others (type-only and function-level imports
    count), but the known list; a cycle that is gone must leave the list."""
    cycles = _cycles(_import_graph())
    assert sorted(cycles - set(KNOWN_CYCLES)) == [], "import cycles"
    assert sorted(set(KNOWN_CYCLES) - cycles) == [], "no longer a cycle: remove from KNOWN_CYCLES"


# -- no stage parses rendered prompt text (issue 24 item 3) -----------------------------------
#: Modules that write the prompt's markup and may read it: the markup's definitions, the
#: renderer, the episode forms, and the neutraliser that defuses lookalikes in ledger text.
MARKUP_WRITERS = frozenset({
    "projection/base/formats.py", "projection/rendering/render.py", "projection/rendering/render_base.py",
    "projection/rendering/render_records.py", "projection/rendering/episode_forms.py", "ledger/body.py"})
#: formats.py's readers of rendered text (fence lines, excerpt and repeat notes).
MARKUP_PARSERS = frozenset({"fence_parts", "FENCE_OPEN", "LEGACY_FENCE_OPEN", "EXCERPT_MARK",
                            "REPEAT_MARK"})
#: formats.py's markup constants: matching text against one reads the prompt back.
MARKUP_CONSTANTS = frozenset({"HEADING", "ALERT", "FOLD_PREFIX", "RELATION_PREFIX",
                              "FENCE_CLOSE", "FENCE_TAG", "OPERATOR_LABEL"})
_TEXT_MATCHERS = frozenset({"startswith", "endswith", "find", "rfind", "index", "split",
                            "partition", "rpartition", "match", "search", "fullmatch",
                            "finditer", "findall"})
#: Modules that still read rendered text, each with why; this list may only shrink. (Empty
#: since the renderer records its notes inside bodies as data, Block.notes: the density
#: measure and the shown-lines pass matched them in the text.)
KNOWN_MARKUP_READERS: dict[str, str] = {}
#: Pieces of the prompt's markup a literal that text is matched against may not hold: fences,
#: headings, and the runtime's notes inside bodies (an excerpt's, the repeat notes).
MARKUP_LITERALS = ("<data", "</data", "### ", "tokens omitted", "above ×", "lines as in",
                   "line as in", "operator (trusted) ", "pinned operator words:", "- folded ",
                   "relation: ", "ALERT ")
#: Calls that build a container of their arguments: markup in, markup out.
_CONTAINERS = frozenset({"tuple", "list", "set", "frozenset", "dict", "MappingProxyType"})
#: A literal that is exactly a fence's first character, given to a text matcher:
#: ``head.startswith("<")`` tells a fence line by it (the clipper did). Only there, and only
#: the whole literal: a shell parser's ``op == "<"`` (ledger/transcript_shell.py) is no fence.
_FENCE_FIRST = "<"


def _reads_markup(node: ast.AST, names: frozenset[str] = frozenset()) -> bool:
    """A markup literal (fence, heading, note, label), a markup constant of formats.py, a
    name of the module bound to one (``names``: :func:`_markup_names`), or a tuple, list,
    set, f-string, dict, ``+``, subscript or comprehension holding one, or a container built
    from one (``tuple(…)``, ``MappingProxyType({…})``). What any other call returns is not
    followed: a writer's ``r.line(f"{RELATION_PREFIX}…")`` is a block, not markup to match."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return any(mark in node.value for mark in MARKUP_LITERALS)
    if isinstance(node, ast.Name):
        return node.id in MARKUP_CONSTANTS or node.id in names
    if isinstance(node, ast.Tuple | ast.List | ast.Set | ast.JoinedStr | ast.Dict | ast.BinOp):
        parts = (node.values if isinstance(node, ast.JoinedStr)
                 else [*node.keys, *node.values] if isinstance(node, ast.Dict)
                 else [node.left, node.right] if isinstance(node, ast.BinOp) else node.elts)
        return any(p is not None and _reads_markup(p, names) for p in parts)
    if isinstance(node, ast.FormattedValue | ast.Subscript):
        return _reads_markup(node.value, names)
    if isinstance(node, ast.GeneratorExp | ast.ListComp | ast.SetComp):
        return _reads_markup(node.elt, names)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in _CONTAINERS):
        return any(_reads_markup(a, names) for a in node.args)
    return False


def _markup_names(tree: ast.AST) -> frozenset[str]:
    """Names bound to markup in ``tree``: assigned a value holding a markup literal or constant
    (``_STYLES = ((HEADING, "bold"), …)``), or a loop's target over one (``for prefix, style
    in _STYLES``), to a fixed point. A text matcher given such a name reads markup as surely
    as one given the literal (the preview's styles were matched that way)."""
    names: set[str] = set()
    while True:
        bound = set(names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
            elif isinstance(node, ast.For | ast.comprehension):
                targets, value = [node.target], node.iter
            else:
                continue
            if value is not None and _reads_markup(value, frozenset(names)):
                bound.update(t.id for target in targets for t in ast.walk(target)
                             if isinstance(t, ast.Name))
        if bound == names:
            return frozenset(names)
        names = bound


def _markup_reads(tree: ast.AST) -> set[str]:
    """What in ``tree`` reads rendered text: formats' parsers, or text matched against markup
    (a ``startswith``/``in``/``==``/regex with a fence, heading or label literal or constant,
    or a name bound to one)."""
    found: set[str] = set()
    names = _markup_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in MARKUP_PARSERS:
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in MARKUP_PARSERS:
            found.add(node.attr)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _TEXT_MATCHERS | {"compile"}
              and any(_reads_markup(a, names) or (isinstance(a, ast.Constant)
                                                  and a.value == _FENCE_FIRST)
                      for a in node.args)):
            found.add(f"{node.func.attr}(markup)")
        elif isinstance(node, ast.Compare) and (
                _reads_markup(node.left, names)
                or any(_reads_markup(c, names) for c in node.comparators)):
            found.add("compare(markup)")
    return found


def _markup_readers(root: Path) -> dict[str, list[str]]:
    """Module (relative to ``root``) → how it reads rendered text, for every module under
    ``root`` but the markup's writers."""
    readers = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in MARKUP_WRITERS:
            continue
        found = _markup_reads(ast.parse(path.read_text(encoding="utf-8")))
        if found:
            readers[rel] = sorted(found)
    return readers


def test_no_code_outside_the_renderer_parses_rendered_prompt_text() -> None:
    """Stages read a block's data (kind, trust, refs, notes), never the prompt's text: outside
    the markup's writers, no module matches text against a fence, a heading or a note, nor
    calls formats' parsers, except the known list (which may only shrink)."""
    readers = _markup_readers(PKG)
    assert sorted(set(readers) - set(KNOWN_MARKUP_READERS)) == [], readers
    gone = sorted(set(KNOWN_MARKUP_READERS) - set(readers))
    assert gone == [], f"no longer reads rendered text: remove from KNOWN_MARKUP_READERS: {gone}"


@pytest.mark.parametrize("code", [
    'vouched = "<data" not in text',
    "heading = block.text.startswith(HEADING)",
    "parts = fence_parts(line)",
    'closed = line == "</data>"',
    'm = re.compile(r"^### turn:")',
    # The notes inside bodies, as the density measure, the shown-lines pass and the manifest
    # read them before the renderer recorded them (Block.notes).
    "n = sum(count(m.group(0)) for m in EXCERPT_MARK.finditer(block.body))",
    'gated = block.kind is BlockKind.FENCED and "above ×" in block.body',
    "note = line.startswith('[') and REPEAT_MARK.match(line + '\\n') is not None",
    'parts = re.compile(r"^\\[(?:line|(\\d+) lines) (?:above ×(\\d+)|as in ([^\\s\\]]+))\\]$")',
    'cut = "tokens omitted; full text:" in block.body',
    'folded = line.endswith("lines as in tool:x1]")',
    # The preview's styles by a line's start, through a table of the markup's constants, and
    # the operator's words told by their label; the clipper's fence told by its "<".
    '_S = ((HEADING, "bold"), (ALERT, "bold red"))\n'
    'style = next((s for prefix, s in _S if line.startswith(prefix)), "")',
    '_LABELS = ("operator (trusted) ", "pinned operator words:")\nop = head.startswith(_LABELS)',
    'fence_first = label.startswith("<")',
    'folded = line.startswith("- folded ")',
    'heading = line.startswith(HEADING + "turn:")',
    # The same styles through a table of the prefixes by kind (the preview on main at 60f3824).
    'P = MappingProxyType({"heading": HEADING, "fold": FOLD_PREFIX})\n'
    '_S = tuple((P[kind], style) for kind, style in (("heading", "bold"), ("fold", "dim")))\n'
    'style = next((s for prefix, s in _S if line.startswith(prefix)), "")',
])
def test_the_markup_scan_finds_a_reader(code: str) -> None:
    """Each way the stages parsed rendered text before (issue 24) is caught by the scan."""
    assert _markup_reads(ast.parse(code))


def test_the_markup_scan_passes_a_writer_and_a_data_read() -> None:
    assert not _markup_reads(ast.parse(
        'line = r.line(f"{HEADING}turn:t1")\nfenced = block.kind is BlockKind.FENCED\n'
        "n = sum(count(block.body[n.start:n.end]) for n in block.notes)\n"
        "mark = same_lines_mark(n, ref)"))
    # A writer's block bound to a name is not markup to match; a mark is data; a shell
    # parser's "<" is a redirection, not a fence (ledger/transcript_shell.py).
    assert not _markup_reads(ast.parse(
        'rel = r.line(f"{RELATION_PREFIX}new_task", mark=Mark.RELATION)\n'
        "same = [b for b in blocks if b is not rel]\n"
        'style = _STYLES.get(block.mark, "")\n'
        '_REDIRS = (">>", ">", "<")\nredirect = op == "<" or text.startswith(o)\n'))


def test_a_reader_planted_in_a_stage_fails_the_check(tmp_path: Path) -> None:
    """A copy of holon_ctx with one stage reading a note back from a body (as density.py did)
    is reported, and only that module: the check fails on a new reader."""
    import shutil

    root = tmp_path / "holon_ctx"
    shutil.copytree(PKG, root, ignore=shutil.ignore_patterns("__pycache__"))
    assert _markup_readers(root) == {}
    (root / "projection" / "measure" / "planted.py").write_text(
        "from holon_ctx.projection.base.formats import REPEAT_MARK\n\n\n"
        "def notes(body: str) -> int:\n"
        "    return len(REPEAT_MARK.findall(body)) if 'above ×' in body else 0\n",
        encoding="utf-8")
    readers = _markup_readers(root)
    assert readers == {"projection/measure/planted.py": ["REPEAT_MARK", "compare(markup)"]}
    assert sorted(set(readers) - set(KNOWN_MARKUP_READERS)) == ["projection/measure/planted.py"]


def test_a_prefix_reader_planted_in_the_cli_fails_the_check(tmp_path: Path) -> None:
    """A copy of holon_ctx whose preview styles a line by its start again (as it did before
    blocks had marks: a table of the markup's prefixes, matched in a loop) is reported."""
    import shutil

    root = tmp_path / "holon_ctx"
    shutil.copytree(PKG, root, ignore=shutil.ignore_patterns("__pycache__"))
    preview = root / "cli" / "preview.py"
    preview.write_text(preview.read_text(encoding="utf-8") + (
        "\n\n_PREFIXES = ((\"### \", \"bold\"), (\"relation: \", \"bold blue\"))\n\n\n"
        "def styled(line: str) -> str:\n"
        "    return next((s for prefix, s in _PREFIXES if line.startswith(prefix)), \"\")\n"),
        encoding="utf-8")
    assert _markup_readers(root) == {"cli/preview.py": ["startswith(markup)"]}


# -- the CLI through the public API or its own documented one (issue 24 item 4) --------------
#: The public modules (RFC 0028 decision 2): anyone, the CLI included, may import them.
PUBLIC_MODULES = frozenset({"holon_ctx", "holon_ctx.lowlevel", "holon_ctx.errors",
                            "holon_ctx.continuity", "holon_ctx.postgres"})
#: The CLI's documented way into the internals (holon_ctx/cli/_api.py).
CLI_API = "holon_ctx.cli._api"
#: CLI modules that still import an internal module directly, each with why; this list may
#: only shrink.
KNOWN_CLI_INTERNAL: dict[str, str] = {}


def _cli_reaches(imports: list[tuple[str, str]]) -> dict[str, set[str]]:
    """CLI module → the internal library modules it imports directly (not through the API)."""
    found: dict[str, set[str]] = {}
    for importer, imported in imports:
        if not importer.startswith("holon_ctx.cli") or importer == CLI_API:
            continue
        if imported in PUBLIC_MODULES or imported.startswith("holon_ctx.cli"):
            continue
        found.setdefault(importer, set()).add(imported)
    return found


def test_the_cli_reaches_the_internals_only_through_its_api() -> None:
    """Every holon_ctx/cli module imports library names from the public modules or from
    cli/_api.py, never from an internal module (but the known list, which may only shrink)."""
    found = _cli_reaches(_holon_imports())
    assert sorted(set(found) - set(KNOWN_CLI_INTERNAL)) == [], found
    gone = sorted(set(KNOWN_CLI_INTERNAL) - set(found))
    assert gone == [], f"now through the API: remove from KNOWN_CLI_INTERNAL: {gone}"


def test_the_cli_check_finds_a_direct_import() -> None:
    imports = [("holon_ctx.cli.preview", "holon_ctx.projection.base.items"),
               ("holon_ctx.cli.preview", "holon_ctx.cli._api"),
               ("holon_ctx.cli._api", "holon_ctx.projection.base.items"),
               ("holon_ctx.cli.main", "holon_ctx.errors")]
    assert _cli_reaches(imports) == {"holon_ctx.cli.preview": {"holon_ctx.projection.base.items"}}


def test_the_cli_api_names_resolve_where_it_says() -> None:
    """cli/_api.py's typed imports, its homes table and its ``__all__`` name the same names
    from the same modules, and each name loads from its home."""
    import importlib

    from holon_ctx.cli import _api

    tree = ast.parse((PKG / "cli" / "_api.py").read_text(encoding="utf-8"))
    typed = {a.name: node.module for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom)
             and node.module not in ("holon_ctx", "__future__", "typing")
             for a in node.names}
    homes = dict(_api._HOMES)
    assert typed == homes
    assert sorted(_api.__all__) == sorted(homes)
    for name, home in homes.items():
        assert getattr(_api, name) is getattr(importlib.import_module(home), name), name


#: At most this many names in cli/_api.py (RFC 0028, fifth amendment): 100 on 2026-12-05
#: before the names a user also needs went public (``holon_ctx.lowlevel``) and the steps the CLI
#: stitched became functions of the library's. 40: the episode commands store form counts as a
#: session does (form_counts_maker, RFC 0024 d. 6); 33 since the stores beside a ledger, a
#: file's replayed compaction and the continuity harness became one name each and --from's
#: spelling moved into the CLI; 32 since describe is public (holon_ctx.postgres); 33 for
#: sqlite_file, which tells a SOURCE database from a file without reading its bytes (reading
#: them released the locks of the process's own connections to it). Raise it only with the
#: name's reason.
CLI_API_MAX_NAMES = 33


def test_the_cli_api_stays_short_and_says_why_for_each_name() -> None:
    """cli/_api.py names at most CLI_API_MAX_NAMES names, each under a ``#:`` line saying why
    the CLI needs it."""
    from holon_ctx.cli import _api

    assert len(_api.__all__) <= CLI_API_MAX_NAMES, sorted(_api.__all__)
    assert _unexplained_homes((PKG / "cli" / "_api.py").read_text(encoding="utf-8")) == []


def _unexplained_homes(source: str) -> list[str]:
    """The names in the source's ``_HOMES`` whose entry is not right under a ``#:`` reason."""
    lines = source[source.index("_HOMES = {"):].splitlines()
    body = lines[1:lines.index("}")]
    return [line.split('"')[1] for before, line in zip(["", *body], body, strict=False)
            if line.lstrip().startswith('"') and not before.lstrip().startswith("#: ")]


def test_the_reason_check_finds_a_name_without_one() -> None:
    source = '_HOMES = {\n    #: why\n    "a": "m",\n    # -- group\n    "b": "m",\n    "c": "m",\n}\n'
    assert _unexplained_homes(source) == ["b", "c"]


# -- projection's stages (issue 24 item 5, RFC 0028) ------------------------------------------
#: projection/'s subpackages in pipeline order: a module imports from its own stage and the ones
#: before it, never one after (type-only and function-level imports too).
PROJECTION_STAGES = ("base", "rendering", "planning", "provider_formats", "session", "measure")


def test_projection_is_its_stages_each_importing_only_earlier_ones() -> None:
    """Every module of projection/ sits in a stage (none flat beside them), and no stage imports
    a later one: base ← rendering ← planning ← provider_formats ← session ← measure."""
    root = PKG / "projection"
    assert sorted(p.name for p in root.glob("*.py")) == ["__init__.py"]
    assert {p.name for p in root.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(
        PROJECTION_STAGES)
    order = {name: i for i, name in enumerate(PROJECTION_STAGES)}
    later: dict[str, list[str]] = {}
    for mod, names in _imports("projection").items():
        parts = Path(mod).parts  # holon_ctx/projection/<stage>/<module>.py
        if len(parts) < 4:
            continue
        mine = order[parts[2]]
        for name in sorted(names):
            bits = name.split(".")
            if bits[:2] == ["holon_ctx", "projection"] and len(bits) > 2 and order[bits[2]] > mine:
                later.setdefault(mod, []).append(name)
    assert later == {}
