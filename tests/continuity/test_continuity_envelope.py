"""The envelope schema, its total decoder, the identifier rules and the summary digest."""

from __future__ import annotations

import json
from typing import Any

import pytest
from continuity_helpers import make_world

from holon_ctx.continuity import (
    SCHEMA_VERSION,
    Envelope,
    ReasonCode,
    decode_envelope,
    encode_envelope,
    id_problem,
    summary_digest,
)

R = ReasonCode


def _valid() -> dict[str, Any]:
    return make_world().envelope_dict()


def test_valid_envelope_round_trips() -> None:
    """A sealed envelope decodes to the same Struct with no findings."""
    world = make_world()
    decoded = decode_envelope(encode_envelope(world.envelope))
    assert decoded.findings == ()
    assert decoded.envelope == world.envelope
    assert decoded.envelope.schema_version == SCHEMA_VERSION


def test_every_seed_field_is_in_the_schema() -> None:
    """The Struct has every field of the seed's minimal envelope, and no other."""
    seed_fields = {
        "schema_version", "envelope_id", "session_id", "source_trace_id", "reset_reason",
        "objective", "exact_constraint_refs", "pending_obligations", "tenant_id", "principal_id",
        "authorization_mode", "delegated_principal_id", "delegated_scope", "policy_version",
        "capability_name", "capability_version", "approval_id", "action_digest",
        "approval_expires_at", "idempotency_key", "side_effect_status", "checkpoint_ref",
        "sandbox_snapshot_ref", "budget_remaining", "source_event_range", "summary_sha256",
        "evidence_refs", "requires_reauthorization",
    }  # fmt: skip
    assert set(Envelope.__struct_fields__) == seed_fields


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("tenant-acme", None),
        ("tenant-аcme", None),  # a valid id, just a different one (Cyrillic а)
        ("", "is empty"),
        ("tenant-acme ", "has surrounding whitespace"),
        (" tenant-acme", "has surrounding whitespace"),
        ("\ttenant-acme", "has surrounding whitespace"),
        ("tenant-acme\u3000", "has surrounding whitespace"),
        ("tenant\u00a0acme", "contains whitespace character U+00A0"),
        ("tenant\nacme", "contains control or invisible character U+000A"),
        ("tenant-acme\x00", "contains control or invisible character U+0000"),
        ("tenant\u200bacme", "contains control or invisible character U+200B"),
        ("tenant\u202eemca", "contains control or invisible character U+202E"),
        ("tenant\ufeffacme", "contains control or invisible character U+FEFF"),
        ("a" * 257, "is longer than 256 characters"),
        ("tickets:create tickets:read", None),
    ],
)
def test_id_rules_never_repair(value: str, problem: str | None) -> None:
    """Ids are refused, not stripped or folded, when whitespace or invisible characters appear."""
    assert id_problem(value) == problem


@pytest.mark.parametrize(
    ("edit", "code", "path"),
    [
        (lambda e: e.update(extra="x"), R.UNKNOWN_FIELD, "$.extra"),
        (lambda e: e.pop("tenant_id"), R.MISSING_FIELD, "$.tenant_id"),
        (lambda e: e.pop("schema_version"), R.SCHEMA_VERSION_MISSING, "$.schema_version"),
        (
            lambda e: e.update(schema_version="continuity-envelope/v2"),
            R.SCHEMA_VERSION_UNSUPPORTED,
            "$.schema_version",
        ),
        (lambda e: e.update(schema_version=1), R.SCHEMA_VERSION_UNSUPPORTED, "$.schema_version"),
        (lambda e: e.update(budget_remaining="7"), R.MALFORMED_FIELD, "$.budget_remaining"),
        (lambda e: e.update(budget_remaining=-1), R.MALFORMED_FIELD, "$.budget_remaining"),
        (lambda e: e.update(budget_remaining=True), R.MALFORMED_FIELD, "$.budget_remaining"),
        (lambda e: e.update(tenant_id=42), R.MALFORMED_FIELD, "$.tenant_id"),
        (lambda e: e.update(tenant_id="tenant-acme "), R.MALFORMED_FIELD, "$.tenant_id"),
        (lambda e: e.update(reset_reason="nap"), R.MALFORMED_FIELD, "$.reset_reason"),
        (
            lambda e: e.update(approval_expires_at="2026-07-21T18:00:00"),
            R.MALFORMED_FIELD,
            "$.approval_expires_at",
        ),
        (lambda e: e.update(summary_sha256="sha256:XYZ"), R.MALFORMED_FIELD, "$.summary_sha256"),
        (
            lambda e: e.update(exact_constraint_refs=["a", "a"]),
            R.MALFORMED_FIELD,
            "$.exact_constraint_refs[1]",
        ),
        (
            lambda e: e.update(source_event_range={"first": "e1", "last": "e2", "x": 1}),
            R.MALFORMED_FIELD,
            "$.source_event_range",
        ),
        (
            lambda e: e.update(requires_reauthorization=False),
            R.REAUTHORIZATION_FLAG_CLEARED,
            "$.requires_reauthorization",
        ),
        (
            lambda e: e.update(delegated_scope=None),
            R.MALFORMED_FIELD,
            "$.delegated_scope",
        ),
        (lambda e: e.update(action_digest=None), R.MALFORMED_FIELD, "$.approval_id"),
        (lambda e: e.update(objective="go\x1b[31m"), R.MALFORMED_FIELD, "$.objective"),
    ],
)
def test_schema_faults_are_findings(edit: Any, code: ReasonCode, path: str) -> None:
    """Each schema fault yields its finding with a path, never an exception."""
    envelope = _valid()
    edit(envelope)
    decoded = decode_envelope(envelope)
    assert decoded.envelope is None
    assert (code, path) in {(f.code, f.path) for f in decoded.findings}


