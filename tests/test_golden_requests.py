"""Golden requests: what a session hands a runtime, pinned byte for byte (issue 24, item 8).

For the demo ledger and each of the twelve shared trajectories, one session imports the ledger
through the public API (``open_session`` on an in-memory SQLite ledger, ``import_history``) and
asks, turn after turn in ledger order, for the request as of that turn at 4,096, 8,192 and 32,768
tokens (``next_request(budget, at=turn)``): the session mode, with its epochs carried from one
request to the next. Each request is serialised as JSON with sorted keys, UTF-8, no spaces
(:func:`canonical`), for OpenAI (``openai_messages``) and for Anthropic (``anthropic_request``).

What is kept (tests/golden/requests/): per ledger and budget, a text file with one line per
request — the turn, ``request_tokens``, then the SHA-256 of each provider's serialised request —
so a change names the requests it touched and how their size moved, and the repository stays
small (2,358 requests, 470 kB of digests; their JSON is 137 MB). A few requests are also kept
whole (``FULL``: the last request of the demo at 8,192 and of one trajectory at 4,096), as
indented JSON, so a reviewer can read what a change did to a real request.

The default run checks every ledger at 8,192 tokens; 4,096 and 32,768 are in the slow tier.
``python3 dev.py goldens`` rewrites all of them and lists which requests changed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_preview_golden import GOLDEN, check_golden

import holon_ctx

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "holon_ctx" / "data" / "demo.jsonl"
CORPUS = ROOT.parent / "shared" / "corpora" / "swe-trajectories"
TRAJECTORIES = sorted(CORPUS.glob("*.traj.json")) if CORPUS.is_dir() else []
LEDGERS = {"demo": DEMO} | {p.name.removesuffix(".traj.json"): p for p in TRAJECTORIES}
BUDGETS = (4096, 8192, 32768)
#: The budget every default run checks; the others are the slow tier's.
DEFAULT_BUDGET = 8192
#: Requests kept whole besides their digests: (ledger, budget) → its last request.
FULL = {("demo", 8192), ("django__django-10914", 4096)}
#: The twelve trajectories the issue names; fewer means the shared corpus is missing or changed.
SHARED_TRAJECTORIES = 12


def canonical(value: Any) -> bytes:
    """A request as the golden files hash it: JSON, keys sorted, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8")


def session_requests(ledger: Path, budget: int) -> list[tuple[str, holon_ctx.Request]]:
    """Every turn's request, in ledger order, from one session over the imported ledger."""
    with holon_ctx.open_session(":memory:") as session:
        session.import_history(ledger)
        store = session.store
        turns = [s.ref.removeprefix("turn:") for s in store.records_between(0, store.end_pos())
                 if s.ref.startswith("turn:")]
        return [(turn, session.next_request(budget, at=turn)) for turn in turns]


def digest_lines(requests: list[tuple[str, holon_ctx.Request]]) -> str:
    """One line per request: turn, request tokens, SHA-256 of the OpenAI and Anthropic JSON."""
    lines = ["# turn request_tokens sha256(openai_messages) sha256(anthropic_request)"]
    for turn, request in requests:
        openai = hashlib.sha256(canonical(request.openai_messages)).hexdigest()
        anthropic = hashlib.sha256(canonical(request.anthropic_request)).hexdigest()
        lines.append(f"{turn} {request.request_tokens} {openai} {anthropic}")
    return "\n".join(lines) + "\n"


def _cases() -> list[Any]:
    return [pytest.param(name, budget, id=f"{name}-{budget}",
                         marks=() if budget == DEFAULT_BUDGET else pytest.mark.slow)
            for name in LEDGERS for budget in BUDGETS]


def test_the_shared_corpus_is_all_there() -> None:
    """The golden set covers the demo and all twelve shared trajectories, each with its files."""
    assert len(TRAJECTORIES) == SHARED_TRAJECTORIES, f"expected 12 trajectories in {CORPUS}"
    kept = {p.name for p in (GOLDEN / "requests").glob("*.txt")}
    assert kept == {f"{name}_{budget}.txt" for name in LEDGERS for budget in BUDGETS}


@pytest.mark.parametrize(("name", "budget"), _cases())
def test_session_requests_match_their_golden_digests(name: str, budget: int) -> None:
    """Every session request of the ledger at the budget serialises to its recorded bytes."""
    requests = session_requests(LEDGERS[name], budget)
    assert requests, f"{name} holds no turn"
    check_golden(f"requests/{name}_{budget}.txt", digest_lines(requests))
    if (name, budget) in FULL:
        _, last = requests[-1]
        for provider, body in (("openai", last.openai_messages),
                               ("anthropic", last.anthropic_request)):
            text = json.dumps(body, sort_keys=True, ensure_ascii=False, indent=1) + "\n"
            check_golden(f"requests/{name}_{budget}_last.{provider}.json", text)
