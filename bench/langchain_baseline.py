"""LangChain-style "keep the newest messages that fit", without LangChain, and the frontier tables.

The baseline is what ``trim_messages(messages, strategy="last", include_system=True,
start_on="human", token_counter=..., max_tokens=N)`` does, written out: keep the system message,
then walk the chat history from the newest message back, keeping whole messages while they fit,
and drop leading messages until the kept history starts with a user message. Tokens are counted
the way :func:`holon_ctx.projection.provider_formats.providers.measure` counts ours (content with the same
counter, plus 3 per message and 3 for reply priming), so both sides spend the same budget.

Run ``python3 dev.py shell bench/langchain_baseline.py`` to print the execution-frontier tables of
``docs/performance.md`` ("Execution frontier on real trajectories"): the checks of
``tests/test_frontier.py`` on holon_ctx's provider output and on this baseline, in one run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from holon_ctx.projection.provider_formats.providers import REPLY_PRIMING_TOKENS, TOKENS_PER_MESSAGE
from holon_ctx.tokens import TokenCounter

__all__ = ["keep_newest", "trajectory_messages"]

ROOT = Path(__file__).resolve().parents[1]


def trajectory_messages(messages: list[dict[str, Any]], steps: int) -> list[dict[str, str]]:
    """The chat history of a trajectory up to and including the result of step ``steps``."""
    out: list[dict[str, str]] = []
    seen = 0
    for msg in messages:
        if msg["role"] == "assistant":
            seen += 1
            if seen > steps:
                break
        out.append({"role": msg["role"], "content": msg["content"]})
    return out


def keep_newest(messages: list[dict[str, str]], max_tokens: int,
                counter: TokenCounter) -> list[dict[str, str]]:
    """``trim_messages(strategy="last", include_system=True, start_on="human")``, by hand."""

    def cost(msg: dict[str, str]) -> int:
        # OpenAI's token-counting guide: the fixed framing and every field's text, role included.
        return counter.count(msg["content"]) + counter.count(msg["role"]) + TOKENS_PER_MESSAGE

    system = [m for m in messages[:1] if m["role"] == "system"]
    history = messages[len(system):]
    room = max_tokens - REPLY_PRIMING_TOKENS - sum(cost(m) for m in system)
    kept: list[dict[str, str]] = []
    for msg in reversed(history):
        need = cost(msg)
        if need > room:
            break
        kept.append(msg)
        room -= need
    kept.reverse()
    while kept and kept[0]["role"] != "user":
        kept.pop(0)
    return system + kept


def _frontier_tests() -> ModuleType:
    """tests/test_frontier.py, which holds the checks (loaded by path: tests are not a package)."""
    path = ROOT / "tests" / "test_frontier.py"
    # Its helpers (folded_output, …) sit beside it, as pytest's rootdir import finds them.
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("test_frontier", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    tests = _frontier_tests()
    if not tests.TRAJECTORIES:
        print(f"no trajectories at {tests.CORPUS}", file=sys.stderr)
        return 2
    rows = tests.evaluate_corpus()
    print(tests.markdown_tables(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
