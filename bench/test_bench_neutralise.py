"""Fence neutralisation cost: lookalike-aware (RFC 0007) against the exact-match version it replaced.

``record_body`` runs on every record at append (its count is cached) and on every record rendered,
so the neutraliser is on the import path. Measured on the bodies of a generated 100k-record ledger
(English, Chinese, code), on the 12 real mini-swe-agent trajectories when the corpus is present,
and on 1 MB of Chinese prose with full-width brackets and emoji (the slowest common case: every
full-width bracket is a lookalike of `(` and must be looked up). Figures go to docs/performance.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from holon_ctx.ledger import body
from holon_ctx.ledger.importer import iter_jsonl
from holon_ctx.ledger.memory import MemoryStore
from holon_ctx.ledger.transcripts import import_any

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "swe-trajectories"
CHINESE = "构建在重试后通过了。请在合并之前检查部署日志，并告诉负责人（明天）上午处理。🚀\n" * 25_000


def _best_ms(run: Callable[[], object], rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return round(best * 1000, 1)


def _bodies_generated(ledger_file: Callable[[int], Path]) -> list[str]:
    with ledger_file(100_000).open("rb") as f:
        return [body._raw_body(r) for _, r in iter_jsonl(f, source="gen", check=False)]


def _bodies_corpus() -> list[str]:
    texts: list[str] = []
    for path in sorted(CORPUS.glob("*.traj.json")):
        store = MemoryStore()
        import_any(path, store)
        texts += [body._raw_body(r) for r in store.iter_records()]
    return texts


@pytest.mark.parametrize("source", ["generated-100k", "trajectories", "chinese-1mb"])
def test_neutralise(benchmark, ledger_file: Callable[[int], Path], source: str) -> None:  # type: ignore[no-untyped-def]
    """CPU ms per pass over all texts, new against exact-match; the texts are the same."""
    if source == "trajectories" and not CORPUS.is_dir():
        pytest.skip("corpus not present")
    texts = {"generated-100k": lambda: _bodies_generated(ledger_file),
             "trajectories": _bodies_corpus, "chinese-1mb": lambda: [CHINESE]}[source]()
    started = time.process_time()
    body._skeleton_table.cache_clear()
    body._skeleton_table()
    table_ms = round((time.process_time() - started) * 1000, 1)
    legacy = _best_ms(lambda: [body._legacy_neutralise(t) for t in texts])
    new = _best_ms(lambda: [body.neutralise_fences(t) for t in texts])
    benchmark.extra_info.update(texts=len(texts), chars=sum(map(len, texts)), legacy_cpu_ms=legacy,
                                new_cpu_ms=new, table_cpu_ms=table_ms)
    benchmark.pedantic(lambda: [body.neutralise_fences(t) for t in texts], rounds=3)


#: Texts dense in tags, where each rewrite pass must build its text once (a pass that spliced
#: every match into the whole text was quadratic: a minute for 800 KB of XML, at append and at
#: every render), and a large non-ASCII text, whose positions are mapped through the few
#: characters that change length (character by character it was 2-3 s for 4 MB).
_DENSE = {
    "xml-800kb": "<row><data>7</data></row>\n" * (800_000 // 26),
    "escaped-html-300kb": "&lt;/data&gt; " * (300_000 // 14),
    "cjk-log-4mb": ("构建日志：编译通过，测试全部成功\n" * 9 + "＜/data＞ 结束 🙂 ﬀ\n") * 25_000,
}


@pytest.mark.parametrize("case", sorted(_DENSE))
def test_neutralise_dense(benchmark, case: str) -> None:  # type: ignore[no-untyped-def]
    """CPU ms to neutralise one large text dense in fence lookalikes (docs/performance.md)."""
    text = _DENSE[case]
    benchmark.extra_info.update(chars=len(text), cpu_ms=_best_ms(lambda: body.neutralise_fences(text), 3))
    benchmark.pedantic(lambda: body.neutralise_fences(text), rounds=3)
