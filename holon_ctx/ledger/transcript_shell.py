"""Which files a shell command writes: the artifact trail of an imported agent transcript.

Theory of operation. A transcript records commands, not their effects, so the importer reads each
command the way a careful reviewer would and names the files it can *see* being written:

1. :func:`tokenize` splits the command into words and operators the way a POSIX shell would for
   our purpose (quotes, backslashes, comments, ``&&``/``||``/``;``/``|``/newlines, redirections)
   and captures here-document bodies (``<<EOF`` … ``EOF``) beside the command that reads them.
2. Each simple command is matched against a table of writers (:data:`_WRITERS`): ``sed -i``,
   ``perl -i``, ``tee``, ``cp``/``mv``/``install`` destinations, ``touch``, ``truncate``, ``dd of=``,
   ``patch``, ``git apply``/``checkout --``/``restore``, editors, ``sh -c``, and Python run inline
   (``python -c``, ``python - <<EOF``) or from a script whose text this transcript wrote earlier.
   Output redirections (``>``, ``>>``, ``>|``, ``&>``, ``N>``) write their target.
3. Python code is read for ``open(PATH, 'w'|'a'|'x'|…)`` and ``Path(PATH).write_text/bytes``, where
   PATH is a string literal or a name bound to one; patch text for ``+++ b/PATH`` lines.

:class:`ShellTracker` keeps what earlier commands wrote by here-document (script and patch bodies),
so ``cat <<'EOF' > fix.py`` followed by ``python fix.py`` attributes ``fix.py``'s writes to the run.
Paths are reported as written, made relative to the workspace when absolute inside it and joined
to a ``cd`` earlier in the same command. Anything the reading cannot see (a script it never saw,
``find -exec``, variables) is left out rather than guessed.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator
from typing import Final

import attrs

__all__ = ["Command", "ShellTracker", "files_in_patch", "python_writes", "tokenize"]

_OPERATORS: Final = ("&&", "||", ";;", ";", "|&", "|", "&", "(", ")")
_REDIRS: Final = (">>", ">|", ">&", ">", "<<<", "<<-", "<<", "<&", "<>", "<", "&>>", "&>")
_WORD_BREAK: Final = frozenset(" \t\n;&|()<>")
_EDITORS: Final = frozenset({"vi", "vim", "nvim", "nano", "emacs", "ed", "ex", "pico", "micro",
                             "joe", "kak", "hx"})
_PREFIXES: Final = frozenset({"sudo", "time", "nohup", "env", "command", "exec", "builtin",
                              "timeout", "stdbuf", "nice"})
_PYTHON: Final = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?$")
_ASSIGN: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@attrs.frozen
class Command:
    """One simple command: its words, its output targets, and the here-document it reads."""

    words: tuple[str, ...]
    writes: tuple[str, ...] = ()
    stdin_text: str | None = None
    stdin_file: str | None = None


def tokenize(text: str) -> Iterator[Command]:
    """Split a command line into simple commands (see the module docstring)."""
    yield from _Lexer(text).commands()


class _Lexer:
    """The state of one command line's split: the commands so far, the one being read (its
    words, output targets and input), and the here-documents still to read."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.cmds: list[Command] = []
        self.words: list[str] = []
        self.writes: list[str] = []
        self.stdin_file: str | None = None
        self.stdin_text: str | None = None
        self.my_docs: list[tuple[str, bool]] = []  # here-documents the current command reads
        self.queued: list[tuple[int, str, bool]] = []  # (command index, delimiter, strip tabs)
        self.redirect: str | None = None

    def commands(self) -> list[Command]:
        text, n = self.text, len(self.text)
        while self.i < n:
            self.step(text[self.i])
        self.finish()
        _read_heredocs(text, n, self.queued, self.cmds)
        return self.cmds

    def step(self, ch: str) -> None:
        text = self.text
        if ch == "\\" and text.startswith("\\\n", self.i):
            self.i += 2
        elif ch in " \t":
            self.i += 1
        elif ch == "#" and (self.i == 0 or text[self.i - 1] in " \t\n;&|("):
            end = text.find("\n", self.i)
            self.i = len(text) if end < 0 else end
        elif ch == "\n":
            self.finish()
            self.i = _read_heredocs(text, self.i + 1, self.queued, self.cmds)
            self.queued.clear()
        elif (op := next((o for o in _REDIRS if text.startswith(o, self.i)), None)) is not None:
            self.read_redirect(op)
        elif (op := next((o for o in _OPERATORS if text.startswith(o, self.i)), None)) is not None:
            self.finish()
            self.i += len(op)
        else:
            self.read_word()

    def finish(self) -> None:
        if self.words or self.writes or self.my_docs:
            self.cmds.append(Command(words=tuple(self.words), writes=tuple(self.writes),
                                     stdin_text=self.stdin_text, stdin_file=self.stdin_file))
            self.queued.extend((len(self.cmds) - 1, d, s) for d, s in self.my_docs)
        self.words, self.writes, self.my_docs = [], [], []
        self.stdin_file = self.stdin_text = None

    def read_redirect(self, op: str) -> None:
        text, words = self.text, self.words
        # A descriptor prefix (`2>`) was read as a word just before: it is not an argument.
        if words and words[-1].isdigit() and self.i > 0 and text[self.i - 1].isdigit():
            words.pop()
        self.i += len(op)
        if op in (">&", "<&"):
            while self.i < len(text) and (text[self.i].isdigit() or text[self.i] == "-"):
                self.i += 1  # `2>&1`, `>&2`: a descriptor, not a file
        else:
            self.redirect = op

    def read_word(self) -> None:
        word, self.i = _read_word(self.text, self.i)
        op, self.redirect = self.redirect, None
        if op is None:
            self.words.append(word)
        elif op in ("<<", "<<-"):
            self.my_docs.append((word, op == "<<-"))
        elif op == "<<<":
            self.stdin_text = word + "\n"
        elif op == "<":
            self.stdin_file = word
        elif op in (">", ">>", ">|", "&>", "&>>"):
            self.writes.append(word)


