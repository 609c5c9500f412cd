"""Calibration against stand-in providers (issue 28, item 4; RFC 0022): over-budget share before and
after calibration, per stand-in.

Run with ``python3 dev.py bench bench/test_bench_calibration.py`` (or as a script:
``python3 dev.py shell bench/test_bench_calibration.py`` prints the table). Each stand-in provider
counts requests with a tokenizer of its own and its own framing (``tests/provider_counts.py``); a
coding-agent loop asks for 1,020 requests at 8,192 tokens. *Before*: no usage observed (the
model's prior factor only). *After*: every request's stand-in count observed, the share over
budget taken over the 1,000 requests after the first 20. The figures are in
``docs/performance.md`` ("Issue 28").
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from test_calibration import calibrated_run, stand_ins  # noqa: E402

REQUESTS = 1000


def measure_all(requests: int = REQUESTS) -> list[dict[str, Any]]:
    rows = []
    for name, (model, provider, fmt) in sorted(stand_ins().items()):
        before = calibrated_run(model, provider, fmt, requests, observe=False)
        after = calibrated_run(model, provider, fmt, requests)
        rows.append({"stand_in": name, "model": model, "requests": requests,
                     "over_before": before["over"], "over_after": after["over"],
                     "planned_mean_after": round(after["planned_mean"])})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| stand-in | session's model | requests | over budget before | over budget after | "
           "mean planned budget after |", "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['stand_in']} | {r['model']} | {r['requests']:,} | "
                   f"{r['over_before']} ({r['over_before'] / r['requests']:.1%}) | "
                   f"{r['over_after']} ({r['over_after'] / r['requests']:.1%}) | "
                   f"{r['planned_mean_after']:,} |")
    return "\n".join(out)


def test_over_budget_share_before_and_after_calibration(benchmark: Any) -> None:
    """Per stand-in: requests over budget by the stand-in's count, without and with usage."""
    rows = benchmark.pedantic(measure_all, rounds=1, iterations=1)
    benchmark.extra_info["stand_ins"] = rows
    sys.stdout.write("\n" + table(rows) + "\n")
    assert all(r["over_after"] <= r["requests"] // 1000 for r in rows), rows


def request_times(model: str | None, steps: int = 200) -> dict[str, float]:
    """Seconds per ``next_request`` (with its usage observed) over a loop, for one model: what
    counting with the model's tokenizer, framing and factor costs a turn."""
    import time
    import warnings

    from provider_counts import agent_loop

    import holon_ctx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = holon_ctx.open_session(":memory:", model=model)
    spent: list[float] = []
    for _ in agent_loop(session, steps, seed=31):
        started = time.perf_counter()
        request = session.next_request(8192)
        session.observe_usage(request.request_tokens)
        spent.append(time.perf_counter() - started)
    spent.sort()
    return {"p50_ms": round(spent[len(spent) // 2] * 1000, 2),
            "p95_ms": round(spent[int(len(spent) * 0.95)] * 1000, 2)}


def test_request_time_per_model(benchmark: Any) -> None:
    """Per-request time of a 200-step loop, no model named against gpt-4o and a claude model."""
    figures = benchmark.pedantic(
        lambda: {str(m): request_times(m) for m in (None, "gpt-4o", "claude-sonnet-4-5")},
        rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    sys.stdout.write(f"\nper-request time: {figures}\n")


if __name__ == "__main__":
    sys.stdout.write(table(measure_all()) + "\n")
