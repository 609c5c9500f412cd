"""CPU time per request of the session path, for comparing two checkouts side by side (issue 24:
one projection walk per request; docs/performance.md, "Session path: CPU per request").

    git archive 96d60c1^ | tar -x -C /tmp/parent      # the parent of the one-walk change
    python bench/session_cpu_per_request.py /tmp/parent demo
    python bench/session_cpu_per_request.py .            loop

ROOT is the checkout whose ``holon_ctx`` is imported (an editable install's finder is taken off
``sys.meta_path`` so that it does not win). Two workloads, each timed by ``time.process_time``
around ``next_request(8192)`` and reading ``openai_messages`` (what a runtime sends):

    loop  a 300-turn agent loop through the helpers on a new SQLite ledger, a request per turn
          (3-40 output lines a tool run, an operator message every 25 turns; it binds and
          compacts under the default policy)
    demo  the bundled demo ledger imported into a new SQLite ledger, a session asked at each of
          its last 76 turns in order

Prints one JSON line: the total and the mean and median per request, in CPU time.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BUDGET = 8192


def _import_holon(root: str) -> Any:
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, str(Path(root).resolve()))
    import holon_ctx

    if not holon_ctx.__file__ or not holon_ctx.__file__.startswith(str(Path(root).resolve())):
        raise SystemExit(f"imported {holon_ctx.__file__}, not the checkout at {root}")
    return holon_ctx


def loop(holon_ctx: Any, turns: int = 300) -> list[float]:
    from holon_ctx.session import ToolCall

    rng = random.Random(7)
    times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, holon_ctx.open_session(Path(tmp) / "a.db") as s:
        s.operator_message("Upgrade the payments service to Python 3.12 and keep CI green.")
        for i in range(turns):
            s.assistant_message(f"step {i}", tool_calls=[
                ToolCall(f"c{i}", "shell", {"cmd": f"pytest -k t{i % 17}"})])
            s.tool_result(f"c{i}", "\n".join(f"line {j} of output {i} " + "x" * rng.randint(5, 60)
                                             for j in range(rng.randint(3, 40))))
            if i % 25 == 0:
                s.operator_message(f"also check module m{i}")
            started = time.process_time()
            s.next_request(BUDGET).openai_messages  # noqa: B018 - what a runtime reads
            times.append(time.process_time() - started)
    return times


def demo(holon_ctx: Any, root: str, last: int = 76) -> list[float]:
    from holon_ctx.ledger.importer import import_jsonl
    from holon_ctx.ledger.sqlite import SqliteStore

    times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "demo.db")
        import_jsonl(Path(root) / "holon_ctx" / "data" / "demo.jsonl", store)
        with holon_ctx.Session(store, owns_store=True) as s:
            turns = [x.ref.removeprefix("turn:") for x in store.records_between(
                0, store.end_pos()) if x.ref.startswith("turn:")]
            for turn in turns[-last:]:
                started = time.process_time()
                s.next_request(BUDGET, at=turn).openai_messages  # noqa: B018
                times.append(time.process_time() - started)
    return times


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("loop", "demo"):
        print(__doc__)
        return 2
    root, which = argv
    holon_ctx = _import_holon(root)
    times = loop(holon_ctx) if which == "loop" else demo(holon_ctx, root)
    print(json.dumps({"root": root, "workload": which, "requests": len(times),
                      "cpu_total_s": round(sum(times), 3),
                      "cpu_mean_ms": round(1000 * statistics.mean(times), 2),
                      "cpu_p50_ms": round(1000 * statistics.median(times), 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
