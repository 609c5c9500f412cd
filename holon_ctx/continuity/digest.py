"""The summary digest: binds the exact summary bytes to an envelope, a session and an event range.

Canonical encoding (version 1), hashed with SHA-256::

    b"holon-ctx/continuity-summary/v1\\n"
    for each of envelope_id, session_id, range.first, range.last (UTF-8):
        8-byte big-endian length, then the bytes
    8-byte big-endian length of the summary, then the summary bytes, unchanged

Why this shape: length prefixes make the encoding injective (no separator a value could smuggle
in), so a summary cannot be moved to another envelope, session or range and still verify. The
summary is hashed as given: no whitespace stripping, no newline or Unicode normalisation, so
whitespace tampering is detected. A digest proves *which* summary was checked, never that it is
complete, true or authorised.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

__all__ = ["DIGEST_DOMAIN", "digests_equal", "summary_digest"]

DIGEST_DOMAIN: Final = b"holon-ctx/continuity-summary/v1\n"


def _framed(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def summary_digest(
    *,
    envelope_id: str,
    session_id: str,
    source_event_range: tuple[str, str],
    summary_bytes: bytes,
) -> str:
    """``sha256:<hex>`` over the canonical encoding above."""
    first, last = source_event_range
    hasher = hashlib.sha256(DIGEST_DOMAIN)
    for part in (envelope_id, session_id, first, last):
        # surrogatepass: ids are validated elsewhere; hashing must not raise on odd input.
        hasher.update(_framed(part.encode("utf-8", "surrogatepass")))
    hasher.update(_framed(bytes(summary_bytes)))
    return "sha256:" + hasher.hexdigest()


def digests_equal(left: str, right: str) -> bool:
    """Constant-time comparison of two digest strings."""
    return hmac.compare_digest(left.encode("utf-8", "surrogatepass"), right.encode("utf-8", "surrogatepass"))
