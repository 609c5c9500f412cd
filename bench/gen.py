"""A fast, deterministic generator of large synthetic ledger JSONL v1 files for benchmarks.

``write_ledger(path, n_records, seed=0)`` writes exactly ``n_records`` valid lines (~200 bytes
each on average) in the mix an agent's day produces: a turn roughly every eight records, each
followed by the records it owns: assistant and operator messages, tool runs, briefs, task results,
external events, work-item transitions, waits opened and later resolved, the odd environment
record and pin. Text mixes English, Chinese and a little code. The same ``(n_records, seed)``
always gives the same bytes, so figures from different runs compare the same input.

Run as a script to make a file: ``python bench/gen.py 100000 /tmp/ledger.jsonl``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["write_ledger"]

_WORDS_EN = ("the", "build", "passed", "on", "main", "after", "retry", "and", "flaky", "test",
             "was", "quarantined", "until", "owner", "can", "look", "at", "it", "again",
             "tomorrow", "morning", "please", "check", "deploy", "log", "for", "errors", "before",
             "merging", "branch", "we", "need", "a", "smaller", "patch", "that", "keeps",
             "public", "API", "stable")
_WORDS_ZH = ("构建", "通过", "测试", "失败", "重试", "部署", "日志", "请检查", "分支", "合并",
             "接口", "稳定", "明天", "上午", "负责人", "补丁")
_CODE = ("def f(x):", "return x + 1", "if err != nil {", "SELECT * FROM t;", "git push -f",
         "pytest -q", "}", "=> ok")
_TRIGGERS = ("operator_input", "task_result", "external_event", "timer", "scheduler_tick",
             "provider_retry", "provider_fallback", "recovery", "subagent_result")
_encode = msgspec.json.Encoder().encode


def _text(rng: random.Random, n_words: int) -> str:
    out: list[str] = []
    for _ in range(n_words):
        r = rng.random()
        if r < 0.65:
            out.append(rng.choice(_WORDS_EN))
        elif r < 0.9:
            out.append(rng.choice(_WORDS_ZH))
        else:
            out.append(rng.choice(_CODE))
    return " ".join(out)


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 0
        self.seq = 0
        self.turn = ""
        self.turns: list[str] = []
        self.open_waits: list[str] = []
        self.work_item = "wi0"
        self.refs: list[str] = []

    def _id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def turn_record(self) -> dict[str, Any]:
        self.seq += 1
        tid = self._id("t")
        trigger = self.rng.choice(_TRIGGERS)
        rec: dict[str, Any] = {"v": 1, "type": "turn", "id": tid, "seq": self.seq,
                               "trigger": trigger, "work_item_id": self.work_item,
                               "at": "2026-11-30T10:00:00Z"}
        if self.turns and self.rng.random() < 0.5:
            rec["anchor_turn_id"] = self.turns[-1 - self.rng.randrange(min(4, len(self.turns)))]
        rec["label"] = _text(self.rng, 4)
        self.turn = tid
        self.turns.append(tid)
        if len(self.turns) > 64:
            del self.turns[:32]
        self.refs.append(f"turn:{tid}")
        return rec

    def owned(self) -> dict[str, Any]:
        r = self.rng.random()
        t = self.turn
        if r < 0.35:
            role = "operator" if self.rng.random() < 0.2 else "assistant"
            mid = self._id("m")
            self.refs.append(f"message:{mid}")
            return {"v": 1, "type": "message", "id": mid, "turn_id": t, "role": role,
                    "text": _text(self.rng, 18)}
        if r < 0.6:
            return {"v": 1, "type": "tool", "id": self._id("x"), "turn_id": t,
                    "tool_name": self.rng.choice(("shell", "read_file", "apply_patch")),
                    "args_digest": "sha256:9f2c", "status": "ok", "exit_code": 0,
                    "output": _text(self.rng, 14)}
        if r < 0.72:
            return {"v": 1, "type": "brief", "id": self._id("b"), "turn_id": t,
                    "kind": self.rng.choice(("result", "progress", "ack")),
                    "text": _text(self.rng, 15)}
        if r < 0.82:
            return {"v": 1, "type": "task_result", "id": self._id("r"), "turn_id": t,
                    "task_id": self._id("task"), "status": "success",
                    "summary": _text(self.rng, 13)}
        if r < 0.88:
            return {"v": 1, "type": "external_event", "id": self._id("e"), "turn_id": t,
                    "source": "ci", "text": _text(self.rng, 15)}
        if r < 0.93:
            if self.rng.random() < 0.3:
                self.work_item = f"wi{self.rng.randrange(4)}"
            return {"v": 1, "type": "work_item", "id": self._id("w"), "turn_id": t,
                    "work_item_id": self.work_item, "status": "active",
                    "objective": _text(self.rng, 8)}
        if r < 0.98:
            if self.open_waits and self.rng.random() < 0.5:
                wait_id = self.open_waits.pop()
                return {"v": 1, "type": "wait", "id": self._id("wr"), "turn_id": t,
                        "wait_id": wait_id, "status": "resolved"}
            wait_id = self._id("wait")
            self.open_waits.append(wait_id)
            return {"v": 1, "type": "wait", "id": self._id("wo"), "turn_id": t,
                    "wait_id": wait_id, "status": "open", "condition": _text(self.rng, 8)}
        if r < 0.99:
            return {"v": 1, "type": "environment", "id": self._id("env"), "turn_id": t,
                    "workspace": "/srv/agent", "capabilities": ["shell", "git"],
                    "guidance": _text(self.rng, 8)}
        target = self.refs[-1 - self.rng.randrange(min(16, len(self.refs)))]
        return {"v": 1, "type": "pin", "id": self._id("p"), "turn_id": t, "target": target,
                "note": _text(self.rng, 5)}


def write_ledger(path: str | Path, n_records: int, *, seed: int = 0) -> Path:
    """Write ``n_records`` valid JSONL v1 lines to ``path`` and return it."""
    gen = _Gen(seed)
    path = Path(path)
    with path.open("wb") as out:
        buf: list[bytes] = []
        for i in range(n_records):
            rec = gen.turn_record() if i == 0 or gen.rng.random() < 0.125 else gen.owned()
            if len(gen.refs) > 256:
                del gen.refs[:128]
            buf.append(_encode(rec))
            if len(buf) >= 4096:
                out.write(b"\n".join(buf) + b"\n")
                buf.clear()
        if buf:
            out.write(b"\n".join(buf) + b"\n")
    return path


if __name__ == "__main__":
    write_ledger(sys.argv[2], int(sys.argv[1]), seed=int(sys.argv[3]) if len(sys.argv) > 3 else 0)