def _read_word(text: str, i: int) -> tuple[str, int]:
    """One shell word with quotes removed; ``$(…)`` and backquotes are kept verbatim."""
    out: list[str] = []
    n = len(text)
    while i < n and text[i] not in _WORD_BREAK:
        ch = text[i]
        if ch == "'":
            j = text.find("'", i + 1)
            j = n if j < 0 else j
            out.append(text[i + 1:j])
            i = j + 1
        elif ch == '"':
            j = i + 1
            buf: list[str] = []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`\n':
                    buf.append(text[j + 1])
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            out.append("".join(buf))
            i = j + 1
        elif ch == "\\" and i + 1 < n:
            out.append(text[i + 1])
            i += 2
        elif ch == "$" and text.startswith("$(", i):
            depth, j = 0, i
            while j < n:
                if text[j] == "(":
                    depth += 1
                elif text[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out), i


def _read_heredocs(text: str, i: int, queued: list[tuple[int, str, bool]],
                   cmds: list[Command]) -> int:
    """Consume the bodies of queued here-documents from ``i``; attach each to its command."""
    for idx, delim, strip in queued:
        lines: list[str] = []
        while i < len(text):
            j = text.find("\n", i)
            line = text[i:] if j < 0 else text[i:j]
            i = len(text) if j < 0 else j + 1
            if (line.lstrip("\t") if strip else line) == delim:
                break
            lines.append(line)
        body = "\n".join(lines) + ("\n" if lines else "")
        cmds[idx] = attrs.evolve(cmds[idx], stdin_text=body)
    return i


# -- what a command writes ------------------------------------------------------------------

_OPEN_CALL: Final = re.compile(
    r"""\bopen\(\s*(?P<arg>[^,()]+?)\s*,\s*(?:mode\s*=\s*)?(?P<q>['"])(?P<mode>[rwxabt+]+)(?P=q)""")
_PATH_WRITE: Final = re.compile(
    r"""\bPath\(\s*(?P<arg>[^()]+?)\s*\)\s*\.\s*write_(?:text|bytes)\(""")
_STRING: Final = re.compile(r"""^[rbuRBU]?(['"])(?P<s>[^'"\n]+)\1$""")
_BINDING: Final = r"""^\s*{name}\s*=\s*[rbuRBU]?(['"])(?P<s>[^'"\n]+)\1\s*$"""


def python_writes(code: str) -> list[str]:
    """Paths Python code visibly opens for writing (literal, or a name bound to a literal)."""
    found: list[str] = []

    def resolve(arg: str) -> str | None:
        arg = arg.strip()
        m = _STRING.match(arg)
        if m:
            return m.group("s")
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", arg):
            b = re.search(_BINDING.format(name=re.escape(arg)), code, re.MULTILINE)
            if b:
                return b.group("s")
        return None

    for m in _OPEN_CALL.finditer(code):
        if any(c in m.group("mode") for c in "wax+"):
            path = resolve(m.group("arg"))
            if path:
                found.append(path)
    for m in _PATH_WRITE.finditer(code):
        path = resolve(m.group("arg"))
        if path:
            found.append(path)
    return list(dict.fromkeys(found))


def files_in_patch(text: str) -> list[str]:
    """Target paths of a unified diff (``+++ b/path``; ``/dev/null`` targets are deletions)."""
    out: list[str] = []
    for m in re.finditer(r"^\+\+\+ (\S+)", text, re.MULTILINE):
        path = m.group(1)
        if path == "/dev/null":
            continue
        out.append(path[2:] if path.startswith(("a/", "b/")) else path)
    return list(dict.fromkeys(out))


def _operands(args: list[str], takes_value: frozenset[str] = frozenset()) -> list[str]:
    """Non-option arguments; options in ``takes_value`` consume the next word."""
    out: list[str] = []
    skip = False
    only = False
    for a in args:
        if skip:
            skip = False
            continue
        if only or not a.startswith("-") or a == "-":
            out.append(a)
        elif a == "--":
            only = True
        elif a in takes_value:
            skip = True
    return out


def _sed(args: list[str]) -> list[str]:
    # -i, -i.bak, --in-place[=SUF], or -i combined with other short flags (-ni, -Ei).
    if not any(a.startswith(("-i", "--in-place"))
               or (a.startswith("-") and not a.startswith("--") and "i" in a[1:] and "e" not in a[1:])
               for a in args):
        return []
    has_script_opt = any(a in ("-e", "-f") or a.startswith(("--expression", "--file"))
                         for a in args)
    ops = _operands(args, frozenset({"-e", "-f", "-l"}))
    return ops if has_script_opt else ops[1:]


def _perl(args: list[str]) -> list[str]:
    if not any(a.startswith("-") and not a.startswith("--") and "i" in a for a in args):
        return []
    ops = _operands(args, frozenset({"-e", "-E", "-M", "-I"}))
    has_script_opt = any(a in ("-e", "-E") or (a.startswith("-") and a.endswith("e") and
                                                 not a.startswith("--")) for a in args)
    return ops if has_script_opt else ops[1:]


def _copy_like(args: list[str]) -> list[str]:
    for k, a in enumerate(args):
        if a in ("-t", "--target-directory") and k + 1 < len(args):
            return [args[k + 1]]
        if a.startswith("--target-directory="):
            return [a.split("=", 1)[1]]
    ops = _operands(args, frozenset({"-S", "--suffix", "-m", "-o", "-g"}))
    return ops[-1:] if len(ops) >= 2 else []


def _git(args: list[str], tracker: ShellTracker, cmd: Command) -> list[str]:
    opts = {"-C", "-c", "--git-dir", "--work-tree"}
    k = 0
    while k < len(args) and args[k].startswith("-"):
        k += 2 if args[k] in opts else 1
    if k >= len(args):
        return []
    sub, rest = args[k], args[k + 1:]
    if sub in ("apply", "am"):
        if "--check" in rest or "--stat" in rest:
            return []
        ops = _operands(rest, frozenset({"-p", "--directory", "--exclude", "--include"}))
        if not ops or ops == ["-"]:
            return files_in_patch(tracker.stdin_of(cmd))
        return [f for op in ops for f in files_in_patch(tracker.body_of(op))]
    if sub in ("checkout", "restore") and "--" in rest:
        return rest[rest.index("--") + 1:]
    if sub == "restore":
        return _operands(rest, frozenset({"-s", "--source"}))
    return []


def _patch(args: list[str], tracker: ShellTracker, cmd: Command) -> list[str]:
    if "--dry-run" in args:
        return []
    for k, a in enumerate(args):
        if a in ("-o", "--output") and k + 1 < len(args):
            return [args[k + 1]]
    text = ""
    for k, a in enumerate(args):
        if a in ("-i", "--input") and k + 1 < len(args):
            text = tracker.body_of(args[k + 1])
    ops = _operands(args, frozenset({"-p", "-i", "--input", "-d", "--directory", "-F", "-z", "-B",
                                      "-V", "-Y", "-D", "-g", "-r"}))
    if ops:
        return ops[:1]
    text = text or tracker.stdin_of(cmd)
    return files_in_patch(text)


def _python(args: list[str], tracker: ShellTracker, cmd: Command) -> list[str]:
    k = 0
    while k < len(args):
        a = args[k]
        if a == "-c" and k + 1 < len(args):
            return python_writes(args[k + 1])
        if a == "-m":
            return []
        if a == "-" or not a.startswith("-"):
            break
        k += 1
    if k >= len(args) or args[k] == "-":
        return python_writes(tracker.stdin_of(cmd))
    return python_writes(tracker.body_of(args[k]))


#: Commands whose written files follow from their arguments alone.
_ARG_WRITERS: dict[str, Callable[[list[str]], list[str]]] = {
    "sed": _sed,
    "gsed": _sed,
    "perl": _perl,
    "tee": _operands,
    "cp": _copy_like,
    "mv": _copy_like,
    "install": _copy_like,
    "touch": lambda a: _operands(a, frozenset({"-d", "-r", "-t"})),
    "truncate": lambda a: _operands(a, frozenset({"-s", "-r", "--size", "--reference"})),
    "dd": lambda a: [x[3:] for x in a if x.startswith("of=")],
}
#: Commands that may write what a here-document or an earlier file says (patch text, scripts).
_TEXT_WRITERS: dict[str, Callable[[list[str], ShellTracker, Command], list[str]]] = {
    "patch": _patch,
    "git": _git,
}


def _command_words(words: tuple[str, ...]) -> list[str]:
    """A command's words from the program on: leading assignments (``A=1``) and wrapper
    programs (``sudo``, ``timeout 5``, ``env X=1``) with their options dropped."""
    out = list(words)
    while out and _ASSIGN.match(out[0]):
        out.pop(0)
    while out and out[0] in _PREFIXES:
        out.pop(0)
        while out and (out[0].startswith("-") or _ASSIGN.match(out[0])
                       or out[0].replace(".", "").isdigit()):
            out.pop(0)
    return out


class ShellTracker:
    """Reads commands in order; remembers here-document bodies written to files (see module)."""

    def __init__(self, workspace: str = "") -> None:
        self.workspace = workspace.rstrip("/")
        self._bodies: dict[str, str] = {}

    def body_of(self, path: str) -> str:
        return self._bodies.get(posixpath.normpath(path), "")

    @staticmethod
    def stdin_of(cmd: Command) -> str:
        return cmd.stdin_text or ""

    def files_written(self, command: str) -> list[str]:
        """Files ``command`` writes, in first-mention order, as paths relative to the workspace."""
        out: list[str] = []
        for cwd, cmd, path in self._walk(command, ""):
            norm = self._normalise(path, cwd)
            if norm is not None and norm not in out:
                out.append(norm)
            del cmd
        return out

    def _walk(self, command: str, cwd: str, depth: int = 0) -> Iterator[tuple[str, Command, str]]:
        for cmd in tokenize(command):
            words = _command_words(cmd.words)
            for target in cmd.writes:
                if cmd.stdin_text is not None and words and words[0] == "cat":
                    self._bodies[posixpath.normpath(posixpath.join(cwd, target))] = cmd.stdin_text
                yield cwd, cmd, target
            if not words:
                continue
            name, args = posixpath.basename(words[0]), words[1:]
            if name == "cd":
                cwd = posixpath.join(cwd, args[0]) if args else ""
                continue
            if name in ("sh", "bash", "zsh", "dash") and "-c" in args and depth < 3:
                k = args.index("-c")
                if k + 1 < len(args):
                    yield from self._walk(args[k + 1], cwd, depth + 1)
                continue
            if name == "tee" and cmd.stdin_text is not None:
                for target in _operands(args):
                    self._bodies[posixpath.normpath(posixpath.join(cwd, target))] = cmd.stdin_text
            for path in self._written_by(name, args, cmd):
                yield cwd, cmd, path

    def _written_by(self, name: str, args: list[str], cmd: Command) -> list[str]:
        """The files program ``name`` writes given its arguments (the known writers' rules)."""
        if name in _EDITORS:
            return _operands(args, frozenset({"-c", "-S", "-u", "-i", "--cmd", "-e", "-l"}))
        if _PYTHON.match(name):
            return _python(args, self, cmd)
        if name in _ARG_WRITERS:
            return _ARG_WRITERS[name](args)
        if name in _TEXT_WRITERS:
            return _TEXT_WRITERS[name](args, self, cmd)
        return []

    def _normalise(self, path: str, cwd: str) -> str | None:
        if not path or "$" in path or "`" in path or path.startswith("/dev/") or path == "-":
            return None
        if not path.startswith("/"):
            path = posixpath.join(cwd, path) if cwd else path
        ws = self.workspace
        if ws and path.startswith(ws + "/"):
            path = path[len(ws) + 1:]
        norm = posixpath.normpath(path)
        return None if norm in (".", "") else norm
