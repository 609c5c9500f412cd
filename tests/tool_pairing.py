"""The provider pairing check on rendered text: every tool result follows its own call, and a
call whose tool has output shows that result or says why not (docs/providers.md, "Tool calls").

A checker of the prompt's text, so it lives with the tests that run it (test_providers.py):
the library's stages read blocks, never the rendered text (issue 24 item 3, RFC 0028).
"""

from __future__ import annotations

import re
from typing import Final

from holon_ctx.projection.base.formats import fence_parts

__all__ = ["tool_pairing_problems"]

_CALL_LABEL: Final = re.compile(r"^(?:ALERT )?(?P<ref>tool:\S+)(?: .*?)? → (?P<rest>.*)$")
#: The label right above a call's fenced result, which names no ref: the fence does (RFC 0015).
_RESULT_LABEL: Final = re.compile(r"^(?:ALERT )?(?!tool:)[^<\s][^\n]*? → ")
#: The clip marker the planner puts after a block it cut (with the full text's ref when it fits;
#: the cut label line before it names the call's own ref either way).
_CLIP_NOTE: Final = re.compile(r"^\[clipped\b")


def tool_pairing_problems(text: str, outputs: dict[str, bool]) -> list[str]:
    """Where rendered tool calls and results come apart, as messages (empty when none).

    ``outputs`` maps each tool ref of the ledger to whether it recorded any output. A result
    (``<data tool:… untrusted_external>``) must follow the label line of its own call (which
    names no ref: the fence does). A call label that names the call's ref (a call shown without
    its output) whose tool has output must be followed by that result, or say
    why not: its status is ``pending`` (no result exists yet), its output is folded into a named
    later run, or the planner's clip marker follows it (the rest omitted for the budget).
    """
    problems: list[str] = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        opened = fence_parts(line)
        if opened and opened[0].startswith("tool:"):
            ref = opened[0]
            prev = lines[i - 1] if i else ""
            label = _CALL_LABEL.match(prev)
            own = (label.group("ref") == ref) if label else _RESULT_LABEL.match(prev) is not None
            if not own:
                problems.append(f"line {i + 1}: result of {ref} without its call just before")
        label = _CALL_LABEL.match(line)
        if label is None or not outputs.get(label.group("ref"), False):
            continue
        ref = label.group("ref")
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        shown = fence_parts(nxt)
        rest = label.group("rest")
        stub = ("output folded" in rest or "result omitted" in rest
                or rest.startswith("pending") or _CLIP_NOTE.match(nxt) is not None)
        if not stub and (shown is None or shown[0] != ref):
            problems.append(f"line {i + 1}: call {ref} without its result or an omission stub")
    return problems
