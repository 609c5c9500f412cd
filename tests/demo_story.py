"""The demo story's generator for the tests: ``tools/make_demo_ledger.py`` (which reads the story
in ``tools/demo_story/``) is a dev tool outside the package (the wheel ships only the JSONL it
writes), so it is loaded here by path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "tools" / "make_demo_ledger.py"
_SPEC = importlib.util.spec_from_file_location("make_demo_ledger", _PATH)
assert _SPEC is not None
assert _SPEC.loader is not None
story = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = story
_SPEC.loader.exec_module(story)

KEY_REFS = story.KEY_REFS
KEY_TURNS = story.KEY_TURNS
build_demo_records = story.build_demo_records
bundled_demo_path = story.bundled_demo_path
demo_jsonl_bytes = story.demo_jsonl_bytes