def test_all_faults_are_collected_not_only_the_first() -> None:
    """Three broken fields give three findings; the valid ones are still decoded."""
    envelope = _valid()
    envelope.update(tenant_id=1, principal_id=" user-42", idempotency_key=None, extra=True)
    decoded = decode_envelope(envelope)
    paths = {f.path for f in decoded.findings}
    assert {"$.tenant_id", "$.principal_id", "$.extra"} <= paths
    assert "session_id" in decoded.fields
    assert "tenant_id" not in decoded.fields


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xff\xfe",
        b"[1, 2]",
        b"null",
        b'{"a": NaN}',
        b'{"tenant_id": "a", "tenant_id": "b"}',
        "not json",
        42,
        None,
        ["list"],
        object(),
    ],
)
def test_undecodable_input_is_a_finding(raw: object) -> None:
    """Garbage yields an ``envelope_undecodable`` finding instead of raising."""
    decoded = decode_envelope(raw)
    assert decoded.envelope is None
    assert [f.code for f in decoded.findings] == [R.ENVELOPE_UNDECODABLE]


def test_duplicate_keys_in_a_valid_envelope_are_refused() -> None:
    """A duplicated key (parser-differential attack) makes the whole envelope undecodable."""
    text = json.dumps(_valid())
    smuggled = text[:-1] + ', "tenant_id": "tenant-evil"}'
    assert [f.code for f in decode_envelope(smuggled).findings] == [R.ENVELOPE_UNDECODABLE]


def test_hostile_mapping_is_contained() -> None:
    """A Mapping that raises from its methods is reported, not propagated."""

    class Hostile(dict[str, Any]):
        def __iter__(self) -> Any:
            raise RuntimeError("boom")

    decoded = decode_envelope(Hostile(a=1))
    assert [f.code for f in decoded.findings] == [R.ENVELOPE_UNDECODABLE]


GOLDEN_SEED_DIGEST = "sha256:87f8996d495e3bf2da2723b362611643a24b0e4f7267f84daa50951a5a13408a"


def test_seed_digest_is_pinned() -> None:
    """The canonical encoding is stable: the seed summary's digest never changes."""
    assert make_world().envelope.summary_sha256 == GOLDEN_SEED_DIGEST


@pytest.mark.parametrize(
    "change",
    [
        {"envelope_id": "ce-2026-07-21-002"},
        {"session_id": "session-support-002"},
        {"source_event_range": ("event-0001", "event-0143")},
        {"source_event_range": ("event-0000", "event-0142")},
        {"summary_bytes": b"summary "},
        {"summary_bytes": b" summary"},
        {"summary_bytes": b"summary\r\n"},
    ],
)
def test_digest_binds_every_component(change: dict[str, Any]) -> None:
    """Changing the envelope, session, either range end or any summary byte changes the digest."""
    base: dict[str, Any] = {
        "envelope_id": "ce-2026-07-21-001",
        "session_id": "session-support-001",
        "source_event_range": ("event-0001", "event-0142"),
        "summary_bytes": b"summary",
    }
    assert summary_digest(**base) != summary_digest(**{**base, **change})


def test_digest_framing_is_injective() -> None:
    """Moving bytes between adjacent components cannot produce the same digest."""
    a = summary_digest(envelope_id="ab", session_id="c", source_event_range=("e", "f"), summary_bytes=b"s")
    b = summary_digest(envelope_id="a", session_id="bc", source_event_range=("e", "f"), summary_bytes=b"s")
    assert a != b
