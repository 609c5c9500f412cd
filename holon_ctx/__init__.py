"""holon_ctx: turn-based context projection for long-running LLM agents.

The ledger is the truth; a prompt is a projection of it. Import what you need from here.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
