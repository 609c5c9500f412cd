"""The naive baseline the projection benchmark compares against (issue 3).

What a context manager without a ledger does every turn (LangChain's ``trim_messages`` with a
tokenizer counter is the model): read every message of the history, count each one with the
tokenizer again, and keep the newest that fit the budget. It has no priorities, folding, pins or
manifest, so it is a lower bound on the work, not a competitor on quality; the point of the
comparison is cost: this is O(history) per turn, the projection O(window + budget).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec

from holon_ctx.ledger.body import record_body
from holon_ctx.ledger.records import Record
from holon_ctx.tokens import TokenCounter

__all__ = ["naive_prompt"]

_decoder = msgspec.json.Decoder(Record)


def naive_prompt(db: Path | str, budget_tokens: int, counter: TokenCounter) -> tuple[str, int]:
    """Every record's text re-counted, the newest that fit kept: ``(prompt, tokens)``."""
    con = sqlite3.connect(str(db))
    try:
        rows = con.execute("SELECT line FROM records ORDER BY pos").fetchall()
    finally:
        con.close()
    texts: list[str] = []
    for (line,) in rows:
        record = _decoder.decode(line)
        body = record_body(record)
        if body:
            texts.append(f"{type(record).__struct_config__.tag}: {body}")
    counts = counter.count_many(texts)
    kept: list[str] = []
    used = 0
    for text, tokens in zip(reversed(texts), reversed(counts), strict=True):
        if used + tokens > budget_tokens:
            break
        kept.append(text)
        used += tokens
    return "".join(reversed(kept)), used
