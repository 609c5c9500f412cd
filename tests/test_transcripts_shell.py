"""Which files a shell command writes (holon_ctx.ledger.transcript_shell): a table of commands."""

from __future__ import annotations

import pytest

from holon_ctx.ledger.transcript_shell import ShellTracker, files_in_patch, python_writes, tokenize

#: (command, files written): the forms agents use, taken from real trajectories where possible.
WRITES: list[tuple[str, list[str]]] = [
    ("sed -i 's/FILE_UPLOAD_PERMISSIONS = None/FILE_UPLOAD_PERMISSIONS = 0o644/' "
     "django/conf/global_settings.py", ["django/conf/global_settings.py"]),
    ("sed -i.bak -e 's/a/b/' -e 's/c/d/' a.py b.py", ["a.py", "b.py"]),
    ("sed -i '222a\\    print(1)' lib/pyplot.py && \\\nsed -i '223d' lib/pyplot.py",
     ["lib/pyplot.py"]),
    ("sed -n '10,20p' x.py", []),
    ("nl -ba x.py | sed -n '10,20p'", []),
    ("cat <<'EOF' > reproduce_issue.py\nimport os\nprint(1)\nEOF", ["reproduce_issue.py"]),
    ("cat > /testbed/notes.txt << EOF\nhi\nEOF", ["notes.txt"]),
    ("cat <<-EOF >> log.md\n\tline\n\tEOF", ["log.md"]),
    ("echo hi >> notes.md && cd sub && echo x > y.txt 2>/dev/null", ["notes.md", "sub/y.txt"]),
    ("ls 2>&1 | tee -a run.log", ["run.log"]),
    ("python3 - <<'EOF'\nfile_path = 'lib/a.py'\nwith open(file_path, 'w') as f:\n"
     "    f.write('x')\nEOF", ["lib/a.py"]),
    ("python -c \"open('z.txt', 'a').write('1')\"", ["z.txt"]),
    ("python3 -c \"from pathlib import Path; Path('p.txt').write_text('x')\"", ["p.txt"]),
    ("python -c \"print(open('r.txt').read())\"", []),
    ("git apply <<'EOF'\n--- a/src/m.py\n+++ b/src/m.py\n@@ -1 +1 @@\n-a\n+b\nEOF", ["src/m.py"]),
    ("patch -p1 <<'EOF'\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\nEOF", ["x.py"]),
    ("patch src/y.py fix.diff", ["src/y.py"]),
    ("git checkout -- a.py b.py && git diff", ["a.py", "b.py"]),
    ("cp a.py b.py; mv c.txt archive/", ["b.py", "archive"]),
    ("mkdir testapp && touch testapp/__init__.py", ["testapp/__init__.py"]),
    ("perl -pi -e 's/foo/bar/' lib/x.pm", ["lib/x.pm"]),
    ("vim -c ':wq' setup.cfg", ["setup.cfg"]),
    ("bash -c 'echo 1 > q.txt'", ["q.txt"]),
    ("dd if=/dev/zero of=blob.bin bs=1 count=1", ["blob.bin"]),
    ("grep -rn 'def symbols' sympy | head -20", []),
    ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", []),
    ("cat $OUT > \"$(mktemp)\"", []),
    ("# cat > not_run.txt\nls", []),
]


@pytest.mark.parametrize(("command", "expected"), WRITES, ids=[c[:40] for c, _ in WRITES])
def test_files_written_by_a_command(command: str, expected: list[str]) -> None:
    """Each command names exactly the files it visibly writes, relative to the workspace."""
    assert ShellTracker("/testbed").files_written(command) == expected


def test_a_script_written_earlier_is_read_when_it_runs() -> None:
    """`cat <<EOF > fix.py` then `python3 fix.py` attributes fix.py's writes to the run."""
    tracker = ShellTracker("/testbed")
    script = ("cat <<'EOF' > update_fix.py\nfile_path = 'sphinx/ext/inheritance_diagram.py'\n"
              "with open(file_path, 'r') as f:\n    lines = f.readlines()\n"
              "with open(file_path, 'w') as f:\n    f.writelines(lines)\nEOF")
    assert tracker.files_written(script) == ["update_fix.py"]
    assert tracker.files_written("python3 update_fix.py") == ["sphinx/ext/inheritance_diagram.py"]
    assert tracker.files_written("python3 other.py") == []


def test_a_patch_file_written_earlier_is_read_by_git_apply() -> None:
    """`git apply fix.patch` names the targets of a patch this transcript wrote before."""
    tracker = ShellTracker("")
    tracker.files_written("cat > fix.patch <<'EOF'\n--- a/a.py\n+++ b/a.py\n@@\nEOF")
    assert tracker.files_written("git apply fix.patch") == ["a.py"]
    assert tracker.files_written("git apply --check fix.patch") == []


def test_heredocs_attach_to_the_command_that_opened_them() -> None:
    """Two here-documents on one line are read in order, each by its own command."""
    cmds = list(tokenize("cat <<'A' > a && cat <<B > b\n1\nA\n2\nB\nls"))
    assert [(c.words, c.writes, c.stdin_text) for c in cmds] == [
        (("cat",), ("a",), "1\n"), (("cat",), ("b",), "2\n"), (("ls",), (), None)]


def test_python_writes_reads_literals_and_bound_names_only() -> None:
    """open() with a literal or a name bound to one is found; computed paths are not guessed."""
    code = ("p = 'out.txt'\nopen(p, 'w')\nopen('log.txt', mode='a')\nopen(name + '.py', 'w')\n"
            "open('in.txt')\n")
    assert python_writes(code) == ["out.txt", "log.txt"]


def test_files_in_patch_skips_deletions() -> None:
    """A diff's +++ targets are named without their a/ or b/ prefix; /dev/null is a deletion."""
    diff = "--- a/x.py\n+++ b/x.py\n--- a/gone.py\n+++ /dev/null\n+++ plain.txt\n"
    assert files_in_patch(diff) == ["x.py", "plain.txt"]
