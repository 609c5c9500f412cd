"""Import and export of ledger JSONL v1 files against a store, all-or-nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import IO

from holon_ctx.errors import InputError
from holon_ctx.ledger.codec import iter_jsonl, write_jsonl
from holon_ctx.ledger.records import Record
from holon_ctx.ledger.store import LedgerStore

__all__ = ["export_jsonl", "import_jsonl"]


class _CountingReader:
    """Wraps a binary stream to report bytes consumed (for progress bars)."""

    def __init__(self, stream: IO[bytes], on_bytes: Callable[[int], None]) -> None:
        self._stream = stream
        self._on_bytes = on_bytes

    def readline(self, limit: int = -1) -> bytes:
        data = self._stream.readline(limit)
        self._on_bytes(len(data))
        return data


def import_jsonl(
    path: str | Path,
    store: LedgerStore,
    *,
    on_bytes: Callable[[int], None] | None = None,
    before: Sequence[Record] = (),
) -> int:
    """Append every record of a ledger JSONL file in one transaction; returns records stored.
    ``before``: records appended first, in the same transaction (and counted).

    On any bad line nothing is appended and a LedgerFormatError names file, line and field.
    """
    path = Path(path)
    try:
        stream = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read ledger: {exc.strerror}", source=str(path)) from None
    with stream:
        reader: IO[bytes] = stream
        if on_bytes is not None:
            reader = _CountingReader(stream, on_bytes)  # type: ignore[assignment]
        # Context-free checks run in the store's append path, line by line as records stream in.
        records = iter_jsonl(reader, source=str(path), check=False)
        return store.append_lines(chain(((None, r) for r in before), records),
                                  source=str(path))


def export_jsonl(store: LedgerStore, out: IO[bytes]) -> int:
    """Write the whole ledger as canonical JSONL v1; returns records written."""
    return write_jsonl(store.iter_records(), out)
