"""The episode stores' postings (split from episode_store.py): each term's ``(num, tf, length)``
triples packed as little-endian uint32 in blocks of up to :data:`BLOCK`, where new ones go
(:func:`plan_postings`) and the newest ones read back (:func:`newest_postings`). Every store
uses them (the SQLite and in-memory stores here in ``ledger/``, the PostgreSQL one), so they
depend on nothing but the standard library and attrs.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs

__all__ = ["BLOCK", "PostingsHead", "PostingsPlan", "newest_postings", "pack_postings",
           "plan_postings", "unpack_postings"]

#: Postings per block row.
BLOCK: Final = 128

_SWAP = sys.byteorder != "little"


def pack_postings(values: Sequence[int]) -> bytes:
    arr = array("I", values)
    if _SWAP:
        arr.byteswap()
    return arr.tobytes()


def unpack_postings(data: bytes) -> array[int]:
    arr = array("I")
    arr.frombytes(data)
    if _SWAP:
        arr.byteswap()
    return arr


@attrs.frozen
class PostingsHead:
    """What appending to a term's postings needs to know: its totals and its last block."""

    df: int
    blocks: int
    last_n: int
    last_data: bytes


@attrs.frozen
class PostingsPlan:
    #: ``(term, block, n, data)``: last blocks that take some of the new postings.
    updates: list[tuple[str, int, int, bytes]]
    #: ``(term, block, first_num, n, data)``: new blocks.
    inserts: list[tuple[str, int, int, int, bytes]]
    #: ``(term, df, blocks)``: every touched term's new totals.
    terms: list[tuple[str, int, int]]


def plan_postings(pending: Mapping[str, list[int]], heads: Mapping[str, PostingsHead]
                  ) -> PostingsPlan:
    """Where new ``(num, tf, length)`` triples go, for every store: the last block of each term
    while it has room, then new blocks of up to :data:`BLOCK`. ``heads`` omits unknown terms."""
    plan = PostingsPlan([], [], [])
    for term, triples in pending.items():
        head = heads.get(term) or PostingsHead(df=0, blocks=0, last_n=0, last_data=b"")
        blocks, i = head.blocks, 0
        if blocks and head.last_n < BLOCK:
            take = triples[: 3 * (BLOCK - head.last_n)]
            plan.updates.append((term, blocks - 1, head.last_n + len(take) // 3,
                                 head.last_data + pack_postings(take)))
            i = len(take)
        while i < len(triples):
            take = triples[i : i + 3 * BLOCK]
            plan.inserts.append((term, blocks, take[0], len(take) // 3, pack_postings(take)))
            blocks += 1
            i += len(take)
        plan.terms.append((term, head.df + len(triples) // 3, blocks))
    return plan


def newest_postings(blocks: Iterable[bytes], max_num: int, cap: int) -> list[tuple[int, int, int]]:
    """The newest ``cap`` postings with ``num <= max_num`` from a term's blocks, newest first
    (``blocks`` newest first too)."""
    out: list[tuple[int, int, int]] = []
    for data in blocks:
        arr = unpack_postings(data)
        block = list(zip(arr[0::3], arr[1::3], arr[2::3], strict=True))
        block.reverse()
        out.extend(p for p in block if p[0] <= max_num)
        if len(out) >= cap:
            break
    return out[:cap]
