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

The envelope digest is SHA-256 over the envelope's canonical bytes (:func:`encode_envelope`):
the journal seals it at step 4 and rehydration recomputes it from what the stored bytes *mean*,
so a re-encoding (another JSON writer, a migration) stays valid and any change of meaning fails.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

import msgspec

from holon_ctx.continuity.envelope import Envelope, decode_envelope, encode_envelope

__all__ = [
    "DIGEST_DOMAIN",
    "digests_equal",
    "envelope_sha256",
    "stored_envelope_sha256",
    "summary_digest",
]

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


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def envelope_sha256(envelope: Envelope) -> str:
    """``sha256:<hex>`` of the canonical bytes (the journal's ``envelope_sha256``)."""
    return _sha256(encode_envelope(envelope))


def stored_envelope_sha256(raw: bytes, sealed: str | None = None) -> str:
    """The digest to compare with the sealed ``envelope_sha256`` for stored bytes ``raw``.

    Stored bytes that decode to a valid envelope are hashed in canonical form. ``sealed`` lets an
    envelope sealed before the canonical form existed stay valid: its digest covered the plain
    msgspec encoding (the same, except for a non-UTC approval expiry), so that form is tried too.
    Bytes that do not decode are hashed as they are (and then never match).
    """
    envelope = decode_envelope(raw).envelope
    if envelope is None:
        return _sha256(bytes(raw))
    canonical = envelope_sha256(envelope)
    if sealed is not None and sealed != canonical:
        for legacy in (_sha256(msgspec.json.encode(envelope)), _sha256(bytes(raw))):
            if legacy == sealed:
                return legacy
    return canonical
