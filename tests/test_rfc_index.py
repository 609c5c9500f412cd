"""rfcs/README.md, the map of decisions, lists every RFC in rfcs/ under its own title."""

from __future__ import annotations

import re
from pathlib import Path

RFCS = Path(__file__).resolve().parents[1] / "rfcs"
#: An RFC's first line: ``# RFC 0012 (densea) — Title`` or ``# RFC 0001: Title`` (an en dash or
#: a hyphen is read as the dash too).
HEADING = re.compile(r"^# RFC (\d{4})(?: \([^)]*\))?(?::| —| –| -) (.+)$")
#: A row of the index: the number (linked once the file exists), the title, the status.
ROW = re.compile(r"^\| (?:\[(\d{4})\]\(([^)]+)\)|(\d{4})) \| ([^|]+) \| ([^|]+) \|")
STATUSES = {"implemented", "accepted", "in progress", "never used"}


def _rows() -> dict[str, tuple[str | None, str, str]]:
    """Number → (linked file, title, status), from the index's table."""
    rows: dict[str, tuple[str | None, str, str]] = {}
    for line in (RFCS / "README.md").read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            number = m.group(1) or m.group(3)
            assert number not in rows, f"RFC {number} listed twice"
            rows[number] = (m.group(2), m.group(4).strip(), m.group(5).strip())
    return rows


def test_every_rfc_file_is_listed_under_its_own_title() -> None:
    """Each rfcs/NNNN-*.md has a row whose title is its heading's; a linked row names the file."""
    rows = _rows()
    for path in sorted(RFCS.glob("[0-9][0-9][0-9][0-9]-*.md")):
        m = HEADING.match(path.read_text(encoding="utf-8").splitlines()[0])
        assert m is not None, f"{path.name}: first line is not '# RFC NNNN: title'"
        assert m.group(1) == path.name[:4], f"{path.name}: heading names RFC {m.group(1)}"
        assert path.name[:4] in rows, f"{path.name} is not listed in rfcs/README.md"
        linked, title, status = rows[path.name[:4]]
        # A row still "in progress" may predate its file (another branch wrote it meanwhile).
        if linked is not None or status != "in progress":
            assert linked == path.name, f"RFC {path.name[:4]}'s row links {linked}"
            assert title == m.group(2), f"RFC {path.name[:4]}'s row says {title!r}"


def test_every_row_has_a_status_and_a_link_that_resolves() -> None:
    """No row links a missing file, every status is one of the four the index defines, and the
    numbers run without a gap from 0001 to the newest."""
    rows = _rows()
    for number, (linked, _title, status) in rows.items():
        assert status in STATUSES, f"RFC {number}: status {status!r}"
        if linked is not None:
            assert (RFCS / linked).is_file(), f"RFC {number} links {linked}, which does not exist"
        else:
            assert status in {"in progress", "never used"}, f"RFC {number} has no file"
    numbers = sorted(int(n) for n in rows)
    assert numbers == list(range(1, numbers[-1] + 1))
